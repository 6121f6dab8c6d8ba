"""The labels family's tables (see :mod:`storage.models`)."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import Column, Index, Text, false
from sqlmodel import Field, SQLModel

from storage.tables import cases, reviewers
from storage.tables.base import one_current_row, utcnow

REFERENCED = (cases, reviewers)
"""The families whose tables this one's foreign keys name, defined before it: a flush
sorts the tables by their keys, and a key naming an undefined table fails."""


class LabelBase(SQLModel):
    case_id: str = Field(foreign_key="cases.case_id", max_length=200)
    turn: int
    rubric_id: str = Field(max_length=100)
    rubric_version: int
    code: str = Field(max_length=100)
    rationale: str | None = Field(default=None, sa_column=Column(Text))


class Label(LabelBase, table=True):
    """One labeling act. Append-only: a change adds a row and marks the old one not current."""

    __tablename__ = "labels"
    __table_args__ = (
        Index("ix_labels_rubric_case_turn", "rubric_id", "rubric_version", "case_id", "turn"),
        Index("ix_labels_reviewer_case", "reviewer_id", "rubric_id", "rubric_version", "case_id"),
        # One current label per reviewer and unit, enforced by the database.
        one_current_row(
            "ux_labels_current_unit",
            "rubric_id",
            "rubric_version",
            "case_id",
            "turn",
            "reviewer_id",
        ),
        # A label is carried into the next rubric version at most once.
        Index("ux_labels_carried_from", "carried_from_id", unique=True),
    )
    id: int | None = Field(default=None, primary_key=True)
    reviewer_id: int = Field(foreign_key="reviewers.id")
    current: bool = True
    source: str = Field(default="app", max_length=20)
    created_at: datetime = Field(default_factory=utcnow)
    stale: bool = Field(default=False, sa_column_kwargs={"server_default": false()})
    """Set when ``import --replace`` changed the turn under the label: it stopped being
    current and its reviewer is asked to label the turn again."""
    carried_from_id: int | None = None
    """The label of the previous rubric version this row was carried from (``labels.id``)."""
    carry_id: int | None = None
    """The publication that carried it (``rubric_carries.id``: from which version, when,
    by whom)."""


class LabelEvent(SQLModel, table=True):
    """One key press of the review page, applied once: the browser numbers its key
    presses per page load (``client_id``, ``seq``) and sends them again until the
    server acknowledges them; the unique index makes a second application impossible."""

    __tablename__ = "label_events"
    __table_args__ = (
        Index("ux_label_events_client_seq", "reviewer_id", "client_id", "seq", unique=True),
    )
    id: int | None = Field(default=None, primary_key=True)
    reviewer_id: int = Field(foreign_key="reviewers.id")
    client_id: str = Field(max_length=64)
    seq: int
    case_id: str = Field(foreign_key="cases.case_id", max_length=200)
    turn: int
    label_id: int | None = Field(default=None, foreign_key="labels.id")
    created_at: datetime = Field(default_factory=utcnow)
