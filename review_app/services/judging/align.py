"""A better judge prompt suggested by an optimiser and confirmed on gold it never saw.

docs/reference.md, "Suggesting a prompt". ``judge align`` (and the workbench's "Suggest
a better prompt") starts a background job (:data:`ALIGN_JOB`,
registered with the job runner) that:

1. fixes three sets of gold units before anything runs, whole conversations each,
   stratified by the conversation's gold verdict: the optimiser's train and validation
   sets (together the *optimisation set*) and the rubric version's *confirmation set*
   (drawn by its first align job, reused by the next ones until its error budget is
   spent). They are recorded with the job;
2. runs GEPA (reflective prompt evolution with Pareto selection; the ``gepa`` package)
   with an adapter whose ``evaluate`` judges a batch of units through
   :func:`~review_app.services.judging.judge_runner.run_judge` (verdicts stored per
   prompt version, model and endpoint: a text already judged on a unit is never asked
   again) and whose reflection request shows the optimiser the current prompt in its
   first fenced block and the units the candidate got wrong with the reviewers' labels
   and rationales and the rubric's definitions; the proposal is the first fenced block
   of the answer. A proposal that does not render is refused before it costs a request;
3. keeps every candidate as a prompt version derived from the starting one, named
   ``<judge>-align<job>@vN``, with its optimisation-set score;
4. runs only the best candidate on the confirmation set, beside the starting version,
   and compares them with the paired test ``judge compare`` uses
   (:func:`review_app.stats.paired.compare_two_runs`) at the level this test may spend
   of the set's error budget (:func:`confirmation_level`).

No confirmation-set unit ever reaches the optimiser: the sets are disjoint by
conversation, the reflection request is built from the minibatch only (train units),
and a request or a proposal naming a confirmation conversation is refused.
"""

from __future__ import annotations

import hashlib
import json
import logging
import math
import random
import re
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, TypedDict, cast

from sqlalchemy import Engine
from sqlalchemy.exc import IntegrityError
from sqlmodel import Session

from review_app.errors import InputError
from review_app.judging import PLACEHOLDERS, JudgePrompt, check_prompt_text, event_block
from review_app.rubrics.model import Rubric
from review_app.services.access.actors import Actor, authorize
from review_app.services.jobs.runner import (
    Heartbeat,
    JobKind,
    JobOutcome,
    JobView,
    add_job_row,
    list_jobs,
    register_job_kind,
)
from review_app.services.judging.endpoints import endpoint_settings, find_endpoint
from review_app.services.judging.judge_prompts import (
    create_judge_prompt,
    list_judge_prompts,
    prompt_for_run,
)
from review_app.services.judging.judge_runner import run_judge
from review_app.services.judging.runs import run_name, run_verdicts
from review_app.services.judging.turn_verdicts import TurnVerdicts
from review_app.services.labels.adjudication import gold_labels
from review_app.services.review.agreement_reports import load_label_columns
from review_app.services.rubrics.rubric_catalog import sync_rubrics
from storage import audit, judging
from storage import cases as cases_storage
from storage import judge_prompts as prompts_storage
from storage import labels as labels_storage
from storage import prompt_align as align_storage
from storage.engine import read_only

if TYPE_CHECKING:
    from review_app.services.judging.transport import EndpointSettings
    from review_app.stats.paired import PairedComparison

log = logging.getLogger(__name__)

ALIGN_JOB = "judge_align"
"""The job kind of a prompt suggested by an optimiser and confirmed on held-out gold."""

Unit = tuple[str, int]

ERROR_BUDGET = 0.05
"""A confirmation set's whole error budget: the chance, over all the tests it serves,
that any of them confirms a version that is not better."""
MAX_TESTS = 5
"""Tests a confirmation set serves at most; the next one needs fresh gold."""
DEFAULT_BUDGET = 200
"""Metric calls (units judged, stored verdicts included) the optimiser may use."""
DEFAULT_CONFIRM_SHARE = 0.3
MINIBATCH = 3
"""Units in each reflection minibatch (GEPA's default)."""
MIN_CONFIRMATION_UNITS = 10
MIN_OPTIMISATION_UNITS = 6
VERDICTS = ("confirmed better", "not confirmed", "worse")
DISTINCT_ID_LENGTH = 8
"""Case ids at least this long are looked for in reflection requests and proposals."""
COMPONENT = "prompt"
OPTIMISER_MAX_TOKENS = 4000
JSON_KEYS = ("verdict", "start", "best", "candidates", "sets", "confirmation", "requests")
"""The keys ``judge align --json`` prints, in order."""
CEILING_REFERENCE = (
    "Dorner, Nastl & Hardt (ICLR 2025): no debiasing of a judge's verdicts saves more than "
    "half the labels unless the judge is more accurate than what it judges"
)


def confirmation_level(number: int) -> float:
    """The level of a confirmation set's ``number``-th test: ``ERROR_BUDGET / 2**number``
    (alpha spending: the levels of any number of tests sum below the budget, so the
    chance that any of them confirms by luck stays below it)."""
    return ERROR_BUDGET / 2**number


def _units_sha(units: Iterable[Unit]) -> str:
    return hashlib.sha256(json.dumps(sorted(units)).encode()).hexdigest()


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def _unit_list(units: Iterable[Unit]) -> list[dict[str, Any]]:
    return [{"case_id": case_id, "turn": turn} for case_id, turn in sorted(units)]


def _units_of(listed: Iterable[Sequence[Any]]) -> list[Unit]:
    return [(str(case_id), int(turn)) for case_id, turn in listed]


# --- the sets ------------------------------------------------------------------------------


def conversation_stratum(codes: Iterable[str], break_mapping: Mapping[str, str | None]) -> str:
    """A conversation's gold verdict: ``break`` when any of its gold units is a break,
    else ``no_break`` when any is not, else ``abstain``."""
    classes = {break_mapping.get(code) for code in codes}
    if "break" in classes:
        return "break"
    return "no_break" if "no_break" in classes else "abstain"


def split_by_conversation(
    gold: Mapping[Unit, str],
    *,
    share: float,
    seed: int,
    break_mapping: Mapping[str, str | None],
) -> tuple[set[Unit], set[Unit]]:
    """``(taken, rest)``: about ``share`` of the conversations of each stratum
    (:func:`conversation_stratum`) with all their gold units, and the others. No
    conversation is in both; the same gold and seed give the same split."""
    by_case: dict[str, list[Unit]] = {}
    for unit in sorted(gold):
        by_case.setdefault(unit[0], []).append(unit)
    strata: dict[str, list[str]] = {}
    for case_id, units in by_case.items():
        stratum = conversation_stratum((gold[u] for u in units), break_mapping)
        strata.setdefault(stratum, []).append(case_id)
    rng = random.Random(seed)
    taken: set[Unit] = set()
    for stratum in sorted(strata):
        cases = sorted(strata[stratum])
        rng.shuffle(cases)
        count = round(share * len(cases))
        if len(cases) >= 2:
            count = min(max(count, 1), len(cases) - 1)
        for case_id in cases[:count]:
            taken.update(by_case[case_id])
    return taken, set(gold) - taken


