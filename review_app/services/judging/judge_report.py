"""The calibration report of judge runs against humans, calibration maps, few-shot material.

Reads verdicts stored by ``review_app.services.judging.judge_import`` and
``review_app.services.judging.judge_runner``.

The calibration report and the few-shot material are JSON documents: printed by ``judge
report --json`` and ``judge few-shot``, stored as payloads of the computed reports
(review_app/services/reports/report_store.py) and read back as plain dictionaries. They
stay dictionaries; :class:`JudgeCalibrationReport`, :class:`JudgeRunReport`,
:class:`JudgeDisagreement` and :class:`FewShotExample` name their keys.
"""

from __future__ import annotations

import json
from collections import Counter, defaultdict
from collections.abc import Sequence
from typing import Any, Literal, NotRequired, TypedDict, cast

from sqlalchemy import Engine
from sqlmodel import Session

import storage.units
from review_app.calibration.few_shot import FewShotJson, few_shot_examples
from review_app.calibration.first_break import (
    FirstBreakJson,
    first_break_comparison,
    first_break_turns,
)
from review_app.calibration.like_for_like import LikeForLike, like_for_like
from review_app.calibration.reference import (
    AgreementJson,
    classify_disagreement,
    compare_to_reference,
)
from review_app.calibration.score_map import CalibrationMap, CalibrationMapJson, fit_calibration_map
from review_app.calibration.scores import (
    ReliabilityJson,
    ThresholdSweepJson,
    reliability,
    threshold_sweep,
)
from review_app.calibration.versions import VersionComparisonJson, compare_prompt_versions
from review_app.errors import InputError, NotFound
from review_app.rubrics.model import Rubric
from review_app.services.access.actors import Actor, authorize
from review_app.services.cases.case_views import CaseView, case_view
from review_app.services.judging.align import confirmation_cases
from review_app.services.judging.runs import run_name, run_verdicts
from review_app.services.judging.turn_verdicts import TurnVerdicts
from review_app.services.labels.adjudication import gold_labels
from review_app.services.review.agreement_reports import load_label_columns
from review_app.stats.alt_test import DEFAULT_EPSILON, AltTestJson, alt_test
from review_app.stats.core import EstimateJson
from storage import audit, judging
from storage.engine import read_only
from storage.models import JudgeRunPublic


class HumanLabel(TypedDict):
    reviewer: str
    label: str
    rationale: str | None


class JudgeDisagreement(TypedDict):
    """A unit where a run's code and gold differ."""

    case_id: str
    turn: int
    gold: str
    judge: str
    score: float | None
    reason: str | None
    kind: str
    """``missed_break``, ``false_alarm`` or ``wrong_break_kind``."""
    human: NotRequired[list[HumanLabel]]
    """The reviewers' labels of the unit (:func:`disagreement_explorer` adds them)."""


class GoldSource(TypedDict):
    """Where the gold behind ``vs_gold`` came from, on the judged units."""

    adjudicated: int
    unanimous: int
    note: str


class ScoreSection(TypedDict):
    """How far the run's scores can be trusted: on the scored units with break / no-break
    gold (``calibration_map`` and ``calibrated_reliability`` with a stored map)."""

    n: int
    sweep: ThresholdSweepJson
    reliability: ReliabilityJson
    calibration_map: NotRequired[CalibrationMapJson]
    calibrated_reliability: NotRequired[ReliabilityJson]


class VersionKappa(TypedDict):
    kappa: EstimateJson
    n_compared: int


class VersionRuns(TypedDict):
    rubric: str
    runs: dict[str, VersionKappa]
    """By run name: the complete runs of that version."""


class JudgeVersionsSideBySide(TypedDict):
    """Each rubric version's complete runs against that version's gold, on the ``units``
    with gold in every version (no bootstrap)."""

    units: int
    compared: list[VersionRuns]


