"""The audit log: append-only rows, written inside the transaction of the change."""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any

from sqlalchemy import Connection, insert, select
from sqlmodel import Session

from storage.models import AuditEntry, GoldLabel, Label, utcnow

_TABLE = AuditEntry.__table__  # type: ignore[attr-defined]


def summary_text(summary: dict[str, Any]) -> str:
    return json.dumps(summary, sort_keys=True, ensure_ascii=False, separators=(",", ":"))


def add_entry(
    target: Session | Connection,
    *,
    actor: str,
    action: str,
    object_type: str,
    object_key: str | None,
    summary: dict[str, Any],
) -> None:
    """Append one row through ``target``'s open transaction (committed with the change)."""
    target.execute(
        insert(_TABLE).values(
            at=utcnow(),
            actor=actor,
            action=action,
            object_type=object_type,
            object_key=object_key,
            summary_json=summary_text(summary),
        )
    )


def list_entries(
    session: Session,
    *,
    since: datetime | None = None,
    actor: str | None = None,
    action: str | None = None,
    limit: int | None = None,
) -> list[AuditEntry]:
    """Entries, newest first."""
    query = select(AuditEntry)
    if since is not None:
        query = query.where(AuditEntry.at >= since)  # type: ignore[arg-type]
    if actor is not None:
        query = query.where(AuditEntry.actor == actor)  # type: ignore[arg-type]
    if action is not None:
        query = query.where(AuditEntry.action == action)  # type: ignore[arg-type]
    query = query.order_by(AuditEntry.id.desc())  # type: ignore[union-attr]
    if limit is not None:
        query = query.limit(limit)
    return list(session.scalars(query))


def current_gold_code(
    session: Session, *, rubric_id: str, version: int, case_id: str, turn: int
) -> str | None:
    """The unit's current gold code before a change (for the entry's ``before``)."""
    query = (
        select(GoldLabel.code)
        .where(
            GoldLabel.rubric_id == rubric_id,  # type: ignore[arg-type]
            GoldLabel.rubric_version == version,  # type: ignore[arg-type]
            GoldLabel.case_id == case_id,  # type: ignore[arg-type]
            GoldLabel.turn == turn,  # type: ignore[arg-type]
            GoldLabel.current,  # type: ignore[arg-type]
        )
        .order_by(GoldLabel.id.desc())  # type: ignore[union-attr]
        .limit(1)
    )
    return session.scalars(query).first()


def current_label_code(
    session: Session, *, rubric_id: str, version: int, case_id: str, turn: int, reviewer_id: int
) -> str | None:
    """The reviewer's current code on a unit before a change (for ``before``)."""
    query = (
        select(Label.code)
        .where(
            Label.rubric_id == rubric_id,  # type: ignore[arg-type]
            Label.rubric_version == version,  # type: ignore[arg-type]
            Label.case_id == case_id,  # type: ignore[arg-type]
            Label.turn == turn,  # type: ignore[arg-type]
            Label.reviewer_id == reviewer_id,  # type: ignore[arg-type]
            Label.current,  # type: ignore[arg-type]
        )
        .order_by(Label.id.desc())  # type: ignore[union-attr]
        .limit(1)
    )
    return session.scalars(query).first()
