"""The cases family's tables (see :mod:`storage.models`)."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import Column, Index, Text
from sqlmodel import Field, SQLModel

from storage.tables.base import utcnow

# --- contracts -------------------------------------------------------------


class ContractBase(SQLModel):
    version: str = Field(primary_key=True, max_length=200)
    sha256: str = Field(max_length=64)
    body_json: str = Field(sa_column=Column(Text, nullable=False))


class Contract(ContractBase, table=True):
    """A role contract; immutable once stored (a changed body needs a new version)."""

    __tablename__ = "contracts"
    created_at: datetime = Field(default_factory=utcnow)


# --- cases and their events ------------------------------------------------


class CaseBase(SQLModel):
    case_id: str = Field(primary_key=True, max_length=200)
    chatbot_role: str | None = Field(default=None, sa_column=Column(Text))
    contract_version: str | None = Field(
        default=None, foreign_key="contracts.version", index=True, max_length=200
    )
    n_events: int = 0
    n_assistant_turns: int = 0


class Case(CaseBase, table=True):
    """One recorded conversation. Its events are in ``events``."""

    __tablename__ = "cases"
    __table_args__ = (Index("ix_cases_imported_at", "imported_at"),)
    content_sha256: str = Field(max_length=64)
    source: str | None = Field(default=None, sa_column=Column(Text))
    source_format: str = Field(default="native", max_length=40)
    extra_json: str | None = Field(default=None, sa_column=Column(Text))
    imported_at: datetime = Field(default_factory=utcnow)


class Event(SQLModel, table=True):
    """One transcript event, in list order (``seq``), addressed by ``turn``."""

    __tablename__ = "events"
    case_id: str = Field(foreign_key="cases.case_id", primary_key=True, max_length=200)
    seq: int = Field(primary_key=True)
    turn: int
    actor: str = Field(max_length=20)
    text: str | None = Field(default=None, sa_column=Column(Text))
    actions_json: str | None = Field(default=None, sa_column=Column(Text))
    set_role: str | None = Field(default=None, sa_column=Column(Text))
    request_json: str | None = Field(default=None, sa_column=Column(Text))
    extra_json: str | None = Field(default=None, sa_column=Column(Text))


# --- deterministic findings --------------------------------------------------


class Evaluation(SQLModel, table=True):
    """The evaluator's verdict on a case, one row per evaluator version.

    Keeping the version in the key lets a change of rules be re-run beside the old
    results and compared.
    """

    __tablename__ = "evaluations"
    __table_args__ = (Index("ix_evaluations_version_lane", "evaluator_version", "lane"),)
    case_id: str = Field(foreign_key="cases.case_id", primary_key=True, max_length=200)
    evaluator_version: str = Field(primary_key=True, max_length=20)
    status: str = Field(max_length=20)
    lane: str = Field(max_length=20)
    first_violation_turn: int | None = None
    diagnostic: str = Field(sa_column=Column(Text, nullable=False))
    role_spans_json: str = Field(sa_column=Column(Text, nullable=False))
    n_fixture_errors: int = 0
    n_violations: int = 0
    n_harness_findings: int = 0
    evaluated_at: datetime = Field(default_factory=utcnow)


class Finding(SQLModel, table=True):
    """One fixture error, violation or harness finding of an evaluation."""

    __tablename__ = "findings"
    __table_args__ = (Index("ix_findings_case_version", "case_id", "evaluator_version"),)
    id: int | None = Field(default=None, primary_key=True)
    case_id: str = Field(foreign_key="cases.case_id", max_length=200)
    evaluator_version: str = Field(max_length=20)
    kind: str = Field(max_length=20)
    code: str = Field(max_length=60)
    turn: int | None = None
    detail_json: str = Field(sa_column=Column(Text, nullable=False))