class JudgeRunReport(TypedDict):
    """One run of the judge report (docs/reference.md, "Judge report JSON")."""

    id: int
    name: str
    judge: str
    prompt_version: str
    model: str
    endpoint: str
    """Where it was asked (a configured endpoint's name, ``host:port``); empty: imported."""
    status: str
    """As stored: ``complete``, ``partial`` (stopped), ``failed`` or ``running``."""
    source: str
    verdicts: int
    turn_verdicts: int
    conversation_verdicts: int
    errors: int
    carried_from_run: int | None
    carried_verdicts: int
    alt_test: AltTestJson
    vs_gold: AgreementJson | None
    gold_source: GoldSource
    vs_reviewers: dict[str, AgreementJson]
    like_for_like: LikeForLike
    first_break: FirstBreakJson | None
    scores: ScoreSection | None
    disagreements: list[JudgeDisagreement]


class JudgeCalibrationReport(TypedDict):
    """``judge report --json``: docs/reference.md, "Judge report JSON"."""

    rubric: str
    gold: dict[str, int]
    reviewers: list[str]
    runs: list[JudgeRunReport]
    carried_units: dict[str, int]
    """``{"labels", "gold_labels"}``: units with labels carried from the version before."""
    versions: NotRequired[VersionComparisonJson]
    """With two complete runs or more that give codes: the runs compared on shared units
    (a stopped run would shrink the shared units to the few it judged)."""
    rubric_versions: JudgeVersionsSideBySide | None


FewShotExample = FewShotJson
"""An adjudicated example in the rubric example shape, with its unit."""


