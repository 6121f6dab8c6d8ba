"""The audit samples family's tables (see :mod:`storage.models`)."""

from __future__ import annotations

from datetime import datetime

from sqlmodel import Field, SQLModel

from storage.tables import cases, judging, reviewers
from storage.tables.base import utcnow

REFERENCED = (cases, judging, reviewers)
"""The families whose tables this one's foreign keys name, defined before it: a flush
sorts the tables by their keys, and a key naming an undefined table fails."""


# --- audit samples ------------------------------------------------------------


class AuditSample(SQLModel, table=True):
    """A uniform random draw of turns to label, so that their gold is a random sample."""

    __tablename__ = "audit_samples"
    id: int | None = Field(default=None, primary_key=True)
    rubric_id: str = Field(max_length=100)
    rubric_version: int
    seed: int
    size: int
    population: int
    created_by: int | None = Field(default=None, foreign_key="reviewers.id")
    created_at: datetime = Field(default_factory=utcnow)
    design: str = Field(default="uniform", max_length=20)
    """``uniform`` (a uniform draw without replacement), ``uncertainty`` (each judged
    turn drawn independently with its own probability, from the judge's scores) or
    ``stratified`` (a uniform draw without replacement within each stratum, of a size
    set by Neyman allocation)."""
    run_id: int | None = Field(default=None, foreign_key="judge_runs.id")
    """The judge run whose scores set the probabilities (``uncertainty``), or whose
    verdicts the strata and the allocation came from (``stratified``)."""
    mix: float | None = None
    expected_size: float | None = None
    stratified_by: str | None = Field(default=None, max_length=20)
    """How a ``stratified`` draw (Neyman allocation) split the turns: ``position``,
    ``lane``, ``code`` (the run's code) or ``finding``."""


class AuditUnit(SQLModel, table=True):
    """One drawn turn of an audit sample."""

    __tablename__ = "audit_units"
    sample_id: int = Field(foreign_key="audit_samples.id", primary_key=True)
    case_id: str = Field(foreign_key="cases.case_id", primary_key=True, max_length=200)
    turn: int = Field(primary_key=True)
    probability: float | None = None
    """The probability the turn had of being drawn (``uncertainty`` and ``stratified``
    samples)."""
    stratum: str | None = Field(default=None, max_length=200)
    """The stratum it was drawn from (``stratified`` samples)."""
