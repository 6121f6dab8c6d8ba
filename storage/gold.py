"""Queries on gold labels (``gold_labels``): the adjudicated reference code of a unit."""

from __future__ import annotations

import zlib
from datetime import datetime

from sqlalchemy import insert, select, text, update
from sqlmodel import Session, col

from storage.models import (
    GoldLabel,
    Reviewer,
)
from storage.units import current_of_unit


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
    unit = current_of_unit(
        GoldLabel, rubric_id=rubric_id, version=version, case_id=case_id, turn=turn
    )
    session.execute(update(GoldLabel).where(*unit).values(current=False))
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


def current_gold_code(
    session: Session, *, rubric_id: str, version: int, case_id: str, turn: int
) -> str | None:
    """The unit's current gold code before a change (for the entry's ``before``)."""
    unit = current_of_unit(
        GoldLabel, rubric_id=rubric_id, version=version, case_id=case_id, turn=turn
    )
    query = select(col(GoldLabel.code)).where(*unit).order_by(col(GoldLabel.id).desc())
    return session.scalars(query.limit(1)).first()
