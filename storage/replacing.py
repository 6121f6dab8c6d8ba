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

This module holds no query of its own: it runs those of the tables' modules in order,
in the import's transaction.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import Connection

from storage.assignments import lock_case_assignments, recount_case_progress
from storage.cases import EVENT_COLUMNS, changed_turns
from storage.judging import delete_verdicts_on_changed_turns
from storage.labels import current_label_counts
from storage.rubric_versions import applies_to_by_version
from storage.units import mark_turns_stale

_EVENT_ACTOR = EVENT_COLUMNS.index("actor")


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
    lock_case_assignments(connection, case_ids=ordered)
    units = [(case_id, turn) for case_id, turns in sorted(changed.items()) for turn in turns]
    stale_labels, stale_gold = mark_turns_stale(connection, units=units)
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
    recount_case_progress(
        connection,
        case_ids=case_ids,
        labeled=current_label_counts(connection, case_ids=case_ids),
        actor_turns=actors,
        applies_to=applies_to_by_version(connection),
        now=datetime.now(UTC),
    )
