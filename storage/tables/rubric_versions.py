"""The rubric versions family's tables (see :mod:`storage.models`)."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import Column, String, Text
from sqlmodel import Field, SQLModel

from storage.tables.base import utcnow

RUBRIC_STATES = ("draft", "published")
"""A stored rubric version's state: a draft never acts (no labels, no queue, no default);
a published version is offered (docs/reference.md, "Rubric drafts and publication")."""


RUBRIC_ORIGINS = ("file", "app")


class RubricVersion(SQLModel, table=True):
    """A rubric version: a draft (read from a file not yet published, or written in the
    app) or a published version, as it was when published (its YAML text and parsed body).

    A trigger refuses turning a published version back into a draft, and any state but
    ``draft`` and ``published`` (migration 0040)."""

    __tablename__ = "rubric_versions"
    rubric_id: str = Field(primary_key=True, max_length=100)
    version: int = Field(primary_key=True)
    sha256: str = Field(max_length=64)
    title: str = Field(sa_column=Column(Text, nullable=False))
    body_json: str = Field(sa_column=Column(Text, nullable=False))
    source: str | None = Field(default=None, sa_column=Column(Text))
    loaded_at: datetime = Field(default_factory=utcnow)
    state: str = Field(
        default="draft",
        sa_column=Column(String(16), nullable=False, server_default="draft"),
    )
    origin: str = Field(
        default="file", sa_column=Column(String(16), nullable=False, server_default="file")
    )
    """``file`` (read from the rubrics folder) or ``app`` (written in the app)."""
    yaml_text: str | None = Field(default=None, sa_column=Column(Text))
    """The YAML as written (the file's text, or the draft written in the app)."""
    saved_by: str | None = Field(default=None, max_length=200)
    published_at: datetime | None = None
    published_by: str | None = Field(default=None, max_length=200)