def calibration_report(
    engine: Engine,
    actor: Actor,
    *,
    rubric: Rubric,
    run_ids: Sequence[int] | None = None,
    n_resamples: int = 1000,
    seed: int = 0,
    epsilon: float = DEFAULT_EPSILON,
    previous: Rubric | None = None,
) -> JudgeCalibrationReport:
    """How far each judge run agrees with humans, where it fails, and how to trust its scores.

    With ``previous`` (version N-1), ``rubric_versions`` sets each version's judge
    runs' kappa against that version's gold side by side, on the units with gold in both.

    Per run: ``alt_test`` (may the judge replace a reviewer? the headline, needs no
    gold), ``like_for_like`` (judge and reviewers on the same units against the same
    reference), ``vs_gold`` (with ``gold_source``) and ``vs_reviewers``. Turn-level
    intervals resample conversations (cluster bootstrap); proportions have Wilson
    intervals.
    """
    if isinstance(epsilon, bool) or not isinstance(epsilon, int | float) or not 0 <= epsilon < 1:
        raise InputError(f"must be a number in [0, 1), got {epsilon!r}", field="--epsilon")
    actor = authorize(engine, actor, "policy_owner")
    gold = gold_labels(engine, actor, rubric=rubric)
    columns = load_label_columns(engine, actor, rubric=rubric)
    by_reviewer: dict[str, dict[tuple[str, int], str]] = defaultdict(dict)
    for case_id, turn, reviewer, code in zip(
        columns.case_ids, columns.turns, columns.reviewers, columns.codes, strict=True
    ):
        by_reviewer[reviewer][(case_id, turn)] = code
    gold_codes = {unit: g.code for unit, g in gold.labels.items()}
    break_mapping = rubric.break_mapping()
    break_codes = set(rubric.break_codes)
    ignore = tuple(rubric.abstain_codes)
    gold_first = gold.first_break_turns(break_codes)
    runs = run_verdicts(engine, rubric, run_ids)
    report: JudgeCalibrationReport = {
        "rubric": rubric.ref,
        "gold": gold.counts(),
        "reviewers": sorted(by_reviewer),
        "runs": [],
        "carried_units": _carried_units(engine, rubric),
        "rubric_versions": None,
    }
    judged_by_run: dict[str, dict[tuple[str, int], str]] = {}
    for run, stored in runs:
        verdicts = TurnVerdicts(stored)
        judged = verdicts.coded()
        if run.status == "complete":
            judged_by_run[run_name(run)] = judged

        def compare(
            reference: dict[tuple[str, int], str], judged: dict[tuple[str, int], str] = judged
        ) -> AgreementJson:
            return compare_to_reference(
                reference=reference,
                judged=judged,
                break_mapping=break_mapping,
                ignore_codes=ignore,
                n_resamples=n_resamples,
                seed=seed,
                cluster_of=_conversation_of,
            ).to_dict()

        judge_first = first_break_turns(judged, break_codes)
        shared_cases = {c: gold_first[c] for c in gold_first if c in judge_first}
        report["runs"].append(
            {
                "id": run.id,
                "name": run_name(run),
                "judge": run.judge,
                "prompt_version": run.prompt_version,
                "model": run.model,
                "endpoint": run.endpoint,
                "status": run.status,
                "source": run.source,
                "verdicts": len(stored.ids),
                "turn_verdicts": verdicts.n_turn,
                "conversation_verdicts": len(stored.ids) - verdicts.n_turn,
                "errors": sum(1 for error in stored.errors if error),
                "carried_from_run": run.carried_from_run_id,
                "carried_verdicts": _carried_verdicts(engine, run.id),
                "alt_test": alt_test(
                    by_reviewer, judged, epsilon=epsilon, break_codes=break_codes, baseline=True
                ).to_dict(),
                "vs_gold": compare(gold_codes) if judged else None,
                "gold_source": _gold_source(gold, judged),
                "vs_reviewers": {
                    reviewer: compare(labels)
                    for reviewer, labels in sorted(by_reviewer.items())
                    if judged
                },
                "like_for_like": like_for_like(
                    by_reviewer,
                    judged,
                    cluster_of=_conversation_of,
                    n_resamples=min(n_resamples, 500),
                    seed=seed,
                ),
                "first_break": (
                    first_break_comparison(
                        reference=shared_cases, judged={c: judge_first[c] for c in shared_cases}
                    ).to_dict()
                    if shared_cases
                    else None
                ),
                "scores": _score_section(run, verdicts, gold_codes, break_mapping),
                "disagreements": _disagreements(engine, verdicts, gold_codes, break_mapping),
            }
        )
    # Only complete runs with codes: one without (scores only, or conversation-level
    # only), or a run stopped after a few units, would leave (almost) no shared unit to
    # compare the others on.
    coded_runs = {name: judged for name, judged in judged_by_run.items() if judged}
    if len(coded_runs) >= 2:
        report["versions"] = compare_prompt_versions(
            verdicts=coded_runs,
            reference=gold_codes,
            break_mapping=break_mapping,
            ignore_codes=ignore,
            n_resamples=min(n_resamples, 300),
            seed=seed,
            cluster_of=_conversation_of,
        ).to_dict()
    report["rubric_versions"] = (
        _judge_versions_side_by_side(engine, actor, [(previous, None), (rubric, runs)])
        if previous is not None
        else None
    )
    return report


def _judge_versions_side_by_side(
    engine: Engine, actor: Actor, versions: list[tuple[Rubric, Any]]
) -> JudgeVersionsSideBySide:
    """Each version's judge runs: Cohen's kappa against that version's gold, on the units
    with gold in every version (no bootstrap)."""
    golds = [
        {unit: g.code for unit, g in gold_labels(engine, actor, rubric=rubric).labels.items()}
        for rubric, _ in versions
    ]
    common = set(golds[0])
    for gold in golds[1:]:
        common &= set(gold)
    compared: list[VersionRuns] = []
    for (rubric, runs), gold in zip(versions, golds, strict=True):
        reference = {unit: code for unit, code in gold.items() if unit in common}
        kappas: dict[str, VersionKappa] = {}
        for run, stored in runs if runs is not None else run_verdicts(engine, rubric, None):
            if run.status != "complete":
                continue
            judged = {
                unit: code for unit, code in TurnVerdicts(stored).coded().items() if unit in common
            }
            result = compare_to_reference(
                reference=reference,
                judged=judged,
                break_mapping=rubric.break_mapping(),
                ignore_codes=tuple(rubric.abstain_codes),
                n_resamples=0,
            )
            kappas[run_name(run)] = {
                "kappa": result.kappa.to_dict(),
                "n_compared": result.n_compared,
            }
        compared.append({"rubric": rubric.ref, "runs": kappas})
    return {"units": len(common), "compared": compared}


