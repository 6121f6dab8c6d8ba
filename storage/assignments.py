"""Queries on assignments: who reviews which case, queues, progress (the ``assignments`` table)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import and_, func, select
from sqlmodel import Session, col

from storage.bulk import in_chunks, insert_ignoring_conflicts, insert_rows, timestamp_param
from storage.models import (
    Assignment,
    AuditEntry,
    Case,
    Evaluation,
    Event,
    Label,
    utcnow,
)


def _queue_of(*, reviewer_id: int, rubric_id: str, version: int) -> tuple[Any, ...]:
    """Conditions selecting the reviewer's assignments under a rubric version: their queue."""
    return (
        col(Assignment.reviewer_id) == reviewer_id,
        col(Assignment.rubric_id) == rubric_id,
        col(Assignment.rubric_version) == version,
    )


def assigned_case_ids(
    session: Session, *, reviewer_id: int, rubric_id: str, version: int
) -> set[str]:
    query = select(col(Assignment.case_id)).where(
        *_queue_of(reviewer_id=reviewer_id, rubric_id=rubric_id, version=version)
    )
    return set(session.scalars(query))


def assignment_counts_by_case(
    session: Session, *, rubric_id: str, version: int, case_ids: Sequence[str] | None = None
) -> dict[str, int]:
    query = (
        select(col(Assignment.case_id), func.count())
        .where(col(Assignment.rubric_id) == rubric_id, col(Assignment.rubric_version) == version)
        .group_by(col(Assignment.case_id))
    )
    if case_ids is not None:
        query = query.where(col(Assignment.case_id).in_(list(case_ids)))
    return {case_id: count for case_id, count in session.execute(query)}


_ASSIGNMENT_KEYS = ("reviewer_id", "rubric_id", "rubric_version", "case_id")


def insert_assignments(
    session: Session,
    *,
    rows: Sequence[tuple[str, int, str, int, int | None]],
    now: datetime,
) -> None:
    """Bulk-add ``(case_id, reviewer_id, rubric_id, version, assigned_by)`` rows; a pair
    that exists already (a reviewer's first save a moment ago) is left as it is."""
    statement = insert_ignoring_conflicts(session.connection(), Assignment, keys=_ASSIGNMENT_KEYS)
    for chunk in in_chunks(rows):
        session.execute(
            statement,
            [
                {
                    "case_id": case_id,
                    "reviewer_id": reviewer_id,
                    "rubric_id": rubric_id,
                    "rubric_version": version,
                    "assigned_by": assigned_by,
                    "created_at": now,
                    "labeled_turns": 0,
                }
                for case_id, reviewer_id, rubric_id, version, assigned_by in chunk
            ],
        )


def lock_assignment(
    session: Session, *, case_id: str, reviewer_id: int, rubric_id: str, version: int
) -> int:
    """Create the reviewer's assignment to the case if missing, lock it, return its id.

    Every change to a reviewer's labels on a case takes this row lock first
    (``SELECT ... FOR UPDATE`` on PostgreSQL; SQLite's ``BEGIN IMMEDIATE`` already
    serialises writers), so concurrent saves by one reviewer on one case run one
    after the other: each sees the label the previous one stored, and the progress
    count is exact.
    """
    insert_assignments(
        session, rows=[(case_id, reviewer_id, rubric_id, version, reviewer_id)], now=utcnow()
    )
    query = (
        select(col(Assignment.id))
        .where(
            *_queue_of(reviewer_id=reviewer_id, rubric_id=rubric_id, version=version),
            col(Assignment.case_id) == case_id,
        )
        .with_for_update()
    )
    return int(session.execute(query).scalar_one())


def lock_assignments(
    session: Session, *, rubric_id: str, version: int, pairs: Sequence[tuple[str, int]]
) -> None:
    """:func:`lock_assignment` for many ``(case_id, reviewer_id)`` pairs, in sorted order
    (every multi-row locker takes them in the same order, so none waits in a cycle)."""
    ordered = sorted(set(pairs))
    insert_assignments(
        session,
        rows=[
            (case_id, reviewer_id, rubric_id, version, reviewer_id)
            for case_id, reviewer_id in ordered
        ],
        now=utcnow(),
    )
    if session.connection().dialect.name != "postgresql":
        return
    for chunk in in_chunks(ordered):
        case_ids = sorted({case_id for case_id, _ in chunk})
        reviewer_ids = sorted({reviewer_id for _, reviewer_id in chunk})
        session.execute(
            select(col(Assignment.id))
            .where(
                col(Assignment.rubric_id) == rubric_id,
                col(Assignment.rubric_version) == version,
                col(Assignment.case_id).in_(case_ids),
                col(Assignment.reviewer_id).in_(reviewer_ids),
            )
            .order_by(col(Assignment.case_id), col(Assignment.reviewer_id))
            .with_for_update()
        ).all()


@dataclass(frozen=True, slots=True)
class QueueRow:
    case_id: str
    lane: str | None
    n_assistant_turns: int
    labeled_turns: int
    completed: bool
    first_violation_turn: int | None


