"""The reviewers family's tables (see :mod:`storage.models`)."""

from __future__ import annotations

from datetime import datetime

from sqlmodel import Field, SQLModel
from sqlmodel.main import SQLModelConfig

from storage.tables.base import utcnow

REVIEWER_ROLES = ("reviewer", "policy_owner", "admin")


class ReviewerBase(SQLModel):
    name: str = Field(unique=True, index=True, max_length=200)
    """The sign-in identity, NFC and case-folded (``Ana`` is stored as ``ana``, shown by
    ``display_name``): an e-mail from OIDC, a proxy header value, or a local name."""
    display_name: str | None = Field(default=None, max_length=200)
    role: str = Field(default="reviewer", max_length=20)


class Reviewer(ReviewerBase, table=True):
    __tablename__ = "reviewers"
    id: int | None = Field(default=None, primary_key=True)
    active: bool = True
    created_at: datetime = Field(default_factory=utcnow)


class ReviewerPublic(ReviewerBase):
    """A reviewer as services return them: the row's fields but ``created_at``, frozen."""

    model_config = SQLModelConfig(frozen=True)
    id: int
    active: bool
