"""``judge route``: certified selective judging over one judge run or a cascade of them.

The judge decides the units where its confidence reaches a threshold certified on gold
(:mod:`review_app.stats.selective`, Jung, Brahman & Choi 2024); the rest are escalated
to reviewers. The guarantee holds only when the gold is a random sample of the units:
audit-sample gold is used when there is any, else all gold with a loud warning.

The routing report and the coverage curve are JSON documents: printed by ``judge route
--json``, stored as payloads of the computed reports (the curve:
review_app/services/reports/report_store.py) and read back as plain dictionaries. They
stay dictionaries; :class:`RouteReport` and :class:`CoverageCurve` name their keys.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, NotRequired, TypedDict

import numpy as np
from sqlalchemy import Engine
from sqlmodel import Session

import storage.certified_verdicts
from review_app.errors import InputError
from review_app.rubrics.model import Rubric
from review_app.services.access.actors import Actor, authorize
from review_app.services.judging.runs import run_verdicts
from review_app.services.labels.adjudication import gold_labels
from review_app.services.team.audit_samples import audited_units
from review_app.services.team.queue import assign_cases
from review_app.stats.selective import route_cascade
from storage import audit
from storage.engine import read_only

ON = ("verdict", "code")
NOT_RANDOM_GOLD = (
    "WARNING: no audit sample has gold yet, so the thresholds are certified on adjudicated "
    "and unanimous gold, which is not a random sample (unanimous units are the easy ones): "
    "the guarantee does not hold. Draw one with `review-app assign --audit-sample K --seed S`."
)

Unit = tuple[str, int]


class RoutedRun(TypedDict):
    """One run of the cascade: its certified threshold and what it decides."""

    run: int
    threshold: float | None
    calibration_units: int
    kept: int
    decided: int
    disagreements: int
    upper_bound: float | None


class AppliedRoute(TypedDict):
    """What ``--apply`` did."""

    certified: int
    escalated_cases: int
    assignment: str | None


class RouteReport(TypedDict):
    """``judge route --json``: docs/reference.md, "Judge route JSON"."""

    alpha: float
    delta: float
    on: str
    gold_source: str
    runs: list[RoutedRun]
    judged_units: int
    decided_units: int
    escalated_units: int
    coverage: float | None
    warnings: list[str]
    applied: NotRequired[AppliedRoute]


class EmptyReason(TypedDict):
    """Why the first run certifies no threshold at an alpha: ``too_few`` gold units to
    certify anything even without a disagreement (``have`` of ``need``), or the judge
    ``disagrees`` with gold on ``disagreements`` of its ``kept`` most confident units."""

    kind: str
    have: int
    need: int
    kept: int
    disagreements: int


class CoveragePoint(TypedDict):
    alpha: float
    coverage: float | None
    decided_units: int
    thresholds: list[float | None]
    """Each run's certified threshold at this alpha (``None``: it decides nothing)."""
    empty: EmptyReason | None
    """Why the first run decides nothing here (``None`` when it decides some units)."""


class CoverageCurve(TypedDict):
    """Coverage against alpha for one delta (the judge page's dial)."""

    points: list[CoveragePoint]
    gold_source: str
    judged_units: int
    calibration_units: int
    """Gold units the first run is certified on (audit-sample gold when there is any)."""
    min_units: int
    warnings: list[str]


def _run_units(columns: Any, mapping: dict[str, str | None]) -> dict[Unit, tuple[float, str]]:
    """``{unit: (confidence, code)}`` of the run's turn verdicts with a break / no-break
    code, a score and no error."""
    result: dict[Unit, tuple[float, str]] = {}
    for case_id, turn, label, score, error in zip(
        columns.case_ids,
        columns.turns,
        columns.labels,
        columns.scores,
        columns.errors,
        strict=True,
    ):
        if turn is None or error is not None or score is None or label is None:
            continue
        collapsed = mapping.get(label)
        if collapsed is None:
            continue
        s = min(1.0, max(0.0, float(score)))
        result[(case_id, int(turn))] = (s if collapsed == "break" else 1.0 - s, label)
    return result


@dataclass
class _Inputs:
    all_units: list[Unit]
    per_run: list[dict[Unit, tuple[float, str]]]
    confidences: list[np.ndarray]
    disagreements: list[np.ndarray]
    has_gold: np.ndarray
    gold_source: str
    warnings: list[str]


