"""Queries behind the access checks of the services."""

from __future__ import annotations

from sqlalchemy import exists
from sqlmodel import Session, col, select

from storage.models import Assignment, Case, Label


def reviewer_has_case(session: Session, *, reviewer_id: int, case_id: str) -> bool:
    """Whether the case is in the reviewer's queue (any rubric) or carries their labels."""
    assigned = select(col(Assignment.case_id)).where(
        col(Assignment.reviewer_id) == reviewer_id, col(Assignment.case_id) == case_id
    )
    if session.scalars(assigned.limit(1)).first() is not None:
        return True
    labeled = select(col(Label.case_id)).where(
        col(Label.reviewer_id) == reviewer_id, col(Label.case_id) == case_id
    )
    return session.scalars(labeled.limit(1)).first() is not None


def case_hash_and_access(
    session: Session, *, case_id: str, reviewer_id: int | None
) -> tuple[str, bool] | None:
    """One query: the case's content hash and whether it is in the reviewer's queue (any
    rubric) or carries their labels (``False`` without a reviewer); ``None`` if no such case."""
    if reviewer_id is None:
        query = select(col(Case.content_sha256), False).where(col(Case.case_id) == case_id)
    else:
        assigned = exists().where(
            col(Assignment.reviewer_id) == reviewer_id, col(Assignment.case_id) == case_id
        )
        labeled = exists().where(
            col(Label.reviewer_id) == reviewer_id, col(Label.case_id) == case_id
        )
        query = select(col(Case.content_sha256), assigned | labeled).where(
            col(Case.case_id) == case_id
        )
    row = session.execute(query).first()
    return None if row is None else (row[0], bool(row[1]))