# --- the plan: what a job would do and cost --------------------------------------------------


@dataclass(frozen=True)
class ConfirmationBudget:
    """A confirmation set's error budget: how many tests it served and what is left."""

    set_id: int | None
    """``None``: the set is new (drawn when the job starts)."""
    units: int
    tests_served: int
    alpha_spent: float
    source: str

    @property
    def spent(self) -> bool:
        return self.tests_served >= MAX_TESTS

    @property
    def next_level(self) -> float | None:
        return None if self.spent else confirmation_level(self.tests_served + 1)

    def sentence(self) -> str:
        if self.set_id is None:
            return (
                f"A new confirmation set of {self.units} gold units is drawn; its first test "
                f"spends {confirmation_level(1):g} of its error budget of {ERROR_BUDGET:g}."
            )
        served = f"{self.tests_served} test{'' if self.tests_served == 1 else 's'}"
        if self.spent:
            return (
                f"The confirmation set ({self.units} gold units) has served {served}, its "
                f"whole error budget ({self.alpha_spent:.4g} of {ERROR_BUDGET:g} spent): a "
                "further confirmation on it is refused. Draw fresh gold (an audit sample), "
                "label it, and the next align job draws a new confirmation set from it."
            )
        return (
            f"The confirmation set ({self.units} gold units) has served {served} of "
            f"{MAX_TESTS} ({self.alpha_spent:.4g} of its error budget {ERROR_BUDGET:g} "
            f"spent); this test spends {self.next_level:.4g}."
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "set_id": self.set_id,
            "units": self.units,
            "tests_served": self.tests_served,
            "max_tests": MAX_TESTS,
            "alpha_spent": self.alpha_spent,
            "error_budget": ERROR_BUDGET,
            "next_level": self.next_level,
            "source": self.source,
            "sentence": self.sentence(),
        }


@dataclass(frozen=True)
class AlignPlan:
    """What an align job would do before it starts: its sets, its budget and its cost."""

    rubric: str
    start: str
    endpoint: str
    optimizer: str
    budget: int
    confirm_share: float
    seed: int
    train: list[Unit]
    validation: list[Unit]
    confirmation: list[Unit]
    confirmation_budget: ConfirmationBudget
    judge_requests_at_most: int
    optimiser_requests_at_most: int

    @property
    def optimisation(self) -> list[Unit]:
        return sorted(self.train + self.validation)

    def sentence(self) -> str:
        return (
            f"At most {self.judge_requests_at_most:,d} requests to {self.endpoint} "
            f"({self.budget:,d} for the optimiser's evaluations, fewer where a prompt text "
            f"was already judged on a unit; {2 * len(self.confirmation):,d} for the "
            f"confirmation) and at most {self.optimiser_requests_at_most:,d} to "
            f"{self.optimizer} (one per proposal). Sets: {len(self.train)} train and "
            f"{len(self.validation)} validation units for the optimiser, "
            f"{len(self.confirmation)} confirmation units it never sees. "
            + self.confirmation_budget.sentence()
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "rubric": self.rubric,
            "start": self.start,
            "endpoint": self.endpoint,
            "optimizer": self.optimizer,
            "budget": self.budget,
            "confirm_share": self.confirm_share,
            "seed": self.seed,
            "sets": {
                "train": _unit_list(self.train),
                "validation": _unit_list(self.validation),
                "confirmation": _unit_list(self.confirmation),
            },
            "confirmation_budget": self.confirmation_budget.to_dict(),
            "requests_at_most": {
                "judge": self.judge_requests_at_most,
                "optimiser": self.optimiser_requests_at_most,
            },
            "sentence": self.sentence(),
        }


def _budget_of(session: Session, set_row: Any) -> ConfirmationBudget:
    tests = align_storage.confirmation_tests(session, set_id=set_row.id)
    return ConfirmationBudget(
        set_id=set_row.id,
        units=len(json.loads(set_row.units_json)),
        tests_served=len(tests),
        alpha_spent=sum(t.alpha_spent for t in tests),
        source=set_row.source,
    )


def _seen_by_optimisers(engine: Engine, rubric: Rubric) -> set[str]:
    """Conversations any align job of ``rubric`` showed its optimiser (or may have)."""
    from storage import jobs as job_storage

    seen: set[str] = set()
    with Session(read_only(engine)) as session:
        for job in job_storage.list_jobs(session, limit=100_000, kinds=[ALIGN_JOB]):
            parameters = json.loads(job.parameters_json)
            if parameters.get("rubric") != rubric.ref:
                continue
            sets = parameters.get("sets", {})
            for name in ("train", "validation"):
                seen.update(str(unit[0]) for unit in sets.get(name, []))
    return seen


