"""The judging family's tables (see :mod:`storage.models`)."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import Column, Index, Text
from sqlmodel import Field, SQLModel
from sqlmodel.main import SQLModelConfig

from storage.tables import cases
from storage.tables.base import utcnow

REFERENCED = (cases,)
"""The families whose tables this one's foreign keys name, defined before it: a flush
sorts the tables by their keys, and a key naming an undefined table fails."""


# --- LLM judge runs --------------------------------------------------------------


class JudgeRunBase(SQLModel):
    judge: str = Field(max_length=200)
    prompt_version: str = Field(max_length=100)
    model: str = Field(max_length=200)
    endpoint: str = Field(default="", max_length=200)
    """Where the model was asked: a configured endpoint's name, ``host:port`` of a
    ``--base-url`` run, empty for imported verdicts (docs/reference.md, "Judge
    endpoints")."""
    rubric_id: str = Field(max_length=100)
    rubric_version: int
    prompt_sha256: str | None = Field(default=None, max_length=64)
    source: str = Field(default="import", max_length=20)
    status: str = Field(default="complete", max_length=20)
    """``running``, ``partial`` (stopped before every unit was asked), ``failed`` (every
    unit failed at the endpoint, nothing answered) or ``complete``."""
    calibration_json: str | None = Field(default=None, sa_column=Column(Text))
    carried_from_run_id: int | None = None
    """The run of the previous rubric version whose verdicts this run carries."""


class JudgeRun(JudgeRunBase, table=True):
    """One judge prompt version with one model at one endpoint, against one rubric version."""

    __tablename__ = "judge_runs"
    __table_args__ = (
        Index(
            "ux_judge_runs_identity",
            "judge",
            "prompt_version",
            "model",
            "endpoint",
            "rubric_id",
            "rubric_version",
            unique=True,
        ),
        Index("ux_judge_runs_carried_from", "carried_from_run_id", unique=True),
    )
    id: int | None = Field(default=None, primary_key=True)
    params_json: str | None = Field(default=None, sa_column=Column(Text))
    summary_json: str | None = Field(default=None, sa_column=Column(Text))
    created_at: datetime = Field(default_factory=utcnow)
    updated_at: datetime = Field(default_factory=utcnow)
    carry_id: int | None = None


class JudgeRunPublic(JudgeRunBase):
    """A judge run as services return it: no parameters, summary or timestamps, frozen."""

    model_config = SQLModelConfig(frozen=True)
    id: int


class JudgeVerdict(SQLModel, table=True):
    """The judge's answer on one turn (``turn`` set) or a whole conversation (``turn`` null)."""

    __tablename__ = "judge_verdicts"
    __table_args__ = (
        Index("ix_judge_verdicts_run_case", "run_id", "case_id", "turn"),
        Index("ux_judge_verdicts_carried_from", "carried_from_id", unique=True),
    )
    id: int | None = Field(default=None, primary_key=True)
    run_id: int = Field(foreign_key="judge_runs.id")
    case_id: str = Field(foreign_key="cases.case_id", max_length=200)
    turn: int | None = None
    label: str | None = Field(default=None, max_length=100)
    score: float | None = None
    reason: str | None = Field(default=None, sa_column=Column(Text))
    error: str | None = Field(default=None, sa_column=Column(Text))
    error_kind: str | None = Field(default=None, max_length=20)
    """``endpoint`` (the endpoint failed: the next run retries) or ``answer`` (kept)."""
    latency_ms: int | None = None
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    created_at: datetime = Field(default_factory=utcnow)
    carried_from_id: int | None = None
    """The verdict of the previous rubric version's run it was carried from."""
