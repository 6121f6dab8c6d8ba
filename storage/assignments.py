"""Queries on assignments: who reviews which case, queues, progress (the ``assignments``
table), and the access checks built on them: which cases a reviewer may open (in their
queue, or carrying their labels)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import Connection, and_, bindparam, false, func, select, text, update
from sqlmodel import Session, col

from storage.bulk import in_chunks, insert_ignoring_conflicts, insert_rows, timestamp_param
from storage.cases import actor_turn_counts
from storage.labels import current_label_counts
from storage.models import (
    Assignment,
    AuditEntry,
    Case,
    Evaluation,
    Label,
    RubricVersion,
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
    labeled = current_label_counts(
        session, case_ids=case_ids, rubric_id=rubric_id, version=version, reviewer_ids=reviewer_ids
    )
    totals = actor_turn_counts(session, case_ids=case_ids, actor=applies_to)
    existing: dict[tuple[str, int], Assignment] = {}
    for chunk in in_chunks(case_ids):
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
        count = labeled.get((case_id, reviewer_id, rubric_id, version), 0)
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


def lock_case_assignments(connection: Connection, *, case_ids: Sequence[str]) -> None:
    """PostgreSQL: lock every assignment of ``case_ids`` (any reviewer and rubric version)
    until the transaction ends, in the order every other writer takes them. SQLite's
    ``BEGIN IMMEDIATE`` already serialises writers."""
    if connection.dialect.name != "postgresql":
        return
    for chunk in in_chunks(case_ids):
        connection.execute(
            select(col(Assignment.id))
            .where(col(Assignment.case_id).in_(chunk))
            .order_by(
                col(Assignment.case_id),
                col(Assignment.rubric_id),
                col(Assignment.rubric_version),
                col(Assignment.reviewer_id),
            )
            .with_for_update()
        ).all()


def recount_case_progress(
    connection: Connection,
    *,
    case_ids: Sequence[str],
    labeled: Mapping[tuple[str, int, str, int], int],
    actor_turns: Mapping[str, Mapping[str, int]],
    applies_to: Mapping[tuple[str, int], str],
    now: datetime,
) -> None:
    """Labeled turns and completion of every assignment of ``case_ids`` (any reviewer and
    rubric version): ``labeled`` holds the current labels per ``(case_id, reviewer_id,
    rubric_id, version)`` (:func:`storage.labels.current_label_counts`), ``actor_turns``
    the turns per case and actor, ``applies_to`` the actor each rubric version labels
    (``assistant`` when missing). A newly complete assignment is stamped ``now``."""
    updates: list[dict[str, Any]] = []
    for chunk in in_chunks(case_ids):
        rows = connection.execute(
            select(
                col(Assignment.id),
                col(Assignment.case_id),
                col(Assignment.reviewer_id),
                col(Assignment.rubric_id),
                col(Assignment.rubric_version),
                col(Assignment.completed_at),
            ).where(col(Assignment.case_id).in_(list(chunk)))
        )
        for assignment_id, case_id, reviewer_id, rubric_id, version, completed_at in rows:
            count = labeled.get((case_id, reviewer_id, rubric_id, version), 0)
            actor = applies_to.get((rubric_id, version), "assistant")
            total = actor_turns.get(case_id, {}).get(actor, 0)
            complete = total > 0 and count >= total
            updates.append(
                {
                    "a_id": assignment_id,
                    "a_labeled": count,
                    "a_completed": (completed_at or now) if complete else None,
                }
            )
    if updates:
        connection.execute(
            update(Assignment)
            .where(col(Assignment.id) == bindparam("a_id"))
            .values(labeled_turns=bindparam("a_labeled"), completed_at=bindparam("a_completed")),
            updates,
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


def reviewer_has_case(session: Session, *, reviewer_id: int, case_id: str) -> bool:
    """Whether the case is in the reviewer's queue (any rubric) or carries their labels."""
    for table in (Assignment, Label):
        query = select(col(table.case_id)).where(
            col(table.reviewer_id) == reviewer_id, col(table.case_id) == case_id
        )
        if session.scalars(query.limit(1)).first() is not None:
            return True
    return False


def case_hash_and_access(
    session: Session, *, case_id: str, reviewer_id: int | None
) -> tuple[str, bool] | None:
    """The case's content hash and whether it is in the reviewer's queue (any rubric) or
    carries their labels (``False`` without a reviewer); ``None`` if no such case.

    One query in the usual case: the assignment and label indexes lead with the reviewer
    and the rubric version, so the check seeks them once per stored rubric version
    instead of scanning every row of the reviewer. Rows under a rubric version missing
    from ``rubric_versions`` are still found, by :func:`reviewer_has_case`."""
    if reviewer_id is None:
        query = select(col(Case.content_sha256), false()).where(col(Case.case_id) == case_id)
        row = session.execute(query).first()
        return None if row is None else (row[0], False)
    assigned = _reviewer_rows_on_case(Assignment, reviewer_id=reviewer_id, case_id=case_id)
    labeled = _reviewer_rows_on_case(Label, reviewer_id=reviewer_id, case_id=case_id)
    query = select(col(Case.content_sha256), assigned | labeled).where(col(Case.case_id) == case_id)
    row = session.execute(query).first()
    if row is None:
        return None
    if row[1]:
        return row[0], True
    return row[0], reviewer_has_case(session, reviewer_id=reviewer_id, case_id=case_id)