def _carried_units(engine: Engine, rubric: Rubric) -> dict[str, int]:
    """Units whose reviewer labels / gold label were carried from the version before."""
    with Session(read_only(engine)) as session:
        return {
            table: storage.units.carried_units(
                session, table=table, rubric_id=rubric.id, version=rubric.version
            )
            for table in ("labels", "gold_labels")
        }


def _carried_verdicts(engine: Engine, run_id: int | None) -> int:
    if run_id is None:
        return 0
    with Session(read_only(engine)) as session:
        return judging.carried_verdicts(session, run_id=run_id)


def _conversation_of(unit: tuple[str, int]) -> str:
    return unit[0]


def _gold_source(gold: Any, judged: dict[tuple[str, int], str]) -> GoldSource:
    """Where the gold behind ``vs_gold`` came from, on the judged units."""
    sources = [g.source for unit, g in gold.labels.items() if unit in judged]
    return {
        "adjudicated": sources.count("adjudicated"),
        "unanimous": sources.count("unanimous"),
        "note": "gold from adjudication and unanimous reviewers is not a random sample: "
        "unanimous units are the easy ones, so figures against it flatter the judge",
    }


def _binary_pairs(
    verdicts: TurnVerdicts,
    gold_codes: dict[tuple[str, int], str],
    break_mapping: dict[str, str | None],
) -> tuple[list[int], list[float]]:
    columns = verdicts.columns
    y_true, scores = [], []
    for i in verdicts.rows_of(gold_codes):
        score = columns.scores[i]
        if score is None or columns.errors[i] is not None:
            continue
        turn = columns.turns[i]
        assert turn is not None
        mapped = break_mapping.get(gold_codes[(columns.case_ids[i], turn)])
        if mapped is None:
            continue
        y_true.append(1 if mapped == "break" else 0)
        scores.append(score)
    return y_true, scores


def _score_section(
    run: JudgeRunPublic,
    verdicts: TurnVerdicts,
    gold_codes: dict[tuple[str, int], str],
    break_mapping: dict[str, str | None],
) -> ScoreSection | None:
    y_true, scores = _binary_pairs(verdicts, gold_codes, break_mapping)
    if not scores:
        return None
    section: ScoreSection = {
        "n": len(scores),
        "sweep": threshold_sweep(y_true=y_true, scores=scores).to_dict(),
        "reliability": reliability(y_true=y_true, probabilities=scores).to_dict(),
    }
    if run.calibration_json:
        stored = CalibrationMap.from_dict(json.loads(run.calibration_json))
        calibrated = [float(v) for v in stored.transform(scores)]
        section["calibration_map"] = stored.to_dict()
        section["calibrated_reliability"] = reliability(
            y_true=y_true, probabilities=calibrated
        ).to_dict()
    return section


def _disagreements(
    engine: Engine,
    verdicts: TurnVerdicts,
    gold_codes: dict[tuple[str, int], str],
    break_mapping: dict[str, str | None],
) -> list[JudgeDisagreement]:
    columns = verdicts.columns
    found: list[JudgeDisagreement] = []
    ids = []
    for i in verdicts.rows_of(gold_codes):
        case_id, turn, label = columns.case_ids[i], columns.turns[i], columns.labels[i]
        assert turn is not None
        reference = gold_codes[(case_id, turn)]
        if label is None or columns.errors[i] is not None:
            continue
        kind = classify_disagreement(reference, label, break_mapping)
        if kind == "agree":
            continue
        ids.append(columns.ids[i])
        found.append(
            {
                "case_id": case_id,
                "turn": turn,
                "gold": reference,
                "judge": label,
                "score": columns.scores[i],
                "reason": None,
                "kind": kind,
            }
        )
    with Session(read_only(engine)) as session:
        reasons = judging.verdict_reasons(session, ids=ids)
    for item, verdict_id in zip(found, ids, strict=True):
        item["reason"] = reasons.get(verdict_id)
    return found


