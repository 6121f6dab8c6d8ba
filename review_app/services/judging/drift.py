"""``review-app drift``: where in the conversation the role breaks.

Break rates by answer position (the tail pooled so every bin has enough units) and by
the role in force, from gold and from each judge run, with conversation-bootstrap
intervals, the first-break distribution and the slope of the break odds per later
answer (:mod:`review_app.stats.drift`); reviewer and judge agreement on the same bins.

The report is a JSON document: printed by ``drift --json``, stored as a payload of the
computed reports (review_app/services/reports/report_store.py) and read back as a plain
dictionary. It stays one; :class:`DriftReport` names its keys.
"""

from __future__ import annotations

import bisect
import json
from typing import Any, TypedDict

import numpy as np
from sqlalchemy import Engine
from sqlmodel import Session

import storage.cases
from review_app.agreement.coefficients import krippendorff_alpha
from review_app.errors import InputError
from review_app.evaluator import EVALUATOR_VERSION
from review_app.rubrics.model import Rubric
from review_app.services.access.actors import Actor, authorize
from review_app.services.judging.runs import run_name, run_verdicts
from review_app.services.labels.adjudication import gold_labels
from review_app.services.labels.label_table import load_rating_table
from review_app.stats.core import kappa_from_confusion
from review_app.stats.drift import (
    GroupRate,
    PositionBin,
    Slope,
    bin_of_positions,
    first_break_positions,
    grouped_rates,
    position_bins,
    position_slope,
)
from storage.engine import read_only

NO_ROLE = "(no role)"
Unit = tuple[str, int]


class PositionRate(TypedDict):
    """A source's break rate on a position bin (``high`` None: ``low`` and later)."""

    bin: str
    low: int
    high: int | None
    units: int
    breaks: int
    rate: float | None
    ci95: list[float] | None
    conversations: int
    reason: str | None
    """Why the rate has no interval (``None`` when it has one)."""


class RoleRate(TypedDict):
    role: str
    units: int
    breaks: int
    rate: float | None
    ci95: list[float] | None


class FirstBreakBin(TypedDict):
    bin: str
    conversations: int
    """Conversations whose first break falls in the bin."""


class SourceFigures(TypedDict):
    units: int
    breaks: int
    conversations: int
    by_position: list[PositionRate]
    by_role: list[RoleRate]
    first_break: list[FirstBreakBin]
    no_break_conversations: int
    slope: Slope


class DriftSource(TypedDict):
    """Gold (``source`` ``gold``, no ``run``) or a judge run (``source`` ``run``)."""

    source: str
    run: int | None
    name: str
    status: str | None
    units: int
    breaks: int
    conversations: int
    by_position: list[PositionRate]
    by_role: list[RoleRate]
    first_break: list[FirstBreakBin]
    no_break_conversations: int
    slope: Slope


class AgreementFigures(TypedDict):
    units: int
    reviewer_alpha: float | None
    judge_kappa: dict[str, float | None]
    """By run id (as text)."""


class PositionAgreement(TypedDict):
    bin: str
    units: int
    reviewer_alpha: float | None
    judge_kappa: dict[str, float | None]


class RoleAgreement(TypedDict):
    role: str
    units: int
    reviewer_alpha: float | None
    judge_kappa: dict[str, float | None]


class DriftAgreement(TypedDict):
    by_position: list[PositionAgreement]
    by_role: list[RoleAgreement]


class DriftReport(TypedDict):
    """``drift --json``: docs/reference.md, "Drift JSON"."""

    rubric: str
    min_units: int
    resamples: int
    seed: int
    sources: list[DriftSource]
    """Gold, then each judge run."""
    agreement: DriftAgreement
    warnings: list[str]


class _Turns:
    """Every assistant turn with its conversation code, answer position and role."""

    def __init__(self, units: list[Unit], spans: dict[str, str]) -> None:
        self.units = units
        self.index = {u: i for i, u in enumerate(units)}
        case_codes: dict[str, int] = {}
        self.cluster = np.fromiter(
            (case_codes.setdefault(c, len(case_codes)) for c, _ in units),
            dtype=np.int64,
            count=len(units),
        )
        starts = np.concatenate(([0], np.flatnonzero(np.diff(self.cluster)) + 1))
        first_of = np.repeat(starts, np.diff(np.concatenate((starts, [len(units)]))))
        self.position = (np.arange(len(units)) - first_of + 1) if units else np.zeros(0, int)
        roles: list[str] = []
        parsed: dict[str, tuple[list[int], list[str | None]]] = {}
        for case_id, turn in units:
            if case_id not in parsed:
                pairs = json.loads(spans.get(case_id, "[]"))
                parsed[case_id] = ([int(t) for t, _ in pairs], [r for _, r in pairs])
            firsts, names = parsed[case_id]
            k = bisect.bisect_right(firsts, turn) - 1
            roles.append(NO_ROLE if k < 0 or names[k] is None else str(names[k]))
        self.role_names = sorted(set(roles))
        codes = {r: i for i, r in enumerate(self.role_names)}
        self.role = np.fromiter((codes[r] for r in roles), dtype=np.int64, count=len(roles))


