"""Queries on stored rubric versions (the ``rubric_versions`` table)."""

from __future__ import annotations

import orjson
from sqlalchemy import Connection, case, func, select
from sqlmodel import Session, col

from storage.models import (
    Assignment,
    RubricVersion,
    utcnow,
)


def list_rubric_versions(session: Session) -> list[RubricVersion]:
    query = select(RubricVersion).order_by(col(RubricVersion.rubric_id), col(RubricVersion.version))
    return list(session.scalars(query))


def versions_token(session: Session) -> tuple[int, int, str, str]:
    """What changes when a version is stored, saved as a draft or published: (versions,
    published, newest load, newest publication), cheap enough for every page run."""
    row = session.execute(
        select(
            func.count(),
            func.count(col(RubricVersion.published_at)),
            func.max(col(RubricVersion.loaded_at)),
            func.max(col(RubricVersion.published_at)),
        ).select_from(RubricVersion)
    ).one()
    return int(row[0]), int(row[1]), str(row[2]), str(row[3])


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
    yaml_text: str | None = None,
    origin: str = "file",
    saved_by: str | None = None,
    published_by: str | None = None,
) -> RubricVersion:
    """Store a version's content (a new row is a draft); ``published_by`` publishes it."""
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
    row.origin = origin
    if yaml_text is not None:
        row.yaml_text = yaml_text
    if saved_by is not None:
        row.saved_by = saved_by
    if published_by is not None and row.state != "published":
        row.state = "published"
        row.published_at = row.loaded_at
        row.published_by = published_by
    session.add(row)
    session.flush()
    return row


def mark_published(session: Session, *, rubric_id: str, version: int, by: str) -> bool:
    """Publish a stored version; whether it was a draft until now."""
    row = session.get(RubricVersion, (rubric_id, version))
    if row is None or row.state == "published":
        return False
    row.state = "published"
    row.published_at = utcnow()
    row.published_by = by
    session.add(row)
    session.flush()
    return True


def newest_assigned_versions(session: Session, *, reviewer_id: int) -> list[tuple[str, int, int]]:
    """(rubric id, version, unfinished assignments) of every published version the
    reviewer's assignments name, newest assignment first."""
    unfinished = func.sum(case((col(Assignment.completed_at).is_(None), 1), else_=0))
    query = (
        select(
            col(Assignment.rubric_id),
            col(Assignment.rubric_version),
            unfinished,
            func.max(col(Assignment.created_at)),
        )
        .join(
            RubricVersion,
            (col(RubricVersion.rubric_id) == col(Assignment.rubric_id))
            & (col(RubricVersion.version) == col(Assignment.rubric_version)),
        )
        .where(col(Assignment.reviewer_id) == reviewer_id, col(RubricVersion.state) == "published")
        .group_by(col(Assignment.rubric_id), col(Assignment.rubric_version))
    )
    rows = [(r, int(v), int(n or 0), at) for r, v, n, at in session.execute(query)]
    rows.sort(key=lambda row: (row[3], row[1]), reverse=True)
    return [(r, v, n) for r, v, n, _ in rows]


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
