"""How often the chatbot breaks role: a prediction-powered estimate from the judge and gold.

The judge labels every unit; reviewers' gold covers few. PPI++ (Angelopoulos, Duchi &
Zrnic 2023; :mod:`review_app.stats.ppi`) combines the judge's verdicts on all units
with gold on some, correcting the judge's bias on the gold units, and gives a 95%
interval that is valid when the gold units are a uniform random sample: an audit
sample (:mod:`review_app.services.operations.audit`). Without one it falls back, loudly, to the
adjudicated and unanimous gold, which is not a random sample.

The estimate is a JSON document: printed by ``judge estimate --json``, stored as a
payload of the computed reports (review_app/services/reports/report_store.py) and read
back as a plain dictionary. It stays one; :class:`BreakRateEstimate` names its keys.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Literal, NotRequired, TypedDict

import numpy as np
from sqlalchemy import Engine

from review_app.errors import InputError
from review_app.rubrics.model import Rubric
from review_app.services.access.actors import Actor, authorize
from review_app.services.judging.runs import run_name, run_verdicts
from review_app.services.judging.strata import (
    AUDIT_DESIGNS,
    StratifiedBlock,
    check_by,
    design_cells,
    stratified_estimate,
)
from review_app.services.judging.turn_verdicts import TurnVerdicts
from review_app.services.judging.uncertainty_audit import scored_turns, uncertainty_sample
from review_app.services.labels.adjudication import gold_labels
from review_app.services.team.audit_samples import audited_units
from review_app.stats.active import active_mean, uniform_width
from review_app.stats.core import MIN_PROPORTION_UNITS, proportion
from review_app.stats.ppi import ppi_mean
from review_app.stats.stratified import design_weights
from storage.judging import VerdictColumns

LEVELS = ("turn", "conversation")
NOT_RANDOM = (
    "WARNING: no audit sample has gold yet, so this uses adjudicated and unanimous gold, "
    "which is not a random sample (unanimous units are the easy ones): the interval is "
    "not valid. Draw one with `review-app assign --audit-sample K --seed S`."
)


class RunRef(TypedDict):
    id: int
    name: str


class Interval(TypedDict):
    value: float | None
    ci95: list[float] | None


PpiFigure = TypedDict(
    "PpiFigure",
    {
        "value": float | None,
        "ci95": list[float] | None,
        "lambda": float | None,
        "lambda_reason": str | None,
    },
)
"""The prediction-powered estimate, with its power-tuning ``lambda``; ``lambda_reason``
says why the judge gets no weight when ``lambda`` is 0 (the estimate is then the
reviewers' alone)."""


class UncertaintyBudget(TypedDict):
    """With an uncertainty draw: its labelled turns, the active interval's width and the
    width as many uniform audits would give (docs/reference.md, "Uncertainty audit
    JSON")."""

    labels: int
    width: float | None
    uniform_width: float | None


class EstimateBudget(TypedDict):
    more_audited_units_to_halve_width: int | None
    reason: str | None
    uncertainty: NotRequired[UncertaintyBudget]


class ActiveFigure(TypedDict):
    """The active estimate from an uncertainty draw from the run."""

    value: float | None
    ci95: list[float] | None
    design: str
    drawn: int
    with_gold: int


class BreakRateEstimate(TypedDict):
    """``judge estimate --json``: docs/reference.md, "Judge estimate JSON" (and
    "Uncertainty audit JSON" for ``active`` and ``budget.uncertainty``)."""

    level: str
    run: RunRef
    n_gold: int
    n_judged: int
    judge_only: float | None
    human_only: Interval
    ppi: PpiFigure
    gold_source: str
    budget: EstimateBudget
    warnings: list[str]
    active: NotRequired[ActiveFigure]
    """With an uncertainty draw from the run."""
    stratified: NotRequired[StratifiedBlock]
    """With ``by``: the break rate by stratum (docs/reference.md, "Judge estimate JSON")."""


def break_rate_estimate(
    engine: Engine,
    actor: Actor,
    *,
    rubric: Rubric,
    run_id: int,
    level: Literal["turn", "conversation"] | str = "turn",
    by: str | None = None,
    n_resamples: int = 300,
) -> BreakRateEstimate:
    """The break rate of run ``run_id``'s units, by PPI++, beside judge-only and human-only.

    Turn level: a unit is a judged turn; the judge says break when its code's verdict is
    fail, no break when pass (borderline, abstain and errors are left out). Conversation
    level: a conversation breaks when any of its judged turns does; it has gold when
    every judged turn has break / no-break gold (a break when any is one).

    Gold: audit-sample units with gold when there are any (a random sample; at turn
    level draws by stratum too, their gold weighted by the design of the draws), else
    all gold with a loud warning. ``by``: also the break rate by stratum (``stratified``,
    :mod:`review_app.services.judging.strata`).
    """
    actor = authorize(engine, actor, "policy_owner")
    if level not in LEVELS:
        raise InputError(f"must be turn or conversation, got {level!r}", field="--level")
    if by is not None:
        check_by(by)
        if level != "turn":
            raise InputError("strata are of turns: use --level turn with --by", field="--by")
    ((run, columns),) = run_verdicts(engine, rubric, [run_id])
    mapping = rubric.break_mapping()
    verdicts = TurnVerdicts(columns)
    # Units are the verdicts' integer keys from here on (TurnVerdicts.key).
    collapsed = [None if code is None else mapping.get(code) for code in columns.labels]
    comparable = np.fromiter((c is not None for c in collapsed), dtype=bool, count=len(collapsed))
    rows = verdicts.positions(verdicts.has_turn & verdicts.no_error & comparable)
    judge_turns: dict[int, int] = dict(
        zip(
            verdicts.keys[rows].tolist(),
            [int(collapsed[i] == "break") for i in rows],
            strict=True,
        )
    )
    gold = {
        unit: mapping.get(g.code)
        for unit, g in gold_labels(engine, actor, rubric=rubric).labels.items()
    }
    audited = audited_units(
        engine, actor, rubric=rubric, designs=AUDIT_DESIGNS if level == "turn" else ("uniform",)
    )
    warnings: list[str] = []
    audit_gold = {u: gold[u] for u in audited if u in gold}
    if audit_gold:
        source = "audit sample"
        gold_used = audit_gold
        waiting = len([u for u in audited if u not in gold])
        if waiting:
            warnings.append(
                f"WARNING: {waiting} of {len(audited)} audited turns have no gold yet (in "
                "disagreement or unlabeled): adjudicate them, or the estimate leans to the "
                "easy units"
            )
    else:
        source = "adjudicated and unanimous gold (not a random sample)"
        gold_used = gold
        warnings.append(NOT_RANDOM)

    active = _active_block(
        engine, actor, rubric=rubric, run_id=run_id, columns=columns, gold=gold, level=level,
        warnings=warnings,
    )  # fmt: skip
    gold_keys = {key: c for u, c in gold_used.items() if (key := verdicts.key(u)) is not None}
    judged: dict[int, int]
    truth: dict[int, int]
    if level == "turn":
        judged = dict(judge_turns)
        truth = {u: int(c == "break") for u, c in gold_keys.items() if c is not None}
    else:
        judged, truth = _conversations(judge_turns, gold_keys, stride=verdicts.stride)
        warnings.append(
            "conversation level: only conversations with gold on every judged turn count "
            "as gold; an audit sample draws turns, not conversations"
        )
    gold_units = [u for u in judged if u in truth]
    other = [u for u in judged if u not in truth]
    y = np.array([truth[u] for u in gold_units], dtype=np.float64)
    f = np.array([judged[u] for u in gold_units], dtype=np.float64)
    f_u = np.array([judged[u] for u in other], dtype=np.float64)
    judge_only = float(np.mean(list(judged.values()))) if judged else None
    human = proportion(int(y.sum()), len(y), undefined_reason="no judged unit has gold")
    result: BreakRateEstimate = {
        "level": level,
        "run": {"id": run.id, "name": run_name(run)},
        "n_gold": len(gold_units),
        "n_judged": len(judged),
        "judge_only": judge_only,
        "human_only": {
            "value": human.value,
            "ci95": None if human.ci95 is None else list(human.ci95),
        },
        "ppi": {"value": None, "ci95": None, "lambda": None, "lambda_reason": None},
        "gold_source": source,
        "budget": {"more_audited_units_to_halve_width": None, "reason": None},
        "warnings": warnings,
    }
    if active is not None:
        result["active"], result["budget"]["uncertainty"] = active
    if by is not None:
        result["stratified"] = stratified_estimate(
            engine, actor, rubric=rubric, run_id=run_id, by=by, n_resamples=n_resamples
        )
    if human.ci95 is None and human.reason:
        warnings.append(f"reviewers alone: {human.reason}")
    if len(gold_units) < 2 or not other:
        reason = (
            f"no PPI estimate: {len(gold_units)} judged units with gold and {len(other)} "
            "without (it needs at least 2 and 1)"
        )
        warnings.append(reason)
        result["budget"]["reason"] = reason
        return result
    weights = None
    if level == "turn" and source == "audit sample":
        weights = _design_weights(engine, actor, rubric, verdicts, rows, gold_units, warnings)
    estimate = ppi_mean(y, f, f_u, weights=weights)
    result["ppi"] = {
        "value": estimate.value,
        "ci95": [max(0.0, estimate.ci95[0]), min(1.0, estimate.ci95[1])],
        "lambda": estimate.lam,
        "lambda_reason": _no_weight_reason(y, f, f_u) if estimate.lam == 0 else None,
    }
    if len(gold_units) < MIN_PROPORTION_UNITS or estimate.ci95[0] == estimate.ci95[1]:
        result["ppi"]["ci95"] = None
        reason = (
            f"no PPI interval: only {len(gold_units)} judged units with gold (fewer than "
            f"{MIN_PROPORTION_UNITS})"
            if len(gold_units) < MIN_PROPORTION_UNITS
            else "no PPI interval: the gold and the judge's verdicts do not vary"
        )
        warnings.append(reason)
        result["budget"]["reason"] = reason
        return result
    more = estimate.gold_units_to_halve_width()
    result["budget"]["more_audited_units_to_halve_width"] = more
    if more is None:
        result["budget"]["reason"] = (
            "more audited units cannot halve the width: the judge's own variance dominates"
        )
    if level == "turn":
        warnings.append(
            "the interval treats turns as independent draws; an audit sample draws turns "
            "uniformly, which is what makes that hold"
        )
    return result


def _no_weight_reason(y: np.ndarray, f: np.ndarray, f_u: np.ndarray) -> str:
    """Why PPI++ gives the judge's verdicts weight 0 (its ``lambda``), in words."""
    if np.all(y == y[0]):
        said = "breaks" if y[0] else "stays in role"
        return (
            f"every one of the {len(y)} gold units {said}, so the judge's verdicts cannot be "
            "checked against gold"
        )
    if np.all(np.concatenate([f, f_u]) == f[0]):
        said = "break" if f[0] else "no break"
        return f"the judge says {said} on every unit, which tells the units apart not at all"
    return (
        f"on the {len(y)} gold units the judge's verdicts do not go with gold (it says break "
        "where gold says no break as often as where gold says break)"
    )


def _design_weights(
    engine: Engine,
    actor: Actor,
    rubric: Rubric,
    verdicts: TurnVerdicts,
    rows: list[int],
    gold_units: list[int],
    warnings: list[str],
) -> np.ndarray | None:
    """The gold units' design weights when audits were drawn by stratum (None when every
    draw was uniform): :func:`review_app.stats.stratified.design_weights` over the judged
    turns, one stratum."""
    columns = verdicts.columns
    keys = verdicts.keys[rows].tolist()
    units = [(columns.case_ids[i], int(columns.turns[i] or 0)) for i in rows]
    cells = design_cells(engine, actor, rubric, units, codes_of_run={})
    if cells is None:
        return None
    gold = set(gold_units)
    weights, missing = design_weights(["all"] * len(keys), cells, [k in gold for k in keys])
    if missing:
        warnings.append(
            f"WARNING: {missing} judged turns sit in strata of the audit draws without any "
            "audited gold: no weight reaches them; audit there"
        )
    by_key = dict(zip(keys, weights.tolist(), strict=True))
    return np.array([by_key[k] for k in gold_units], dtype=np.float64)


def _active_block(
    engine: Engine,
    actor: Actor,
    *,
    rubric: Rubric,
    run_id: int,
    columns: VerdictColumns,
    gold: dict[tuple[str, int], str | None],
    level: str,
    warnings: list[str],
) -> tuple[ActiveFigure, UncertaintyBudget] | None:
    """The active estimate from the newest uncertainty draw from this run's scores
    (:mod:`review_app.stats.active`), and the budget line; None without such a draw."""
    sample = uncertainty_sample(engine, actor, rubric=rubric, run_id=run_id)
    if sample is None:
        return None
    if level != "turn":
        warnings.append(
            "the uncertainty draw gives a turn-level estimate only (run with --level turn)"
        )
        return None
    scored = scored_turns(columns)
    drawn = sample.probabilities
    units = list(scored)
    index = {u: i for i, u in enumerate(units)}
    s = np.fromiter(scored.values(), dtype=np.float64, count=len(units))
    pi = np.ones(len(units))
    xi = np.zeros(len(units), dtype=bool)
    y = np.zeros(len(units))
    waiting: list[tuple[str, int]] = []
    gone: list[tuple[str, int]] = []
    for unit, probability in sorted(drawn.items()):
        i = index.get(unit)
        if i is None:
            gone.append(unit)
            continue
        pi[i] = probability
        truth = gold.get(unit)
        if truth is None:
            waiting.append(unit)
            continue
        xi[i] = True
        y[i] = float(truth == "break")

    def named(found: list[tuple[str, int]]) -> str:
        shown = ", ".join(f"{c}:{t}" for c, t in found[:10])
        return shown + (f" and {len(found) - 10} more" if len(found) > 10 else "")

    if waiting:
        warnings.append(
            f"WARNING: {len(waiting)} of {len(drawn)} turns drawn by uncertainty (sample "
            f"{sample.sample_id}) have no break / no-break gold yet ({named(waiting)}): "
            "they count as drawn without a label, which biases the active estimate; label "
            "and adjudicate them"
        )
    if gone:
        warnings.append(
            f"WARNING: {len(gone)} drawn turns no longer have a scored verdict in run "
            f"{run_id} ({named(gone)}): the active estimate leaves them out"
        )
    block: ActiveFigure = {
        "value": None,
        "ci95": None,
        "design": "uncertainty",
        "drawn": len(drawn),
        "with_gold": int(xi.sum()),
    }
    line: UncertaintyBudget = {"labels": int(xi.sum()), "width": None, "uniform_width": None}
    if len(units) < 2:
        warnings.append("no active estimate: fewer than 2 judged turns with a score")
        return block, line
    estimate = active_mean(s, y, xi, pi)
    block["value"] = estimate.value
    block["ci95"] = [max(0.0, estimate.ci95[0]), min(1.0, estimate.ci95[1])]
    line["width"] = estimate.ci95[1] - estimate.ci95[0]
    line["uniform_width"] = uniform_width(s, y, xi, pi, labels=int(xi.sum()))
    return block, line


def _conversations(
    judge_turns: dict[int, int], gold: dict[int, str | None], *, stride: int
) -> tuple[dict[int, int], dict[int, int]]:
    """Per case (its code: a unit key // ``stride``), from the unit keys of its turns."""
    by_case: dict[int, list[tuple[int, int]]] = defaultdict(list)
    for key, value in judge_turns.items():
        by_case[key // stride].append((key, value))
    judged = {case: int(any(v for _, v in turns)) for case, turns in by_case.items()}
    truth: dict[int, int] = {}
    for case, turns in by_case.items():
        keys = [key for key, _ in turns]
        if all(key in gold and gold[key] is not None for key in keys):
            truth[case] = int(any(gold[key] == "break" for key in keys))
    return judged, truth