def _reviewer_rows_on_case(
    table: type[Assignment] | type[Label], *, reviewer_id: int, case_id: str
) -> Any:
    """``EXISTS``: the reviewer has a row of ``table`` on the case under a stored rubric
    version. Nested, so the planner loops over the few rubric versions and seeks each."""
    return (
        select(1)
        .select_from(RubricVersion)
        .where(
            select(1)
            .where(
                col(table.reviewer_id) == reviewer_id,
                col(table.rubric_id) == col(RubricVersion.rubric_id),
                col(table.rubric_version) == col(RubricVersion.version),
                col(table.case_id) == case_id,
            )
            .exists()
        )
        .exists()
    )


def reviewer_case_ids(session: Session, *, reviewer_id: int, case_ids: list[str]) -> set[str]:
    """Those of ``case_ids`` in the reviewer's queue (any rubric) or carrying their labels."""
    found: set[str] = set()
    wanted = sorted(set(case_ids))
    for table in (Assignment, Label):
        for chunk in in_chunks(wanted):
            query = select(col(table.case_id)).where(
                col(table.reviewer_id) == reviewer_id, col(table.case_id).in_(chunk)
            )
            found.update(session.scalars(query.distinct()))
    return found


def carry_assignments(
    session: Session,
    *,
    rubric_id: str,
    from_version: int,
    to_version: int,
    at: datetime,
    count_assistant_turns: bool,
) -> None:
    """Every queue entry of ``from_version`` also under ``to_version``, with progress
    recounted from the labels now there (carried ones included).

    New entries get their counts as they are inserted (one ``INSERT ... SELECT`` with the
    labels counted per case and reviewer in one pass); only the entries ``to_version``
    had before are updated. On PostgreSQL an update of a row inserted by the same
    transaction checks its foreign keys again, which cost as much as the insert."""
    stamp = timestamp_param(session.connection(), at)
    params = {"to_v": to_version, "from_v": from_version, "rid": rubric_id, "at": stamp}
    existing_up_to = session.execute(
        text("SELECT max(id) FROM assignments WHERE rubric_id = :rid AND rubric_version = :to_v"),
        params,
    ).scalar_one()
    counted = (
        "(SELECT l.case_id, l.reviewer_id, count(*) AS n FROM labels l "
        "WHERE l.rubric_id = :rid AND l.rubric_version = :to_v AND l.current "
        "GROUP BY l.case_id, l.reviewer_id)"
    )
    finished = (
        "CASE WHEN coalesce(k.n, 0) >= c.n_assistant_turns THEN :at ELSE NULL END"
        if count_assistant_turns
        else "NULL"
    )
    session.execute(
        text(
            "INSERT INTO assignments (case_id, reviewer_id, rubric_id, rubric_version, "
            "assigned_by, created_at, labeled_turns, completed_at) "
            "SELECT a.case_id, a.reviewer_id, a.rubric_id, :to_v, a.assigned_by, :at, "
            f"coalesce(k.n, 0), {finished} "
            "FROM assignments a JOIN cases c ON c.case_id = a.case_id "
            f"LEFT JOIN {counted} k ON k.case_id = a.case_id AND k.reviewer_id = a.reviewer_id "
            "WHERE a.rubric_id = :rid AND a.rubric_version = :from_v "
            "AND NOT EXISTS (SELECT 1 FROM assignments b WHERE b.reviewer_id = a.reviewer_id "
            "AND b.rubric_id = a.rubric_id AND b.rubric_version = :to_v "
            "AND b.case_id = a.case_id)"
        ),
        params,
    )
    if existing_up_to is None:
        return
    labeled = (
        "(SELECT count(*) FROM labels l WHERE l.rubric_id = assignments.rubric_id "
        "AND l.rubric_version = assignments.rubric_version "
        "AND l.case_id = assignments.case_id AND l.reviewer_id = assignments.reviewer_id "
        "AND l.current)"
    )
    completed = (
        f"CASE WHEN {labeled} >= (SELECT c.n_assistant_turns FROM cases c "
        "WHERE c.case_id = assignments.case_id) THEN :at ELSE NULL END"
        if count_assistant_turns
        else "NULL"
    )
    session.execute(
        text(
            f"UPDATE assignments SET labeled_turns = {labeled}, completed_at = {completed} "
            "WHERE rubric_id = :rid AND rubric_version = :to_v AND completed_at IS NULL "
            "AND id <= :existing"
        ),
        {**params, "existing": existing_up_to},
    )


def open_assignment_count(session: Session, *, reviewer_id: int) -> int:
    """The reviewer's assignments not finished yet, under every rubric version."""
    query = select(func.count()).where(
        col(Assignment.reviewer_id) == reviewer_id, col(Assignment.completed_at).is_(None)
    )
    return int(session.execute(query).scalar_one())