def _check_runs(run_ids: list[int], on: str) -> None:
    if on not in ON:
        raise InputError(f"must be verdict or code, got {on!r}", field="--on")
    if not run_ids:
        raise InputError("name at least one judge run", field="--runs")
    if len(set(run_ids)) != len(run_ids):
        raise InputError("a run appears twice", field="--runs")


def _routing_inputs(
    engine: Engine, actor: Actor, *, rubric: Rubric, run_ids: list[int], on: str
) -> _Inputs:
    """Each run's confidence and disagreement with gold on every unit any run judged."""
    loaded = dict((run.id, columns) for run, columns in run_verdicts(engine, rubric, run_ids))
    mapping = rubric.break_mapping()
    per_run = [_run_units(loaded[r], mapping) for r in run_ids]
    warnings: list[str] = []
    for run_id, units in zip(run_ids, per_run, strict=True):
        if not units:
            warnings.append(
                f"run {run_id} has no scored break / no-break turn verdicts: it decides nothing"
            )
    all_units = sorted(set().union(*per_run))
    gold_all = gold_labels(engine, actor, rubric=rubric).labels
    audited = audited_units(engine, actor, rubric=rubric)
    audit_gold = {u: gold_all[u] for u in audited if u in gold_all}
    if audit_gold:
        gold_source = "audit sample"
        gold = audit_gold
        waiting = len(audited) - len(audit_gold)
        if waiting:
            warnings.append(
                f"WARNING: {waiting} of {len(audited)} audited turns have no gold yet: "
                "adjudicate them, or the certification leans to the easy units"
            )
    else:
        gold_source = "adjudicated and unanimous gold (not a random sample)"
        gold = gold_all
        warnings.append(NOT_RANDOM_GOLD)

    def gold_value(unit: Unit) -> str | None:
        entry = gold.get(unit)
        if entry is None:
            return None
        return entry.code if on == "code" else mapping.get(entry.code)

    truth = [gold_value(u) for u in all_units]
    has_gold = np.array([t is not None for t in truth], dtype=bool)
    confidences, disagreements = [], []
    for units in per_run:
        conf = np.full(len(all_units), np.nan)
        wrong = np.zeros(len(all_units), dtype=bool)
        for i, unit in enumerate(all_units):
            found = units.get(unit)
            if found is None:
                continue
            conf[i] = found[0]
            said = found[1] if on == "code" else mapping.get(found[1])
            wrong[i] = truth[i] is not None and said != truth[i]
        confidences.append(conf)
        disagreements.append(wrong)
    return _Inputs(all_units, per_run, confidences, disagreements, has_gold, gold_source, warnings)


def units_needed(*, alpha: float, delta: float) -> int:
    """The fewest gold units that can certify a threshold at all: zero disagreements among
    n units bound the rate by ``1 - delta ** (1 / n)``, at most alpha from
    ``n = ceil(log(delta) / log(1 - alpha))``."""
    return math.ceil(math.log(delta) / math.log(1.0 - alpha))


def _min_units_warning(*, alpha: float, delta: float, min_units: int) -> str | None:
    # Zero disagreements among n units bound the rate by 1 - delta ** (1 / n): with
    # fewer units than this, the first tested threshold fails and the sequence stops.
    needed = units_needed(alpha=alpha, delta=delta)
    if min_units >= needed:
        return None
    return (
        f"--min-units {min_units} is below {needed}: even with no disagreement, the "
        f"first threshold tested (about {min_units} units) has an upper bound above "
        f"{alpha}, which stops the sequence at once; raise --min-units to {needed}"
    )


@dataclass(frozen=True)
class Routing:
    """What ``judge route --apply`` stores and queues, beside the routing report."""

    decisions: list[dict[str, Any]]
    """The decided units' certified verdicts, rows of ``certified_verdicts``: ``case_id``,
    ``turn``, ``run_id``, ``label``, ``confidence``, ``threshold``, ``alpha``, ``delta``
    (:func:`storage.certified_verdicts.replace_certified`)."""
    escalated: list[Unit]
    """The units no run decides, for reviewers."""


