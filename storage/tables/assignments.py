"""The assignments family's tables (see :mod:`storage.models`)."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import Index
from sqlmodel import Field, SQLModel

from storage.tables import cases, reviewers
from storage.tables.base import utcnow

REFERENCED = (cases, reviewers)
"""The families whose tables this one's foreign keys name, defined before it: a flush
sorts the tables by their keys, and a key naming an undefined table fails."""


class Assignment(SQLModel, table=True):
    """A case in a reviewer's queue for one rubric version, with their progress on it."""

    __tablename__ = "assignments"
    __table_args__ = (
        Index(
            "ux_assignments_reviewer_rubric_case",
            "reviewer_id",
            "rubric_id",
            "rubric_version",
            "case_id",
            unique=True,
        ),
        Index("ix_assignments_rubric_case", "rubric_id", "rubric_version", "case_id"),
    )
    id: int | None = Field(default=None, primary_key=True)
    case_id: str = Field(foreign_key="cases.case_id", max_length=200)
    reviewer_id: int = Field(foreign_key="reviewers.id")
    rubric_id: str = Field(max_length=100)
    rubric_version: int
    assigned_by: int | None = Field(default=None, foreign_key="reviewers.id")
    created_at: datetime = Field(default_factory=utcnow)
    labeled_turns: int = 0
    completed_at: datetime | None = None
