"""Queries on labels (``labels``, ``label_events``): one reviewer's code for one turn.

Single labels as the review page writes them (and its key presses, applied once each),
labels in bulk (a label CSV's import, the export) and current labels as columns for
agreement. A label is current or superseded, never deleted.
"""

from __future__ import annotations

import warnings
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from datetime import datetime
from operator import itemgetter
from typing import TYPE_CHECKING, Any

from sqlalchemy import Connection, and_, case, distinct, false, func, insert, select, update
from sqlmodel import Session, col

from storage.bulk import in_chunks, insert_rows, plain_rows, timestamp_param
from storage.models import (
    Evaluation,
    Event,
    Finding,
    Label,
    LabelEvent,
    Reviewer,
    utcnow,
)
from storage.reviewers import reviewer_names
from storage.units import current_of_unit

if TYPE_CHECKING:  # numpy is imported where labels are read as arrays, not by every command
    import numpy as np
    import numpy.typing as npt


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

    Call it after :func:`storage.assignments.lock_assignment` for the same case and reviewer:
    the lock makes concurrent saves take turns, and the partial unique index
    ``ux_labels_current_unit`` refuses a second current label should a caller forget.
    """
    unit = current_of_unit(Label, rubric_id=rubric_id, version=version, case_id=case_id, turn=turn)
    of_reviewer = col(Label.reviewer_id) == reviewer_id
    session.execute(update(Label).where(*unit, of_reviewer).values(current=False))
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


def current_label(
    session: Session, *, case_id: str, turn: int, reviewer_id: int, rubric_id: str, version: int
) -> tuple[int, str, str | None] | None:
    """The reviewer's current label on the unit: (label id, code, rationale), or ``None``."""
    unit = current_of_unit(Label, rubric_id=rubric_id, version=version, case_id=case_id, turn=turn)
    query = select(col(Label.id), col(Label.code), col(Label.rationale)).where(
        *unit, col(Label.reviewer_id) == reviewer_id
    )
    found = session.execute(query).first()
    return None if found is None else (int(found[0]), str(found[1]), found[2])


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


def current_label_counts(
    target: Session | Connection,
    *,
    case_ids: Sequence[str],
    rubric_id: str | None = None,
    version: int | None = None,
    reviewer_ids: Sequence[int] | None = None,
) -> dict[tuple[str, int, str, int], int]:
    """``(case_id, reviewer_id, rubric_id, version) -> n``: the current labels on
    ``case_ids`` (of one rubric version and of ``reviewer_ids`` only, if given), for
    recounting the reviewers' progress."""
    found: dict[tuple[str, int, str, int], int] = {}
    for chunk in in_chunks(case_ids):
        query = (
            select(
                col(Label.case_id),
                col(Label.reviewer_id),
                col(Label.rubric_id),
                col(Label.rubric_version),
                func.count(),
            )
            .where(col(Label.current), col(Label.case_id).in_(list(chunk)))
            .group_by(
                col(Label.case_id),
                col(Label.reviewer_id),
                col(Label.rubric_id),
                col(Label.rubric_version),
            )
        )
        if rubric_id is not None:
            query = query.where(col(Label.rubric_id) == rubric_id)
        if version is not None:
            query = query.where(col(Label.rubric_version) == version)
        if reviewer_ids is not None:
            query = query.where(col(Label.reviewer_id).in_(reviewer_ids))
        for case_id, reviewer_id, rubric, rubric_version, n in target.execute(query):
            found[(case_id, reviewer_id, rubric, rubric_version)] = n
    return found


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


