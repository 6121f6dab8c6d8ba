"""Queries behind the access checks of the services."""

from __future__ import annotations

from sqlmodel import Session, col, select

from storage.models import Assignment, Label


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
