"""The carry family's tables (see :mod:`storage.models`)."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import Column, Index, Text
from sqlmodel import Field, SQLModel

from storage.tables import cases, labels, reviewers
from storage.tables.base import utcnow

REFERENCED = (cases, labels, reviewers)
"""The families whose tables this one's foreign keys name, defined before it: a flush
sorts the tables by their keys, and a key naming an undefined table fails."""


# --- rubric carry-over -------------------------------------------------------


class RubricCarry(SQLModel, table=True):
    """One publication of a rubric version: what it carried from the version before.

    Carried rows (labels, gold labels, judge runs and verdicts) point here with
    ``carry_id``; ``summary_json`` holds the counts (docs/reference.md, "Rubric versions:
    mapping and carry-over")."""

    __tablename__ = "rubric_carries"
    __table_args__ = (Index("ix_rubric_carries_rubric", "rubric_id", "to_version"),)
    id: int | None = Field(default=None, primary_key=True)
    rubric_id: str = Field(max_length=100)
    from_version: int
    to_version: int
    actor: str = Field(max_length=200)
    at: datetime = Field(default_factory=utcnow)
    summary_json: str = Field(sa_column=Column(Text, nullable=False))


class ReReview(SQLModel, table=True):
    """A unit a reviewer labeled under version N with a code whose meaning changed
    (narrowed, widened, split or merged): they are asked to label it again under N+1."""

    __tablename__ = "re_reviews"
    __table_args__ = (
        # An old label is queued once, however often the version is published.
        Index("ux_re_reviews_old_label", "old_label_id", unique=True),
        Index("ix_re_reviews_reviewer", "reviewer_id", "rubric_id", "rubric_version"),
    )
    id: int | None = Field(default=None, primary_key=True)
    carry_id: int = Field(foreign_key="rubric_carries.id")
    reviewer_id: int = Field(foreign_key="reviewers.id")
    rubric_id: str = Field(max_length=100)
    rubric_version: int
    """The new version the unit is to be labeled under."""
    case_id: str = Field(foreign_key="cases.case_id", max_length=200)
    turn: int
    old_label_id: int = Field(foreign_key="labels.id")
    old_code: str = Field(max_length=100)
