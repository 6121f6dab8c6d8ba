"""Queries on certified judge verdicts (the ``certified_verdicts`` table), stored by
``judge route --apply``."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import delete, select
from sqlmodel import Session, col

from storage.models import CertifiedVerdict


def replace_certified(
    session: Session,
    *,
    rubric_id: str,
    version: int,
    rows: Sequence[dict[str, Any]],
    created_by: int | None,
    now: datetime,
) -> None:
    """Make ``rows`` the rubric version's certified verdicts (the caller commits).

    Each row: ``case_id``, ``turn``, ``run_id``, ``label``, ``confidence``,
    ``threshold``, ``alpha``, ``delta``.
    """
    session.execute(
        delete(CertifiedVerdict).where(
            col(CertifiedVerdict.rubric_id) == rubric_id,
            col(CertifiedVerdict.rubric_version) == version,
        )
    )
    session.add_all(
        CertifiedVerdict(
            rubric_id=rubric_id,
            rubric_version=version,
            created_by=created_by,
            created_at=now,
            **row,
        )
        for row in rows
    )
    session.flush()


def certified_verdicts(
    session: Session, *, rubric_id: str, version: int, case_ids: Sequence[str] | None = None
) -> dict[tuple[str, int], CertifiedVerdict]:
    """The rubric version's certified verdicts by unit (of ``case_ids`` when given)."""
    query = select(CertifiedVerdict).where(
        col(CertifiedVerdict.rubric_id) == rubric_id,
        col(CertifiedVerdict.rubric_version) == version,
    )
    if case_ids is not None:
        query = query.where(col(CertifiedVerdict.case_id).in_(list(case_ids)))
    rows = session.execute(query).scalars().all()
    for row in rows:
        session.expunge(row)
    return {(row.case_id, row.turn): row for row in rows}
