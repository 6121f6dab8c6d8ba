"""SQLModel tables: every table's name, each defined on first use.

Per entity a small family in the manner of SQLModel's full-stack template: a
``Base`` with the shared fields, the ``table=True`` class, and a ``Public`` shape
returned to callers where the table holds more than they need. A ``Public`` shape is a
frozen value with the row's id, not a row: services hand it out after their session
closed (``ReviewerPublic`` from ``people.add_person``, ``JudgeRunPublic`` from
``runs.run_verdicts``), so nothing outside a transaction can change or lazy-load a row.

JSON-valued columns are stored as canonical JSON text (``*_json``), so SQLite and
PostgreSQL hold byte-identical values and exports are deterministic.

The classes live in :mod:`storage.tables`, one module per table family, and
``from storage.models import Label`` defines the labels family (and the families its
foreign keys name) when first asked: a command defines the tables it uses, not all
twenty-seven (issue 38, a command's start-up). :func:`define_all` defines every table,
for what needs the whole schema (the migrations, ``SQLModel.metadata`` in the tests).
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

from sqlalchemy import MetaData
from sqlmodel import SQLModel

from storage.tables.base import PARTIAL_INDEX_DIALECTS, declare_partial_indexes, utcnow

if TYPE_CHECKING:
    from storage.tables.assignments import Assignment
    from storage.tables.audit import AuditEntry
    from storage.tables.audit_samples import AuditSample, AuditUnit
    from storage.tables.carry import ReReview, RubricCarry
    from storage.tables.cases import (
        Case,
        CaseBase,
        Contract,
        ContractBase,
        Evaluation,
        Event,
        Finding,
    )
    from storage.tables.certified_verdicts import CertifiedVerdict
    from storage.tables.gold import GoldLabel
    from storage.tables.jobs import JOB_STATUSES, BackgroundJob
    from storage.tables.judge_prompts import JudgePromptVersion
    from storage.tables.judging import JudgeRun, JudgeRunBase, JudgeRunPublic, JudgeVerdict
    from storage.tables.labels import Label, LabelBase, LabelEvent
    from storage.tables.prompt_align import (
        AlignCandidate,
        AlignProposal,
        ConfirmationSet,
        ConfirmationTest,
    )
    from storage.tables.reports import ComputedReport
    from storage.tables.reviewers import REVIEWER_ROLES, Reviewer, ReviewerBase, ReviewerPublic
    from storage.tables.rubric_versions import RUBRIC_ORIGINS, RUBRIC_STATES, RubricVersion
    from storage.tables.team_judges import TeamJudge

__all__ = [
    "HOMES",
    "JOB_STATUSES",
    "PARTIAL_INDEX_DIALECTS",
    "REVIEWER_ROLES",
    "RUBRIC_ORIGINS",
    "RUBRIC_STATES",
    "AlignCandidate",
    "AlignProposal",
    "Assignment",
    "AuditEntry",
    "AuditSample",
    "AuditUnit",
    "BackgroundJob",
    "Case",
    "CaseBase",
    "CertifiedVerdict",
    "ComputedReport",
    "ConfirmationSet",
    "ConfirmationTest",
    "Contract",
    "ContractBase",
    "Evaluation",
    "Event",
    "Finding",
    "GoldLabel",
    "JudgePromptVersion",
    "JudgeRun",
    "JudgeRunBase",
    "JudgeRunPublic",
    "JudgeVerdict",
    "Label",
    "LabelBase",
    "LabelEvent",
    "ReReview",
    "Reviewer",
    "ReviewerBase",
    "ReviewerPublic",
    "RubricCarry",
    "RubricVersion",
    "TeamJudge",
    "declare_partial_indexes",
    "define_all",
    "utcnow",
]

HOMES: dict[str, str] = {
    "ContractBase": "cases",
    "Contract": "cases",
    "CaseBase": "cases",
    "Case": "cases",
    "Event": "cases",
    "Evaluation": "cases",
    "Finding": "cases",
    "REVIEWER_ROLES": "reviewers",
    "ReviewerBase": "reviewers",
    "Reviewer": "reviewers",
    "ReviewerPublic": "reviewers",
    "RUBRIC_STATES": "rubric_versions",
    "RUBRIC_ORIGINS": "rubric_versions",
    "RubricVersion": "rubric_versions",
    "Assignment": "assignments",
    "LabelBase": "labels",
    "Label": "labels",
    "LabelEvent": "labels",
    "GoldLabel": "gold",
    "JudgeRunBase": "judging",
    "JudgeRun": "judging",
    "JudgeRunPublic": "judging",
    "JudgeVerdict": "judging",
    "TeamJudge": "team_judges",
    "JudgePromptVersion": "judge_prompts",
    "RubricCarry": "carry",
    "ReReview": "carry",
    "AuditEntry": "audit",
    "AuditSample": "audit_samples",
    "AuditUnit": "audit_samples",
    "CertifiedVerdict": "certified_verdicts",
    "JOB_STATUSES": "jobs",
    "BackgroundJob": "jobs",
    "ComputedReport": "reports",
    "ConfirmationSet": "prompt_align",
    "ConfirmationTest": "prompt_align",
    "AlignCandidate": "prompt_align",
    "AlignProposal": "prompt_align",
}
"""Each name of a table, shape or constant -> its family's module in :mod:`storage.tables`."""


def __getattr__(name: str) -> Any:
    home = HOMES.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(import_module(f"storage.tables.{home}"), name)
    globals()[name] = value
    return value


def define_all() -> MetaData:
    """Define every table (each family's module imported); ``SQLModel.metadata``, whole."""
    for home in dict.fromkeys(HOMES.values()):
        import_module(f"storage.tables.{home}")
    return SQLModel.metadata
