"""Queries on audit samples: uniform random draws of turns for unbiased gold."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from sqlalchemy import func, select
from sqlmodel import Session, col

from storage.models import AuditSample, AuditUnit, Reviewer


def audited_units(
    session: Session,
    *,
    rubric_id: str,
    version: int,
    design: str | tuple[str, ...] | None = "uniform",
) -> set[tuple[str, int]]:
    """The units of every audit sample of ``design`` (one, or any of several) drawn for
    a rubric version.

    By default uniform samples only: uncertainty samples (``design = 'uncertainty'``)
    are not uniform, nor are stratified ones across strata. ``design=None``: every
    sample.
    """
    query = (
        select(col(AuditUnit.case_id), col(AuditUnit.turn))
        .join(AuditSample, col(AuditSample.id) == col(AuditUnit.sample_id))
        .where(
            col(AuditSample.rubric_id) == rubric_id,
            col(AuditSample.rubric_version) == version,
        )
    )
    if isinstance(design, str):
        query = query.where(col(AuditSample.design) == design)
    elif design is not None:
        query = query.where(col(AuditSample.design).in_(design))
    return {(case_id, int(turn)) for case_id, turn in session.execute(query)}


def stratified_designs(
    session: Session, *, rubric_id: str, version: int
) -> list[tuple[str, int | None]]:
    """``(stratified_by, run_id)`` of each distinct stratification a ``stratified`` audit
    sample of the rubric version was drawn by, oldest first."""
    query = (
        select(col(AuditSample.stratified_by), col(AuditSample.run_id), func.min(AuditSample.id))
        .where(
            col(AuditSample.rubric_id) == rubric_id,
            col(AuditSample.rubric_version) == version,
            col(AuditSample.design) == "stratified",
        )
        .group_by(col(AuditSample.stratified_by), col(AuditSample.run_id))
        .order_by(func.min(AuditSample.id))
    )
    return [(str(by), run) for by, run, _ in session.execute(query)]


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
    design: str = "uniform",
    run_id: int | None = None,
    mix: float | None = None,
    expected_size: float | None = None,
    probabilities: Sequence[float] | None = None,
    stratified_by: str | None = None,
    strata: Sequence[str] | None = None,
) -> int:
    """Record one draw and its units (with each unit's probability of being drawn, for
    an uncertainty or stratified draw, and its stratum for a stratified one); returns
    the sample id (the caller commits)."""
    sample = AuditSample(
        rubric_id=rubric_id,
        rubric_version=version,
        seed=seed,
        size=len(units),
        population=population,
        created_by=created_by,
        created_at=now,
        design=design,
        run_id=run_id,
        mix=mix,
        expected_size=expected_size,
        stratified_by=stratified_by,
    )
    session.add(sample)
    session.flush()
    assert sample.id is not None
    chances = [None] * len(units) if probabilities is None else list(probabilities)
    where = [None] * len(units) if strata is None else list(strata)
    session.add_all(
        AuditUnit(sample_id=sample.id, case_id=c, turn=t, probability=p, stratum=k)
        for (c, t), p, k in zip(units, chances, where, strict=True)
    )
    session.flush()
    return sample.id


def latest_uncertainty_sample(
    session: Session, *, rubric_id: str, version: int, run_id: int
) -> tuple[AuditSample, dict[tuple[str, int], float]] | None:
    """The newest uncertainty draw from run ``run_id``'s scores, with its units'
    probabilities; None when there is none."""
    query = (
        select(AuditSample)
        .where(
            col(AuditSample.rubric_id) == rubric_id,
            col(AuditSample.rubric_version) == version,
            col(AuditSample.design) == "uncertainty",
            col(AuditSample.run_id) == run_id,
        )
        .order_by(col(AuditSample.id).desc())
        .limit(1)
    )
    sample = session.execute(query).scalars().first()
    if sample is None:
        return None
    units = session.execute(
        select(col(AuditUnit.case_id), col(AuditUnit.turn), col(AuditUnit.probability)).where(
            col(AuditUnit.sample_id) == sample.id
        )
    )
    session.expunge(sample)
    return sample, {(c, int(t)): float(p) for c, t, p in units}


def audit_token(session: Session, *, rubric_id: str, version: int) -> tuple[int, int]:
    """Changes whenever an audit sample of the rubric version is drawn (samples and
    their units are written once): ``(samples, highest sample id)``."""
    row = session.execute(
        select(func.count(), func.coalesce(func.max(col(AuditSample.id)), 0)).where(
            col(AuditSample.rubric_id) == rubric_id, col(AuditSample.rubric_version) == version
        )
    ).one()
    return int(row[0]), int(row[1])


def draws_with_seed(
    session: Session,
    *,
    rubric_id: str,
    version: int,
    design: str,
    seed: int,
    run_id: int | None = None,
) -> list[tuple[int, int, datetime, str | None]]:
    """``(sample id, turns drawn, when, by whom)`` of each earlier draw of ``design`` with
    ``seed`` for the rubric version (and run ``run_id`` when given), oldest first; "by
    whom" is the person's name, ``None`` for the command line."""
    query = (
        select(
            col(AuditSample.id),
            col(AuditSample.size),
            col(AuditSample.created_at),
            col(Reviewer.name),
        )
        .outerjoin(Reviewer, col(Reviewer.id) == col(AuditSample.created_by))
        .where(
            col(AuditSample.rubric_id) == rubric_id,
            col(AuditSample.rubric_version) == version,
            col(AuditSample.design) == design,
            col(AuditSample.seed) == seed,
        )
        .order_by(col(AuditSample.id))
    )
    if run_id is not None:
        query = query.where(col(AuditSample.run_id) == run_id)
    return [(int(i), int(n), at, who) for i, n, at, who in session.execute(query)]
