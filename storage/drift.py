"""Queries for drift: every assistant turn and the roles the evaluator found in force."""

from __future__ import annotations

from sqlalchemy import select
from sqlmodel import Session, col

from storage.models import Evaluation


def role_spans(session: Session, *, evaluator_version: str) -> dict[str, str]:
    """``{case_id: role_spans_json}`` of the evaluator version's results."""
    query = select(col(Evaluation.case_id), col(Evaluation.role_spans_json)).where(
        col(Evaluation.evaluator_version) == evaluator_version
    )
    return {case_id: spans for case_id, spans in session.execute(query)}