def _source_block(
    turns: _Turns,
    rows: np.ndarray,
    breaks: np.ndarray,
    *,
    min_units: int,
    n_resamples: int,
    seed: int,
    bins: list[PositionBin] | None = None,
) -> tuple[SourceFigures, list[PositionBin]]:
    """One source's figures, on ``bins`` (gold's, so that every source is read on the
    same answers) or, without, on its own."""
    positions = turns.position[rows]
    clusters_raw = turns.cluster[rows]
    _, clusters = np.unique(clusters_raw, return_inverse=True)
    if not rows.size:
        bins = []
    elif not bins:
        bins = position_bins(positions, min_units=min_units)
    by_position: list[PositionRate] = []
    by_role: list[RoleRate] = []
    first_break: list[FirstBreakBin] = []
    no_break = 0
    if rows.size:
        groups = bin_of_positions(positions, bins)
        rates = grouped_rates(
            groups, breaks, clusters, n_groups=len(bins), n_resamples=n_resamples, seed=seed
        )
        conversations = np.bincount(
            np.unique(np.column_stack([groups, clusters]), axis=0)[:, 0], minlength=len(bins)
        )
        by_position = [
            {
                "bin": b.label,
                "low": b.low,
                "high": b.high,
                **rate,
                "conversations": int(n),
                "reason": _no_interval(rate, int(n), n_resamples),
            }
            for b, rate, n in zip(bins, rates, conversations, strict=True)
        ]
        roles = turns.role[rows]
        role_rates = grouped_rates(
            roles, breaks, clusters, n_groups=len(turns.role_names), n_resamples=n_resamples,
            seed=seed,
        )  # fmt: skip
        by_role = [
            {"role": name, **rate}
            for name, rate in zip(turns.role_names, role_rates, strict=True)
            if rate["units"]
        ]
        first = first_break_positions(clusters, positions, breaks)
        no_break = int((first == 0).sum())
        broke = first[first > 0]
        counts = np.bincount(bin_of_positions(broke, bins), minlength=len(bins))
        first_break = [
            {"bin": b.label, "conversations": int(n)} for b, n in zip(bins, counts, strict=True)
        ]
    block: SourceFigures = {
        "units": int(rows.size),
        "breaks": int(breaks.sum()),
        "conversations": int(np.unique(clusters_raw).size),
        "by_position": by_position,
        "by_role": by_role,
        "first_break": first_break,
        "no_break_conversations": no_break,
        "slope": position_slope(positions, breaks, clusters),
    }
    return block, bins


def _no_interval(rate: GroupRate, conversations: int, n_resamples: int) -> str | None:
    """Why a bin's rate has no interval (``None`` when it has one)."""
    if rate["ci95"] is not None:
        return None
    if not n_resamples:
        return "no interval: none was computed (no resamples)"
    return (
        f"no interval: its {rate['units']} turns come from {conversations} conversation"
        f"{'' if conversations == 1 else 's'}, too few to resample"
    )