def plan_align(
    engine: Engine,
    actor: Actor,
    *,
    rubric: Rubric,
    start: str,
    endpoint: str,
    optimizer: str,
    budget: int = DEFAULT_BUDGET,
    confirm_share: float = DEFAULT_CONFIRM_SHARE,
    seed: int = 0,
) -> AlignPlan:
    """The sets and the cost of an align job, before anything runs (policy owners).

    The confirmation set is the rubric version's newest one while its budget lasts;
    without one, ``confirm_share`` of the gold conversations (stratified by gold
    verdict); once spent, a fresh one from gold in conversations no align job showed its
    optimiser. Refused (:class:`InputError`) when the budget is spent and no fresh gold
    is there, or when a set would be too small."""

    actor = authorize(engine, actor, "policy_owner")
    if isinstance(budget, bool) or not isinstance(budget, int) or budget < 10:
        raise InputError(f"the budget is at least 10 calls, got {budget!r}", field="--budget")
    if not isinstance(confirm_share, int | float) or not 0.05 <= confirm_share <= 0.8:
        raise InputError(
            f"the confirmation share is from 0.05 to 0.8, got {confirm_share!r}",
            field="--confirm-share",
        )
    find_endpoint(endpoint)
    find_endpoint(optimizer)
    start_prompt = prompt_for_run(engine, actor, rubric=rubric, ref=start)
    gold = {unit: g.code for unit, g in gold_labels(engine, actor, rubric=rubric).labels.items()}
    if not gold:
        raise InputError(
            "no unit has gold yet: adjudicate disagreements or draw an audit sample first",
            field="--rubric",
        )
    mapping = rubric.break_mapping()
    with Session(read_only(engine)) as session:
        latest = align_storage.latest_confirmation_set(
            session, rubric_id=rubric.id, version=rubric.version
        )
        current = _budget_of(session, latest) if latest is not None else None
        stored_units = _units_of(json.loads(latest.units_json)) if latest is not None else []
    if current is not None and not current.spent:
        confirmation = [u for u in stored_units if u in gold]
        held = {case_id for case_id, _ in stored_units}
        optimisation = {u: c for u, c in gold.items() if u[0] not in held}
        confirmation_budget = current
    else:
        if current is not None:  # spent: fresh gold, never shown to an optimiser
            seen = _seen_by_optimisers(engine, rubric)
            with Session(read_only(engine)) as session:
                for row in align_storage.confirmation_sets(
                    session, rubric_id=rubric.id, version=rubric.version
                ):
                    seen.update(str(u[0]) for u in json.loads(row.units_json))
            fresh = {u: c for u, c in gold.items() if u[0] not in seen}
            if len(fresh) < MIN_CONFIRMATION_UNITS:
                raise InputError(
                    current.sentence()
                    + f" Gold in conversations no optimiser saw: {len(fresh)} units (at "
                    f"least {MIN_CONFIRMATION_UNITS} needed): review-app assign --rubric "
                    f"{rubric.ref} --reviewers A,B --audit-sample K",
                    field="confirmation set",
                )
            confirmation = sorted(fresh)
            held = {case_id for case_id, _ in confirmation}
            optimisation = {u: c for u, c in gold.items() if u[0] not in held}
            source = "fresh"
        else:
            taken, rest = split_by_conversation(
                gold, share=confirm_share, seed=seed, break_mapping=mapping
            )
            confirmation = sorted(taken)
            optimisation = {u: gold[u] for u in rest}
            source = "split"
        confirmation_budget = ConfirmationBudget(None, len(confirmation), 0, 0.0, source)
    if len(confirmation) < MIN_CONFIRMATION_UNITS:
        raise InputError(
            f"the confirmation set would hold {len(confirmation)} gold units (at least "
            f"{MIN_CONFIRMATION_UNITS}): add gold or raise --confirm-share",
            field="--confirm-share",
        )
    if len(optimisation) < MIN_OPTIMISATION_UNITS:
        raise InputError(
            f"the optimisation set would hold {len(optimisation)} gold units (at least "
            f"{MIN_OPTIMISATION_UNITS}): add gold or lower --confirm-share",
            field="--confirm-share",
        )
    validation, train = split_by_conversation(
        optimisation, share=0.5, seed=seed + 1, break_mapping=mapping
    )
    if not train or not validation:
        raise InputError(
            "the optimisation set's gold is in one conversation: it cannot be split into "
            "train and validation",
            field="--rubric",
        )
    optimiser_at_most = max(1, math.ceil(max(0, budget - len(validation)) / MINIBATCH))
    return AlignPlan(
        rubric=rubric.ref,
        start=start_prompt.ref,
        endpoint=endpoint,
        optimizer=optimizer,
        budget=budget,
        confirm_share=float(confirm_share),
        seed=seed,
        train=sorted(train),
        validation=sorted(validation),
        confirmation=confirmation,
        confirmation_budget=confirmation_budget,
        judge_requests_at_most=budget + 2 * len(confirmation),
        optimiser_requests_at_most=optimiser_at_most,
    )


def start_align_job(
    engine: Engine,
    actor: Actor,
    *,
    rubric: Rubric,
    start: str,
    endpoint: str,
    optimizer: str,
    budget: int = DEFAULT_BUDGET,
    confirm_share: float = DEFAULT_CONFIRM_SHARE,
    seed: int = 0,
) -> JobView:
    """Queue an align job (policy owners): its sets are fixed now and recorded with it
    (a new confirmation set is stored now too). Refused while another align job of the
    rubric version is queued or running (both would spend the same budget)."""

    plan = plan_align(
        engine,
        actor,
        rubric=rubric,
        start=start,
        endpoint=endpoint,
        optimizer=optimizer,
        budget=budget,
        confirm_share=confirm_share,
        seed=seed,
    )
    for job in list_jobs(engine, actor, limit=200, kinds=[ALIGN_JOB]):
        if job.parameters.get("rubric") == rubric.ref and not job.finished:
            raise InputError(
                f"align job {job.id} runs on {rubric.ref}; wait for it or stop it "
                "(both would spend the same confirmation set's budget)",
                field="--background",
            )
    with Session(engine) as session:
        set_id = plan.confirmation_budget.set_id
        if set_id is None:
            row = align_storage.add_confirmation_set(
                session,
                rubric_id=rubric.id,
                rubric_version=rubric.version,
                units_json=json.dumps(sorted(plan.confirmation)),
                units_sha256=_units_sha(plan.confirmation),
                alpha=ERROR_BUDGET,
                max_tests=MAX_TESTS,
                source=plan.confirmation_budget.source,
                created_by=actor.name,
            )
            set_id = row.id
        parameters: dict[str, Any] = {
            "rubric": plan.rubric,
            "prompt": plan.start,
            "endpoint": endpoint,
            "optimizer": optimizer,
            "budget": budget,
            "confirm_share": plan.confirm_share,
            "seed": seed,
            "confirmation_set": set_id,
            "sets": {
                "train": sorted(plan.train),
                "validation": sorted(plan.validation),
                "confirmation": sorted(plan.confirmation),
            },
            "requests_at_most": {
                "judge": plan.judge_requests_at_most,
                "optimiser": plan.optimiser_requests_at_most,
            },
        }
        view = add_job_row(session, actor, kind=ALIGN_JOB, parameters=parameters)
        session.commit()
    return view


# --- the optimiser's endpoint ------------------------------------------------------------------


_FENCE = re.compile(r"^(?P<fence>`{3,}|~{3,})[^\n]*\n(?P<body>.*?)\n(?P=fence)[ \t]*$", re.M | re.S)


def first_fenced_block(text: str) -> str | None:
    """The body of the first fenced code block of ``text`` (``` or ~~~), or ``None``."""
    found = _FENCE.search(text)
    return None if found is None else found["body"]


def _fence_for(text: str) -> str:
    """A fence longer than any run of backticks in ``text``."""
    runs = [len(run) for run in re.findall(r"`+", text)]
    return "`" * max(3, max(runs, default=0) + 1)


def reflection_request(current: str, rubric: Rubric, records: Sequence[Mapping[str, Any]]) -> str:
    """What the optimiser is asked: the current prompt in the first fenced block, the
    rubric's definitions, and the units the prompt got wrong (GEPA's reflection)."""
    fence = _fence_for(current)
    definitions = "\n".join(
        f"- {label.code} ({label.verdict}): {label.title}. {label.definition}".rstrip()
        for label in rubric.labels
    )
    examples = []
    for number, record in enumerate(records, 1):
        lines = [f"## Example {number}"]
        for key, value in record.items():
            if isinstance(value, list):
                shown = "\n".join(f"- {item}" for item in value) or "- (none)"
            else:
                shown = str(value)
            lines.append(f"### {key}\n{shown}")
        examples.append("\n".join(lines))
    shown_examples = "\n\n".join(examples) or "(the prompt got every unit of this batch right)"
    known = ", ".join("$" + name for name in sorted(PLACEHOLDERS))
    return (
        "A judge model labels chatbot turns with a rubric's codes. It was given this prompt "
        "template:\n"
        f"{fence}\n{current}\n{fence}\n\n"
        f"The rubric ({rubric.ref}) and its codes:\n{definitions}\n\n"
        "Turns the judge labelled differently from the reviewers' gold label, with the "
        "reviewers' labels and rationales:\n\n"
        f"{shown_examples}\n\n"
        "Write an improved prompt template that would make the judge agree with the "
        "reviewers. Keep it a template: it must use $codes and one of $conversation, $recent "
        f"or $reply; the placeholders known are {known} (write $$ for a dollar sign). Put "
        "the whole new template in one fenced code block; nothing else in a code block."
    )