def route_units(
    engine: Engine,
    actor: Actor,
    *,
    rubric: Rubric,
    run_ids: list[int],
    alpha: float,
    delta: float,
    min_units: int = 30,
    on: str = "verdict",
) -> tuple[RouteReport, Routing]:
    """The routing report (docs/reference.md, "Judge route JSON") and what --apply needs."""
    actor = authorize(engine, actor, "policy_owner")
    _check_runs(run_ids, on)
    for value, name in ((alpha, "--alpha"), (delta, "--delta")):
        if not 0.0 < value < 1.0:
            raise InputError(f"must be strictly between 0 and 1, got {value}", field=name)
    if isinstance(min_units, bool) or min_units < 1:
        raise InputError(f"must be at least 1, got {min_units}", field="--min-units")
    inputs = _routing_inputs(engine, actor, rubric=rubric, run_ids=run_ids, on=on)
    warnings = inputs.warnings
    too_few = _min_units_warning(alpha=alpha, delta=delta, min_units=min_units)
    if too_few:
        warnings.append(too_few)
    all_units, per_run, gold_source = inputs.all_units, inputs.per_run, inputs.gold_source
    confidences, disagreements, has_gold = (
        inputs.confidences, inputs.disagreements, inputs.has_gold
    )  # fmt: skip
    steps = route_cascade(
        confidences, disagreements, has_gold, alpha=alpha, delta=delta, min_units=min_units
    )
    runs: list[RoutedRun] = []
    decided_total = np.zeros(len(all_units), dtype=bool)
    for run_id, step in zip(run_ids, steps, strict=True):
        cert = step.certification
        runs.append(
            {
                "run": run_id,
                "threshold": cert.threshold,
                "calibration_units": cert.calibration_units,
                "kept": cert.kept,
                "decided": int(step.decides.sum()),
                "disagreements": cert.disagreements,
                "upper_bound": cert.upper_bound,
            }
        )
        if cert.threshold is None:
            warnings.append(
                f"run {run_id}: no threshold certified on {cert.calibration_units} gold units "
                f"(disagreement at most {alpha} with probability {1 - delta}): it decides nothing"
            )
        decided_total |= step.decides
    judged = len(all_units)
    decided = int(decided_total.sum())
    report: RouteReport = {
        "alpha": alpha,
        "delta": delta,
        "on": on,
        "gold_source": gold_source,
        "runs": runs,
        "judged_units": judged,
        "decided_units": decided,
        "escalated_units": judged - decided,
        "coverage": decided / judged if judged else None,
        "warnings": warnings,
    }
    decisions: list[dict[str, Any]] = []
    for run_id, step, units in zip(run_ids, steps, per_run, strict=True):
        for i in np.flatnonzero(step.decides).tolist():
            confidence, label = units[all_units[i]]
            decisions.append(
                {
                    "case_id": all_units[i][0],
                    "turn": all_units[i][1],
                    "run_id": run_id,
                    "label": label,
                    "confidence": confidence,
                    "threshold": step.certification.threshold,
                    "alpha": alpha,
                    "delta": delta,
                }
            )
    escalated = [all_units[i] for i in np.flatnonzero(~decided_total).tolist()]
    return report, Routing(decisions=decisions, escalated=escalated)


def route_judges(
    engine: Engine,
    actor: Actor,
    *,
    rubric: Rubric,
    run_ids: list[int],
    alpha: float,
    delta: float,
    min_units: int = 30,
    on: str = "verdict",
    apply: bool = False,
    reviewers: list[str] | None = None,
    overlap: int = 2,
) -> RouteReport:
    """Route the units; with ``apply``, mark the decided verdicts certified and queue the
    escalated units' cases for ``reviewers`` (``overlap`` per case). Policy owners."""
    actor = authorize(engine, actor, "policy_owner")
    if apply and not reviewers:
        raise InputError("--apply needs the reviewers to queue for", field="--reviewers")
    report, routed = route_units(
        engine,
        actor,
        rubric=rubric,
        run_ids=run_ids,
        alpha=alpha,
        delta=delta,
        min_units=min_units,
        on=on,
    )
    if not apply:
        return report
    assert reviewers is not None
    case_ids = sorted({case_id for case_id, _ in routed.escalated})
    with Session(engine) as session:
        storage.certified_verdicts.replace_certified(
            session,
            rubric_id=rubric.id,
            version=rubric.version,
            rows=routed.decisions,
            created_by=actor.reviewer_id,
            now=datetime.now(UTC),
        )
        audit.add_entry(
            session,
            actor=actor.name,
            action="judge_route",
            object_type="rubric",
            object_key=rubric.ref,
            summary={
                "runs": run_ids,
                "alpha": alpha,
                "delta": delta,
                "on": on,
                "certified": len(routed.decisions),
                "escalated": len(routed.escalated),
            },
        )
        session.commit()
    assignment = (
        assign_cases(
            engine, actor, rubric=rubric, reviewers=reviewers, overlap=overlap, case_ids=case_ids
        )
        if case_ids
        else None
    )
    report["applied"] = {
        "certified": len(routed.decisions),
        "escalated_cases": len(case_ids),
        "assignment": None if assignment is None else assignment.line(),
    }
    return report