@dataclass(frozen=True, slots=True)
class QueueSelection:
    """Which of a reviewer's assignments under a rubric version a queue page shows: all,
    or those of one lane (by ``evaluator_version``'s evaluation), or not finished yet."""

    reviewer_id: int
    rubric_id: str
    version: int
    evaluator_version: str
    lane: str | None = None
    only_unlabeled: bool = False


def _evaluation_of_assignment(evaluator_version: str) -> Any:
    return and_(
        col(Evaluation.case_id) == col(Assignment.case_id),
        col(Evaluation.evaluator_version) == evaluator_version,
    )


def _selected(query: Any, selection: QueueSelection) -> Any:
    """``query`` over assignments (joined to their evaluations when a lane is asked for)
    narrowed to the selection."""
    query = query.where(
        *_queue_of(
            reviewer_id=selection.reviewer_id,
            rubric_id=selection.rubric_id,
            version=selection.version,
        )
    )
    if selection.lane is not None:
        query = query.where(col(Evaluation.lane) == selection.lane)
    if selection.only_unlabeled:
        query = query.where(col(Assignment.completed_at).is_(None))
    return query


def queue_cases(selection: QueueSelection) -> Any:
    """The case ids of a queue selection as a subquery (``column.in_(queue_cases(...))``)."""
    query = select(col(Assignment.case_id))
    if selection.lane is not None:
        query = query.join(Evaluation, _evaluation_of_assignment(selection.evaluator_version))
    return _selected(query, selection)


def queue_page(
    session: Session, *, selection: QueueSelection, offset: int = 0, limit: int = 25
) -> list[QueueRow]:
    query = (
        select(
            col(Assignment.case_id),
            col(Evaluation.lane),
            col(Case.n_assistant_turns),
            col(Assignment.labeled_turns),
            col(Assignment.completed_at),
            col(Evaluation.first_violation_turn),
        )
        .join(Case, col(Case.case_id) == col(Assignment.case_id))
        .outerjoin(Evaluation, _evaluation_of_assignment(selection.evaluator_version))
    )
    query = _selected(query, selection).order_by(col(Assignment.case_id))
    rows = session.execute(query.offset(offset).limit(limit))
    return [
        QueueRow(case_id, lane_, n, labeled, completed is not None, first)
        for case_id, lane_, n, labeled, completed, first in rows
    ]


def queue_count(session: Session, *, selection: QueueSelection) -> int:
    # Counted on assignments alone (their case always exists: foreign key), joining
    # the evaluations only to filter by lane: the join on cases cost most of the time.
    query = select(func.count()).select_from(Assignment)
    if selection.lane is not None:
        query = query.join(Evaluation, _evaluation_of_assignment(selection.evaluator_version))
    return int(session.execute(_selected(query, selection)).scalar_one())


def progress_token(session: Session) -> tuple[Any, ...]:
    """Changes whenever a reviewer's queue counts (:func:`queue_progress`) may have:
    ``(highest label id, highest assignment id, time of the newest audit entry)``.

    Labels and assignments are append-only, so a saved or imported label and a new
    queue entry raise a highest id. What updates progress in place (a case replaced
    under its labels, a rubric carry's recount) or brings older rows back (a restored
    backup) is a change with its audit entry, written in the same transaction; a
    restore's entry is newer than anything the database held before. Three index
    lookups, whatever the size of the tables. On PostgreSQL, ids are drawn before
    commit, so two writes committing in the other order can leave the highest id as it
    was: a reader caching by this token also bounds how long it keeps a count.
    """
    newest = (
        select(func.max(col(Label.id))).scalar_subquery(),
        select(func.max(col(Assignment.id))).scalar_subquery(),
        select(func.max(col(AuditEntry.at))).scalar_subquery(),
    )
    return tuple(session.execute(select(*newest)).one())


def queue_progress(
    session: Session, *, reviewer_id: int, rubric_id: str, version: int
) -> tuple[int, int]:
    """``(completed cases, assigned cases)`` for one reviewer and rubric version."""
    query = select(func.count(), func.count(col(Assignment.completed_at))).where(
        *_queue_of(reviewer_id=reviewer_id, rubric_id=rubric_id, version=version)
    )
    total, completed = session.execute(query).one()
    return int(completed), int(total)


def unfinished_case_ids(
    session: Session, *, reviewer_id: int, rubric_id: str, version: int
) -> list[str]:
    """The reviewer's unfinished cases under a rubric version, by case id (queue order)."""
    query = (
        select(col(Assignment.case_id))
        .where(
            *_queue_of(reviewer_id=reviewer_id, rubric_id=rubric_id, version=version),
            col(Assignment.completed_at).is_(None),
        )
        .order_by(col(Assignment.case_id))
    )
    return list(session.scalars(query))