# The columns of a LabelRow, in its field order (the reviewer's name from ``reviewers``).
_LABEL_ROW_COLUMNS = (
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


def _label_select() -> Any:
    return select(*_LABEL_ROW_COLUMNS).join(Reviewer, col(Reviewer.id) == col(Label.reviewer_id))


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


def current_labels(
    session: Session, *, rubric_id: str, version: int, case_ids: Sequence[str]
) -> dict[tuple[str, int, int], tuple[int, str, str | None]]:
    """(case_id, turn, reviewer_id) -> (label id, code, rationale) of current labels."""
    found: dict[tuple[str, int, int], tuple[int, str, str | None]] = {}
    for chunk in in_chunks(case_ids):
        query = select(
            col(Label.case_id),
            col(Label.turn),
            col(Label.reviewer_id),
            col(Label.id),
            col(Label.code),
            col(Label.rationale),
        ).where(
            col(Label.rubric_id) == rubric_id,
            col(Label.rubric_version) == version,
            col(Label.current),
            col(Label.case_id).in_(chunk),
        )
        for case_id, turn, reviewer_id, label_id, code, rationale in session.execute(query):
            found[(case_id, turn, reviewer_id)] = (label_id, code, rationale)
    return found


def supersede(session: Session, *, label_ids: Sequence[int]) -> None:
    for chunk in in_chunks(label_ids):
        session.execute(update(Label).where(col(Label.id).in_(chunk)).values(current=False))


LABEL_COLUMNS = (
    "case_id",
    "turn",
    "reviewer_id",
    "rubric_id",
    "rubric_version",
    "code",
    "rationale",
    "current",
    "source",
    "created_at",
)


def insert_labels(session: Session, *, rows: Sequence[tuple[Any, ...]]) -> None:
    """Rows in :data:`LABEL_COLUMNS` order; ``created_at`` may be a datetime."""
    connection = session.connection()
    prepared = [
        (
            *row[:-1],
            timestamp_param(connection, row[-1]) if isinstance(row[-1], datetime) else row[-1],
        )
        for row in rows
    ]
    insert_rows(connection, table="labels", columns=LABEL_COLUMNS, rows=prepared)


def export_rows(
    session: Session, *, rubric_id: str, version: int, history: bool = False
) -> list[tuple[str, int, str, str, str | None]]:
    query = (
        select(
            col(Label.case_id),
            col(Label.turn),
            col(Reviewer.name),
            col(Label.code),
            col(Label.rationale),
        )
        .join(Reviewer, col(Reviewer.id) == col(Label.reviewer_id))
        .where(col(Label.rubric_id) == rubric_id, col(Label.rubric_version) == version)
        .order_by(col(Label.case_id), col(Label.turn), col(Reviewer.name), col(Label.id))
    )
    if not history:
        query = query.where(col(Label.current))
    return [(row[0], row[1], row[2], row[3], row[4]) for row in session.execute(query)]


@dataclass(frozen=True, slots=True)
class LabelColumns:
    """Current labels of one rubric version as parallel lists (fast to turn into arrays)."""

    case_ids: list[str]
    turns: list[int]
    reviewers: list[str]
    codes: list[str]

    def __len__(self) -> int:
        return len(self.codes)


def current_label_columns(session: Session, *, rubric_id: str, version: int) -> LabelColumns:
    # Reviewer ids (small ints) rather than a join that makes a name string per row.
    rows = _raw_current_labels(
        session,
        rubric_id=rubric_id,
        version=version,
        columns="l.case_id, l.turn, l.reviewer_id, l.code",
    )
    names = reviewer_names(session)
    # One pass per column: zip(*rows) would pass a million arguments.
    return LabelColumns(
        list(map(itemgetter(0), rows)),
        list(map(itemgetter(1), rows)),
        list(map(names.__getitem__, map(itemgetter(2), rows))),
        list(map(itemgetter(3), rows)),
    )


@dataclass(frozen=True, slots=True)
class TimedLabels:
    """Current labels of one rubric version with when each was stored, in the order
    they were stored (time, then id)."""

    case_ids: list[str]
    turns: list[int]
    reviewers: list[str]
    codes: list[str]
    created_at: list[datetime]
    imported: list[bool]
    """From a label file (``labels import``): its time is the import's."""
    carried: list[bool]
    """Carried from the version before: its time is the publication's."""

    def __len__(self) -> int:
        return len(self.codes)


def current_labels_with_times(session: Session, *, rubric_id: str, version: int) -> TimedLabels:
    """The current labels of a rubric version with their times (agreement over time)."""
    query = (
        select(
            col(Label.case_id),
            col(Label.turn),
            col(Label.reviewer_id),
            col(Label.code),
            col(Label.created_at),
            col(Label.source),
            col(Label.carried_from_id),
        )
        .where(
            col(Label.rubric_id) == rubric_id,
            col(Label.rubric_version) == version,
            col(Label.current),
        )
        .order_by(col(Label.created_at), col(Label.id))
    )
    rows = session.execute(query).all()
    names = reviewer_names(session)
    return TimedLabels(
        [r[0] for r in rows],
        [int(r[1]) for r in rows],
        [names[r[2]] for r in rows],
        [r[3] for r in rows],
        [r[4] for r in rows],
        [r[5] == "import" for r in rows],
        [r[6] is not None for r in rows],
    )


def _raw_current_labels(
    session: Session, *, rubric_id: str, version: int, columns: str, group_by_case: bool = False
) -> list[tuple[Any, ...]]:
    """``columns`` (SQL over ``labels l``) of the rubric version's current labels.

    A million rows: the DB-API cursor directly, without ORM or Core row processing.
    """
    connection = session.connection()
    placeholder = "?" if connection.dialect.name == "sqlite" else "%s"
    cursor = connection.connection.driver_connection.cursor()  # type: ignore[union-attr]
    try:
        cursor.execute(
            f"SELECT {columns} FROM labels l "
            f"WHERE l.rubric_id = {placeholder} AND l.rubric_version = {placeholder} "
            "AND l.current" + (" GROUP BY l.case_id" if group_by_case else ""),
            (rubric_id, version),
        )
        rows: list[tuple[Any, ...]] = cursor.fetchall()
        return rows
    finally:
        cursor.close()


@dataclass(frozen=True, slots=True)
class GroupedLabels:
    """Current labels of one rubric version, case by case, as arrays.

    Case ``i`` is ``case_ids[i]`` with ``labels_per_case[i]`` labels; the per-label
    arrays hold those labels one case after the other.
    """

    case_ids: list[str]
    labels_per_case: npt.NDArray[np.int64]
    turns: npt.NDArray[np.int64]
    reviewer_ids: npt.NDArray[np.int64]
    codes: list[str]
    reviewer_names: dict[int, str]

    def __len__(self) -> int:
        return len(self.codes)


_AGGREGATE_TEXT = {
    "sqlite": "group_concat({column}, ',')",
    "postgresql": "string_agg(CAST({column} AS TEXT), ',')",
}


def current_labels_grouped(
    session: Session, *, rubric_id: str, version: int
) -> GroupedLabels | None:
    """The current labels with one result row per case (``None`` on other databases).

    A million labels fetched row by row cost a Python tuple and four objects each;
    grouped, the database joins each case's turns, reviewer ids and codes into one
    text per column, and numpy reads the numbers back. The aggregates of one query
    consume a group's rows in the same order, so the texts line up label by label;
    a count that does not add up (a separator inside a code) gives ``None`` too,
    and the caller falls back to :func:`current_label_columns`.
    """
    import numpy as np

    connection = session.connection()
    aggregate = _AGGREGATE_TEXT.get(connection.dialect.name)
    if aggregate is None:
        return None
    rows = _raw_current_labels(
        session,
        rubric_id=rubric_id,
        version=version,
        columns=(
            f"l.case_id, count(*), {aggregate.format(column='l.turn')}, "
            f"{aggregate.format(column='l.reviewer_id')}, {aggregate.format(column='l.code')}"
        ),
        group_by_case=True,
    )
    names = reviewer_names(session)
    labels_per_case = np.fromiter(map(itemgetter(1), rows), dtype=np.int64, count=len(rows))
    total = int(labels_per_case.sum())
    if not rows:
        nothing = np.zeros(0, dtype=np.int64)
        return GroupedLabels([], nothing, nothing, nothing, [], names)
    turns = _integers(",".join(map(itemgetter(2), rows)))
    reviewer_ids = _integers(",".join(map(itemgetter(3), rows)))
    codes = ",".join(map(itemgetter(4), rows)).split(",")
    if turns is None or reviewer_ids is None:
        return None
    if not len(turns) == len(reviewer_ids) == len(codes) == total:
        return None
    return GroupedLabels(
        list(map(itemgetter(0), rows)), labels_per_case, turns, reviewer_ids, codes, names
    )


def _integers(text: str) -> npt.NDArray[np.int64] | None:
    """Comma-separated integers, parsed in C; ``None`` if the text is anything else."""
    import numpy as np

    with warnings.catch_warnings():
        warnings.simplefilter("error")  # numpy warns (and stops) at a token it cannot read
        try:
            return np.fromstring(text, dtype=np.int64, sep=",")
        except (DeprecationWarning, ValueError):
            return None


def pass_labels_on_violations(
    session: Session,
    *,
    rubric_id: str,
    version: int,
    pass_codes: Sequence[str],
    evaluator_version: str,
) -> list[tuple[str, int, str]]:
    """``(case_id, turn, reviewer)`` where a pass code sits on a turn with a recorded
    action outside the role: a human label contradicting a deterministic finding."""
    query = (
        select(col(Label.case_id), col(Label.turn), col(Reviewer.name))
        .join(Reviewer, col(Reviewer.id) == col(Label.reviewer_id))
        .join(
            Finding,
            (col(Finding.case_id) == col(Label.case_id)) & (col(Finding.turn) == col(Label.turn)),
        )
        .join(
            Evaluation,
            (col(Evaluation.case_id) == col(Finding.case_id))
            & (col(Evaluation.evaluator_version) == col(Finding.evaluator_version)),
        )
        .where(
            col(Label.rubric_id) == rubric_id,
            col(Label.rubric_version) == version,
            col(Label.current),
            col(Label.code).in_(list(pass_codes)),
            col(Finding.kind) == "violation",
            col(Finding.evaluator_version) == evaluator_version,
            col(Evaluation.status) == "fail",
        )
        .order_by(col(Label.case_id), col(Label.turn), col(Reviewer.name))
        .distinct()
    )
    return [(row[0], row[1], row[2]) for row in session.execute(query)]


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
        select(col(Event.turn), col(Event.actor), *_LABEL_ROW_COLUMNS)
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


def label_turn_summaries(
    session: Session,
    *,
    cases: Any,
    rubric_id: str,
    version: int,
    me: int,
    pass_codes: Collection[str],
) -> Sequence[Any]:
    """``(case_id, turn, mine, other_codes, passed)`` of every turn of ``cases`` with a
    current label: whether reviewer ``me`` labeled it (1 or 0), how many different codes
    the other reviewers gave, and whether some reviewer gave one of ``pass_codes`` (1 or 0).

    For the "most informative first" queue order. ``cases`` is a subquery of case ids
    (:func:`storage.assignments.queue_cases`): one query however long the queue, not
    ``IN`` lists of ids; the database sums the labels up, one row per turn."""
    reviewer, code = col(Label.reviewer_id), col(Label.code)
    passing = code.in_(list(pass_codes)) if pass_codes else false()
    query = (
        select(
            col(Label.case_id),
            col(Label.turn),
            func.max(case((reviewer == me, 1), else_=0)),
            func.count(distinct(case((reviewer != me, code), else_=None))),
            func.max(case((passing, 1), else_=0)),
        )
        .where(
            col(Label.rubric_id) == rubric_id,
            col(Label.rubric_version) == version,
            col(Label.current),
            col(Label.case_id).in_(cases),
        )
        .group_by(col(Label.case_id), col(Label.turn))
    )
    return plain_rows(session, query)


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
