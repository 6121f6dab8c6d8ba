"""Queries on stored rubric versions (the ``rubric_versions`` table)."""

from __future__ import annotations

import orjson
from sqlalchemy import Connection, select
from sqlmodel import Session, col

from storage.models import (
    RubricVersion,
    utcnow,
)


def list_rubric_versions(session: Session) -> list[RubricVersion]:
    query = select(RubricVersion).order_by(col(RubricVersion.rubric_id), col(RubricVersion.version))
    return list(session.scalars(query))


def get_rubric_version(session: Session, *, rubric_id: str, version: int) -> RubricVersion | None:
    return session.get(RubricVersion, (rubric_id, version))


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


def applies_to_by_version(connection: Connection) -> dict[tuple[str, int], str]:
    """The actor each stored rubric version labels (``assistant`` when unknown)."""
    found: dict[tuple[str, int], str] = {}
    query = select(
        col(RubricVersion.rubric_id), col(RubricVersion.version), col(RubricVersion.body_json)
    )
    for rubric_id, version, body in connection.execute(query):
        try:
            found[(rubric_id, version)] = str(orjson.loads(body).get("applies_to") or "assistant")
        except (orjson.JSONDecodeError, AttributeError):
            found[(rubric_id, version)] = "assistant"
    return found