class NotEnoughGold(InputError):
    """Too few gold turns of one class to fit a calibration map.

    ``str(error)`` keeps the option and the numbers for the command line; ``sentence``
    says the same in plain words for a page.
    """

    def __init__(self, run_id: int, *, cv: int, breaks: int, clean: int) -> None:
        super().__init__(
            f"cannot calibrate run {run_id}: needs at least {cv} units of each class for "
            f"cv={cv}, got {breaks} break and {clean} no-break units",
            field="--run",
        )
        self.sentence = (
            f"Not enough gold to calibrate this judge's scores: it takes at least {cv} scored "
            f"turns with gold that break and {cv} that stay in role; there are {breaks} and "
            f"{clean}. Adjudicate more disagreements or an audit sample, then try again."
        )


def fit_run_calibration(
    engine: Engine,
    actor: Actor,
    *,
    rubric: Rubric,
    run_id: int,
    method: str = "isotonic",
    cv: int = 5,
    seed: int = 0,
) -> CalibrationMap:
    """Fit a score calibration map on the gold units and store it with the run; the map
    (its ``heldout_*`` fields describe the cross-validated fit)."""
    actor = authorize(engine, actor, "policy_owner")
    if method not in ("isotonic", "platt"):
        raise InputError("--method is isotonic or platt", field="--method")
    gold = gold_labels(engine, actor, rubric=rubric)
    gold_codes = {unit: g.code for unit, g in gold.labels.items()}
    [(_, columns)] = run_verdicts(engine, rubric, [run_id])
    y_true, scores = _binary_pairs(TurnVerdicts(columns), gold_codes, rubric.break_mapping())
    breaks = int(sum(1 for y in y_true if y))
    if min(breaks, len(y_true) - breaks) < cv:
        raise NotEnoughGold(run_id, cv=cv, breaks=breaks, clean=len(y_true) - breaks)
    try:
        fitted = fit_calibration_map(
            y_true=y_true,
            scores=scores,
            method=cast(Literal["isotonic", "platt"], method),
            cv=cv,
            seed=seed,
        )
    except ValueError as error:
        raise InputError(f"cannot calibrate run {run_id}: {error}", field="--run") from None
    with Session(engine) as session:
        stored = judging.get_run(session, run_id=run_id)
        assert stored is not None
        before = stored.calibration_json is not None
        judging.touch_run(
            session, stored, calibration_json=json.dumps(fitted.to_dict(), sort_keys=True)
        )
        audit.add_entry(
            session,
            actor=actor.name,
            action="calibration_fit",
            object_type="judge_run",
            object_key=str(run_id),
            summary={"rubric": rubric.ref, "method": method, "replaced_a_map": before},
        )
        session.commit()
    return fitted


def calibrated_probability(
    engine: Engine, actor: Actor, *, run_id: int, scores: Sequence[float]
) -> list[float]:
    authorize(engine, actor, "policy_owner")
    with Session(read_only(engine)) as session:
        run = judging.get_run(session, run_id=run_id)
        if run is None:
            raise NotFound(f"no judge run {run_id}")
        if not run.calibration_json:
            raise InputError(f"run {run_id} has no calibration map yet", field="--run")
        mapping = CalibrationMap.from_dict(json.loads(run.calibration_json))
    return [float(v) for v in mapping.transform(list(scores))]


