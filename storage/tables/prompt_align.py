"""The prompt align family's tables (see :mod:`storage.models`)."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import CheckConstraint, Column, Index, Text
from sqlmodel import Field, SQLModel

from storage.tables import jobs, judge_prompts
from storage.tables.base import utcnow

REFERENCED = (jobs, judge_prompts)
"""The families whose tables this one's foreign keys name, defined before it: a flush
sorts the tables by their keys, and a key naming an undefined table fails."""


# --- suggesting a prompt (judge align) -------------------------------------------


class ConfirmationSet(SQLModel, table=True):
    """Gold units of a rubric version set aside to confirm a suggested prompt: no
    optimiser ever sees them (docs/reference.md, "Suggesting a prompt").

    The first ``judge align`` of a rubric version draws it (whole conversations,
    stratified by the gold verdict); later align jobs and hand comparisons test on the
    same units and spend its error budget (``confirmation_tests``) until it is spent;
    then a fresh one is drawn from gold no optimiser has seen."""

    __tablename__ = "confirmation_sets"
    __table_args__ = (
        Index("ix_confirmation_sets_rubric", "rubric_id", "rubric_version", "id"),
        CheckConstraint("alpha > 0 AND alpha < 1", name="ck_confirmation_sets_alpha"),
        CheckConstraint("max_tests >= 1", name="ck_confirmation_sets_max_tests"),
    )
    id: int | None = Field(default=None, primary_key=True)
    rubric_id: str = Field(max_length=100)
    rubric_version: int
    units_json: str = Field(sa_column=Column(Text, nullable=False))
    """``[[case_id, turn], ...]``, sorted."""
    units_sha256: str = Field(max_length=64)
    alpha: float
    """The set's whole error budget (the test levels of its tests sum below it)."""
    max_tests: int
    source: str = Field(max_length=40)
    """``split`` (drawn from the gold when the first align job started) or ``fresh``
    (drawn from gold no optimiser saw, once an earlier set's budget was spent)."""
    created_by: str = Field(max_length=200)
    created_at: datetime = Field(default_factory=utcnow)


class ConfirmationTest(SQLModel, table=True):
    """One test on a confirmation set: the share of its error budget it spent.

    ``number`` is unique per set (the database refuses two tests in one slot, so two
    jobs cannot both spend the same share), and an align job spends at most once."""

    __tablename__ = "confirmation_tests"
    __table_args__ = (
        Index("ux_confirmation_tests_number", "set_id", "number", unique=True),
        Index("ux_confirmation_tests_job", "set_id", "job_id", unique=True),
        CheckConstraint("number >= 1", name="ck_confirmation_tests_number"),
        CheckConstraint("alpha_spent > 0 AND alpha_spent < 1", name="ck_confirmation_tests_alpha"),
    )
    id: int | None = Field(default=None, primary_key=True)
    set_id: int = Field(foreign_key="confirmation_sets.id")
    number: int
    alpha_spent: float
    p_value: float | None = None
    kind: str = Field(max_length=20)
    """``align`` (an align job's confirmation) or ``compare`` (a comparison by hand)."""
    job_id: int | None = Field(default=None, foreign_key="background_jobs.id")
    first: str = Field(max_length=200)
    """The version tested against (the starting one)."""
    second: str = Field(max_length=200)
    verdict: str = Field(max_length=40)
    created_by: str = Field(max_length=200)
    created_at: datetime = Field(default_factory=utcnow)


class AlignCandidate(SQLModel, table=True):
    """A prompt version an align job's optimiser proposed, with its score on the
    optimisation set (the share of the units it was judged on whose code matched gold)."""

    __tablename__ = "align_candidates"
    __table_args__ = (Index("ux_align_candidates_job_prompt", "job_id", "prompt_id", unique=True),)
    id: int | None = Field(default=None, primary_key=True)
    job_id: int = Field(foreign_key="background_jobs.id")
    prompt_id: int = Field(foreign_key="judge_prompts.id")
    optimisation_score: float | None = None
    scored_units: int = 0
    created_at: datetime = Field(default_factory=utcnow)


class AlignProposal(SQLModel, table=True):
    """The optimiser's answer to one reflection request of an align job, kept so that a
    resumed job replays it instead of asking again."""

    __tablename__ = "align_proposals"
    __table_args__ = (Index("ux_align_proposals_request", "job_id", "request_sha256", unique=True),)
    id: int | None = Field(default=None, primary_key=True)
    job_id: int = Field(foreign_key="background_jobs.id")
    request_sha256: str = Field(max_length=64)
    answer: str = Field(sa_column=Column(Text, nullable=False))
    created_at: datetime = Field(default_factory=utcnow)
