"""Queries on stored rubric versions (the ``rubric_versions`` table)."""

from __future__ import annotations

from sqlalchemy import select
from sqlmodel import Session, col

from storage.models import (
    Label,
    RubricVersion,
    utcnow,
)


def list_rubric_versions(session: Session) -> list[RubricVersion]:
    query = select(RubricVersion).order_by(col(RubricVersion.rubric_id), col(RubricVersion.version))
    return list(session.scalars(query))


def save_rubric_version(
    session: Session,
    *,
    rubric_id: str,
    version: int,
    sha256: str,
    title: str,
    body_json: str,
    source: str | None,
) -> RubricVersion:
    row = session.get(RubricVersion, (rubric_id, version))
    if row is None:
        row = RubricVersion(
            rubric_id=rubric_id, version=version, sha256=sha256, title=title, body_json=body_json
        )
    row.sha256 = sha256
    row.title = title
    row.body_json = body_json
    row.source = source
    row.loaded_at = utcnow()
    session.add(row)
    session.flush()
    return row


def rubric_version_has_labels(session: Session, *, rubric_id: str, version: int) -> bool:
    query = (
        select(col(Label.id))
        .where(col(Label.rubric_id) == rubric_id, col(Label.rubric_version) == version)
        .limit(1)
    )
    return session.execute(query).first() is not None


def rubric_versions_with_labels(session: Session) -> set[tuple[str, int]]:
    query = select(col(Label.rubric_id), col(Label.rubric_version)).distinct()
    return {(rubric_id, version) for rubric_id, version in session.execute(query)}
