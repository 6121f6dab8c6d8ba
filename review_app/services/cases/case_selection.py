"""The cases a command names: by lane and/or by id, every named id stored."""

from __future__ import annotations

from collections.abc import Sequence

from sqlmodel import Session

from review_app.errors import InputError
from review_app.evaluator import EVALUATOR_VERSION
from storage.cases import CaseSummaryRow, list_case_summaries


def selected_cases(
    session: Session,
    *,
    case_ids: Sequence[str] | None,
    lane: str | None,
    limit: int | None = None,
) -> list[CaseSummaryRow]:
    rows = list_case_summaries(
        session,
        evaluator_version=EVALUATOR_VERSION,
        lanes=[lane] if lane else None,
        case_ids=list(case_ids) if case_ids else None,
        limit=limit,
    )
    if case_ids:
        missing = sorted(set(case_ids) - {row.case_id for row in rows})
        if missing:
            raise InputError(f"no case {missing[0]!r} in the database", field="--case")
    return rows
