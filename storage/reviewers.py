"""Queries on reviewers (the ``reviewers`` table)."""

from __future__ import annotations

from collections.abc import Iterable

from sqlalchemy import select, update
from sqlmodel import Session, col

from storage.bulk import in_chunks, insert_ignoring_conflicts
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
    for chunk in in_chunks(wanted):
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
    return ensure_reviewer_created(session, name=name, role=role, display_name=display_name)[0]


def ensure_reviewer_created(
    session: Session, *, name: str, role: str = "reviewer", display_name: str | None = None
) -> tuple[Reviewer, bool]:
    """:func:`ensure_reviewer`, and whether this call created the row (of two racing
    first sign-ins, exactly one did)."""
    statement = insert_ignoring_conflicts(session.connection(), Reviewer, keys=["name"]).values(
        name=name, role=role, display_name=display_name, active=True, created_at=utcnow()
    )
    created = session.execute(statement.returning(col(Reviewer.id))).first() is not None
    reviewer = get_reviewer_by_name(session, name=name)
    assert reviewer is not None
    return reviewer, created


def list_reviewers(session: Session, *, active_only: bool = True) -> list[Reviewer]:
    query = select(Reviewer).order_by(col(Reviewer.name))
    if active_only:
        query = query.where(col(Reviewer.active))
    return list(session.scalars(query))


def set_reviewer_role(session: Session, *, reviewer_id: int, role: str) -> None:
    session.execute(update(Reviewer).where(col(Reviewer.id) == reviewer_id).values(role=role))


def set_reviewer_active(session: Session, *, reviewer_id: int, active: bool) -> None:
    session.execute(update(Reviewer).where(col(Reviewer.id) == reviewer_id).values(active=active))


def lock_active_admins(session: Session) -> list[str]:
    """The names of the active admins, their rows locked until the transaction ends.

    Every change that may take an admin away (a demotion, a deactivation) takes these
    locks before it checks that another active admin remains (``SELECT ... FOR UPDATE``
    on PostgreSQL; SQLite's ``BEGIN IMMEDIATE`` already serialises writers), so two
    admins removing the last two admins at once cannot both pass the check: the second
    waits, then no longer sees the first one's change as an active admin.
    """
    query = (
        select(col(Reviewer.name))
        .where(col(Reviewer.role) == "admin", col(Reviewer.active))
        .order_by(col(Reviewer.id))
        .with_for_update()
    )
    return list(session.scalars(query))


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


def reviewer_names(session: Session) -> dict[int, str]:
    """``{reviewer id: name}`` of every reviewer."""
    query = select(col(Reviewer.id), col(Reviewer.name))
    return {row[0]: row[1] for row in session.execute(query)}
