"""What ``import --replace`` does to the labels and gold labels of a replaced case.

A label judges one turn as the reviewer read it: the conversation up to and
including that turn, under the case's role. When a replacement changes any of
that (the turn's event, an earlier event, the chatbot role or the contract
version), or the turn is gone, the label is *stale*: it stops being current, stays
in the history with ``stale`` set, and its reviewer sees "needs relabeling" on the
turn. Labels on turns whose conversation so far is unchanged stay current (a
conversation that only grew keeps all of its labels). Gold labels follow the same
rule. The reviewers' progress on the replaced cases is then recounted against the
new transcript.

Judge verdicts are per run, not per person, and have no history: a verdict on a
changed turn (and a conversation-level verdict on any replaced case) judged a
conversation that is gone, so it is deleted in the same transaction; the judge
report then never pairs it with the new content, and resuming the run judges the
new turns.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import orjson
from sqlalchemy import Connection, and_, bindparam, delete, func, select, tuple_, update
from sqlmodel import col

from storage.models import Assignment, Case, Event, GoldLabel, JudgeVerdict, Label, RubricVersion

# Positions in the rows of storage.cases.CASE_COLUMNS / EVENT_COLUMNS.
_CASE_ROLE, _CASE_CONTRACT = 1, 2
_EVENT_SEQ, _EVENT_TURN, _EVENT_ACTOR = 1, 2, 3
_EVENT_CONTENT = slice(3, 9)  # actor, text, actions_json, set_role, request_json, extra_json


@dataclass(frozen=True, slots=True)
class StaleMarks:
    labels: int
    gold_labels: int
    verdicts: int = 0
    """Judge verdicts deleted (on changed turns; conversation verdicts of replaced cases)."""


def _prefix_digests(seed: tuple[Any, ...], events: Sequence[tuple[Any, ...]]) -> dict[int, bytes]:
    """``turn -> digest`` of the role and every event up to and including the turn."""
    digest = hashlib.sha256(orjson.dumps(list(seed)))
    found: dict[int, bytes] = {}
    for event in sorted(events, key=lambda row: row[_EVENT_SEQ]):
        digest.update(orjson.dumps(list(event[_EVENT_CONTENT])))
        found[event[_EVENT_TURN]] = digest.copy().digest()
    return found


def changed_turns(
    connection: Connection,
    *,
    case_ids: Sequence[str],
    new_cases: Sequence[tuple[Any, ...]],
    new_events: Sequence[tuple[Any, ...]],
) -> dict[str, list[int]]:
    """Per stored case of ``case_ids``: the stored turns whose conversation so far differs
    in the replacement (``new_*``: rows in the column order of ``storage.cases``)."""
    wanted = set(case_ids)
    new_seed = {
        row[0]: (row[_CASE_ROLE], row[_CASE_CONTRACT]) for row in new_cases if row[0] in wanted
    }
    new_by_case: dict[str, list[tuple[Any, ...]]] = {}
    for row in new_events:
        if row[0] in wanted:
            new_by_case.setdefault(row[0], []).append(row)
    changed: dict[str, list[int]] = {}
    ordered = sorted(wanted)
    for start in range(0, len(ordered), 500):
        chunk = ordered[start : start + 500]
        seeds = {
            case_id: (role, contract)
            for case_id, role, contract in connection.execute(
                select(col(Case.case_id), col(Case.chatbot_role), col(Case.contract_version)).where(
                    col(Case.case_id).in_(chunk)
                )
            )
        }
        old_by_case: dict[str, list[tuple[Any, ...]]] = {}
        query = select(
            col(Event.case_id),
            col(Event.seq),
            col(Event.turn),
            col(Event.actor),
            col(Event.text),
            col(Event.actions_json),
            col(Event.set_role),
            col(Event.request_json),
            col(Event.extra_json),
        ).where(col(Event.case_id).in_(chunk))
        for row in connection.execute(query):
            old_by_case.setdefault(row[0], []).append(tuple(row))
        for case_id in chunk:
            old = _prefix_digests(seeds.get(case_id, (None, None)), old_by_case.get(case_id, []))
            new = _prefix_digests(new_seed.get(case_id, (None, None)), new_by_case.get(case_id, []))
            turns = sorted(turn for turn, digest in old.items() if new.get(turn) != digest)
            if turns:
                changed[case_id] = turns
    return changed


def _applies_to(connection: Connection) -> dict[tuple[str, int], str]:
    """The actor each stored rubric version labels (``assistant`` when unknown)."""
    found: dict[tuple[str, int], str] = {}
    query = select(
        col(RubricVersion.rubric_id), col(RubricVersion.version), col(RubricVersion.body_json)
    )
    for rubric_id, version, body in connection.execute(query):
        try:
            found[(rubric_id, version)] = str(orjson.loads(body).get("applies_to") or "assistant")
        except (orjson.JSONDecodeError, AttributeError):
            found[(rubric_id, version)] = "assistant"
    return found


def mark_replaced_turns_stale(
    connection: Connection,
    *,
    case_ids: Sequence[str],
    new_cases: Sequence[tuple[Any, ...]],
    new_events: Sequence[tuple[Any, ...]],
) -> StaleMarks:
    """Before a replacement's old events are deleted: make labels and gold labels on
    changed turns stale, and recount the reviewers' progress on the replaced cases.

    Takes the reviewers' assignment row locks first, in the order every other writer
    takes them, so a reviewer saving a label on one of these cases at this moment
    waits for the import (and then labels the new transcript) or goes first.
    """
    if not case_ids:
        return StaleMarks(0, 0)
    changed = changed_turns(
        connection, case_ids=case_ids, new_cases=new_cases, new_events=new_events
    )
    ordered = sorted(set(case_ids))
    if connection.dialect.name == "postgresql":
        for start in range(0, len(ordered), 500):
            connection.execute(
                select(col(Assignment.id))
                .where(col(Assignment.case_id).in_(ordered[start : start + 500]))
                .order_by(
                    col(Assignment.case_id),
                    col(Assignment.rubric_id),
                    col(Assignment.rubric_version),
                    col(Assignment.reviewer_id),
                )
                .with_for_update()
            ).all()
    units = [(case_id, turn) for case_id, turns in sorted(changed.items()) for turn in turns]
    stale_labels = stale_gold = 0
    for start in range(0, len(units), 500):
        chunk = units[start : start + 500]
        for table in (Label, GoldLabel):
            result = connection.execute(
                update(table)
                .where(
                    col(table.current),
                    tuple_(col(table.case_id), col(table.turn)).in_(chunk),
                )
                .values(current=False, stale=True)
            )
            if table is Label:
                stale_labels += result.rowcount
            else:
                stale_gold += result.rowcount
    verdicts = delete_verdicts_on_changed_turns(connection, case_ids=ordered, changed=changed)
    _recount_progress(connection, case_ids=ordered, new_events=new_events)
    return StaleMarks(stale_labels, stale_gold, verdicts)


def delete_verdicts_on_changed_turns(
    connection: Connection, *, case_ids: Sequence[str], changed: dict[str, list[int]]
) -> int:
    """Delete judge verdicts on the changed turns of replaced cases, and the
    conversation-level verdicts (no turn) of every replaced case ``case_ids`` (its
    conversation differs, if only by growing). Returns how many were deleted."""
    units = [(case_id, turn) for case_id, turns in sorted(changed.items()) for turn in turns]
    deleted = 0
    for start in range(0, len(units), 500):
        chunk = units[start : start + 500]
        deleted += connection.execute(
            delete(JudgeVerdict).where(
                tuple_(col(JudgeVerdict.case_id), col(JudgeVerdict.turn)).in_(chunk)
            )
        ).rowcount
    cases = sorted(set(case_ids))
    for start in range(0, len(cases), 500):
        deleted += connection.execute(
            delete(JudgeVerdict).where(
                col(JudgeVerdict.case_id).in_(cases[start : start + 500]),
                col(JudgeVerdict.turn).is_(None),
            )
        ).rowcount
    return deleted


def _recount_progress(
    connection: Connection, *, case_ids: Sequence[str], new_events: Sequence[tuple[Any, ...]]
) -> None:
    """Labeled turns and completion of every assignment of the replaced cases, against the
    new transcript (it may have more or fewer turns to label)."""
    wanted = set(case_ids)
    actors: dict[str, dict[str, int]] = {}
    for row in new_events:
        if row[0] in wanted:
            per_actor = actors.setdefault(row[0], {})
            per_actor[row[_EVENT_ACTOR]] = per_actor.get(row[_EVENT_ACTOR], 0) + 1
    applies_to = _applies_to(connection)
    now = datetime.now(UTC)
    updates: list[dict[str, Any]] = []
    for start in range(0, len(case_ids), 500):
        chunk = list(case_ids[start : start + 500])
        counts = {
            (case_id, reviewer_id, rubric_id, version): n
            for case_id, reviewer_id, rubric_id, version, n in connection.execute(
                select(
                    col(Label.case_id),
                    col(Label.reviewer_id),
                    col(Label.rubric_id),
                    col(Label.rubric_version),
                    func.count(),
                )
                .where(col(Label.current), col(Label.case_id).in_(chunk))
                .group_by(
                    col(Label.case_id),
                    col(Label.reviewer_id),
                    col(Label.rubric_id),
                    col(Label.rubric_version),
                )
            )
        }
        assignments = connection.execute(
            select(
                col(Assignment.id),
                col(Assignment.case_id),
                col(Assignment.reviewer_id),
                col(Assignment.rubric_id),
                col(Assignment.rubric_version),
                col(Assignment.completed_at),
            ).where(col(Assignment.case_id).in_(chunk))
        )
        for assignment_id, case_id, reviewer_id, rubric_id, version, completed_at in assignments:
            labeled = counts.get((case_id, reviewer_id, rubric_id, version), 0)
            actor = applies_to.get((rubric_id, version), "assistant")
            total = actors.get(case_id, {}).get(actor, 0)
            complete = total > 0 and labeled >= total
            updates.append(
                {
                    "a_id": assignment_id,
                    "a_labeled": labeled,
                    "a_completed": (completed_at or now) if complete else None,
                }
            )
    if updates:
        connection.execute(
            update(Assignment)
            .where(and_(col(Assignment.id) == bindparam("a_id")))
            .values(labeled_turns=bindparam("a_labeled"), completed_at=bindparam("a_completed")),
            updates,
        )
