"""The team judges family's tables (see :mod:`storage.models`)."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import Index
from sqlmodel import Field, SQLModel

from storage.tables import judging
from storage.tables.base import utcnow

REFERENCED = (judging,)
"""The families whose tables this one's foreign keys name, defined before it: a flush
sorts the tables by their keys, and a key naming an undefined table fails."""


class TeamJudge(SQLModel, table=True):
    """A policy owner's choice of the rubric version's judge: a prompt version with its
    model and endpoint (the run it was chosen from). Kept as history: the newest row of a
    rubric version is its current judge; each choice is also in the audit log."""

    __tablename__ = "team_judges"
    __table_args__ = (Index("ix_team_judges_rubric", "rubric_id", "rubric_version", "id"),)
    id: int | None = Field(default=None, primary_key=True)
    rubric_id: str = Field(max_length=100)
    rubric_version: int
    judge: str = Field(max_length=200)
    prompt_version: str = Field(max_length=100)
    model: str = Field(max_length=200)
    endpoint: str = Field(default="", max_length=200)
    run_id: int = Field(foreign_key="judge_runs.id")
    chosen_by: str = Field(max_length=200)
    chosen_at: datetime = Field(default_factory=utcnow)