def next_queued_case(
    session: Session,
    *,
    reviewer_id: int,
    rubric_id: str,
    version: int,
    after_case_id: str | None,
) -> str | None:
    """The next case (by id) in the reviewer's queue they have not finished, wrapping round."""
    base = select(col(Assignment.case_id)).where(
        *_queue_of(reviewer_id=reviewer_id, rubric_id=rubric_id, version=version),
        col(Assignment.completed_at).is_(None),
    )
    if after_case_id is not None:
        following = session.scalars(
            base.where(col(Assignment.case_id) > after_case_id)
            .order_by(col(Assignment.case_id))
            .limit(1)
        ).first()
        if following is not None:
            return following
    first = session.scalars(base.order_by(col(Assignment.case_id)).limit(1)).first()
    return first if first != after_case_id else None


def record_progress(
    session: Session,
    *,
    assignment_id: int,
    labeled_turns: int,
    complete: bool,
) -> None:
    """Store the reviewer's progress on the assignment locked by :func:`lock_assignment`."""
    assignment = session.get(Assignment, assignment_id)
    assert assignment is not None
    assignment.labeled_turns = labeled_turns
    if complete and assignment.completed_at is None:
        assignment.completed_at = utcnow()
    elif not complete:
        assignment.completed_at = None
    session.add(assignment)
    session.flush()


def refresh_progress(
    session: Session,
    *,
    rubric_id: str,
    version: int,
    pairs: Sequence[tuple[str, int]],
    applies_to: str,
    now: datetime,
) -> None:
    """Recount (case, reviewer) progress after a bulk change; create missing assignments."""
    if not pairs:
        return
    case_ids = sorted({case_id for case_id, _ in pairs})
    reviewer_ids = sorted({reviewer_id for _, reviewer_id in pairs})
    wanted = set(pairs)
    labeled: dict[tuple[str, int], int] = {}
    totals: dict[str, int] = {}
    existing: dict[tuple[str, int], Assignment] = {}
    for chunk in in_chunks(case_ids):
        counts = (
            select(col(Label.case_id), col(Label.reviewer_id), func.count())
            .where(
                col(Label.rubric_id) == rubric_id,
                col(Label.rubric_version) == version,
                col(Label.current),
                col(Label.case_id).in_(chunk),
                col(Label.reviewer_id).in_(reviewer_ids),
            )
            .group_by(col(Label.case_id), col(Label.reviewer_id))
        )
        for case_id, reviewer_id, count in session.execute(counts):
            labeled[(case_id, reviewer_id)] = count
        turns = (
            select(col(Event.case_id), func.count())
            .where(col(Event.case_id).in_(chunk), col(Event.actor) == applies_to)
            .group_by(col(Event.case_id))
        )
        totals.update({case_id: count for case_id, count in session.execute(turns)})
        rows = select(Assignment).where(
            col(Assignment.rubric_id) == rubric_id,
            col(Assignment.rubric_version) == version,
            col(Assignment.case_id).in_(chunk),
            col(Assignment.reviewer_id).in_(reviewer_ids),
        )
        for found in session.scalars(rows):
            existing[(found.case_id, found.reviewer_id)] = found
    connection = session.connection()
    stamp = timestamp_param(connection, now)
    new_rows: list[tuple[Any, ...]] = []
    for case_id, reviewer_id in sorted(wanted):
        count = labeled.get((case_id, reviewer_id), 0)
        complete = count >= totals.get(case_id, 0) > 0
        assignment = existing.get((case_id, reviewer_id))
        if assignment is None:
            new_rows.append(
                (
                    case_id,
                    reviewer_id,
                    rubric_id,
                    version,
                    reviewer_id,
                    stamp,
                    count,
                    stamp if complete else None,
                )
            )
            continue
        assignment.labeled_turns = count
        if complete and assignment.completed_at is None:
            assignment.completed_at = now
        elif not complete:
            assignment.completed_at = None
        session.add(assignment)
    session.flush()
    insert_rows(
        connection,
        table="assignments",
        columns=(
            "case_id",
            "reviewer_id",
            "rubric_id",
            "rubric_version",
            "assigned_by",
            "created_at",
            "labeled_turns",
            "completed_at",
        ),
        rows=new_rows,
    )


def progress_by_reviewer(
    session: Session, *, rubric_id: str, version: int
) -> dict[int, tuple[int, int]]:
    """reviewer id -> ``(assigned cases, completed cases)`` under a rubric version."""
    query = (
        select(col(Assignment.reviewer_id), func.count(), func.count(col(Assignment.completed_at)))
        .where(col(Assignment.rubric_id) == rubric_id, col(Assignment.rubric_version) == version)
        .group_by(col(Assignment.reviewer_id))
    )
    return {int(r): (int(total), int(done)) for r, total, done in session.execute(query)}


def cases_without_reviewer(session: Session, *, rubric_id: str, version: int) -> int:
    """How many stored cases are in nobody's queue under a rubric version."""
    queued = select(col(Assignment.case_id)).where(
        col(Assignment.rubric_id) == rubric_id, col(Assignment.rubric_version) == version
    )
    query = select(func.count()).select_from(Case).where(col(Case.case_id).not_in(queued))
    return int(session.execute(query).scalar_one())


def case_count(session: Session) -> int:
    return int(session.execute(select(func.count()).select_from(Case)).scalar_one())