def few_shot_material(
    engine: Engine,
    actor: Actor,
    *,
    rubric: Rubric,
    run_id: int | None = None,
    per_label: int = 1,
    seed: int = 0,
) -> list[FewShotExample]:
    """Adjudicated contrasting examples (pass / fail / borderline per label) for a prompt.

    Never from a conversation of a confirmation set (docs/reference.md, "Suggesting a
    prompt"): a unit that confirms a prompt is not shown to the prompt as an example."""

    actor = authorize(engine, actor, "policy_owner")
    gold = gold_labels(engine, actor, rubric=rubric)
    held = confirmation_cases(engine, actor, rubric=rubric)
    adjudicated = sorted(
        unit
        for unit, entry in gold.labels.items()
        if (entry.source == "adjudicated" or entry.calibration_item) and unit[0] not in held
    )
    judge_codes: dict[tuple[str, int], str] = {}
    if run_id is not None:
        # The run's codes on those units' conversations only, not the whole run.
        with Session(read_only(engine)) as session:
            run = judging.get_run(session, run_id=run_id)
            if run is None or (run.rubric_id, run.rubric_version) != (rubric.id, rubric.version):
                raise NotFound(f"no judge run {run_id} for {rubric.ref}")
            judge_codes = judging.labels_on_cases(
                session, run_id=run_id, case_ids=[case_id for case_id, _ in adjudicated]
            )
    columns = load_label_columns(engine, actor, rubric=rubric)
    agreement: Counter[tuple[str, int]] = Counter()
    raters: Counter[tuple[str, int]] = Counter()
    for case_id, turn, code in zip(columns.case_ids, columns.turns, columns.codes, strict=True):
        raters[(case_id, turn)] += 1
        if gold.labels.get((case_id, turn)) and gold.labels[(case_id, turn)].code == code:
            agreement[(case_id, turn)] += 1
    # The choice needs no text: choose first, then read the chosen conversations only
    # (not one per gold unit, hundreds at team scale).
    candidates = [
        {
            "case_id": case_id,
            "turn": turn,
            "label": gold.labels[(case_id, turn)].code,
            "reply": "",
            "why": gold.labels[(case_id, turn)].note or "",
            "judge_label": judge_codes.get((case_id, turn)),
            "agreement": agreement[(case_id, turn)] / raters[(case_id, turn)]
            if raters[(case_id, turn)]
            else 0.0,
        }
        for case_id, turn in adjudicated
    ]
    # the core gives the example shape (FewShotExample); context and reply are read below
    examples = few_shot_examples(
        candidates,
        verdict_by_code={label.code: label.verdict for label in rubric.labels},
        per_label=per_label,
        seed=seed,
    )
    with Session(read_only(engine)) as session:
        by_case: dict[str, CaseView] = {}
        for example in examples:
            case_id, turn = example["case_id"], example["turn"]
            if case_id not in by_case:
                by_case[case_id] = case_view(session, case_id=case_id)
            texts = [t for t in by_case[case_id].turns if t.turn <= turn]
            reply = texts[-1].text if texts and texts[-1].turn == turn else ""
            context = next((t.text for t in reversed(texts[:-1]) if t.actor == "user"), "")
            example["reply"], example["context"] = reply or "", context or ""
    return examples


def disagreement_explorer(
    engine: Engine,
    actor: Actor,
    *,
    rubric: Rubric,
    report_run: JudgeRunReport,
    kind: str | None = None,
    label: str | None = None,
    limit: int | None = None,
) -> list[JudgeDisagreement]:
    """A run's disagreements with gold beside the reviewers' rationales, filtered.

    ``kind``: ``missed_break`` (the judge misses a break), ``false_alarm`` (it flags a
    clean turn), ``wrong_break_kind``; ``label``: gold or judge code. ``limit``: the
    reviewers' labels (``human``) are read for the first ``limit`` rows only, the ones a
    page shows (a query per conversation; thousands of rows at team scale); every row
    is returned, the later ones without ``human``.
    """
    import storage.labels

    authorize(engine, actor, "policy_owner")
    rows = [
        item
        for item in report_run.get("disagreements", [])
        if (kind is None or item["kind"] == kind)
        and (label is None or label in (item["gold"], item["judge"]))
    ]
    with Session(read_only(engine)) as session:
        cache: dict[str, list[Any]] = {}
        for item in rows[:limit]:
            if item["case_id"] not in cache:
                cache[item["case_id"]] = storage.labels.labels_for_case(
                    session,
                    case_id=item["case_id"],
                    rubric_id=rubric.id,
                    version=rubric.version,
                )
            item["human"] = [
                {"reviewer": r.reviewer, "label": r.code, "rationale": r.rationale}
                for r in cache[item["case_id"]]
                if r.turn == item["turn"]
            ]
    return rows
