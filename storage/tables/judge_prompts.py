"""The judge prompts family's tables (see :mod:`storage.models`)."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import Column, Index, Text
from sqlmodel import Field, SQLModel

from storage.tables.base import utcnow


class JudgePromptVersion(SQLModel, table=True):
    """One version of a judge's prompt template for a rubric: ``<judge>@v<version>``.

    Read from ``rubrics/<rubric-id>/judges/<judge>/v<N>.txt`` or created in the app or
    with ``judge prompts create``. Immutable once a run used it: a trigger refuses
    changing its text (or name) while a judge run of that name exists
    (docs/reference.md, "Judge prompt versions")."""

    __tablename__ = "judge_prompts"
    __table_args__ = (
        Index("ux_judge_prompts_version", "rubric_id", "judge", "version", unique=True),
    )
    id: int | None = Field(default=None, primary_key=True)
    rubric_id: str = Field(max_length=100)
    rubric_version: int | None = None
    """The rubric version it was written for: named when created, else that of its
    first run (empty until then for a prompt read from a file)."""
    judge: str = Field(max_length=200)
    version: int
    text: str = Field(sa_column=Column(Text, nullable=False))
    sha256: str = Field(max_length=64)
    source: str | None = Field(default=None, sa_column=Column(Text))
    """The file it was read from; empty for a version created in the app or the CLI."""
    created_by: str = Field(max_length=200)
    created_at: datetime = Field(default_factory=utcnow)
    derived_from_id: int | None = Field(default=None, foreign_key="judge_prompts.id")
    """The version it was derived from (edited from), if any."""