def _ask_optimiser(settings: EndpointSettings, request: str) -> str:
    """One chat request to the optimiser's endpoint; its answer's text. Retries
    connection failures, 429 and 5xx with backoff; errors never show the key."""
    import httpx

    body = {
        "model": settings.model,
        "messages": [{"role": "user", "content": request}],
        "temperature": 0,
        "max_tokens": max(settings.max_tokens, OPTIMISER_MAX_TOKENS),
    }
    headers = {"Content-Type": "application/json"}
    if settings.api_key:
        headers["Authorization"] = f"Bearer {settings.api_key}"
    problem = "no attempt"
    for attempt in range(settings.retries + 1):
        if attempt:
            time.sleep(min(30.0, 0.5 * 2 ** (attempt - 1)))
        try:
            response = httpx.post(
                f"{settings.base_url}/chat/completions",
                json=body,
                headers=headers,
                timeout=settings.timeout,
            )
        except httpx.HTTPError as error:
            problem = f"{type(error).__name__}: {error}"
            continue
        if response.status_code == 429 or response.status_code >= 500:
            problem = f"HTTP {response.status_code}"
            continue
        if response.status_code >= 400:
            text = settings.redact(response.text) or ""
            raise RuntimeError(
                f"the optimiser answered HTTP {response.status_code}: {text[:300]!r}"
            )
        try:
            content = response.json()["choices"][0]["message"]["content"]
        except (ValueError, KeyError, IndexError, TypeError):
            content = None
        if not isinstance(content, str):
            raise RuntimeError("the optimiser's answer is not a chat-completions response")
        return content
    raise RuntimeError(f"the optimiser failed: {settings.redact(problem)}")


# --- the job ---------------------------------------------------------------------------------


class AlignStopped(Exception):
    """A Stop was asked for (or the job's lease was lost) while the optimiser ran."""


@dataclass
class _Version:
    id: int
    ref: str
    prompt: JudgePrompt


