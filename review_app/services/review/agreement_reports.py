"""Inter-rater agreement of the labels of one rubric version, and the dashboard's data.

Units are ``(case_id, turn)`` pairs, raters are reviewers, values are label codes
(each reviewer's current label). The coefficients come from the pure module
:mod:`review_app.agreement`; this module reads the labels and adds the gold-label
counts (adjudicated, unanimous, left in disagreement).

The agreement report is a JSON document: printed by ``agreement --json`` and stored, in
:class:`DashboardData`, as a payload of the computed reports
(review_app/services/reports/report_store.py). It stays a dictionary;
:class:`AgreementReport` names its keys.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass
from operator import itemgetter
from typing import Any, NotRequired, TypedDict

import numpy as np
import numpy.typing as npt
from sqlalchemy import Engine
from sqlmodel import Session

import storage.gold
import storage.units
from review_app.agreement.summary import (
    BootstrapJson,
    ConversationAgreementJson,
    PairKappaJson,
    agreement_summary,
)
from review_app.rubrics.model import Rubric
from review_app.services.access.actors import Actor, authorize
from review_app.services.labels.adjudication import gold_counts
from review_app.services.labels.label_table import load_rating_table, rating_table
from review_app.stats.confusion import confusion_from_codes
from review_app.stats.core import UnitsEstimateJson
from review_app.stats.table import RatingTable
from storage import labels
from storage.engine import read_only
from storage.labels import LabelColumns

IntArray = npt.NDArray[np.int64]
__all__ = [
    "AgreementReport",
    "ConfusionCell",
    "DashboardData",
    "agreement_report",
    "confusion_between",
    "dashboard_data",
    "label_token",
    "load_label_columns",
    "load_rating_table",
    "rating_table",
    "report_from_table",
    "versions_side_by_side",
]


class VersionCoefficients(TypedDict):
    """One version's coefficients on the units both versions have labels on."""

    rubric: str
    percent_agreement: UnitsEstimateJson
    krippendorff_alpha: UnitsEstimateJson
    fleiss_kappa: UnitsEstimateJson
    gwet_ac1: UnitsEstimateJson


class VersionsSideBySide(TypedDict):
    """Versions N-1 and N on the units both have labels on (no bootstrap)."""

    units: int
    compared: list[VersionCoefficients]


class AgreementReport(TypedDict):
    """``agreement --json``: docs/reference.md, "Agreement JSON"."""

    rubric: str
    level: str
    units: int
    raters: int
    ratings: int
    rater_names: list[str]
    percent_agreement: UnitsEstimateJson
    krippendorff_alpha: UnitsEstimateJson
    alpha_ci95: list[float] | None
    alpha_break: UnitsEstimateJson
    alpha_verdict: UnitsEstimateJson
    fleiss_kappa: UnitsEstimateJson
    gwet_ac1: UnitsEstimateJson
    cohen_kappa: dict[str, PairKappaJson]
    """By ``"<reviewer_a>|<reviewer_b>"``."""
    per_label: dict[str, UnitsEstimateJson]
    conversation: ConversationAgreementJson
    gold: dict[str, int]
    bootstrap: BootstrapJson
    warnings: list[str]
    carried_units: NotRequired[int]
    """Units holding a label carried from the version before (set by
    :func:`agreement_report` and :func:`dashboard_data`)."""
    versions: NotRequired[VersionsSideBySide | None]
    """Versions N-1 and N side by side; ``None`` for version 1 (set with
    ``carried_units``)."""


def load_label_columns(engine: Engine, actor: Actor, *, rubric: Rubric) -> LabelColumns:
    """Every reviewer's current labels (policy owners and admins)."""
    authorize(engine, actor, "policy_owner")
    with Session(read_only(engine)) as session:
        return labels.current_label_columns(session, rubric_id=rubric.id, version=rubric.version)


