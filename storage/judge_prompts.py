"""Queries on stored judge prompt versions (the ``judge_prompts`` table)."""

from __future__ import annotations

from collections import Counter
from typing import Any

from sqlalchemy import func, select
from sqlmodel import Session, col

from storage.models import JudgePromptVersion, JudgeRun


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


def run_counts(session: Session, *, rubric_id: str) -> Counter[tuple[str, str]]:
    """Judge runs per ``(judge, prompt_version)`` of a rubric id (any rubric version)."""
    query = (
        select(col(JudgeRun.judge), col(JudgeRun.prompt_version), func.count())
        .where(col(JudgeRun.rubric_id) == rubric_id)
        .group_by(col(JudgeRun.judge), col(JudgeRun.prompt_version))
    )
    return Counter({(judge, version): int(n) for judge, version, n in session.execute(query)})


def run_sha256s(
    session: Session, *, rubric_id: str, judge: str, prompt_version: str
) -> set[str | None]:
    """The prompt sha256 each run of ``judge@prompt_version`` recorded."""
    query = (
        select(col(JudgeRun.prompt_sha256))
        .where(
            col(JudgeRun.rubric_id) == rubric_id,
            col(JudgeRun.judge) == judge,
            col(JudgeRun.prompt_version) == prompt_version,
        )
        .distinct()
    )
    return set(session.scalars(query))
