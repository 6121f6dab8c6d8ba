"""Queries for agreement and adjudication: current labels in bulk, disagreements, gold labels."""

from __future__ import annotations

import warnings
import zlib
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from operator import itemgetter

import numpy as np
import numpy.typing as npt
from sqlalchemy import func, insert, select, text, update
from sqlmodel import Session, col

from storage.models import Evaluation, Finding, GoldLabel, Label, Reviewer


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
    # A million rows: the DB-API cursor directly, without ORM or Core row processing,
    # and reviewer ids (small ints) rather than a join that makes a name string per row.
    connection = session.connection()
    placeholder = "?" if connection.dialect.name == "sqlite" else "%s"
    cursor = connection.connection.driver_connection.cursor()  # type: ignore[union-attr]
    try:
        cursor.execute(
            "SELECT l.case_id, l.turn, l.reviewer_id, l.code FROM labels l "
            f"WHERE l.rubric_id = {placeholder} AND l.rubric_version = {placeholder} "
            "AND l.current",
            (rubric_id, version),
        )
        rows = cursor.fetchall()
    finally:
        cursor.close()
    names: dict[int, str] = {
        row[0]: row[1] for row in session.execute(select(col(Reviewer.id), col(Reviewer.name)))
    }
    # One pass per column: zip(*rows) would pass a million arguments.
    return LabelColumns(
        list(map(itemgetter(0), rows)),
        list(map(itemgetter(1), rows)),
        list(map(names.__getitem__, map(itemgetter(2), rows))),
        list(map(itemgetter(3), rows)),
    )


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
    connection = session.connection()
    aggregate = _AGGREGATE_TEXT.get(connection.dialect.name)
    if aggregate is None:
        return None
    placeholder = "?" if connection.dialect.name == "sqlite" else "%s"
    cursor = connection.connection.driver_connection.cursor()  # type: ignore[union-attr]
    try:
        cursor.execute(
            f"SELECT l.case_id, count(*), {aggregate.format(column='l.turn')}, "
            f"{aggregate.format(column='l.reviewer_id')}, {aggregate.format(column='l.code')} "
            "FROM labels l "
            f"WHERE l.rubric_id = {placeholder} AND l.rubric_version = {placeholder} "
            "AND l.current GROUP BY l.case_id",
            (rubric_id, version),
        )
        rows = cursor.fetchall()
    finally:
        cursor.close()
    names: dict[int, str] = {
        row[0]: row[1] for row in session.execute(select(col(Reviewer.id), col(Reviewer.name)))
    }
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
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # numpy warns (and stops) at a token it cannot read
        try:
            return np.fromstring(text, dtype=np.int64, sep=",")
        except (DeprecationWarning, ValueError):
            return None


def label_token(session: Session, *, rubric_id: str, version: int) -> tuple[int, int, int, int]:
    """Changes whenever labels or gold labels of the rubric version change (append-only ids)."""
    labels = session.execute(
        select(func.count(), func.coalesce(func.max(col(Label.id)), 0)).where(
            col(Label.rubric_id) == rubric_id, col(Label.rubric_version) == version
        )
    ).one()
    gold = session.execute(
        select(func.count(), func.coalesce(func.max(col(GoldLabel.id)), 0)).where(
            col(GoldLabel.rubric_id) == rubric_id, col(GoldLabel.rubric_version) == version
        )
    ).one()
    return int(labels[0]), int(labels[1]), int(gold[0]), int(gold[1])


def disagreement_units(
    session: Session, *, rubric_id: str, version: int
) -> list[tuple[str, int, int, int]]:
    """``(case_id, turn, labels, distinct codes)`` of units whose current labels differ."""
    query = (
        select(
            col(Label.case_id),
            col(Label.turn),
            func.count(),
            func.count(func.distinct(col(Label.code))),
        )
        .where(
            col(Label.rubric_id) == rubric_id,
            col(Label.rubric_version) == version,
            col(Label.current),
        )
        .group_by(col(Label.case_id), col(Label.turn))
        .having(func.count(func.distinct(col(Label.code))) > 1)
        .order_by(col(Label.case_id), col(Label.turn))
    )
    return [(row[0], row[1], row[2], row[3]) for row in session.execute(query)]


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


