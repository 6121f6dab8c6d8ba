"""Queries on reviewers, rubric versions, assignments (queues) and labels."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import Connection, and_, func, insert, select, update
from sqlalchemy.dialects import postgresql, sqlite
from sqlmodel import Session, col

from storage.models import (
    Assignment,
    Case,
    Evaluation,
    Event,
    Label,
    LabelEvent,
    Reviewer,
    RubricVersion,
    utcnow,
)

# --- reviewers -----------------------------------------------------------------


def get_reviewer(session: Session, *, reviewer_id: int) -> Reviewer | None:
    return session.get(Reviewer, reviewer_id)


def get_reviewer_by_name(session: Session, *, name: str) -> Reviewer | None:
    return session.scalars(select(Reviewer).where(col(Reviewer.name) == name)).first()


def reviewers_by_name(session: Session, *, names: Iterable[str]) -> dict[str, Reviewer]:
    wanted = sorted(set(names))
    found: dict[str, Reviewer] = {}
    for start in range(0, len(wanted), 500):
        chunk = wanted[start : start + 500]
        for reviewer in session.scalars(select(Reviewer).where(col(Reviewer.name).in_(chunk))):
            found[reviewer.name] = reviewer
    return found


def create_reviewer(
    session: Session, *, name: str, role: str = "reviewer", display_name: str | None = None
) -> Reviewer:
    reviewer = Reviewer(name=name, role=role, display_name=display_name)
    session.add(reviewer)
    session.flush()
    return reviewer


def insert_ignoring_conflicts(connection: Connection, table: Any, *, keys: Sequence[str]) -> Any:
    """``INSERT ... ON CONFLICT (keys) DO NOTHING`` for this connection's dialect.

    Get-or-create that two sessions may run at once (a first sign-in from two tabs,
    a first save on an unassigned case): the loser's insert does nothing instead of
    failing, and both then read the one row.
    """
    name = connection.dialect.name
    if name == "postgresql":
        return postgresql.insert(table).on_conflict_do_nothing(index_elements=list(keys))
    if name == "sqlite":
        return sqlite.insert(table).on_conflict_do_nothing(index_elements=list(keys))
    return insert(table)  # pragma: no cover - other databases: plain insert


def ensure_reviewer(
    session: Session, *, name: str, role: str = "reviewer", display_name: str | None = None
) -> Reviewer:
    """The reviewer called ``name``, created with ``role`` if there is none (race-safe)."""
    statement = insert_ignoring_conflicts(session.connection(), Reviewer, keys=["name"]).values(
        name=name, role=role, display_name=display_name, active=True, created_at=utcnow()
    )
    session.execute(statement)
    reviewer = get_reviewer_by_name(session, name=name)
    assert reviewer is not None
    return reviewer


def insert_reviewer_if_absent(
    session: Session, *, name: str, role: str = "reviewer", display_name: str | None = None
) -> bool:
    """Create the reviewer ``name`` unless it exists (``ON CONFLICT DO NOTHING``, so a
    simultaneous sign-in or addition of the same name never raises); whether this
    call created it."""
    statement = insert_ignoring_conflicts(session.connection(), Reviewer, keys=["name"]).values(
        name=name, role=role, display_name=display_name, active=True, created_at=utcnow()
    )
    # RETURNING says whether a row was inserted on both backends (rowcount does not
    # through the ORM's insert path on PostgreSQL).
    return session.execute(statement.returning(col(Reviewer.id))).first() is not None


def list_reviewers(session: Session, *, active_only: bool = True) -> list[Reviewer]:
    query = select(Reviewer).order_by(col(Reviewer.name))
    if active_only:
        query = query.where(col(Reviewer.active))
    return list(session.scalars(query))


def set_reviewer_role(session: Session, *, reviewer_id: int, role: str) -> None:
    session.execute(update(Reviewer).where(col(Reviewer.id) == reviewer_id).values(role=role))


def count_reviewers_with_role(session: Session, *, role: str) -> int:
    query = select(func.count()).select_from(Reviewer).where(col(Reviewer.role) == role)
    return int(session.execute(query).scalar_one())


# --- rubric versions -------------------------------------------------------------


def get_rubric_version(session: Session, *, rubric_id: str, version: int) -> RubricVersion | None:
    return session.get(RubricVersion, (rubric_id, version))


def list_rubric_versions(session: Session) -> list[RubricVersion]:
    query = select(RubricVersion).order_by(col(RubricVersion.rubric_id), col(RubricVersion.version))
    return list(session.scalars(query))


def save_rubric_version(
    session: Session,
    *,
    rubric_id: str,
    version: int,
    sha256: str,
    title: str,
    body_json: str,
    source: str | None,
) -> RubricVersion:
    row = session.get(RubricVersion, (rubric_id, version))
    if row is None:
        row = RubricVersion(
            rubric_id=rubric_id, version=version, sha256=sha256, title=title, body_json=body_json
        )
    row.sha256 = sha256
    row.title = title
    row.body_json = body_json
    row.source = source
    row.loaded_at = utcnow()
    session.add(row)
    session.flush()
    return row


def rubric_version_has_labels(session: Session, *, rubric_id: str, version: int) -> bool:
    query = (
        select(col(Label.id))
        .where(col(Label.rubric_id) == rubric_id, col(Label.rubric_version) == version)
        .limit(1)
    )
    return session.execute(query).first() is not None


def rubric_versions_with_labels(session: Session) -> set[tuple[str, int]]:
    query = select(col(Label.rubric_id), col(Label.rubric_version)).distinct()
    return {(rubric_id, version) for rubric_id, version in session.execute(query)}


# --- events needed to validate labels ---------------------------------------------


def event_actors_by_turn(session: Session, *, case_id: str) -> dict[int, str]:
    query = select(col(Event.turn), col(Event.actor)).where(col(Event.case_id) == case_id)
    return {turn: actor for turn, actor in session.execute(query)}


def n_turns_by_actor(session: Session, *, case_id: str, actor: str) -> int:
    query = (
        select(func.count())
        .select_from(Event)
        .where(col(Event.case_id) == case_id, col(Event.actor) == actor)
    )
    return int(session.execute(query).scalar_one())


# --- assignments and queues ----------------------------------------------------------


def assigned_case_ids(
    session: Session, *, reviewer_id: int, rubric_id: str, version: int
) -> set[str]:
    query = select(col(Assignment.case_id)).where(
        col(Assignment.reviewer_id) == reviewer_id,
        col(Assignment.rubric_id) == rubric_id,
        col(Assignment.rubric_version) == version,
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
    for start in range(0, len(rows), 1000):
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
                for case_id, reviewer_id, rubric_id, version, assigned_by in rows[
                    start : start + 1000
                ]
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
    connection = session.connection()
    session.execute(
        insert_ignoring_conflicts(connection, Assignment, keys=_ASSIGNMENT_KEYS).values(
            case_id=case_id,
            reviewer_id=reviewer_id,
            rubric_id=rubric_id,
            rubric_version=version,
            assigned_by=reviewer_id,
            created_at=utcnow(),
            labeled_turns=0,
        )
    )
    query = (
        select(col(Assignment.id))
        .where(
            col(Assignment.case_id) == case_id,
            col(Assignment.reviewer_id) == reviewer_id,
            col(Assignment.rubric_id) == rubric_id,
            col(Assignment.rubric_version) == version,
        )
        .with_for_update()
    )
    return int(session.execute(query).scalar_one())


def lock_assignments(
    session: Session, *, rubric_id: str, version: int, pairs: Sequence[tuple[str, int]]
) -> None:
    """:func:`lock_assignment` for many ``(case_id, reviewer_id)`` pairs, in sorted order
    (every multi-row locker takes them in the same order, so none waits in a cycle)."""
    now = utcnow()
    connection = session.connection()
    ordered = sorted(set(pairs))
    for start in range(0, len(ordered), 500):
        chunk = ordered[start : start + 500]
        session.execute(
            insert_ignoring_conflicts(connection, Assignment, keys=_ASSIGNMENT_KEYS),
            [
                {
                    "case_id": case_id,
                    "reviewer_id": reviewer_id,
                    "rubric_id": rubric_id,
                    "rubric_version": version,
                    "assigned_by": reviewer_id,
                    "created_at": now,
                    "labeled_turns": 0,
                }
                for case_id, reviewer_id in chunk
            ],
        )
    if connection.dialect.name != "postgresql":
        return
    for start in range(0, len(ordered), 500):
        chunk = ordered[start : start + 500]
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


def get_assignment(
    session: Session, *, case_id: str, reviewer_id: int, rubric_id: str, version: int
) -> Assignment | None:
    query = select(Assignment).where(
        col(Assignment.case_id) == case_id,
        col(Assignment.reviewer_id) == reviewer_id,
        col(Assignment.rubric_id) == rubric_id,
        col(Assignment.rubric_version) == version,
    )
    return session.scalars(query).first()


@dataclass(frozen=True, slots=True)
class QueueRow:
    case_id: str
    lane: str | None
    n_assistant_turns: int
    labeled_turns: int
    completed: bool
    first_violation_turn: int | None


def _queue_query(
    *,
    reviewer_id: int,
    rubric_id: str,
    version: int,
    evaluator_version: str,
    lane: str | None,
    only_unlabeled: bool,
) -> Any:
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
        .outerjoin(
            Evaluation,
            and_(
                col(Evaluation.case_id) == col(Assignment.case_id),
                col(Evaluation.evaluator_version) == evaluator_version,
            ),
        )
        .where(
            col(Assignment.reviewer_id) == reviewer_id,
            col(Assignment.rubric_id) == rubric_id,
            col(Assignment.rubric_version) == version,
        )
    )
    if lane is not None:
        query = query.where(col(Evaluation.lane) == lane)
    if only_unlabeled:
        query = query.where(col(Assignment.completed_at).is_(None))
    return query


def queue_page(
    session: Session,
    *,
    reviewer_id: int,
    rubric_id: str,
    version: int,
    evaluator_version: str,
    lane: str | None = None,
    only_unlabeled: bool = False,
    offset: int = 0,
    limit: int = 25,
) -> list[QueueRow]:
    query = (
        _queue_query(
            reviewer_id=reviewer_id,
            rubric_id=rubric_id,
            version=version,
            evaluator_version=evaluator_version,
            lane=lane,
            only_unlabeled=only_unlabeled,
        )
        .order_by(col(Assignment.case_id))
        .offset(offset)
        .limit(limit)
    )
    return [
        QueueRow(case_id, lane_, n, labeled, completed is not None, first)
        for case_id, lane_, n, labeled, completed, first in session.execute(query)
    ]


def queue_count(
    session: Session,
    *,
    reviewer_id: int,
    rubric_id: str,
    version: int,
    evaluator_version: str,
    lane: str | None = None,
    only_unlabeled: bool = False,
) -> int:
    # Counted on assignments alone (their case always exists: foreign key), joining
    # the evaluations only to filter by lane: the join on cases cost most of the time.
    query = (
        select(func.count())
        .select_from(Assignment)
        .where(
            col(Assignment.reviewer_id) == reviewer_id,
            col(Assignment.rubric_id) == rubric_id,
            col(Assignment.rubric_version) == version,
        )
    )
    if lane is not None:
        query = query.join(
            Evaluation,
            and_(
                col(Evaluation.case_id) == col(Assignment.case_id),
                col(Evaluation.evaluator_version) == evaluator_version,
            ),
        ).where(col(Evaluation.lane) == lane)
    if only_unlabeled:
        query = query.where(col(Assignment.completed_at).is_(None))
    return int(session.execute(query).scalar_one())


def queue_progress(
    session: Session, *, reviewer_id: int, rubric_id: str, version: int
) -> tuple[int, int]:
    """``(completed cases, assigned cases)`` for one reviewer and rubric version."""
    query = select(func.count(), func.count(col(Assignment.completed_at))).where(
        col(Assignment.reviewer_id) == reviewer_id,
        col(Assignment.rubric_id) == rubric_id,
        col(Assignment.rubric_version) == version,
    )
    total, completed = session.execute(query).one()
    return int(completed), int(total)


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
        col(Assignment.reviewer_id) == reviewer_id,
        col(Assignment.rubric_id) == rubric_id,
        col(Assignment.rubric_version) == version,
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


# --- labels -------------------------------------------------------------------------


def add_label(
    session: Session,
    *,
    case_id: str,
    turn: int,
    reviewer_id: int,
    rubric_id: str,
    version: int,
    code: str,
    rationale: str | None,
    source: str = "app",
) -> int:
    """Append a label and return its id; the reviewer's earlier label on that turn stops
    being current.

    Call it after :func:`lock_assignment` for the same case and reviewer: the lock makes
    concurrent saves take turns, and the partial unique index ``ux_labels_current_unit``
    refuses a second current label should a caller forget.
    """
    session.execute(
        update(Label)
        .where(
            col(Label.case_id) == case_id,
            col(Label.turn) == turn,
            col(Label.reviewer_id) == reviewer_id,
            col(Label.rubric_id) == rubric_id,
            col(Label.rubric_version) == version,
            col(Label.current),
        )
        .values(current=False)
    )
    statement = (
        insert(Label)
        .values(
            case_id=case_id,
            turn=turn,
            reviewer_id=reviewer_id,
            rubric_id=rubric_id,
            rubric_version=version,
            code=code,
            rationale=rationale,
            source=source,
            current=True,
            stale=False,
            created_at=utcnow(),
        )
        .returning(col(Label.id))
    )
    return int(session.execute(statement).scalar_one())


def count_current_labeled_turns(
    session: Session, *, case_id: str, reviewer_id: int, rubric_id: str, version: int
) -> int:
    query = select(func.count()).where(
        col(Label.case_id) == case_id,
        col(Label.reviewer_id) == reviewer_id,
        col(Label.rubric_id) == rubric_id,
        col(Label.rubric_version) == version,
        col(Label.current),
    )
    return int(session.execute(query).scalar_one())


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


@dataclass(frozen=True, slots=True)
class LabelRow:
    id: int
    case_id: str
    turn: int
    reviewer: str
    reviewer_id: int
    code: str
    rationale: str | None
    current: bool
    created_at: datetime
    source: str
    stale: bool = False
    """No longer current because ``import --replace`` changed the turn."""


def _label_rows(session: Session, query: Any) -> list[LabelRow]:
    return [LabelRow(*row) for row in session.execute(query)]


def _label_select() -> Any:
    return select(
        col(Label.id),
        col(Label.case_id),
        col(Label.turn),
        col(Reviewer.name),
        col(Label.reviewer_id),
        col(Label.code),
        col(Label.rationale),
        col(Label.current),
        col(Label.created_at),
        col(Label.source),
        col(Label.stale),
    ).join(Reviewer, col(Reviewer.id) == col(Label.reviewer_id))


def labels_for_case(
    session: Session,
    *,
    case_id: str,
    rubric_id: str,
    version: int,
    reviewer_id: int | None = None,
    current_only: bool = True,
) -> list[LabelRow]:
    query = _label_select().where(
        col(Label.case_id) == case_id,
        col(Label.rubric_id) == rubric_id,
        col(Label.rubric_version) == version,
    )
    if reviewer_id is not None:
        query = query.where(col(Label.reviewer_id) == reviewer_id)
    if current_only:
        query = query.where(col(Label.current))
    return _label_rows(session, query.order_by(col(Label.turn), col(Label.id)))


def turns_with_labels(
    session: Session, *, case_id: str, rubric_id: str, version: int, reviewer_id: int | None
) -> list[tuple[int, str, LabelRow | None]]:
    """One query: every event's ``(turn, actor)`` of the case with each of the reviewer's
    labels on that turn under a rubric version (history too; ``None`` where there is none),
    by turn, oldest label first."""
    on = and_(
        col(Label.case_id) == col(Event.case_id),
        col(Label.turn) == col(Event.turn),
        col(Label.rubric_id) == rubric_id,
        col(Label.rubric_version) == version,
        col(Label.reviewer_id) == (reviewer_id if reviewer_id is not None else -1),
    )
    query = (
        select(
            col(Event.turn),
            col(Event.actor),
            col(Label.id),
            col(Label.case_id),
            col(Label.turn),
            col(Reviewer.name),
            col(Label.reviewer_id),
            col(Label.code),
            col(Label.rationale),
            col(Label.current),
            col(Label.created_at),
            col(Label.source),
            col(Label.stale),
        )
        .select_from(Event)
        .outerjoin(Label, on)
        .outerjoin(Reviewer, col(Reviewer.id) == col(Label.reviewer_id))
        .where(col(Event.case_id) == case_id)
        .order_by(col(Event.turn), col(Label.id))
    )
    return [
        (row[0], row[1], None if row[2] is None else LabelRow(*row[2:]))
        for row in session.execute(query)
    ]


def current_label_tuples(
    session: Session, *, rubric_id: str, version: int
) -> list[tuple[str, int, str, str]]:
    """``(case_id, turn, reviewer name, code)`` of every current label of a rubric version."""
    query = (
        select(col(Label.case_id), col(Label.turn), col(Reviewer.name), col(Label.code))
        .join(Reviewer, col(Reviewer.id) == col(Label.reviewer_id))
        .where(
            col(Label.rubric_id) == rubric_id,
            col(Label.rubric_version) == version,
            col(Label.current),
        )
    )
    return [(row[0], row[1], row[2], row[3]) for row in session.execute(query)]


def count_labels(
    session: Session, *, rubric_id: str | None = None, version: int | None = None
) -> int:
    query = select(func.count()).select_from(Label)
    if rubric_id is not None:
        query = query.where(col(Label.rubric_id) == rubric_id)
    if version is not None:
        query = query.where(col(Label.rubric_version) == version)
    return int(session.execute(query).scalar_one())


# --- key presses of the review page ------------------------------------------------


def label_event_applied(session: Session, *, reviewer_id: int, client_id: str, seq: int) -> bool:
    """Whether this key press (page load ``client_id``, number ``seq``) is stored already."""
    found = session.scalars(
        select(col(LabelEvent.id)).where(
            col(LabelEvent.reviewer_id) == reviewer_id,
            col(LabelEvent.client_id) == client_id,
            col(LabelEvent.seq) == seq,
        )
    ).first()
    return found is not None


def add_label_event(
    session: Session,
    *,
    reviewer_id: int,
    client_id: str,
    seq: int,
    case_id: str,
    turn: int,
    label_id: int | None,
) -> None:
    """Record a key press as applied (a second one with the same numbers violates
    ``ux_label_events_client_seq``)."""
    session.add(
        LabelEvent(
            reviewer_id=reviewer_id,
            client_id=client_id,
            seq=seq,
            case_id=case_id,
            turn=turn,
            label_id=label_id,
        )
    )
    session.flush()
