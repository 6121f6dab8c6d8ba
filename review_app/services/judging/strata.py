"""Where the judge fails: the break rate by stratum (stratified PPI++) and the judge's
agreement with gold in each stratum.

``review-app judge estimate --by position|lane|code|finding`` and the judge page. A
stratum is what the app already knows of every judged turn:

- ``position``: the answer's ordinal among the conversation's assistant turns, in the
  bins 1, 2, 3-4, 5-8, 9-16, 17+ (the drift's edges, fixed, so that audits drawn by
  position and estimates made later agree on the strata);
- ``lane``: the conversation's deterministic lane (violation, missing-context, invalid,
  no-contract, pass);
- ``code``: the code the judge gave the turn (gold is only on a few turns; the judge's
  code is on all of them), so each stratum's rate is how often the judge's code is a
  real break;
- ``finding``: the deterministic finding on the turn (a fixture error first, then a
  harness finding, then a violation), ``none`` without one.

Gold is the audit samples' (uniform and by stratum), weighted by the design of the
draws (:func:`review_app.stats.stratified.design_weights`); without any, all gold, with
a warning that it is no random sample. The estimate and its variance:
:mod:`review_app.stats.stratified`; the judge's agreement with gold per stratum: Cohen's
kappa on the codes with a conversation-bootstrap interval
(:func:`review_app.calibration.reference.compare_to_reference`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, TypedDict

import numpy as np
from sqlalchemy import Engine
from sqlmodel import Session

import storage.audit_samples
import storage.cases
from review_app.agreement.coefficients import SMALL_SAMPLE_UNITS
from review_app.calibration.reference import compare_to_reference
from review_app.errors import InputError
from review_app.evaluator import EVALUATOR_VERSION
from review_app.rubrics.model import Rubric
from review_app.services.access.actors import Actor, authorize
from review_app.services.cases.case_views import LANES
from review_app.services.judging.runs import run_verdicts
from review_app.services.judging.turn_verdicts import TurnVerdicts
from review_app.services.labels.adjudication import gold_labels
from review_app.stats.core import MIN_PROPORTION_UNITS, Estimate, EstimateJson
from review_app.stats.drift import PositionBin
from review_app.stats.stratified import StratifiedBreakRate, stratified_break_rate
from storage.engine import read_only

__all__ = [
    "AUDIT_DESIGNS",
    "POSITION_BINS",
    "STRATA_BY",
    "StrataFit",
    "StratifiedBlock",
    "check_by",
    "design_cells",
    "fit_strata",
    "judged_codes",
    "strata_of",
    "stratified_estimate",
]

STRATA_BY = ("position", "lane", "code", "finding")
AUDIT_DESIGNS = ("uniform", "stratified")
"""Audit samples whose gold the estimates use: uniform within every stratum of their
design (an uncertainty draw is not)."""
POSITION_BINS = (
    PositionBin(1, 1),
    PositionBin(2, 2),
    PositionBin(3, 4),
    PositionBin(5, 8),
    PositionBin(9, 16),
    PositionBin(17, None),
)
"""The edges of the drift's bins (:func:`review_app.stats.drift.position_bins`, doubling
width), fixed: the judge page shows both, and a stratum is then one drift bin or a union."""
FINDING_ORDER = ("fixture_error", "harness", "violation")
"""A turn with several findings is in the stratum of the first kind here (the lanes' order)."""
NO_FINDING = "none"
NOT_JUDGED = "(not judged)"
WELL_BELOW = "well below"
Unit = tuple[str, int]


def check_by(by: str) -> str:
    if by not in STRATA_BY:
        raise InputError(f"must be one of {', '.join(STRATA_BY)}, got {by!r}", field="--by")
    return by


def judged_codes(columns: Any, mapping: dict[str, str | None]) -> dict[Unit, str]:
    """``{unit: code}`` of a run's turn verdicts without error whose code is break or no
    break (the units the estimates count)."""
    return {
        unit: code
        for unit, code in TurnVerdicts(columns).coded().items()
        if mapping.get(code) is not None
    }


def _position_label(position: int) -> str:
    for b in POSITION_BINS:
        if position >= b.low and (b.high is None or position <= b.high):
            return b.label
    return POSITION_BINS[-1].label


def strata_of(
    session: Session, *, by: str, units: Sequence[Unit], codes: dict[Unit, str] | None = None
) -> list[str]:
    """The stratum of each of ``units`` under ``by`` (``codes``: the run's, for ``code``)."""
    if by == "code":
        assert codes is not None
        return [codes.get(u, NOT_JUDGED) for u in units]
    if by == "lane":
        lanes = storage.cases.case_lanes(session, evaluator_version=EVALUATOR_VERSION)
        return [lanes.get(case_id, "(no lane)") for case_id, _ in units]
    if by == "finding":
        findings = storage.cases.turn_findings(session, evaluator_version=EVALUATOR_VERSION)
        found = []
        for unit in units:
            marks = findings.get(unit, [])
            chosen = NO_FINDING
            for kind in FINDING_ORDER:
                codes_of_kind = sorted(code for k, code in marks if k == kind)
                if codes_of_kind:
                    chosen = codes_of_kind[0]
                    break
            found.append(chosen)
        return found
    ordinal: dict[Unit, int] = {}
    previous, count = None, 0
    for case_id, turn in storage.cases.assistant_units(session):
        count = count + 1 if case_id == previous else 1
        previous = case_id
        ordinal[(case_id, turn)] = count
    return [_position_label(ordinal.get(u, 1)) for u in units]


def strata_order(by: str) -> list[str]:
    """The order strata are shown in."""
    if by == "position":
        return [b.label for b in POSITION_BINS]
    if by == "lane":
        return list(LANES)
    if by == "finding":
        return [NO_FINDING]
    return []


def design_cells(
    engine: Engine,
    actor: Actor,
    rubric: Rubric,
    units: Sequence[Unit],
    *,
    codes_of_run: dict[int, dict[Unit, str]],
) -> list[tuple[str, ...]] | None:
    """Per unit, its stratum under each stratification a stratified audit draw of the
    rubric version used (its *design cell*); None when there was no such draw.
    ``codes_of_run`` holds the runs' codes already read (others are read). Policy owners."""
    authorize(engine, actor, "policy_owner")
    with Session(read_only(engine)) as session:
        designs = storage.audit_samples.stratified_designs(
            session, rubric_id=rubric.id, version=rubric.version
        )
        if not designs:
            return None
        columns: list[list[str]] = []
        mapping = rubric.break_mapping()
        for by, run_id in designs:
            codes = None
            if by == "code" and run_id is not None:
                if run_id not in codes_of_run:
                    found = run_verdicts(engine, rubric, [run_id])
                    codes_of_run[run_id] = judged_codes(found[0][1], mapping)
                codes = codes_of_run[run_id]
            columns.append(strata_of(session, by=by, units=units, codes=codes or {}))
    return list(zip(*columns, strict=True))


class StrataBudget(TypedDict):
    """The interval's width now and with ``audits`` more placed by stratum (Neyman) or
    uniformly; the widths are ``None`` without an estimate."""

    audits: int
    width: float | None
    width_neyman: float | None
    width_uniform: float | None


StratumRow = TypedDict(
    "StratumRow",
    {
        "stratum": str,
        "members": list[str],
        "weight": float,
        "n_units": int,
        "n_gold": int,
        "lambda": float | None,
        "value": float | None,
        "ci95": list[float] | None,
        "reason": str | None,
        "spread": float | None,
        "weighted": bool,
        "judge_kappa": EstimateJson,
        "judge_accuracy": EstimateJson,
    },
)
"""One stratum of :class:`StratifiedBlock` (``weight``: its share of judged units)."""


class StratifiedBlock(TypedDict):
    """``stratified`` in ``judge estimate --by B --json``: docs/reference.md, "Judge
    estimate JSON"."""

    value: float | None
    ci95: list[float] | None
    by: str
    strata: list[StratumRow]
    gold_source: str
    judge_kappa: EstimateJson
    judge_accuracy: EstimateJson
    budget: StrataBudget
    sentences: list[str]
    warnings: list[str]


def _interval(low_high: tuple[float, float] | None) -> list[float] | None:
    if low_high is None:
        return None
    return [max(0.0, low_high[0]), min(1.0, low_high[1])]


def _agreement(
    gold: dict[Unit, str], judged: dict[Unit, str], mapping: dict[str, str | None], *,
    n_resamples: int, seed: int,
) -> tuple[Estimate, Estimate]:  # fmt: skip
    """Cohen's kappa on the codes and the share of equal codes, judge against gold."""
    report = compare_to_reference(
        reference=gold, judged=judged, break_mapping=mapping, n_resamples=n_resamples,
        seed=seed, cluster_of=lambda unit: unit[0],
    )  # fmt: skip
    return report.kappa, report.accuracy


def _below(stratum: Estimate, overall: Estimate) -> bool:
    return (
        stratum.ci95 is not None
        and overall.value is not None
        and stratum.n >= MIN_PROPORTION_UNITS
        and stratum.ci95[1] < overall.value
    )


@dataclass(frozen=True)
class StrataFit:
    """A run's judged turns, their strata, the gold used and the stratified estimate."""

    run_id: int
    by: str
    units: list[Unit]
    codes: dict[Unit, str]
    strata: list[str]
    audited: set[Unit]
    gold: dict[Unit, str]
    gold_source: str
    result: StratifiedBreakRate
    warnings: list[str]

    @property
    def n_gold(self) -> int:
        return sum(f.n_gold for f in self.result.strata)

    def budget(self, audits: int) -> StrataBudget:
        """The interval's width now and with ``audits`` more placed by stratum (Neyman)
        or uniformly (docs/reference.md, "Judge estimate JSON")."""
        widths = self.result.widths(audits)
        return {
            "audits": audits,
            "width": None if widths is None else widths[0],
            "width_neyman": None if widths is None else widths[1],
            "width_uniform": None if widths is None else widths[2],
        }


def fit_strata(engine: Engine, actor: Actor, *, rubric: Rubric, run_id: int, by: str) -> StrataFit:
    """The stratified estimate of run ``run_id``'s break rate by ``by`` (module
    docstring), with what it rests on; policy owners."""
    actor = authorize(engine, actor, "policy_owner")
    check_by(by)
    ((run, columns),) = run_verdicts(engine, rubric, [run_id])
    assert run.id is not None
    mapping = rubric.break_mapping()
    codes = judged_codes(columns, mapping)
    units = sorted(codes)
    all_gold = {u: g.code for u, g in gold_labels(engine, actor, rubric=rubric).labels.items()}
    with Session(read_only(engine)) as session:
        audited = storage.audit_samples.audited_units(
            session, rubric_id=rubric.id, version=rubric.version, design=AUDIT_DESIGNS
        )
        strata = strata_of(session, by=by, units=units, codes=codes)
    warnings: list[str] = []
    audit_gold = {u: all_gold[u] for u in audited if u in all_gold}
    cells = None
    if audit_gold:
        gold_source = "audit samples"
        gold = audit_gold
        cells = design_cells(engine, actor, rubric, units, codes_of_run={run.id: codes})
    else:
        gold_source = "adjudicated and unanimous gold (not a random sample)"
        gold = all_gold
        warnings.append(
            "WARNING: no audit sample has gold yet, so this uses adjudicated and unanimous "
            "gold, which is not a random sample: the intervals are not valid. Draw one by "
            f"stratum with `review-app assign --audit-sample K --by-stratum {by} --run {run.id}`."
        )
    truth = np.array(
        [
            np.nan if (g := gold.get(u)) is None or mapping.get(g) is None
            else float(mapping[g] == "break")
            for u in units
        ],
        dtype=np.float64,
    )  # fmt: skip
    judge = np.array([float(mapping[codes[u]] == "break") for u in units], dtype=np.float64)
    result = stratified_break_rate(
        strata, judge, truth, cells=cells, min_gold=MIN_PROPORTION_UNITS, order=strata_order(by)
    )
    if result.unrepresented:
        warnings.append(
            f"WARNING: {result.unrepresented} judged turns sit in a stratum and design cell "
            "without any audited gold: no weight reaches them; audit there"
        )
    return StrataFit(
        run.id, by, units, codes, strata, audited, {u: gold[u] for u in units if u in gold},
        gold_source, result, warnings,
    )  # fmt: skip


def stratified_estimate(
    engine: Engine,
    actor: Actor,
    *,
    rubric: Rubric,
    run_id: int,
    by: str,
    n_resamples: int = 300,
    seed: int = 0,
) -> StratifiedBlock:
    """The break rate of run ``run_id``'s turns by stratum ``by`` (module docstring);
    policy owners. ``n_resamples`` for the kappa intervals (0: none)."""
    fit = fit_strata(engine, actor, rubric=rubric, run_id=run_id, by=by)
    mapping = rubric.break_mapping()
    result, codes, gold = fit.result, fit.codes, fit.gold
    warnings = list(fit.warnings)
    overall_kappa, overall_accuracy = _agreement(
        gold, {u: codes[u] for u in gold}, mapping, n_resamples=n_resamples, seed=seed
    )
    rows: list[StratumRow] = []
    sentences: list[str] = []
    member_of = {m: f.stratum for f in result.strata for m in f.members}
    for figures in result.strata:
        inside = [
            u for u, s in zip(fit.units, fit.strata, strict=True) if member_of[s] == figures.stratum
        ]
        stratum_gold = {u: gold[u] for u in inside if u in gold}
        kappa, accuracy = _agreement(
            stratum_gold, {u: codes[u] for u in stratum_gold}, mapping,
            n_resamples=n_resamples, seed=seed,
        )  # fmt: skip
        one_sided = _one_code(stratum_gold, codes)
        if one_sided is not None:
            kappa = Estimate(None, kappa.n, None, one_sided)
        estimate = figures.estimate
        reason = None
        if estimate is None:
            reason = "no estimate: fewer than 2 turns with gold or none without"
        elif figures.n_gold < MIN_PROPORTION_UNITS:
            reason = (
                f"no interval: only {figures.n_gold} turns with gold (fewer than "
                f"{MIN_PROPORTION_UNITS})"
            )
        elif estimate.ci95[0] == estimate.ci95[1]:
            reason = "no interval: the gold and the judge's verdicts do not vary here"
        rows.append(
            {
                "stratum": figures.stratum,
                "members": list(figures.members),
                "weight": figures.weight,
                "n_units": figures.n_units,
                "n_gold": figures.n_gold,
                "lambda": None if estimate is None else estimate.lam,
                "value": None if estimate is None else estimate.value,
                "ci95": None if reason or estimate is None else _interval(estimate.ci95),
                "reason": reason,
                "spread": None if estimate is None else estimate.rectifier_variance**0.5,
                "weighted": figures.weighted,
                "judge_kappa": kappa.to_dict(),
                "judge_accuracy": accuracy.to_dict(),
            }
        )
        sentence = _below_sentence(
            by, figures.stratum, kappa, accuracy, overall_kappa, overall_accuracy, fit.run_id
        )
        if sentence:
            sentences.append(sentence)
    combined = result.combined
    thin = [f.stratum for f in result.strata if f.estimate and f.n_gold < SMALL_SAMPLE_UNITS]
    if combined is not None and thin:
        warnings.append(
            f"the interval leans on strata with fewer than {SMALL_SAMPLE_UNITS} turns with "
            f"gold ({', '.join(thin)}): a normal approximation on so few may cover less than "
            "95%; audit them"
        )
    if combined is None:
        warnings.append(result.reason or "no stratified estimate")
    elif fit.n_gold < MIN_PROPORTION_UNITS:
        warnings.append(
            f"no stratified interval: fewer than {MIN_PROPORTION_UNITS} judged turns with gold"
        )
    if not sentences and combined is not None:
        sentences.append(
            f"No {by} stratum has judge agreement with gold well below its overall level "
            "(its interval wholly below the overall figure)."
        )
    left = len(fit.units) - fit.n_gold
    budget = fit.budget(min(max(20, fit.n_gold), left))
    if budget["width"] is not None:
        sentences.append(budget_sentence(budget, by=by))
    enough = combined is not None and fit.n_gold >= MIN_PROPORTION_UNITS
    return {
        "value": None if combined is None else combined.value,
        "ci95": _interval(combined.ci95) if enough and combined is not None else None,
        "by": by,
        "strata": rows,
        "gold_source": fit.gold_source,
        "judge_kappa": overall_kappa.to_dict(),
        "judge_accuracy": overall_accuracy.to_dict(),
        "budget": budget,
        "sentences": sentences,
        "warnings": warnings,
    }


def _one_code(gold: dict[Unit, str], codes: dict[Unit, str]) -> str | None:
    """Why kappa says nothing in a stratum where gold or the judge gives one code (kappa
    is then 0 or undefined whatever the agreement), else None."""
    if len(set(gold.values())) == 1:
        return "gold has one code in this stratum, so kappa says nothing: read judge_accuracy"
    if len({codes[u] for u in gold}) == 1:
        return (
            "the judge gives one code in this stratum, so kappa says nothing: read judge_accuracy"
        )
    return None


def _below_sentence(
    by: str,
    stratum: str,
    kappa: Estimate,
    accuracy: Estimate,
    overall_kappa: Estimate,
    overall_accuracy: Estimate,
    run_id: int,
) -> str | None:
    """The sentence for a stratum where the judge agrees with gold well below overall:
    on kappa, or where kappa says nothing (one code on a side) on the share of equal
    codes."""
    on_kappa = kappa.value is not None and overall_kappa.value is not None
    compared, reference = (kappa, overall_kappa) if on_kappa else (accuracy, overall_accuracy)
    if not _below(compared, reference):
        return None
    assert compared.ci95 is not None and compared.value is not None
    assert reference.value is not None
    if not on_kappa:
        figure = f"agrees with gold on {100 * compared.value:.0f}% of turns"
        overall = f"{100 * reference.value:.0f}%"
    else:
        figure = f"kappa is {compared.value:.2f}"
        overall = f"{reference.value:.2f}"
    return (
        f"Where {by} is {stratum}, the judge's {figure} [{compared.ci95[0]:.2f}, "
        f"{compared.ci95[1]:.2f}] ({compared.n} turns with gold), {WELL_BELOW} its {overall} "
        f"overall: calibrated overall, broken there. Audit there (`review-app assign "
        f"--audit-sample K --by-stratum {by} --run {run_id}`) and read its disagreements "
        "before trusting the judge on it."
    )


def budget_sentence(budget: StrataBudget, *, by: str) -> str:
    """``40 more audits placed by position would narrow the interval from 9.1 to 6.0
    points; placed uniformly, to 6.9.`` (a budget with widths)."""
    width, neyman, uniform = budget["width"], budget["width_neyman"], budget["width_uniform"]
    assert width is not None and neyman is not None and uniform is not None
    return (
        f"{budget['audits']} more audits placed by {by} (Neyman allocation) would narrow the "
        f"interval from {100 * width:.1f} to {100 * neyman:.1f} points "
        f"wide; placed uniformly, to {100 * uniform:.1f}."
    )