def current_gold(
    session: Session, *, rubric_id: str, version: int, case_id: str | None = None
) -> dict[tuple[str, int], GoldLabel]:
    query = select(GoldLabel).where(
        col(GoldLabel.rubric_id) == rubric_id,
        col(GoldLabel.rubric_version) == version,
        col(GoldLabel.current),
    )
    if case_id is not None:
        query = query.where(col(GoldLabel.case_id) == case_id)
    return {(gold.case_id, gold.turn): gold for gold in session.scalars(query)}


def gold_history(
    session: Session, *, rubric_id: str, version: int, case_id: str, turn: int
) -> list[tuple[GoldLabel, str | None]]:
    query = (
        select(GoldLabel, col(Reviewer.name))
        .outerjoin(Reviewer, col(Reviewer.id) == col(GoldLabel.adjudicator_id))
        .where(
            col(GoldLabel.rubric_id) == rubric_id,
            col(GoldLabel.rubric_version) == version,
            col(GoldLabel.case_id) == case_id,
            col(GoldLabel.turn) == turn,
        )
        .order_by(col(GoldLabel.id))
    )
    return [(row[0], row[1]) for row in session.execute(query)]


# Any constant works: it only has to be the same in every process recording gold.
_PG_GOLD_LOCK_NAMESPACE = 725_310_444


def lock_gold_unit(
    session: Session, *, rubric_id: str, version: int, case_id: str, turn: int
) -> None:
    """Make this transaction the only one writing the unit's gold label until it ends.

    PostgreSQL: a transaction-scoped advisory lock keyed on the unit (a hash; two units
    sharing one only wait for each other). SQLite's ``BEGIN IMMEDIATE`` already
    serialises writers.
    """
    connection = session.connection()
    if connection.dialect.name != "postgresql":
        return
    digest = zlib.crc32(f"{rubric_id}\x00{version}\x00{case_id}\x00{turn}".encode())
    key = digest - (1 << 32) if digest >= (1 << 31) else digest
    connection.execute(
        text("SELECT pg_advisory_xact_lock(:namespace, :key)"),
        {"namespace": _PG_GOLD_LOCK_NAMESPACE, "key": key},
    )


def add_gold(
    session: Session,
    *,
    case_id: str,
    turn: int,
    rubric_id: str,
    version: int,
    code: str,
    note: str | None,
    calibration_item: bool,
    rubric_ambiguity: str | None,
    adjudicator_id: int | None,
    now: datetime,
) -> int:
    """Record the unit's gold label (the previous one becomes history); returns its id.

    Concurrent calls on one unit take turns (:func:`lock_gold_unit`): the last one
    stays current, and the partial unique index ``ux_gold_current_unit`` refuses a
    second current row whatever happens.
    """
    lock_gold_unit(session, rubric_id=rubric_id, version=version, case_id=case_id, turn=turn)
    session.execute(
        update(GoldLabel)
        .where(
            col(GoldLabel.case_id) == case_id,
            col(GoldLabel.turn) == turn,
            col(GoldLabel.rubric_id) == rubric_id,
            col(GoldLabel.rubric_version) == version,
            col(GoldLabel.current),
        )
        .values(current=False)
    )
    statement = (
        insert(GoldLabel)
        .values(
            case_id=case_id,
            turn=turn,
            rubric_id=rubric_id,
            rubric_version=version,
            code=code,
            note=note,
            calibration_item=calibration_item,
            rubric_ambiguity=rubric_ambiguity,
            adjudicator_id=adjudicator_id,
            current=True,
            stale=False,
            created_at=now,
        )
        .returning(col(GoldLabel.id))
    )
    return int(session.execute(statement).scalar_one())


def rubric_ambiguities(session: Session, *, rubric_id: str, version: int) -> list[GoldLabel]:
    query = (
        select(GoldLabel)
        .where(
            col(GoldLabel.rubric_id) == rubric_id,
            col(GoldLabel.rubric_version) == version,
            col(GoldLabel.current),
            col(GoldLabel.rubric_ambiguity).is_not(None),
        )
        .order_by(col(GoldLabel.case_id), col(GoldLabel.turn))
    )
    return list(session.scalars(query))
