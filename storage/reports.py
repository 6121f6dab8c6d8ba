"""Computed reports: one row per report key, holding the payload of one data token.

A reader asks for the payload of ``key`` computed for ``token`` (:func:`stored_payload`);
a writer replaces the row with :func:`store_report`, an ``INSERT ... ON CONFLICT (key) DO
UPDATE`` on both SQLite and PostgreSQL, so two servers storing the same key at once
never fail: the later write wins, and a reader checks the token anyway.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import select as sql_select
from sqlmodel import Session, col, select

from storage.bulk import dialect_insert
from storage.models import ComputedReport


def stored_payload(session: Session, *, key: str, token: str) -> str | None:
    """The payload stored for ``key`` if it was computed for ``token``, else ``None``."""
    return session.exec(
        select(ComputedReport.payload_json).where(
            col(ComputedReport.key) == key, col(ComputedReport.token) == token
        )
    ).first()


@dataclass(frozen=True)
class ReportStamp:
    """Which data a stored report was computed for, how long it took, and when."""

    key: str
    token: str
    seconds: float
    computed_at: datetime


def report_stamps(session: Session, *, keys: Sequence[str]) -> dict[str, ReportStamp]:
    """The stamps of the rows of ``keys`` whatever their token (without their payloads)."""
    rows = session.execute(
        sql_select(
            col(ComputedReport.key),
            col(ComputedReport.token),
            col(ComputedReport.seconds),
            col(ComputedReport.computed_at),
        ).where(col(ComputedReport.key).in_(list(keys)))
    )
    return {
        key: ReportStamp(key, token, float(seconds), computed_at)
        for key, token, seconds, computed_at in rows
    }


def has_report(session: Session, *, key: str, token: str) -> bool:
    """Whether ``key`` is stored for ``token`` (without reading its payload)."""
    found = session.exec(
        select(ComputedReport.key).where(
            col(ComputedReport.key) == key, col(ComputedReport.token) == token
        )
    ).first()
    return found is not None


def store_report(
    session: Session,
    *,
    key: str,
    kind: str,
    rubric_id: str,
    rubric_version: int,
    token: str,
    payload_json: str,
    seconds: float,
    now: datetime,
) -> None:
    """Insert or replace the row of ``key`` (the caller commits)."""
    values = {
        "key": key,
        "kind": kind,
        "rubric_id": rubric_id,
        "rubric_version": rubric_version,
        "token": token,
        "payload_json": payload_json,
        "seconds": seconds,
        "computed_at": now,
    }
    statement = dialect_insert(session.get_bind().dialect.name)(ComputedReport).values(**values)
    statement = statement.on_conflict_do_update(
        index_elements=[col(ComputedReport.key)],
        set_={
            "token": statement.excluded.token,
            "payload_json": statement.excluded.payload_json,
            "seconds": statement.excluded.seconds,
            "computed_at": statement.excluded.computed_at,
        },
    )
    session.execute(statement)


def report_rows(session: Session, *, kind: str | None = None) -> list[ComputedReport]:
    """The stored reports (of ``kind``), by key."""
    query = select(ComputedReport).order_by(col(ComputedReport.key))
    if kind is not None:
        query = query.where(col(ComputedReport.kind) == kind)
    return list(session.exec(query))