def label_token(engine: Engine, actor: Actor, *, rubric: Rubric) -> tuple[int, int, int, int]:
    """Changes whenever a label or gold label of the rubric version does (a cache key)."""
    authorize(engine, actor, "policy_owner")
    with Session(read_only(engine)) as session:
        return storage.units.label_token(session, rubric_id=rubric.id, version=rubric.version)


def agreement_report(
    engine: Engine,
    actor: Actor,
    *,
    rubric: Rubric,
    n_resamples: int = 1000,
    seed: int = 0,
    previous: Rubric | None = None,
) -> AgreementReport:
    """The figures of docs/reference.md, "Agreement JSON", for a rubric version (no NaN).

    ``carried_units`` counts the units with a label carried from the version before;
    with ``previous`` (version N-1) ``versions`` compares both versions on the units
    both have (else it is null).
    """
    authorize(engine, actor, "policy_owner")
    with Session(read_only(engine)) as session:
        table = load_rating_table(session, rubric_id=rubric.id, version=rubric.version)
        adjudicated = storage.gold.current_gold(
            session, rubric_id=rubric.id, version=rubric.version
        )
        carried = storage.units.carried_units(
            session, table="labels", rubric_id=rubric.id, version=rubric.version
        )
        older = (
            load_rating_table(session, rubric_id=previous.id, version=previous.version)
            if previous is not None
            else None
        )
    report = report_from_table(
        table, rubric=rubric, adjudicated=adjudicated, n_resamples=n_resamples, seed=seed
    )
    report["carried_units"] = carried
    report["versions"] = (
        versions_side_by_side([(previous, older), (rubric, table)])
        if previous is not None and older is not None
        else None
    )
    return report


def _restricted(table: RatingTable, keep: Collection[Any]) -> RatingTable:
    """The ratings of ``table`` on the units in ``keep`` only."""
    kept = np.array([unit in keep for unit in table.units], dtype=bool)
    mask = kept[table.unit_idx] if table.n_units else np.zeros(0, dtype=bool)
    return RatingTable.from_records(
        (table.units[u], table.raters[r], table.values[v])
        for u, r, v in zip(
            table.unit_idx[mask].tolist(),
            table.rater_idx[mask].tolist(),
            table.value_idx[mask].tolist(),
            strict=True,
        )
    )


def versions_side_by_side(tables: list[tuple[Rubric, RatingTable]]) -> VersionsSideBySide:
    """Each version's coefficients on the units every one of ``tables`` has labels on
    (no bootstrap): did the rewrite make reviewers agree more on the same turns?"""
    common: set[Any] = set(tables[0][1].units)
    for _, table in tables[1:]:
        common &= set(table.units)
    compared: list[VersionCoefficients] = []
    for rubric, table in tables:
        summary = agreement_summary(
            _restricted(table, common),
            break_mapping=rubric.break_mapping(),
            verdict_mapping=rubric.verdict_mapping(),
            conversation_of=itemgetter(0),
            turn_of=itemgetter(1),
            n_resamples=0,
        )
        compared.append(
            {
                "rubric": rubric.ref,
                "percent_agreement": summary["percent_agreement"],
                "krippendorff_alpha": summary["krippendorff_alpha"],
                "fleiss_kappa": summary["fleiss_kappa"],
                "gwet_ac1": summary["gwet_ac1"],
            }
        )
    return {"units": len(common), "compared": compared}


def report_from_table(
    table: RatingTable,
    *,
    rubric: Rubric,
    adjudicated: Collection[tuple[str, int]],
    n_resamples: int = 1000,
    seed: int = 0,
) -> AgreementReport:
    """The agreement report of ``table`` (without ``carried_units`` and ``versions``)."""
    summary = agreement_summary(
        table,
        break_mapping=rubric.break_mapping(),
        verdict_mapping=rubric.verdict_mapping(),
        conversation_of=itemgetter(0),
        turn_of=itemgetter(1),
        n_resamples=n_resamples,
        seed=seed,
    )
    gold = gold_counts(table, adjudicated)
    gold["labeled_units"] = table.n_units
    # the core's figures (review_app/agreement/summary.py) between rubric and gold
    return {"rubric": rubric.ref, **summary, "gold": gold}


