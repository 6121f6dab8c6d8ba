"""Two judge runs compared on the same gold units, with a verdict: is the new one better?

docs/reference.md, "Comparing two judge runs". Reads the runs' verdicts, the gold
labels and the reviewers' labels, and hands them to
:func:`review_app.stats.paired.compare_two_runs`; adds the runs' reasons on the units
where they differ and where the gold comes from. Policy owners and admins.

The comparison is a JSON document: printed by ``judge compare --json`` and shown by the
prompt workbench as it is. It stays a dictionary; :class:`RunComparison` names its keys.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any, TypedDict, cast

from sqlalchemy import Engine
from sqlmodel import Session

from review_app.errors import InputError
from review_app.rubrics.model import Rubric
from review_app.services.access.actors import Actor, authorize
from review_app.services.judging.judge_prompts import prompt_refs_for
from review_app.services.judging.run_defaults import confound, default_pair, team_judge
from review_app.services.judging.runs import RunListing, list_judge_runs, run_name, run_verdicts
from review_app.services.judging.turn_verdicts import TurnVerdicts
from review_app.services.labels.adjudication import gold_labels
from review_app.services.review.agreement_reports import load_label_columns
from review_app.services.team.audit_samples import audited_units
from review_app.stats.alt_test import DEFAULT_EPSILON, AltTestJson
from review_app.stats.core import EstimateJson
from review_app.stats.paired import McNemarJson, compare_two_runs
from storage import judging
from storage.engine import read_only
from storage.models import JudgeRunPublic

GOLD_NOTE = (
    "gold from adjudication and unanimous reviewers is not a random sample: unanimous units "
    "are the easy ones, so figures against it flatter both runs (the difference between "
    "them less so); audit-sample gold is a random sample"
)


class ComparedRun(TypedDict):
    id: int
    label: str
    """The short name that tells it from the other run (``first`` or ``second``)."""
    name: str
    judge: str
    prompt_version: str
    model: str
    endpoint: str
    state: str
    """``complete``, ``stopped``, ``failed`` or ``running``."""
    identity: str
    """The run in words: prompt version, model, endpoint, rubric version and state."""
    prompt_sha256: str | None


class ComparisonGold(TypedDict):
    adjudicated: int
    unanimous: int
    in_audit_samples: int
    note: str


class RunVerdict(TypedDict):
    code: str
    reason: str | None


class DifferingVerdicts(TypedDict):
    """A unit where the two runs give different codes, with their reasons."""

    case_id: str
    turn: int
    gold: str
    first: RunVerdict
    second: RunVerdict


class RunComparison(TypedDict):
    """``judge compare --json``: docs/reference.md, "Comparing two judge runs"."""

    rubric: str
    runs: list[ComparedRun]
    first: str
    second: str
    n_units: int
    n_conversations: int
    kappa: dict[str, EstimateJson]
    accuracy: dict[str, EstimateJson]
    kappa_difference: EstimateJson
    accuracy_difference: EstimateJson
    difference_is: str
    mcnemar: McNemarJson
    alt_test: dict[str, AltTestJson] | None
    alt_test_units: int
    differing: list[DifferingVerdicts]
    gold_source: ComparisonGold
    outcome: str
    """``second_better``, ``first_better``, ``second_likely_better``,
    ``first_likely_better``, ``mixed``, ``no_difference``, ``too_few_units`` or
    ``undefined``."""
    verdict: str
    """The one sentence reconciling the kappa difference and McNemar's test: the page and
    ``judge compare`` show exactly this."""
    pairing: str
    """How the two runs were chosen: ``chosen`` or ``default: <the rule that chose them>``."""
    confound: str | None
    """One sentence naming what else than the prompt differs (or which run is not
    complete); ``None`` when only the prompt differs between two complete runs."""
    n_resamples: int
    seed: int


def _conversation_of(unit: tuple[str, int]) -> str:
    return unit[0]


def _labels(first: JudgeRunPublic, second: JudgeRunPublic) -> tuple[str, str]:
    """Short distinct names: the prompt versions when only they differ, the models when
    only they differ, the endpoints when only they differ, else the full run names."""
    parts = ("judge", "prompt_version", "model", "endpoint")
    differ = [part for part in parts if getattr(first, part) != getattr(second, part)]
    if differ in (["prompt_version"], ["model"]):
        return getattr(first, differ[0]), getattr(second, differ[0])
    if differ == ["endpoint"]:
        return first.endpoint or "imported", second.endpoint or "imported"
    return run_name(first), run_name(second)


def compare_judge_runs(
    engine: Engine,
    actor: Actor,
    *,
    rubric: Rubric,
    run_ids: tuple[int, int] | list[int] | None = None,
    n_resamples: int = 1000,
    seed: int = 0,
    epsilon: float = DEFAULT_EPSILON,
) -> RunComparison:
    """Compare two runs of ``rubric`` on the gold units both judged (policy owners).

    ``run_ids = (a, b)``: the difference is b - a, and a run that is not complete or a
    pair that differs in more than the prompt gets a ``confound`` sentence. By default:
    :func:`review_app.services.judging.run_defaults.default_pair` (complete runs, the
    same model at the same endpoint, the earlier prompt first); with no comparable pair
    an :class:`InputError` says so and which baseline to run. Returns ``{"rubric",
    "runs": [a, b], "gold_source", **comparison}`` with the differing units' reasons
    (docs/reference.md, "Comparing two judge runs").
    """
    actor = authorize(engine, actor, "policy_owner")
    if isinstance(epsilon, bool) or not isinstance(epsilon, int | float) or not 0 <= epsilon < 1:
        raise InputError(f"must be a number in [0, 1), got {epsilon!r}", field="--epsilon")
    if isinstance(n_resamples, bool) or not isinstance(n_resamples, int) or n_resamples < 0:
        raise InputError(f"must be an integer >= 0, got {n_resamples!r}", field="--resamples")
    listings = {run.id: run for run in list_judge_runs(engine, actor, rubric=rubric)}
    if not listings:
        raise InputError(f"{rubric.ref} has no judge runs to compare", field="--runs")
    if run_ids is not None:
        ids = list(run_ids)
        if len(ids) != 2 or ids[0] == ids[1]:
            raise InputError("give two different run ids, e.g. --runs 3,5", field="--runs")
        missing = [i for i in ids if i not in listings]
        if missing:
            raise InputError(
                f"no judge run {missing[0]} for {rubric.ref} (runs: "
                f"{', '.join(str(i) for i in sorted(listings))})",
                field="--runs",
            )
        first_id, second_id = ids
        pairing = "chosen"
    else:
        found = default_pair(
            list(listings.values()),
            team_judge(engine, actor, rubric=rubric),
            prompts=prompt_refs_for(engine, actor, rubric=rubric),
        )
        if not found.found:
            raise InputError(
                f"{found.how}; or give two runs with --runs A,B "
                '(docs/reference.md, "Which run by default")',
                field="--runs",
            )
        first_id, second_id = found.ids
        pairing = f"default: {found.how}"
    gold = gold_labels(engine, actor, rubric=rubric)
    gold_codes = {unit: g.code for unit, g in gold.labels.items()}
    by_id = {
        run.id: (run, columns)
        for run, columns in run_verdicts(engine, rubric, [first_id, second_id])
    }
    break_mapping = rubric.break_mapping()
    ignore = tuple(rubric.abstain_codes)
    first_run, first_columns = by_id[first_id]
    second_run, second_columns = by_id[second_id]
    first_verdicts, second_verdicts = TurnVerdicts(first_columns), TurnVerdicts(second_columns)
    first_codes, second_codes = first_verdicts.coded(), second_verdicts.coded()
    names = _labels(first_run, second_run)

    columns = load_label_columns(engine, actor, rubric=rubric)
    by_reviewer: dict[str, dict[tuple[str, int], str]] = defaultdict(dict)
    for case_id, turn, reviewer, code in zip(
        columns.case_ids, columns.turns, columns.reviewers, columns.codes, strict=True
    ):
        by_reviewer[reviewer][(case_id, turn)] = code

    result = compare_two_runs(
        gold=gold_codes,
        first=first_codes,
        second=second_codes,
        break_mapping=break_mapping,
        names=names,
        ignore_codes=ignore,
        cluster_of=_conversation_of,
        reviewers=by_reviewer,
        epsilon=epsilon,
        n_resamples=n_resamples,
        seed=seed,
    )
    differing = [(cast(tuple[str, int], d.unit), d) for d in result.differing]
    reasons = [
        _reasons(engine, verdicts, [unit for unit, _ in differing])
        for verdicts in (first_verdicts, second_verdicts)
    ]
    compared = {
        u
        for u in gold_codes
        if u in first_codes
        and u in second_codes
        and not set(ignore) & {gold_codes[u], first_codes[u], second_codes[u]}
    }
    audited = audited_units(engine, actor, rubric=rubric)
    sources = [gold.labels[u].source for u in compared]
    first_listing, second_listing = listings[first_id], listings[second_id]
    # The comparison's figures (stats/paired.py) as JSON, then what only the runs tell.
    return {
        "first": result.first,
        "second": result.second,
        "n_units": result.n_units,
        "n_conversations": result.n_conversations,
        "kappa": {name: e.to_dict() for name, e in result.kappa.items()},
        "accuracy": {name: e.to_dict() for name, e in result.accuracy.items()},
        "kappa_difference": result.kappa_difference.to_dict(),
        "accuracy_difference": result.accuracy_difference.to_dict(),
        "difference_is": "second - first",
        "mcnemar": result.mcnemar.to_dict(),
        "alt_test": None
        if result.alt_test is None
        else {name: r.to_dict() for name, r in result.alt_test.items()},
        "alt_test_units": result.alt_test_units,
        "differing": [
            {
                "case_id": unit[0],
                "turn": unit[1],
                "gold": d.gold,
                "first": {"code": d.first, "reason": reasons[0].get(unit)},
                "second": {"code": d.second, "reason": reasons[1].get(unit)},
            }
            for unit, d in differing
        ],
        "outcome": result.outcome,
        "verdict": result.verdict,
        "n_resamples": result.n_resamples,
        "seed": result.seed,
        "gold_source": {
            "adjudicated": sources.count("adjudicated"),
            "unanimous": sources.count("unanimous"),
            "in_audit_samples": len(compared & audited),
            "note": GOLD_NOTE,
        },
        "rubric": rubric.ref,
        "runs": [_run_entry(first_listing, names[0]), _run_entry(second_listing, names[1])],
        "pairing": pairing,
        "confound": confound(first_listing, second_listing),
    }


def _run_entry(run: RunListing, label: str) -> ComparedRun:
    return {
        "id": run.id,
        "label": label,
        "name": run.name,
        "judge": run.judge,
        "prompt_version": run.prompt_version,
        "model": run.model,
        "endpoint": run.endpoint,
        "state": run.state,
        "identity": run.label,
        "prompt_sha256": run.prompt_sha256,
    }


def _reasons(
    engine: Engine, verdicts: TurnVerdicts, units: list[Any]
) -> dict[tuple[str, int], str | None]:
    columns = verdicts.columns
    rows = verdicts.rows_of(units)
    ids = [columns.ids[i] for i in rows]
    with Session(read_only(engine)) as session:
        by_id = judging.verdict_reasons(session, ids=ids)
    found: dict[tuple[str, int], str | None] = {}
    for i in rows:
        turn = columns.turns[i]
        assert turn is not None
        found[(columns.case_ids[i], turn)] = by_id.get(columns.ids[i])
    return found
