"""Queries on audit samples: uniform random draws of turns for unbiased gold."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from sqlalchemy import select
from sqlmodel import Session, col

from storage.models import AuditSample, AuditUnit, Event


def assistant_units(session: Session) -> list[tuple[str, int]]:
    """Every ``(case_id, turn)`` with an assistant event, sorted."""
    query = (
        select(col(Event.case_id), col(Event.turn))
        .where(col(Event.actor) == "assistant")
        .distinct()
        .order_by(col(Event.case_id), col(Event.turn))
    )
    return [(case_id, int(turn)) for case_id, turn in session.execute(query)]


def audited_units(session: Session, *, rubric_id: str, version: int) -> set[tuple[str, int]]:
    """The units of every uniform audit sample drawn for a rubric version.

    Uncertainty samples (``design = 'uncertainty'``) are not uniform and are left out.
    """
    query = (
        select(col(AuditUnit.case_id), col(AuditUnit.turn))
        .join(AuditSample, col(AuditSample.id) == col(AuditUnit.sample_id))
        .where(
            col(AuditSample.rubric_id) == rubric_id,
            col(AuditSample.rubric_version) == version,
            col(AuditSample.design) == "uniform",
        )
    )
    return {(case_id, int(turn)) for case_id, turn in session.execute(query)}


def insert_audit_sample(
    session: Session,
    *,
    rubric_id: str,
    version: int,
    seed: int,
    population: int,
    units: Sequence[tuple[str, int]],
    created_by: int | None,
    now: datetime,
) -> int:
    """Record one draw and its units; returns the sample id (the caller commits)."""
    sample = AuditSample(
        rubric_id=rubric_id,
        rubric_version=version,
        seed=seed,
        size=len(units),
        population=population,
        created_by=created_by,
        created_at=now,
    )
    session.add(sample)
    session.flush()
    assert sample.id is not None
    session.add_all(AuditUnit(sample_id=sample.id, case_id=c, turn=t) for c, t in units)
    session.flush()
    return sample.id
