"""Inter-rater agreement of the labels of one rubric version, and the dashboard's data.

Units are ``(case_id, turn)`` pairs, raters are reviewers, values are label codes
(each reviewer's current label). The coefficients come from the pure module
:mod:`review_app.agreement`; this module reads the labels and adds the gold-label
counts (adjudicated, unanimous, left in disagreement).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import Any

import numpy as np
from sqlalchemy import Engine
from sqlmodel import Session

from review_app.agreement import RatingTable, agreement_summary
from review_app.rubrics import Rubric
from review_app.services.adjudication import gold_set_from
from storage import adjudication as queries
from storage.adjudication import LabelColumns
from storage.engine import read_only
from storage.models import GoldLabel


def load_label_columns(engine: Engine, *, rubric: Rubric) -> LabelColumns:
    with Session(read_only(engine)) as session:
        return queries.current_label_columns(session, rubric_id=rubric.id, version=rubric.version)


def label_token(engine: Engine, *, rubric: Rubric) -> tuple[int, int, int, int]:
    with Session(read_only(engine)) as session:
        return queries.label_token(session, rubric_id=rubric.id, version=rubric.version)


def rating_table(columns: LabelColumns) -> RatingTable:
    units = np.empty(len(columns), dtype=object)
    units[:] = list(zip(columns.case_ids, columns.turns, strict=True))
    return RatingTable.from_arrays(units=units, raters=columns.reviewers, values=columns.codes)


def agreement_report(
    engine: Engine, *, rubric: Rubric, n_resamples: int = 1000, seed: int = 0
) -> dict[str, Any]:
    """Every agreement figure of SPEC §6 for a rubric version, JSON-ready (no NaN)."""
    with Session(read_only(engine)) as session:
        columns = queries.current_label_columns(
            session, rubric_id=rubric.id, version=rubric.version
        )
        adjudicated = queries.current_gold(session, rubric_id=rubric.id, version=rubric.version)
    return report_from_columns(
        columns, rubric=rubric, adjudicated=adjudicated, n_resamples=n_resamples, seed=seed
    )


def report_from_columns(
    columns: LabelColumns,
    *,
    rubric: Rubric,
    adjudicated: dict[tuple[str, int], GoldLabel],
    n_resamples: int = 1000,
    seed: int = 0,
) -> dict[str, Any]:
    table = rating_table(columns)
    summary = agreement_summary(
        table,
        break_mapping=rubric.break_mapping(),
        verdict_mapping=rubric.verdict_mapping(),
        conversation_of=lambda unit: unit[0],
        turn_of=lambda unit: unit[1],
        n_resamples=n_resamples,
        seed=seed,
    )
    gold = gold_set_from(columns, adjudicated).counts()
    gold["labeled_units"] = table.n_units
    return {"rubric": rubric.ref, **summary, "gold": gold}


@dataclass(frozen=True)
class DashboardData:
    """What the agreement page draws, computed once per change of labels."""

    report: dict[str, Any]
    distribution: list[dict[str, Any]]
    """One row per (reviewer, code): count and share of that reviewer's labels."""
    reviewers: list[str]


def dashboard_data(engine: Engine, *, rubric: Rubric, n_resamples: int = 500) -> DashboardData:
    with Session(read_only(engine)) as session:
        columns = queries.current_label_columns(
            session, rubric_id=rubric.id, version=rubric.version
        )
        adjudicated = queries.current_gold(session, rubric_id=rubric.id, version=rubric.version)
    report = report_from_columns(
        columns, rubric=rubric, adjudicated=adjudicated, n_resamples=n_resamples
    )
    per_reviewer = Counter(columns.reviewers)
    pairs = Counter(zip(columns.reviewers, columns.codes, strict=True))
    distribution = [
        {
            "reviewer": reviewer,
            "code": code,
            "count": count,
            "share": count / per_reviewer[reviewer],
        }
        for (reviewer, code), count in sorted(pairs.items())
    ]
    return DashboardData(report, distribution, sorted(per_reviewer))


def confusion_between(
    engine: Engine, *, rubric: Rubric, reviewer_a: str, reviewer_b: str
) -> list[dict[str, Any]]:
    """Counts of (code by A, code by B) over the units both labeled."""
    columns = load_label_columns(engine, rubric=rubric)
    by_reviewer: dict[str, dict[tuple[str, int], str]] = {reviewer_a: {}, reviewer_b: {}}
    for case_id, turn, reviewer, code in zip(
        columns.case_ids, columns.turns, columns.reviewers, columns.codes, strict=True
    ):
        if reviewer in by_reviewer:
            by_reviewer[reviewer][(case_id, turn)] = code
    first, second = by_reviewer[reviewer_a], by_reviewer[reviewer_b]
    shared = Counter((first[unit], second[unit]) for unit in first.keys() & second.keys())
    return [
        {reviewer_a: code_a, reviewer_b: code_b, "a": code_a, "b": code_b, "count": count}
        for (code_a, code_b), count in sorted(shared.items())
    ]
