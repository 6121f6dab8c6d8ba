"""The certified verdicts family's tables (see :mod:`storage.models`)."""

from __future__ import annotations

from datetime import datetime

from sqlmodel import Field, SQLModel

from storage.tables import cases, judging, reviewers
from storage.tables.base import utcnow

REFERENCED = (cases, judging, reviewers)
"""The families whose tables this one's foreign keys name, defined before it: a flush
sorts the tables by their keys, and a key naming an undefined table fails."""


# --- certified selective judging -----------------------------------------------


class CertifiedVerdict(SQLModel, table=True):
    """A judge verdict certified by ``judge route --apply``: the judge decides this unit.

    One routing per rubric version is current: applying again replaces its rows.
    """

    __tablename__ = "certified_verdicts"
    rubric_id: str = Field(primary_key=True, max_length=100)
    rubric_version: int = Field(primary_key=True)
    case_id: str = Field(foreign_key="cases.case_id", primary_key=True, max_length=200)
    turn: int = Field(primary_key=True)
    run_id: int = Field(foreign_key="judge_runs.id")
    label: str = Field(max_length=100)
    confidence: float
    threshold: float
    alpha: float
    delta: float
    created_by: int | None = Field(default=None, foreign_key="reviewers.id")
    created_at: datetime = Field(default_factory=utcnow)
