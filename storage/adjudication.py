"""Queries for agreement and adjudication: current labels in bulk, disagreements, gold labels."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from operator import itemgetter

from sqlalchemy import func, select, update
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
) -> GoldLabel:
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
    gold = GoldLabel(
        case_id=case_id,
        turn=turn,
        rubric_id=rubric_id,
        rubric_version=version,
        code=code,
        note=note,
        calibration_item=calibration_item,
        rubric_ambiguity=rubric_ambiguity,
        adjudicator_id=adjudicator_id,
        created_at=now,
    )
    session.add(gold)
    session.flush()
    return gold


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