@dataclass
class _Aligner:
    """GEPA's adapter (``evaluate``, ``make_reflective_dataset``, ``propose_new_texts``)
    over the project's judge runner and the optimiser's endpoint."""

    engine: Engine
    actor: Actor
    job_id: int
    rubric: Rubric
    start: _Version
    judge_settings: list[EndpointSettings]
    optimiser_settings: EndpointSettings
    gold: dict[Unit, str]
    confirmation_cases: frozenset[str]
    optimisation: frozenset[Unit]
    stop: Callable[[], bool]
    progress: Callable[[int, int], None]
    total: int
    budget: int
    judge_requests: int = 0
    optimiser_requests: int = 0
    metric_calls: int = 0
    refused: list[str] = field(default_factory=list)
    versions: dict[str, _Version] = field(default_factory=dict)
    scores: dict[int, dict[Unit, float]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.versions[self.start.prompt.sha256] = self.start

    @property
    def judge_name(self) -> str:
        return f"{self.start.prompt.judge}-align{self.job_id}"[:64]

    # -- prompt versions

    def version_for(self, text: str) -> _Version:
        """The stored version of ``text``: an existing one with the same text for this
        rubric version, else a new ``<judge>-align<job>@vN`` derived from the start.
        :class:`InputError` when the text does not render as a template."""

        sha = _sha(text)
        found = self.versions.get(sha)
        if found is not None:
            return found
        check_prompt_text(text, source=f"align job {self.job_id}", field="proposal")
        with Session(read_only(self.engine)) as session:
            row = prompts_storage.find_by_sha256(
                session, rubric_id=self.rubric.id, sha256=sha, rubric_version=self.rubric.version
            )
        if row is not None:
            assert row.id is not None
            version = _Version(
                row.id,
                f"{row.judge}@v{row.version}",
                JudgePrompt(
                    judge=row.judge,
                    version=f"v{row.version}",
                    text=row.text,
                    source=row.source or f"{row.rubric_id}/{row.judge}@v{row.version} (stored)",
                ),
            )
        else:
            stored = create_judge_prompt(
                self.engine,
                self.actor,
                rubric=self.rubric,
                judge=self.judge_name,
                text=text,
                derived_from=self.start.ref,
                source=f"judge align job {self.job_id}",
            )
            version = _Version(stored.id, stored.ref, stored.as_prompt())
        self.versions[sha] = version
        if version.id != self.start.id:
            self._keep(version)
        return version

    def _keep(self, version: _Version) -> None:
        scored = self.scores.get(version.id, {})
        score = sum(scored.values()) / len(scored) if scored else None
        with Session(self.engine) as session:
            align_storage.keep_candidate(
                session,
                job_id=self.job_id,
                prompt_id=version.id,
                score=score,
                units=len(scored),
                now=datetime.now(UTC),
            )
            session.commit()

    # -- judging

    def judge(self, version: _Version, units: Sequence[Unit]) -> dict[Unit, tuple[str | None, str]]:
        """``unit -> (code, reason or error)`` of ``version`` on ``units``: stored
        verdicts where there are, the endpoint asked for the others."""

        if self.stop():
            raise AlignStopped
        summary = run_judge(
            self.engine,
            self.actor,
            rubric=self.rubric,
            prompt=version.prompt,
            settings=self.judge_settings,
            case_ids=sorted({case_id for case_id, _ in units}),
            units=list(units),
            scope=f"align job {self.job_id}",
            stop=self.stop,
        )
        self.judge_requests += summary.asked
        self.progress(min(self.metric_calls, self.budget), self.total)
        if summary.stopped:
            raise AlignStopped
        wanted = set(units)
        with Session(read_only(self.engine)) as session:
            rows = judging.verdicts(session, run_id=summary.run_id)
        return {
            (row.case_id, row.turn): (row.label, row.reason or row.error or "")
            for row in rows
            if row.turn is not None and (row.case_id, row.turn) in wanted
        }

    def evaluate(
        self, batch: list[dict[str, Any]], candidate: dict[str, str], capture_traces: bool = False
    ) -> Any:
        from gepa import EvaluationBatch

        units = [(item["case_id"], item["turn"]) for item in batch]
        # GEPA checks its budget between iterations: its last one may go past it. The
        # units past the budget are not judged (scored wrong, never asked), so the
        # optimisation never sends more than the budget's requests.
        allowed = units[: max(0, self.budget - self.metric_calls)]
        self.metric_calls += len(units)
        try:
            version = self.version_for(candidate[COMPONENT])
        except InputError as refused:  # never sent: scored as wrong on every unit
            traces = [{"unit": u, "code": None, "reason": refused.describe()} for u in units]
            return EvaluationBatch(
                outputs=[None] * len(units),
                scores=[0.0] * len(units),
                trajectories=traces if capture_traces else None,
            )
        answers = self.judge(version, allowed) if allowed else {}
        scores = []
        for unit in units:
            code = answers.get(unit, (None, ""))[0]
            scores.append(1.0 if code is not None and code == self.gold[unit] else 0.0)
        mine = self.scores.setdefault(version.id, {})
        for unit, score in zip(units, scores, strict=True):
            if unit in self.optimisation and unit in answers:
                mine[unit] = score
        if version.id != self.start.id:
            self._keep(version)
        traces = []
        for unit in units:
            code, reason = answers.get(unit, (None, "not judged: the budget is spent"))
            traces.append({"unit": unit, "code": code, "reason": reason})
        return EvaluationBatch(
            outputs=[t["code"] for t in traces],
            scores=scores,
            trajectories=traces if capture_traces else None,
        )

    # -- reflection

    def make_reflective_dataset(
        self, candidate: dict[str, str], eval_batch: Any, components_to_update: list[str]
    ) -> dict[str, list[dict[str, Any]]]:
        traces = eval_batch.trajectories or []
        wrong = [
            trace
            for trace, score in zip(traces, eval_batch.scores, strict=True)
            if score < 1.0 and trace["unit"] in self.gold
        ]
        records = [self._record(trace) for trace in wrong]
        return {name: records for name in components_to_update}

    def _record(self, trace: Mapping[str, Any]) -> dict[str, Any]:
        case_id, turn = trace["unit"]
        if case_id in self.confirmation_cases:  # the sets are disjoint: never happens
            raise RuntimeError(f"a confirmation unit ({case_id}) reached the reflection")
        with Session(read_only(self.engine)) as session:
            transcripts = cases_storage.judge_transcripts(session, case_ids=[case_id])
            rows = labels_storage.labels_for_case(
                session, case_id=case_id, rubric_id=self.rubric.id, version=self.rubric.version
            )
        role, events = transcripts.get(case_id, (None, []))
        shown = []
        for event in events:
            if event.turn > turn:
                break
            shown.append(
                event_block(
                    {
                        "turn": event.turn,
                        "actor": event.actor,
                        "text": event.text,
                        "observed_actions": json.loads(event.actions_json)
                        if event.actions_json
                        else [],
                        "set_role": event.set_role,
                    }
                )
            )
        reviewers = [
            f"{row.reviewer}: {row.code}" + (f" ({row.rationale})" if row.rationale else "")
            for row in rows
            if row.turn == turn
        ]
        return {
            "Unit": f"turn {turn} of conversation {case_id}",
            "Chatbot role": role or "(not recorded)",
            "Conversation up to the judged turn (last events)": "\n".join(shown[-6:]),
            "Judge's answer": f"{trace['code'] or 'no code'}: {trace['reason']}",
            "Gold label": self.gold[(case_id, turn)],
            "Reviewers' labels and rationales": reviewers,
        }

    def propose_new_texts(
        self,
        candidate: dict[str, str],
        reflective_dataset: Mapping[str, Sequence[Mapping[str, Any]]],
        components_to_update: list[str],
    ) -> dict[str, str]:
        if self.stop():
            raise AlignStopped
        proposed = dict(candidate)
        for name in components_to_update:
            current = candidate[name]
            request = reflection_request(current, self.rubric, reflective_dataset.get(name, []))
            leaked = self._confirmation_case_in(request)
            if leaked is not None:
                raise RuntimeError(f"a confirmation unit ({leaked}) would reach the optimiser")
            answer = self._answer(request)
            text = first_fenced_block(answer)
            why = self._refusal(text)
            if why is not None:
                self.refused.append(why)
                log.info("align job %s: proposal refused: %s", self.job_id, why)
                continue  # the current text again: judged already, no request
            assert text is not None
            proposed[name] = text
        return proposed

    def _confirmation_case_in(self, text: str) -> str | None:
        """A confirmation conversation's id found in ``text`` as a word. Ids shorter
        than :data:`DISTINCT_ID_LENGTH` are not looked for (``12`` would be found in
        "turn 12"): the sets' disjointness already keeps their units out."""
        for case_id in self.confirmation_cases:
            if len(case_id) < DISTINCT_ID_LENGTH:
                continue
            if re.search(rf"(?<![\w-]){re.escape(case_id)}(?![\w-])", text):
                return case_id
        return None

    def _refusal(self, text: str | None) -> str | None:
        if text is None:
            return "the answer holds no fenced code block"
        try:
            check_prompt_text(text, source="proposal", field="proposal")
        except InputError as error:
            return error.describe()
        leaked = self._confirmation_case_in(text)
        if leaked is not None:
            return f"it names a conversation of the confirmation set ({leaked})"
        return None

    def _answer(self, request: str) -> str:
        """The optimiser's answer: replayed when this job asked it before (a resumed
        job), else asked and kept."""
        sha = _sha(request)
        with Session(read_only(self.engine)) as session:
            stored = align_storage.stored_proposal(session, job_id=self.job_id, request_sha256=sha)
        if stored is not None:
            return stored
        answer = _ask_optimiser(self.optimiser_settings, request)
        self.optimiser_requests += 1
        try:
            with Session(self.engine) as session:
                align_storage.add_proposal(
                    session,
                    job_id=self.job_id,
                    request_sha256=sha,
                    answer=self.optimiser_settings.redact(answer) or "",
                    now=datetime.now(UTC),
                )
                session.commit()
        except IntegrityError:  # kept by another attempt meanwhile
            pass
        return answer


class _QuietLogger:
    def log(self, message: str) -> None:
        log.debug("gepa: %s", message)


def _load_start(engine: Engine, actor: Actor, rubric: Rubric, ref: str) -> _Version:

    stored = list_judge_prompts(engine, actor, rubric_id=rubric.id).get(ref)
    return _Version(stored.id, stored.ref, stored.as_prompt())


def run_align_job(
    engine: Engine,
    actor: Actor,
    *,
    job_id: int,
    parameters: Mapping[str, Any],
    stop: Callable[[], bool],
    progress: Callable[[int, int], None],
) -> dict[str, Any]:
    """Run an align job (the worker calls this as the person who started it): GEPA on
    the job's optimisation set, then the best candidate's confirmation. Returns the
    result (``stopped`` true when a Stop came first: the candidates are kept)."""
    import gepa

    actor = authorize(engine, actor, "policy_owner")
    rubric = sync_rubrics(engine, actor).get(parameters["rubric"])
    start = _load_start(engine, actor, rubric, parameters["prompt"])
    sets = parameters["sets"]
    train = _units_of(sets["train"])
    validation = _units_of(sets["validation"])
    confirmation = _units_of(sets["confirmation"])
    gold = {u: g.code for u, g in gold_labels(engine, actor, rubric=rubric).labels.items()}
    train = [u for u in train if u in gold]
    validation = [u for u in validation if u in gold]
    budget = int(parameters["budget"])
    seed = int(parameters.get("seed", 0))
    aligner = _Aligner(
        engine=engine,
        actor=actor,
        job_id=job_id,
        rubric=rubric,
        start=start,
        judge_settings=endpoint_settings(parameters["endpoint"]),
        optimiser_settings=endpoint_settings(parameters["optimizer"])[0],
        gold=gold,
        confirmation_cases=frozenset(case_id for case_id, _ in confirmation),
        optimisation=frozenset(train + validation),
        stop=stop,
        progress=progress,
        total=budget + 2 * len(confirmation),
        budget=budget,
    )
    result: dict[str, Any] = {
        "verdict": None,
        "start": start.ref,
        "best": None,
        "candidates": [],
        "sets": {
            "optimisation": _unit_list(train + validation),
            "confirmation": _unit_list(confirmation),
        },
        "confirmation": None,
        "requests": {},
        "stopped": False,
        "refused_proposals": [],
    }

    def finish() -> dict[str, Any]:
        result["candidates"] = _candidates(engine, job_id)
        result["requests"] = {
            "judge": aligner.judge_requests,
            "optimiser": aligner.optimiser_requests,
        }
        result["refused_proposals"] = aligner.refused
        started = aligner.scores.get(start.id, {})
        result["start_score"] = {
            "optimisation_score": sum(started.values()) / len(started) if started else None,
            "scored_units": len(started),
        }
        return result

    def as_items(units: Sequence[Unit]) -> list[dict[str, Any]]:
        return [{"case_id": case_id, "turn": turn} for case_id, turn in units]

    try:
        optimised: Any = gepa.optimize(
            seed_candidate={COMPONENT: start.prompt.text},
            trainset=as_items(train),
            valset=as_items(validation),
            adapter=cast(Any, aligner),
            max_metric_calls=budget,
            reflection_minibatch_size=MINIBATCH,
            candidate_selection_strategy="pareto",
            skip_perfect_score=True,
            seed=seed,
            logger=_QuietLogger(),
            raise_on_exception=True,
            stop_callbacks=[lambda _state: stop()],
            display_progress_bar=False,
        )
    except AlignStopped:
        result["stopped"] = True
        return finish()
    if stop():
        result["stopped"] = True
        return finish()
    found = optimised.best_candidate
    best_text = found if isinstance(found, str) else found[COMPONENT]
    best = aligner.version_for(best_text)
    result["best"] = best.ref
    try:
        result["confirmation"], result["verdict"] = _confirm(
            engine, actor, aligner, rubric, best, confirmation, gold, parameters, seed
        )
    except AlignStopped:
        result["stopped"] = True
    aligner.progress(aligner.total, aligner.total)
    return finish()


def _candidates(engine: Engine, job_id: int) -> list[dict[str, Any]]:
    with Session(read_only(engine)) as session:
        rows = align_storage.candidates(session, job_id=job_id)
        found = []
        for row in rows:
            prompt = prompts_storage.get_prompt_by_id(session, prompt_id=row.prompt_id)
            assert prompt is not None
            found.append(
                {
                    "name": f"{prompt.judge}@v{prompt.version}",
                    "optimisation_score": row.optimisation_score,
                    "scored_units": row.scored_units,
                }
            )
    return found


def _confirm(
    engine: Engine,
    actor: Actor,
    aligner: _Aligner,
    rubric: Rubric,
    best: _Version,
    confirmation: list[Unit],
    gold: Mapping[Unit, str],
    parameters: Mapping[str, Any],
    seed: int,
) -> tuple[dict[str, Any], str]:
    """The best candidate against the start on the confirmation set, once: the paired
    test at this test's level of the set's budget, recorded (a resumed job reuses the
    test it recorded)."""
    from review_app.stats.paired import compare_two_runs

    set_id = int(parameters["confirmation_set"])
    units = [u for u in confirmation if u in gold]
    if best.id == aligner.start.id:
        with Session(read_only(engine)) as session:
            set_row = align_storage.get_confirmation_set(session, set_id=set_id)
            assert set_row is not None
            budget = _budget_of(session, set_row)
        return (
            {
                "tested": False,
                "why": "no candidate scored above the starting version on the optimisation "
                "set: nothing to confirm, and no share of the error budget was spent",
                "effect": None,
                "interval": None,
                "p_value": None,
                "alpha_spent": 0.0,
                "budget": budget.to_dict(),
            },
            "not confirmed",
        )
    with Session(read_only(engine)) as session:
        set_row = align_storage.get_confirmation_set(session, set_id=set_id)
        assert set_row is not None
        earlier = align_storage.test_of_job(session, set_id=set_id, job_id=aligner.job_id)
        budget = _budget_of(session, set_row)
    if earlier is None and budget.spent:
        raise InputError(budget.sentence(), field="confirmation set")
    starts = aligner.judge(aligner.start, units)
    bests = aligner.judge(best, units)
    first = {u: code for u, (code, _) in starts.items() if code is not None}
    second = {u: code for u, (code, _) in bests.items() if code is not None}
    columns = load_label_columns(engine, actor, rubric=rubric)
    wanted = set(units)
    reviewers: dict[str, dict[Unit, str]] = {}
    for case_id, turn, reviewer, code in zip(
        columns.case_ids, columns.turns, columns.reviewers, columns.codes, strict=True
    ):
        if (case_id, turn) in wanted:
            reviewers.setdefault(reviewer, {})[(case_id, turn)] = code
    comparison = compare_two_runs(
        gold={u: gold[u] for u in units},
        first=first,
        second=second,
        break_mapping=rubric.break_mapping(),
        names=(aligner.start.ref, best.ref),
        ignore_codes=tuple(rubric.abstain_codes),
        cluster_of=lambda unit: unit[0],
        reviewers=reviewers,
        n_resamples=1000,
        seed=seed,
        min_units=1,
    )
    p_value = comparison.mcnemar.p_value
    (_, only_start), (only_best, _) = comparison.mcnemar.table
    effect = comparison.kappa_difference
    number, level, verdict = _spend(
        engine,
        actor,
        set_id=set_id,
        budget=budget,
        earlier=earlier,
        comparison=comparison,
        kind="align",
        job_id=aligner.job_id,
    )
    with Session(read_only(engine)) as session:
        set_row = align_storage.get_confirmation_set(session, set_id=set_id)
        assert set_row is not None
        after = _budget_of(session, set_row)
    alt = None
    if comparison.alt_test is not None:
        alt = comparison.alt_test[best.ref].to_dict()
    return (
        {
            "tested": True,
            "measure": "Cohen's kappa against gold, best - start (paired, conversation bootstrap)",
            "effect": effect.value,
            "interval": list(effect.ci95) if effect.ci95 is not None else None,
            "interval_reason": effect.reason,
            "accuracy_difference": comparison.accuracy_difference.to_dict(),
            "p_value": p_value,
            "test": "exact McNemar on break / no break "
            f"(only {aligner.start.ref} right: {only_start}, only {best.ref} right: {only_best})",
            "test_number": number,
            "alpha_spent": level,
            "units": comparison.n_units,
            "conversations": comparison.n_conversations,
            "budget": after.to_dict(),
            "ceiling": ceiling(gold, second, units, rubric),
            "alt_test": alt,
            "alt_test_units": comparison.alt_test_units,
        },
        verdict,
    )


def _test_verdict(comparison: PairedComparison, level: float) -> str:
    """``confirmed better`` when McNemar's test finds the second right more often at
    ``level``; ``worse`` when it finds the first right more often, or the kappa
    difference's interval lies below 0; else ``not confirmed``."""
    (_, only_first), (only_second, _) = comparison.mcnemar.table
    effect = comparison.kappa_difference
    if comparison.mcnemar.p_value <= level:
        return "confirmed better" if only_second > only_first else "worse"
    if effect.ci95 is not None and effect.ci95[1] < 0:
        return "worse"
    return "not confirmed"


def _spend(
    engine: Engine,
    actor: Actor,
    *,
    set_id: int,
    budget: ConfirmationBudget,
    earlier: Any,
    comparison: PairedComparison,
    kind: str,
    job_id: int | None,
) -> tuple[int, float, str]:
    """Record a test on the confirmation set at the next level of its budget (or the
    test ``earlier`` recorded, for a resumed job): ``(number, level, verdict)``.
    Refused once the set has served :data:`MAX_TESTS` tests."""
    if earlier is not None:
        level = confirmation_level(earlier.number)
        return earlier.number, level, _test_verdict(comparison, level)
    for attempt in range(5):
        number = budget.tests_served + 1 + attempt
        if number > MAX_TESTS:
            raise InputError(budget.sentence(), field="confirmation set")
        level = confirmation_level(number)
        verdict = _test_verdict(comparison, level)
        summary = {
            "number": number,
            "alpha_spent": level,
            "p_value": comparison.mcnemar.p_value,
            "kind": kind,
            "job": job_id,
            "first": comparison.first,
            "second": comparison.second,
            "verdict": verdict,
        }
        try:
            with Session(engine) as session:
                align_storage.add_confirmation_test(
                    session,
                    set_id=set_id,
                    number=number,
                    alpha_spent=level,
                    p_value=comparison.mcnemar.p_value,
                    kind=kind,
                    job_id=job_id,
                    first=comparison.first[:200],
                    second=comparison.second[:200],
                    verdict=verdict,
                    created_by=actor.name,
                )
                audit.add_entry(
                    session,
                    actor=actor.name,
                    action="confirmation_test",
                    object_type="confirmation_set",
                    object_key=str(set_id),
                    summary=summary,
                )
                session.commit()
        except IntegrityError:  # another test took the slot meanwhile: the next one
            continue
        return number, level, verdict
    raise InputError("the confirmation set's test slots are contended; try again")


def confirm_by_hand(
    engine: Engine,
    actor: Actor,
    *,
    rubric: Rubric,
    run_ids: tuple[int, int],
    n_resamples: int = 1000,
    seed: int = 0,
) -> dict[str, Any]:
    """Compare two judge runs on the rubric version's confirmation set only (the
    difference is second - first), spending the next share of its error budget like an
    align job's confirmation (``judge compare --confirmation-set``). Policy owners."""
    from review_app.stats.paired import compare_two_runs

    actor = authorize(engine, actor, "policy_owner")
    first_id, second_id = run_ids
    if first_id == second_id:
        raise InputError("give two different run ids, e.g. --runs 3,5", field="--runs")
    with Session(read_only(engine)) as session:
        latest = align_storage.latest_confirmation_set(
            session, rubric_id=rubric.id, version=rubric.version
        )
        if latest is None:
            raise InputError(
                f"{rubric.ref} has no confirmation set yet: `judge align` draws one",
                field="--confirmation-set",
            )
        budget = _budget_of(session, latest)
        runs = {run.id: run for run in judging.list_runs(session, rubric_id=rubric.id)}
    if budget.spent:
        raise InputError(budget.sentence(), field="--confirmation-set")
    missing = [i for i in run_ids if i not in runs or runs[i].rubric_version != rubric.version]
    if missing:
        raise InputError(f"no judge run {missing[0]} of {rubric.ref}", field="--runs")
    assert latest.id is not None
    units = [
        u
        for u in _units_of(json.loads(latest.units_json))
        if u in (gold := gold_labels(engine, actor, rubric=rubric).labels)
    ]
    codes = {
        run.id: TurnVerdicts(columns).coded()
        for run, columns in run_verdicts(engine, rubric, [first_id, second_id])
    }
    wanted = set(units)
    reviewers: dict[str, dict[Unit, str]] = {}
    columns = load_label_columns(engine, actor, rubric=rubric)
    for case_id, turn, reviewer, code in zip(
        columns.case_ids, columns.turns, columns.reviewers, columns.codes, strict=True
    ):
        if (case_id, turn) in wanted:
            reviewers.setdefault(reviewer, {})[(case_id, turn)] = code
    names = (run_name(runs[first_id]), run_name(runs[second_id]))
    comparison = compare_two_runs(
        gold={u: gold[u].code for u in units},
        first={u: c for u, c in codes[first_id].items() if u in wanted},
        second={u: c for u, c in codes[second_id].items() if u in wanted},
        break_mapping=rubric.break_mapping(),
        names=names,
        ignore_codes=tuple(rubric.abstain_codes),
        cluster_of=lambda unit: unit[0],
        reviewers=reviewers,
        n_resamples=n_resamples,
        seed=seed,
        min_units=1,
    )
    number, level, verdict = _spend(
        engine,
        actor,
        set_id=latest.id,
        budget=budget,
        earlier=None,
        comparison=comparison,
        kind="compare",
        job_id=None,
    )
    with Session(read_only(engine)) as session:
        after = _budget_of(session, latest)
    effect = comparison.kappa_difference
    return {
        "verdict": verdict,
        "first": names[0],
        "second": names[1],
        "confirmation": {
            "effect": effect.value,
            "interval": list(effect.ci95) if effect.ci95 is not None else None,
            "p_value": comparison.mcnemar.p_value,
            "alpha_spent": level,
            "test_number": number,
            "units": comparison.n_units,
            "budget": after.to_dict(),
        },
    }


class Ceiling(TypedDict):
    """What a judge of this agreement can save at most (:func:`ceiling`)."""

    correlation: float | None
    units: int
    label_savings_at_most: float | None
    sentence: str


def ceiling(
    gold: Mapping[Unit, str], judged: Mapping[Unit, str], units: Sequence[Unit], rubric: Rubric
) -> Ceiling:
    """The label savings a judge of this agreement can give at most: the share ``rho^2``
    of the gold labels a prediction-powered estimate of the break rate saves at best
    (its variance falls by ``rho^2``, ``rho`` the correlation of the judge's break
    verdict with gold's), beside Dorner, Nastl & Hardt's bound."""
    mapping = rubric.break_mapping()
    pairs = [
        (mapping.get(gold[u]) == "break", mapping.get(judged[u]) == "break")
        for u in units
        if u in judged and mapping.get(gold[u]) is not None and mapping.get(judged[u]) is not None
    ]
    n = len(pairs)
    rho: float | None = None
    if n >= 2:
        xs = [float(g) for g, _ in pairs]
        ys = [float(j) for _, j in pairs]
        mx, my = sum(xs) / n, sum(ys) / n
        sxx = sum((x - mx) ** 2 for x in xs)
        syy = sum((y - my) ** 2 for y in ys)
        sxy = sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True))
        rho = sxy / math.sqrt(sxx * syy) if sxx > 0 and syy > 0 else None
    if rho is None:
        sentence = (
            "The label savings cannot be said: on the confirmation set gold or the judge "
            f"gives one verdict only ({n} units). {CEILING_REFERENCE}."
        )
        saving = None
    else:
        saving = rho * rho
        sentence = (
            f"A judge that agrees this well with gold (correlation {rho:.2f} of its break "
            f"verdicts with gold's on {n} confirmation units) can save at most {saving:.0%} "
            "of the gold labels an estimate of the break rate needs. "
            f"{CEILING_REFERENCE}."
        )
    return Ceiling(correlation=rho, units=n, label_savings_at_most=saving, sentence=sentence)


