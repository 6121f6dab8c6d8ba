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

from review_app import calibration
from review_app.errors import InputError
from review_app.rubrics import Rubric
from review_app.services.judging.audit_samples import audited_units
from review_app.services.judging.runs import run_name, run_verdicts
from review_app.services.judging.turn_verdicts import TurnVerdicts
from review_app.services.labels.adjudication import gold_labels
from review_app.services.review.agreement_reports import load_label_columns
from review_app.services.team.people import Actor, authorize
from review_app.stats.alt_test import DEFAULT_EPSILON
from review_app.stats.paired import compare_two_runs
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
    prompt_sha256: str | None


class ComparisonGold(TypedDict):
    adjudicated: int
    unanimous: int
    in_audit_samples: int
    note: str


class RunComparison(TypedDict):
    """``judge compare --json``: docs/reference.md, "Comparing two judge runs". An
    estimate is ``{"value", "n", "ci95", "reason", "warning", "method"}``."""

    rubric: str
    runs: list[ComparedRun]
    first: str
    second: str
    n_units: int
    n_conversations: int
    kappa: dict[str, dict[str, Any]]
    accuracy: dict[str, dict[str, Any]]
    kappa_difference: dict[str, Any]
    accuracy_difference: dict[str, Any]
    difference_is: str
    mcnemar: dict[str, Any]
    alt_test: dict[str, dict[str, Any]] | None
    alt_test_units: int
    differing: list[dict[str, Any]]
    """``{"case_id", "turn", "gold", "first": {"code", "reason"}, "second": ...}``."""
    gold_source: ComparisonGold
    verdict: str
    headline: str
    n_resamples: int
    seed: int


def _conversation_of(unit: tuple[str, int]) -> str:
    return unit[0]


def _labels(first: JudgeRunPublic, second: JudgeRunPublic) -> tuple[str, str]:
    """Short distinct names: the prompt versions when only they differ, etc."""
    same_judge = first.judge == second.judge
    if same_judge and first.model == second.model and first.prompt_version != second.prompt_version:
        return first.prompt_version, second.prompt_version
    if same_judge and first.prompt_version == second.prompt_version and first.model != second.model:
        return first.model, second.model
    names = run_name(first), run_name(second)
    if names[0] == names[1]:
        return f"run {first.id}", f"run {second.id}"
    return names


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

    ``run_ids = (a, b)``: the difference is b - a. By default: the newest run (b) and
    the earlier run of the same judge with the highest kappa against gold (a).
    Returns ``{"rubric", "runs": [a, b], "gold_source", **comparison}`` with the
    differing units' reasons (docs/reference.md, "Comparing two judge runs").
    """
    actor = authorize(engine, actor, "policy_owner")
    if isinstance(epsilon, bool) or not isinstance(epsilon, int | float) or not 0 <= epsilon < 1:
        raise InputError(f"must be a number in [0, 1), got {epsilon!r}", field="--epsilon")
    if isinstance(n_resamples, bool) or not isinstance(n_resamples, int) or n_resamples < 0:
        raise InputError(f"must be an integer >= 0, got {n_resamples!r}", field="--resamples")
    gold = gold_labels(engine, actor, rubric=rubric)
    gold_codes = {unit: g.code for unit, g in gold.labels.items()}
    runs = run_verdicts(engine, rubric, None)
    if not runs:
        raise InputError(f"{rubric.ref} has no judge runs to compare", field="--runs")
    by_id = {run.id: (run, columns) for run, columns in runs}
    break_mapping = rubric.break_mapping()
    ignore = tuple(rubric.abstain_codes)
    if run_ids is not None:
        ids = list(run_ids)
        if len(ids) != 2 or ids[0] == ids[1]:
            raise InputError("give two different run ids, e.g. --runs 3,5", field="--runs")
        missing = [i for i in ids if i not in by_id]
        if missing:
            raise InputError(
                f"no judge run {missing[0]} for {rubric.ref} (runs: "
                f"{', '.join(str(i) for i in sorted(i for i in by_id if i is not None))})",
                field="--runs",
            )
        first_id, second_id = ids
    else:
        first_id, second_id = _default_pair(runs, gold_codes, break_mapping, ignore)
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
    # the figures of the comparison (stats/paired.py); the keys below are added here
    report = cast(RunComparison, result.to_dict())
    differing = [(cast(tuple[str, int], d.unit), d) for d in result.differing]
    reasons = [
        _reasons(engine, verdicts, [unit for unit, _ in differing])
        for verdicts in (first_verdicts, second_verdicts)
    ]
    report["differing"] = [
        {
            "case_id": unit[0],
            "turn": unit[1],
            "gold": d.gold,
            "first": {"code": d.first, "reason": reasons[0].get(unit)},
            "second": {"code": d.second, "reason": reasons[1].get(unit)},
        }
        for unit, d in differing
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
    report["gold_source"] = {
        "adjudicated": sources.count("adjudicated"),
        "unanimous": sources.count("unanimous"),
        "in_audit_samples": len(compared & audited),
        "note": GOLD_NOTE,
    }
    report["rubric"] = rubric.ref
    report["runs"] = [_run_entry(first_run, names[0]), _run_entry(second_run, names[1])]
    return report


def _run_entry(run: JudgeRunPublic, label: str) -> ComparedRun:
    return {
        "id": run.id,
        "label": label,
        "name": run_name(run),
        "judge": run.judge,
        "prompt_version": run.prompt_version,
        "model": run.model,
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


def _default_pair(
    runs: list[tuple[JudgeRunPublic, Any]],
    gold_codes: dict[tuple[str, int], str],
    break_mapping: dict[str, str | None],
    ignore: tuple[str, ...],
) -> tuple[int, int]:
    """The newest run and the earlier run of the same judge agreeing best with gold."""
    newest, _ = max(runs, key=lambda pair: pair[0].id or 0)
    earlier = [
        (run, columns)
        for run, columns in runs
        if run.judge == newest.judge and (run.id or 0) < (newest.id or 0)
    ]
    if not earlier:
        raise InputError(
            f"run {newest.id} ({run_name(newest)}) is the only run of judge {newest.judge!r} "
            "for this rubric version; give two runs with --runs A,B",
            field="--runs",
        )

    def kappa(pair: tuple[JudgeRunPublic, Any]) -> tuple[float, int]:
        judged = TurnVerdicts(pair[1]).coded()
        result = calibration.compare_to_reference(
            reference=gold_codes,
            judged=judged,
            break_mapping=break_mapping,
            ignore_codes=ignore,
            n_resamples=0,
        )
        value = result.kappa.value
        return (value if value is not None else -2.0, pair[0].id or 0)

    best, _ = max(earlier, key=kappa)
    assert best.id is not None and newest.id is not None
    return best.id, newest.id
