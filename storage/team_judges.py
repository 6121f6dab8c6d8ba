"""Queries on the team's judge choices (the ``team_judges`` table): a rubric version's
current judge is its newest row."""

from __future__ import annotations

from typing import Any

from sqlalchemy import select
from sqlmodel import Session, col

from storage.models import TeamJudge


def current(session: Session, *, rubric_id: str, version: int) -> TeamJudge | None:
    """The newest choice for the rubric version, or ``None`` when nobody chose one."""
    query = (
        select(TeamJudge)
        .where(col(TeamJudge.rubric_id) == rubric_id, col(TeamJudge.rubric_version) == version)
        .order_by(col(TeamJudge.id).desc())
        .limit(1)
    )
    return session.scalars(query).first()


def add_choice(session: Session, **fields: Any) -> TeamJudge:
    row = TeamJudge(**fields)
    session.add(row)
    session.flush()
    return row
