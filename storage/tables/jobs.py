"""The jobs family's tables (see :mod:`storage.models`)."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import Column, Index, Text
from sqlmodel import Field, SQLModel

from storage.tables import reviewers
from storage.tables.base import utcnow

REFERENCED = (reviewers,)
"""The families whose tables this one's foreign keys name, defined before it: a flush
sorts the tables by their keys, and a key naming an undefined table fails."""


# --- background jobs -----------------------------------------------------------------

JOB_STATUSES = ("queued", "running", "stopping", "stopped", "done", "failed")


class BackgroundJob(SQLModel, table=True):
    """Work done off the page's script run (a judge run), by whichever worker claims it.

    A worker claims a queued job, or one whose lease ran out (its worker died), by a
    conditional UPDATE (storage/jobs.py); it renews ``lease_expires_at`` with each
    heartbeat. ``parameters_json`` never holds a secret (an endpoint is named, its key
    is read when the job runs).
    """

    __tablename__ = "background_jobs"
    __table_args__ = (Index("ix_background_jobs_status", "status", "id"),)
    id: int | None = Field(default=None, primary_key=True)
    kind: str = Field(max_length=40)
    parameters_json: str = Field(sa_column=Column(Text, nullable=False))
    created_by: str = Field(max_length=200)
    created_by_id: int | None = Field(default=None, foreign_key="reviewers.id")
    status: str = Field(default="queued", max_length=20)
    progress_done: int = 0
    progress_total: int | None = None
    error: str | None = Field(default=None, sa_column=Column(Text))
    result_json: str | None = Field(default=None, sa_column=Column(Text))
    lease_owner: str | None = Field(default=None, max_length=200)
    lease_expires_at: datetime | None = None
    heartbeat_at: datetime | None = None
    claims: int = 0
    """How many times a worker claimed it (1 unless a worker died and another resumed)."""
    created_at: datetime = Field(default_factory=utcnow)
    started_at: datetime | None = None
    finished_at: datetime | None = None