@dataclass(frozen=True)
class DashboardData:
    """What the agreement page draws, computed once per change of labels."""

    report: AgreementReport
    distribution: list[dict[str, Any]]
    """One row per (reviewer, code): count and share of that reviewer's labels."""
    reviewers: list[str]


def dashboard_data(
    engine: Engine,
    actor: Actor,
    *,
    rubric: Rubric,
    n_resamples: int = 500,
    previous: Rubric | None = None,
) -> DashboardData:
    authorize(engine, actor, "policy_owner")
    with Session(read_only(engine)) as session:
        table = load_rating_table(session, rubric_id=rubric.id, version=rubric.version)
        adjudicated = storage.gold.current_gold(
            session, rubric_id=rubric.id, version=rubric.version
        )
        carried = storage.units.carried_units(
            session, table="labels", rubric_id=rubric.id, version=rubric.version
        )
        older = (
            load_rating_table(session, rubric_id=previous.id, version=previous.version)
            if previous is not None
            else None
        )
    report = report_from_table(
        table, rubric=rubric, adjudicated=adjudicated, n_resamples=n_resamples
    )
    report["carried_units"] = carried
    report["versions"] = (
        versions_side_by_side([(previous, older), (rubric, table)])
        if previous is not None and older is not None
        else None
    )
    n_values = max(table.n_values, 1)
    counts = np.bincount(
        table.rater_idx * n_values + table.value_idx, minlength=table.n_raters * n_values
    ).reshape(table.n_raters, n_values)
    per_reviewer = counts.sum(axis=1)
    # Raters and values of the table are sorted, so index order is (reviewer, code) order.
    distribution = [
        {
            "reviewer": str(table.raters[r]),
            "code": str(table.values[v]),
            "count": int(counts[r, v]),
            "share": int(counts[r, v]) / int(per_reviewer[r]),
        }
        for r, v in zip(*np.nonzero(counts), strict=True)
    ]
    return DashboardData(report, distribution, [str(name) for name in table.raters])


@dataclass(frozen=True)
class ConfusionCell:
    """How many of the units two reviewers both labeled got code ``a`` from the first
    and code ``b`` from the second."""

    a: str
    b: str
    count: int


def confusion_between(
    engine: Engine, actor: Actor, *, rubric: Rubric, reviewer_a: str, reviewer_b: str
) -> list[ConfusionCell]:
    """Counts of (code by A, code by B) over the units both labeled, in (A, B) code order
    (cells with no unit left out)."""
    authorize(engine, actor, "policy_owner")
    with Session(read_only(engine)) as session:
        table = load_rating_table(session, rubric_id=rubric.id, version=rubric.version)
    if reviewer_a not in table.raters or reviewer_b not in table.raters:
        return []
    code_by: dict[str, IntArray] = {}
    for reviewer in (reviewer_a, reviewer_b):
        mine = table.rater_idx == table.raters.index(reviewer)
        codes = np.full(table.n_units, -1, dtype=np.int64)
        codes[table.unit_idx[mine]] = table.value_idx[mine]
        code_by[reviewer] = codes
    first, second = code_by[reviewer_a], code_by[reviewer_b]
    both = (first >= 0) & (second >= 0)
    n_values = table.n_values
    shared = confusion_from_codes(first[both], second[both], n_categories=n_values).ravel()
    return [  # values are sorted: (code A, code B) order
        ConfusionCell(
            a=str(table.values[cell // n_values]),
            b=str(table.values[cell % n_values]),
            count=int(shared[cell]),
        )
        for cell in np.flatnonzero(shared).tolist()
    ]
