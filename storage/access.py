"""Queries behind the access checks of the services."""

from __future__ import annotations

from typing import Any

from sqlalchemy import false
from sqlmodel import Session, col, select

from storage.bulk import in_chunks
from storage.models import Assignment, Case, Label, RubricVersion


def reviewer_has_case(session: Session, *, reviewer_id: int, case_id: str) -> bool:
    """Whether the case is in the reviewer's queue (any rubric) or carries their labels."""
    for table in (Assignment, Label):
        query = select(col(table.case_id)).where(
            col(table.reviewer_id) == reviewer_id, col(table.case_id) == case_id
        )
        if session.scalars(query.limit(1)).first() is not None:
            return True
    return False


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
    assigned = _reviewer_rows_on_case(Assignment, reviewer_id=reviewer_id, case_id=case_id)
    labeled = _reviewer_rows_on_case(Label, reviewer_id=reviewer_id, case_id=case_id)
    query = select(col(Case.content_sha256), assigned | labeled).where(col(Case.case_id) == case_id)
    row = session.execute(query).first()
    if row is None:
        return None
    if row[1]:
        return row[0], True
    return row[0], reviewer_has_case(session, reviewer_id=reviewer_id, case_id=case_id)


def _reviewer_rows_on_case(
    table: type[Assignment] | type[Label], *, reviewer_id: int, case_id: str
) -> Any:
    """``EXISTS``: the reviewer has a row of ``table`` on the case under a stored rubric
    version. Nested, so the planner loops over the few rubric versions and seeks each."""
    return (
        select(1)
        .select_from(RubricVersion)
        .where(
            select(1)
            .where(
                col(table.reviewer_id) == reviewer_id,
                col(table.rubric_id) == col(RubricVersion.rubric_id),
                col(table.rubric_version) == col(RubricVersion.version),
                col(table.case_id) == case_id,
            )
            .exists()
        )
        .exists()
    )


def reviewer_case_ids(session: Session, *, reviewer_id: int, case_ids: list[str]) -> set[str]:
    """Those of ``case_ids`` in the reviewer's queue (any rubric) or carrying their labels."""
    found: set[str] = set()
    wanted = sorted(set(case_ids))
    for table in (Assignment, Label):
        for chunk in in_chunks(wanted):
            query = select(col(table.case_id)).where(
                col(table.reviewer_id) == reviewer_id, col(table.case_id).in_(chunk)
            )
            found.update(session.scalars(query.distinct()))
    return found
