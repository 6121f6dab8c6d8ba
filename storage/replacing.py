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

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import Connection, and_, bindparam, func, select, tuple_, update
from sqlmodel import col

from storage.cases import changed_turns
from storage.judging import delete_verdicts_on_changed_turns
from storage.models import Assignment, GoldLabel, Label
from storage.rubric_versions import applies_to_by_version

# Position of the actor in the rows of storage.cases.EVENT_COLUMNS.
_EVENT_ACTOR = 3


@dataclass(frozen=True, slots=True)
class StaleMarks:
    labels: int
    gold_labels: int
    verdicts: int = 0
    """Judge verdicts deleted (on changed turns; conversation verdicts of replaced cases)."""


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
    applies_to = applies_to_by_version(connection)
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