def align_json(result: Mapping[str, Any]) -> dict[str, Any]:
    """The keys ``judge align --json`` prints (:data:`JSON_KEYS`)."""
    return {key: result.get(key) for key in JSON_KEYS}


def verdict_sentence(result: Mapping[str, Any]) -> str:
    """The job's result in one sentence."""
    if result.get("stopped"):
        return (
            f"Stopped before the confirmation; {len(result.get('candidates') or [])} candidates "
            "kept as prompt versions."
        )
    confirmation = result.get("confirmation") or {}
    verdict = result.get("verdict")
    if not confirmation.get("tested"):
        return f"{verdict}: {confirmation.get('why', '')}"
    interval = confirmation.get("interval")
    effect = confirmation.get("effect")
    shown = f"{effect:+.2f}" if isinstance(effect, float) else "undefined"
    shown += f" [{interval[0]:+.2f}, {interval[1]:+.2f}]" if interval else " (no interval)"
    return (
        f"{verdict}: {result.get('best')} against {result.get('start')} on "
        f"{confirmation.get('units')} confirmation units: kappa difference {shown}, "
        f"p = {confirmation.get('p_value'):.3g} against this test's level "
        f"{confirmation.get('alpha_spent'):.4g}."
    )


def confirmation_cases(engine: Engine, actor: Actor, *, rubric: Rubric) -> set[str]:
    """The conversations of every confirmation set of ``rubric``: kept out of the
    few-shot material (a confirmation unit never becomes a prompt's example)."""
    authorize(engine, actor, "policy_owner")
    with Session(read_only(engine)) as session:
        rows = align_storage.confirmation_sets(session, rubric_id=rubric.id, version=rubric.version)
    return {str(unit[0]) for row in rows for unit in json.loads(row.units_json)}


