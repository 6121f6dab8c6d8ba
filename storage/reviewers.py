"""Queries on reviewers (the ``reviewers`` table)."""

from __future__ import annotations

from collections.abc import Iterable

from sqlalchemy import func, select, update
from sqlmodel import Session, col

from storage.bulk import insert_ignoring_conflicts
from storage.models import (
    Reviewer,
    utcnow,
)


def get_reviewer(session: Session, *, reviewer_id: int) -> Reviewer | None:
    return session.get(Reviewer, reviewer_id)


def get_reviewer_by_name(session: Session, *, name: str) -> Reviewer | None:
    return session.scalars(select(Reviewer).where(col(Reviewer.name) == name)).first()


def reviewers_by_name(session: Session, *, names: Iterable[str]) -> dict[str, Reviewer]:
    wanted = sorted(set(names))
    found: dict[str, Reviewer] = {}
    for start in range(0, len(wanted), 500):
        chunk = wanted[start : start + 500]
        for reviewer in session.scalars(select(Reviewer).where(col(Reviewer.name).in_(chunk))):
            found[reviewer.name] = reviewer
    return found


def create_reviewer(
    session: Session, *, name: str, role: str = "reviewer", display_name: str | None = None
) -> Reviewer:
    reviewer = Reviewer(name=name, role=role, display_name=display_name)
    session.add(reviewer)
    session.flush()
    return reviewer


def ensure_reviewer(
    session: Session, *, name: str, role: str = "reviewer", display_name: str | None = None
) -> Reviewer:
    """The reviewer called ``name``, created with ``role`` if there is none (race-safe)."""
    statement = insert_ignoring_conflicts(session.connection(), Reviewer, keys=["name"]).values(
        name=name, role=role, display_name=display_name, active=True, created_at=utcnow()
    )
    session.execute(statement)
    reviewer = get_reviewer_by_name(session, name=name)
    assert reviewer is not None
    return reviewer


def list_reviewers(session: Session, *, active_only: bool = True) -> list[Reviewer]:
    query = select(Reviewer).order_by(col(Reviewer.name))
    if active_only:
        query = query.where(col(Reviewer.active))
    return list(session.scalars(query))


def set_reviewer_role(session: Session, *, reviewer_id: int, role: str) -> None:
    session.execute(update(Reviewer).where(col(Reviewer.id) == reviewer_id).values(role=role))


def count_reviewers_with_role(session: Session, *, role: str) -> int:
    query = select(func.count()).select_from(Reviewer).where(col(Reviewer.role) == role)
    return int(session.execute(query).scalar_one())


def insert_reviewer_if_absent(
    session: Session, *, name: str, role: str = "reviewer", display_name: str | None = None
) -> bool:
    """Create the reviewer ``name`` unless it exists (``ON CONFLICT DO NOTHING``, so a
    simultaneous sign-in or addition of the same name never raises); whether this
    call created it."""
    statement = insert_ignoring_conflicts(session.connection(), Reviewer, keys=["name"]).values(
        name=name, role=role, display_name=display_name, active=True, created_at=utcnow()
    )
    # RETURNING says whether a row was inserted on both backends (rowcount does not
    # through the ORM's insert path on PostgreSQL).
    return session.execute(statement.returning(col(Reviewer.id))).first() is not None
