"""Queries on stored judge prompt versions (the ``judge_prompts`` table)."""

from __future__ import annotations

from typing import Any

from sqlalchemy import func, select
from sqlmodel import Session, col

from storage.models import JudgePromptVersion


def list_prompts(
    session: Session, *, rubric_id: str, judge: str | None = None
) -> list[JudgePromptVersion]:
    query = select(JudgePromptVersion).where(col(JudgePromptVersion.rubric_id) == rubric_id)
    if judge is not None:
        query = query.where(col(JudgePromptVersion.judge) == judge)
    query = query.order_by(col(JudgePromptVersion.judge), col(JudgePromptVersion.version))
    return list(session.scalars(query))


def get_prompt(
    session: Session, *, rubric_id: str, judge: str, version: int
) -> JudgePromptVersion | None:
    query = select(JudgePromptVersion).where(
        col(JudgePromptVersion.rubric_id) == rubric_id,
        col(JudgePromptVersion.judge) == judge,
        col(JudgePromptVersion.version) == version,
    )
    return session.scalars(query).first()


def get_prompt_by_id(session: Session, *, prompt_id: int) -> JudgePromptVersion | None:
    return session.get(JudgePromptVersion, prompt_id)


def next_version(session: Session, *, rubric_id: str, judge: str) -> int:
    query = select(func.max(col(JudgePromptVersion.version))).where(
        col(JudgePromptVersion.rubric_id) == rubric_id, col(JudgePromptVersion.judge) == judge
    )
    highest = session.execute(query).scalar()
    return int(highest or 0) + 1


def add_prompt(session: Session, **fields: Any) -> JudgePromptVersion:
    row = JudgePromptVersion(**fields)
    session.add(row)
    session.flush()
    return row


def update_prompt(session: Session, row: JudgePromptVersion, **fields: Any) -> None:
    """Change a version no run used yet (the database refuses it otherwise)."""
    for name, value in fields.items():
        setattr(row, name, value)
    session.add(row)
    session.flush()


def find_by_sha256(
    session: Session, *, rubric_id: str, sha256: str, rubric_version: int
) -> JudgePromptVersion | None:
    """The oldest version of ``rubric_id`` with this text written for ``rubric_version``
    (or for none yet): a text already stored is not stored again under another name."""
    query = (
        select(JudgePromptVersion)
        .where(
            col(JudgePromptVersion.rubric_id) == rubric_id,
            col(JudgePromptVersion.sha256) == sha256,
            (col(JudgePromptVersion.rubric_version) == rubric_version)
            | col(JudgePromptVersion.rubric_version).is_(None),
        )
        .order_by(col(JudgePromptVersion.id))
    )
    return session.scalars(query).first()