@dataclass(frozen=True)
class CertifiedMark:
    """A judge verdict ``judge route --apply`` certified: the judge decides this unit."""

    label: str
    run: int
    """The judge run whose verdict it is."""
    confidence: float
    threshold: float
    """The run's certified threshold the confidence reached."""
    alpha: float
    delta: float


def certified_verdicts(
    engine: Engine, actor: Actor, *, rubric: Rubric, case_ids: list[str] | None = None
) -> dict[Unit, CertifiedMark]:
    """The certified judge verdicts of the rubric version by unit (policy owners)."""
    authorize(engine, actor, "policy_owner")
    with Session(read_only(engine)) as session:
        rows = storage.certified_verdicts.certified_verdicts(
            session, rubric_id=rubric.id, version=rubric.version, case_ids=case_ids
        )
    return {
        unit: CertifiedMark(
            label=row.label,
            run=row.run_id,
            confidence=row.confidence,
            threshold=row.threshold,
            alpha=row.alpha,
            delta=row.delta,
        )
        for unit, row in rows.items()
    }


def coverage_curve(
    engine: Engine,
    actor: Actor,
    *,
    rubric: Rubric,
    run_ids: list[int],
    delta: float,
    alphas: list[float],
    min_units: int = 30,
    on: str = "verdict",
) -> CoverageCurve:
    """Coverage against alpha, the policy owner's dial, from one load of the verdicts and
    gold (policy owners)."""
    actor = authorize(engine, actor, "policy_owner")
    _check_runs(run_ids, on)
    if not 0.0 < delta < 1.0:
        raise InputError(f"must be strictly between 0 and 1, got {delta}", field="--delta")
    inputs = _routing_inputs(engine, actor, rubric=rubric, run_ids=run_ids, on=on)
    judged = len(inputs.all_units)
    calibration = inputs.has_gold & ~np.isnan(inputs.confidences[0])
    confident = inputs.confidences[0][calibration]
    wrong = inputs.disagreements[0][calibration][np.argsort(-confident, kind="stable")]
    points: list[CoveragePoint] = []
    for alpha in alphas:
        if not 0.0 < alpha < 1.0:
            raise InputError(f"must be strictly between 0 and 1, got {alpha}", field="--alpha")
        steps = route_cascade(
            inputs.confidences, inputs.disagreements, inputs.has_gold,
            alpha=alpha, delta=delta, min_units=min_units,
        )  # fmt: skip
        decided = int(sum(int(step.decides.sum()) for step in steps))
        empty: EmptyReason | None = None
        if steps[0].certification.threshold is None:
            need = max(min_units, units_needed(alpha=alpha, delta=delta))
            kept = min(len(wrong), need)
            empty = {
                "kind": "too_few" if len(wrong) < need else "disagrees",
                "have": len(wrong),
                "need": need,
                "kept": kept,
                "disagreements": int(wrong[:kept].sum()),
            }
        points.append(
            {
                "alpha": alpha,
                "coverage": decided / judged if judged else None,
                "decided_units": decided,
                "thresholds": [step.certification.threshold for step in steps],
                "empty": empty,
            }
        )
    return {
        "points": points,
        "gold_source": inputs.gold_source,
        "judged_units": judged,
        "calibration_units": len(wrong),
        "min_units": min_units,
        "warnings": inputs.warnings,
    }