def drift_report(
    engine: Engine,
    actor: Actor,
    *,
    rubric: Rubric,
    run_id: int | None = None,
    min_units: int = 30,
    n_resamples: int = 1000,
    seed: int = 0,
) -> DriftReport:
    """The drift report of a rubric version (docs/reference.md, "Drift JSON"); policy
    owners. Sources: gold, then every complete judge run of the version (a stopped,
    failed or running run only when ``run_id`` names it). ``n_resamples=0``: rates
    without intervals (a page's point figures)."""
    actor = authorize(engine, actor, "policy_owner")
    if isinstance(min_units, bool) or min_units < 1:
        raise InputError(f"must be at least 1, got {min_units}", field="--min-units")
    if isinstance(n_resamples, bool) or n_resamples < 0:
        raise InputError(f"must be 0 or more, got {n_resamples}", field="--resamples")
    with Session(read_only(engine)) as session:
        units = storage.cases.assistant_units(session)
        spans = storage.cases.role_spans(session, evaluator_version=EVALUATOR_VERSION)
        table = load_rating_table(session, rubric_id=rubric.id, version=rubric.version)
    units.sort()
    turns = _Turns(units, spans)
    mapping = rubric.break_mapping()
    warnings: list[str] = []
    gold = {
        u: mapping.get(g.code) for u, g in gold_labels(engine, actor, rubric=rubric).labels.items()
    }
    sources: list[DriftSource] = []
    gold_rows = np.array(
        sorted(turns.index[u] for u, v in gold.items() if v is not None and u in turns.index),
        dtype=np.int64,
    )
    gold_y = np.array([gold[turns.units[i]] == "break" for i in gold_rows.tolist()], dtype=bool)
    block, gold_bins = _source_block(
        turns, gold_rows, gold_y, min_units=min_units, n_resamples=n_resamples, seed=seed
    )
    sources.append({"source": "gold", "run": None, "name": "gold", "status": None, **block})
    if not gold_rows.size:
        warnings.append("no unit has break / no-break gold yet: only the judge runs are shown")
    judged: dict[int, dict[int, bool]] = {}
    shared_bins: list[PositionBin] | None = gold_bins or None
    for run, columns in run_verdicts(engine, rubric, None if run_id is None else [run_id]):
        assert run.id is not None
        if run_id is None and run.status != "complete":
            continue
        said: dict[int, bool] = {}
        for case_id, turn, label, error in zip(
            columns.case_ids, columns.turns, columns.labels, columns.errors, strict=True
        ):
            if turn is None or error is not None or label is None:
                continue
            collapsed = mapping.get(label)
            i = turns.index.get((case_id, int(turn)))
            if collapsed is not None and i is not None:
                said[i] = collapsed == "break"
        judged[run.id] = said
        rows = np.array(sorted(said), dtype=np.int64)
        y = np.array([said[i] for i in rows.tolist()], dtype=bool)
        block, run_bins = _source_block(
            turns, rows, y, min_units=min_units, n_resamples=n_resamples, seed=seed,
            bins=shared_bins,
        )  # fmt: skip
        shared_bins = shared_bins or run_bins or None
        sources.append(
            {
                "source": "run",
                "run": run.id,
                "name": run_name(run),
                "status": run.status,
                **block,
            }
        )
    return {
        "rubric": rubric.ref,
        "min_units": min_units,
        "resamples": n_resamples,
        "seed": seed,
        "sources": sources,
        "agreement": _agreement(turns, table, mapping, gold_rows, gold_y, gold_bins, judged),
        "warnings": warnings,
    }


def _agreement(
    turns: _Turns,
    table: Any,
    mapping: dict[str, str | None],
    gold_rows: np.ndarray,
    gold_y: np.ndarray,
    bins: list[PositionBin],
    judged: dict[int, dict[int, bool]],
) -> DriftAgreement:
    """Reviewers' alpha (break / no break) and each run's kappa against gold, on gold's
    position bins and by role."""
    collapsed = table.collapse(mapping)
    truth = dict(zip(gold_rows.tolist(), gold_y.tolist(), strict=True))
    rated = [u for u in collapsed.units if u in turns.index]
    rated_rows = np.array([turns.index[u] for u in rated], dtype=np.int64)

    def row(members: np.ndarray) -> AgreementFigures:
        inside = set(members.tolist())
        alpha = krippendorff_alpha(
            collapsed.restrict_units([u for u, i in zip(rated, rated_rows.tolist(), strict=True)
                                      if i in inside])
        )  # fmt: skip
        kappas: dict[str, float | None] = {}
        for run_id, said in judged.items():
            confusion = np.zeros((2, 2))
            for i in inside:
                if i in truth and i in said:
                    confusion[int(truth[i]), int(said[i])] += 1
            value = float(kappa_from_confusion(confusion)) if confusion.sum() else float("nan")
            kappas[str(run_id)] = value if np.isfinite(value) else None
        return {
            "units": len(inside),
            "reviewer_alpha": alpha.value,
            "judge_kappa": kappas,
        }

    all_rows = np.arange(len(turns.units))
    by_position: list[PositionAgreement] = []
    if bins:
        groups = bin_of_positions(turns.position, bins)
        for k, b in enumerate(bins):
            by_position.append({"bin": b.label, **row(all_rows[groups == k])})
    by_role: list[RoleAgreement] = [
        {"role": name, **row(all_rows[turns.role == k])} for k, name in enumerate(turns.role_names)
    ]
    return {"by_position": by_position, "by_role": by_role}
