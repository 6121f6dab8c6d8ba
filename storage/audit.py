"""The audit log: append-only rows, written inside the transaction of the change."""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any

from sqlalchemy import Connection, insert
from sqlmodel import Session, col, select

from storage.models import AuditEntry, utcnow

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
        query = query.where(col(AuditEntry.at) >= since)
    if actor is not None:
        query = query.where(col(AuditEntry.actor) == actor)
    if action is not None:
        query = query.where(col(AuditEntry.action) == action)
    query = query.order_by(col(AuditEntry.id).desc())
    if limit is not None:
        query = query.limit(limit)
    return list(session.exec(query))
