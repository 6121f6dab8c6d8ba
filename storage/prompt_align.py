"""Queries of ``judge align``: confirmation sets and the tests that spent their error
budget, the candidates an align job kept, and the optimiser's answers it replays
(docs/reference.md, "Suggesting a prompt")."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import select
from sqlmodel import Session, col

from storage.models import AlignCandidate, AlignProposal, ConfirmationSet, ConfirmationTest


def latest_confirmation_set(
    session: Session, *, rubric_id: str, version: int
) -> ConfirmationSet | None:
    query = (
        select(ConfirmationSet)
        .where(
            col(ConfirmationSet.rubric_id) == rubric_id,
            col(ConfirmationSet.rubric_version) == version,
        )
        .order_by(col(ConfirmationSet.id).desc())
    )
    return session.scalars(query).first()


def confirmation_sets(session: Session, *, rubric_id: str, version: int) -> list[ConfirmationSet]:
    query = (
        select(ConfirmationSet)
        .where(
            col(ConfirmationSet.rubric_id) == rubric_id,
            col(ConfirmationSet.rubric_version) == version,
        )
        .order_by(col(ConfirmationSet.id))
    )
    return list(session.scalars(query))


def get_confirmation_set(session: Session, *, set_id: int) -> ConfirmationSet | None:
    return session.get(ConfirmationSet, set_id)


def add_confirmation_set(session: Session, **fields: Any) -> ConfirmationSet:
    row = ConfirmationSet(**fields)
    session.add(row)
    session.flush()
    return row


def confirmation_tests(session: Session, *, set_id: int) -> list[ConfirmationTest]:
    query = (
        select(ConfirmationTest)
        .where(col(ConfirmationTest.set_id) == set_id)
        .order_by(col(ConfirmationTest.number))
    )
    return list(session.scalars(query))


def test_of_job(session: Session, *, set_id: int, job_id: int) -> ConfirmationTest | None:
    query = select(ConfirmationTest).where(
        col(ConfirmationTest.set_id) == set_id, col(ConfirmationTest.job_id) == job_id
    )
    return session.scalars(query).first()


def add_confirmation_test(session: Session, **fields: Any) -> ConfirmationTest:
    """Insert a test; the unique index on (set, number) refuses a slot already spent."""
    row = ConfirmationTest(**fields)
    session.add(row)
    session.flush()
    return row


def keep_candidate(
    session: Session, *, job_id: int, prompt_id: int, score: float | None, units: int, now: datetime
) -> None:
    """Record (or update) a candidate of ``job_id`` with its optimisation-set score."""
    query = select(AlignCandidate).where(
        col(AlignCandidate.job_id) == job_id, col(AlignCandidate.prompt_id) == prompt_id
    )
    row = session.scalars(query).first()
    if row is None:
        row = AlignCandidate(job_id=job_id, prompt_id=prompt_id, created_at=now)
    row.optimisation_score = score
    row.scored_units = units
    session.add(row)
    session.flush()


def candidates(session: Session, *, job_id: int) -> list[AlignCandidate]:
    query = (
        select(AlignCandidate)
        .where(col(AlignCandidate.job_id) == job_id)
        .order_by(col(AlignCandidate.id))
    )
    return list(session.scalars(query))


def candidate_prompt_ids(session: Session, *, job_ids: Sequence[int]) -> set[int]:
    if not job_ids:
        return set()
    query = select(col(AlignCandidate.prompt_id)).where(col(AlignCandidate.job_id).in_(job_ids))
    return set(session.scalars(query))


def stored_proposal(session: Session, *, job_id: int, request_sha256: str) -> str | None:
    query = select(col(AlignProposal.answer)).where(
        col(AlignProposal.job_id) == job_id, col(AlignProposal.request_sha256) == request_sha256
    )
    return session.scalars(query).first()


def add_proposal(
    session: Session, *, job_id: int, request_sha256: str, answer: str, now: datetime
) -> None:
    session.add(
        AlignProposal(job_id=job_id, request_sha256=request_sha256, answer=answer, created_at=now)
    )
    session.flush()