def current_align_job(
    engine: Engine, actor: Actor, *, rubric: Rubric, watched: int | None = None
) -> JobView | None:
    """The align job the workbench shows for ``rubric``: one queued or running (whoever
    started it), else the job ``watched`` (this session's), else the newest finished one
    (its result stays on the page). Policy owners and admins."""

    jobs = [
        job
        for job in list_jobs(engine, actor, limit=50, kinds=[ALIGN_JOB])
        if job.parameters.get("rubric") == rubric.ref
    ]
    for job in jobs:
        if not job.finished:
            return job
    return next((job for job in jobs if job.id == watched), jobs[0] if jobs else None)


def confirmation_budget(
    engine: Engine, actor: Actor, *, rubric: Rubric
) -> ConfirmationBudget | None:
    """The rubric version's newest confirmation set's budget (``None``: none drawn yet)."""
    authorize(engine, actor, "policy_owner")
    with Session(read_only(engine)) as session:
        latest = align_storage.latest_confirmation_set(
            session, rubric_id=rubric.id, version=rubric.version
        )
        return None if latest is None else _budget_of(session, latest)


def result_lines(result: Mapping[str, Any]) -> list[str]:
    """An align job's result in sentences, as the page and the command show it: the
    verdict, each candidate with its optimisation-set score, the budget, the ceiling,
    the alternative annotator test and the requests."""
    lines = [verdict_sentence(result)]
    started = result.get("start_score") or {}
    if started.get("optimisation_score") is not None:
        lines.append(
            f"Starting version {result.get('start')}: optimisation-set score "
            f"{started['optimisation_score']:.3f} on {started.get('scored_units', 0)} units"
        )
    for candidate in result.get("candidates") or []:
        score = candidate.get("optimisation_score")
        shown = "not scored" if score is None else f"{score:.3f}"
        lines.append(
            f"Candidate {candidate['name']}: optimisation-set score {shown} (share of "
            f"{candidate.get('scored_units', 0)} optimisation units whose code matched gold)"
        )
    refused = result.get("refused_proposals") or []
    if refused:
        lines.append(f"{len(refused)} proposal(s) refused before any request: {refused[0]}")
    confirmation = result.get("confirmation") or {}
    for key in ("budget", "ceiling"):
        part = confirmation.get(key) or {}
        if part.get("sentence"):
            lines.append(str(part["sentence"]))
    alt = confirmation.get("alt_test")
    if isinstance(alt, Mapping):
        lines.append(
            f"Alternative annotator test of {result.get('best')} on the confirmation set: "
            + str(alt.get("verdict") or alt.get("reason") or json.dumps(alt, sort_keys=True)[:300])
        )
    requests = result.get("requests") or {}
    lines.append(
        f"Requests: {requests.get('judge', 0)} to the judge's endpoint, "
        f"{requests.get('optimiser', 0)} to the optimiser's."
    )
    return lines


def _run_align_job_kind(engine: Engine, actor: Actor, view: JobView, beat: Heartbeat) -> JobOutcome:
    result = run_align_job(
        engine,
        actor,
        job_id=view.id,
        parameters=view.parameters,
        stop=beat.should_stop,
        progress=beat.progress,
    )
    return JobOutcome(status="stopped" if result.get("stopped") else "done", result=result)


ALIGN_JOB_KIND = register_job_kind(JobKind(name=ALIGN_JOB, handler=_run_align_job_kind))
