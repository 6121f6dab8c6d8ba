"""The gold family's tables (see :mod:`storage.models`)."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import Column, Index, Text, false
from sqlmodel import Field, SQLModel

from storage.tables import cases, reviewers
from storage.tables.base import one_current_row, utcnow

REFERENCED = (cases, reviewers)
"""The families whose tables this one's foreign keys name, defined before it: a flush
sorts the tables by their keys, and a key naming an undefined table fails."""


# --- adjudication ----------------------------------------------------------------


class GoldLabel(SQLModel, table=True):
    """A policy owner's decision on one unit. Append-only: the latest row is current."""

    __tablename__ = "gold_labels"
    __table_args__ = (
        Index("ix_gold_rubric_case_turn", "rubric_id", "rubric_version", "case_id", "turn"),
        # One current gold label per unit, enforced by the database.
        one_current_row("ux_gold_current_unit", "rubric_id", "rubric_version", "case_id", "turn"),
        Index("ux_gold_carried_from", "carried_from_id", unique=True),
    )
    id: int | None = Field(default=None, primary_key=True)
    case_id: str = Field(foreign_key="cases.case_id", max_length=200)
    turn: int
    rubric_id: str = Field(max_length=100)
    rubric_version: int
    code: str = Field(max_length=100)
    note: str | None = Field(default=None, sa_column=Column(Text))
    calibration_item: bool = False
    rubric_ambiguity: str | None = Field(default=None, sa_column=Column(Text))
    adjudicator_id: int | None = Field(default=None, foreign_key="reviewers.id")
    current: bool = True
    created_at: datetime = Field(default_factory=utcnow)
    stale: bool = Field(default=False, sa_column_kwargs={"server_default": false()})
    """Set when ``import --replace`` changed the turn under the gold label."""
    carried_from_id: int | None = None
    """The gold label of the previous rubric version it was carried from."""
    carry_id: int | None = None
