"""Queries behind the access checks of the services."""

from __future__ import annotations

from sqlalchemy import false
from sqlmodel import Session, col, select

from storage.models import Assignment, Case, Label, RubricVersion


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
    """The case's content hash and whether it is in the reviewer's queue (any rubric) or
    carries their labels (``False`` without a reviewer); ``None`` if no such case.

    One query in the usual case: the assignment and label indexes lead with the reviewer
    and the rubric version, so the check seeks them once per stored rubric version
    instead of scanning every row of the reviewer. Rows under a rubric version missing
    from ``rubric_versions`` are still found, by :func:`reviewer_has_case`."""
    if reviewer_id is None:
        query = select(col(Case.content_sha256), false()).where(col(Case.case_id) == case_id)
        row = session.execute(query).first()
        return None if row is None else (row[0], False)
    # Nested: the planner then loops over the few rubric versions and seeks each.
    assigned = (
        select(1)
        .select_from(RubricVersion)
        .where(
            select(1)
            .where(
                col(Assignment.reviewer_id) == reviewer_id,
                col(Assignment.rubric_id) == col(RubricVersion.rubric_id),
                col(Assignment.rubric_version) == col(RubricVersion.version),
                col(Assignment.case_id) == case_id,
            )
            .exists()
        )
        .exists()
    )
    labeled = (
        select(1)
        .select_from(RubricVersion)
        .where(
            select(1)
            .where(
                col(Label.reviewer_id) == reviewer_id,
                col(Label.rubric_id) == col(RubricVersion.rubric_id),
                col(Label.rubric_version) == col(RubricVersion.version),
                col(Label.case_id) == case_id,
            )
            .exists()
        )
        .exists()
    )
    query = select(col(Case.content_sha256), assigned | labeled).where(col(Case.case_id) == case_id)
    row = session.execute(query).first()
    if row is None:
        return None
    if row[1]:
        return row[0], True
    return row[0], reviewer_has_case(session, reviewer_id=reviewer_id, case_id=case_id)
