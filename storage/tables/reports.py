"""The reports family's tables (see :mod:`storage.models`)."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import Column, Text
from sqlmodel import Field, SQLModel

from storage.tables.base import utcnow

# --- computed reports ----------------------------------------------------------


class ComputedReport(SQLModel, table=True):
    """A heavy report (agreement, judge calibration, drift, ...) computed for one state of
    the data it reads, shared by every session and every server on the database.

    ``key`` names the report: its kind, rubric version and parameters (the bootstrap's
    resamples among them: the point figures and the figures with intervals are two
    rows). ``token`` is the state of the data it was computed for (labels, gold labels,
    verdicts, rubric content, ...); a reader whose current token differs gets the report
    computed again (at once, or by a background job while the page shows this row's
    older figures) and the row replaced (review_app/services/reports/report_store.py).
    """

    __tablename__ = "computed_reports"
    key: str = Field(primary_key=True, max_length=500)
    kind: str = Field(max_length=40)
    rubric_id: str = Field(max_length=100)
    rubric_version: int
    token: str = Field(sa_column=Column(Text, nullable=False))
    payload_json: str = Field(sa_column=Column(Text, nullable=False))
    seconds: float = 0.0
    """How long computing it took: a page computes a report at once only if that was quick."""
    computed_at: datetime = Field(default_factory=utcnow)
