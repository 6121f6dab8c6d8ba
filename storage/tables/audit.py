"""The audit family's tables (see :mod:`storage.models`)."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import Column, Index, Text
from sqlmodel import Field, SQLModel

from storage.tables.base import utcnow

# --- audit log -------------------------------------------------------------


class AuditEntry(SQLModel, table=True):
    """One change (or export) and who made it. Append-only: rows are never updated.

    ``summary_json`` holds canonical JSON of what changed (before/after, counts,
    a file's sha256); it is written in the same transaction as the change.
    """

    __tablename__ = "audit_log"
    __table_args__ = (
        Index("ix_audit_log_at", "at"),
        Index("ix_audit_log_actor_at", "actor", "at"),
    )
    id: int | None = Field(default=None, primary_key=True)
    at: datetime = Field(default_factory=utcnow)
    actor: str = Field(max_length=200)
    action: str = Field(max_length=60)
    object_type: str = Field(max_length=60)
    object_key: str | None = Field(default=None, sa_column=Column(Text))
    summary_json: str = Field(sa_column=Column(Text, nullable=False))
