"""The judge page's prompt workbench: preview a prompt text on one gold unit, say what a
run would ask before it starts, run a stored version on the units with gold as a
background job, and compare it like for like (docs/reference.md, "Prompt workbench").

Saving a text as a new version is
:func:`review_app.services.judging.judge_prompts.create_judge_prompt`;
comparing two runs is :func:`review_app.services.judging.judge_compare.compare_judge_runs`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from sqlalchemy import Engine
from sqlmodel import Session

from review_app.errors import InputError
from review_app.judging import PLACEHOLDERS, ChatMessage, check_prompt_text
from review_app.rubrics.model import Rubric
from review_app.services.access.actors import Actor, authorize
from review_app.services.jobs.runner import JobView, list_jobs
from review_app.services.judging.endpoints import find_endpoint
from review_app.services.judging.judge_compare import compare_judge_runs
from review_app.services.judging.judge_jobs import GOLD_SCOPE, JUDGE_RUN
from review_app.services.judging.judge_prompts import (
    parse_prompt_ref,
    preview_messages,
    prompt_refs_for,
)
from review_app.services.judging.judge_run_kind import start_judge_job
from review_app.services.judging.run_defaults import Pairing, default_pair, team_judge
from review_app.services.judging.runs import RunListing, list_judge_runs, rubric_listings
from review_app.services.labels.adjudication import gold_labels
from storage import cases as cases_storage
from storage import judging
from storage.engine import read_only

if TYPE_CHECKING:
    from review_app.services.judging.judge_compare import RunComparison

PLACEHOLDER_HELP: dict[str, str] = {
    "rubric_ref": "the rubric version, e.g. role-adherence@1",
    "chatbot_role": "the chatbot's role description, as recorded with the case",
    "labels": "every code with its verdict, title and definition",
    "label_titles": "every code with its title only (for small models)",
    "examples": "the rubric's contrasting examples, one per code",
    "codes": "the codes, comma-separated (required)",
    "conversation": "the transcript up to and including the judged turn",
    "recent": "the last six events before and including the judged turn",
    "turn": "the judged turn's number",
    "reply": "the judged assistant reply",
}
assert set(PLACEHOLDER_HELP) == PLACEHOLDERS


@dataclass(frozen=True)
class PromptPreview:
    """The messages a judge is sent for one unit."""

    case_id: str
    turn: int
    messages: list[ChatMessage]


def _gold_units(engine: Engine, actor: Actor, rubric: Rubric) -> list[tuple[str, int]]:
    return sorted(gold_labels(engine, actor, rubric=rubric).labels)


def preview_prompt(engine: Engine, actor: Actor, *, rubric: Rubric, text: str) -> PromptPreview:
    """``text`` filled in for the first unit with gold (policy owners and admins).

    The text is checked as a saved version would be (:func:`check_prompt_text`): an
    unknown placeholder is an :class:`InputError` naming its line.
    """
    actor = authorize(engine, actor, "policy_owner")
    check_prompt_text(text, source="Prompt", field="Prompt")
    units = _gold_units(engine, actor, rubric)
    if not units:
        raise InputError("no unit has gold yet to preview the prompt on", field="Prompt")
    case_id, turn = units[0]
    messages = preview_messages(
        engine, actor, rubric=rubric, text=text, case_id=case_id, turn=turn, judge="preview"
    )
    return PromptPreview(case_id, turn, messages)


@dataclass(frozen=True)
class RunPlan:
    """What a run would ask before it starts: its units, those already answered by the
    same prompt, model and endpoint (not asked again), and a token estimate."""

    prompt: str
    endpoint: str
    model: str
    scope: str
    """``the gold units`` or ``every turn``."""
    units: int
    answered: int
    tokens_per_request: float | None
    """Mean tokens (prompt + answer) of earlier answers of this judge at this endpoint."""

    @property
    def requests(self) -> int:
        return self.units - self.answered

    def sentence(self) -> str:
        """``84 requests to loopback (model loop-model): the 84 gold units, none answered
        yet; about 1,900 tokens a request, 160,000 in all.``"""
        done = (
            "none answered yet"
            if not self.answered
            else f"{self.answered:,d} already answered by this prompt there (not asked again)"
        )
        cost = (
            f"; about {self.tokens_per_request:,.0f} tokens a request (from earlier answers "
            f"there), {self.tokens_per_request * self.requests:,.0f} in all"
            if self.tokens_per_request is not None and self.requests
            else ""
        )
        return (
            f"{self.requests:,d} request{'' if self.requests == 1 else 's'} to "
            f"{self.endpoint} (model {self.model}): {self.scope}, {self.units:,d} turns, "
            f"{done}{cost}."
        )


def plan_run(
    engine: Engine, actor: Actor, *, rubric: Rubric, prompt: str, endpoint: str, scope: str
) -> RunPlan:
    """How many requests a run of ``prompt`` at ``endpoint`` would send: ``scope``
    ``gold`` (the units with gold) or ``all`` (every turn), less the units that run has
    answered already; tokens from the totals of its earlier answers there (or of the
    judge's other runs there). Policy owners and admins."""

    actor = authorize(engine, actor, "policy_owner")
    if scope not in ("gold", "all"):
        raise InputError(f"scope is gold or all, got {scope!r}", field="scope")
    judge, number = parse_prompt_ref(prompt)
    model = find_endpoint(endpoint).model
    gold = _gold_units(engine, actor, rubric) if scope == "gold" else None
    with Session(read_only(engine)) as session:
        listed = [
            run for run in rubric_listings(engine, session, rubric=rubric)
            if run.judge == judge and run.endpoint == endpoint
        ]  # fmt: skip
        run = next(
            (r for r in listed if r.prompt_version == f"v{number}" and r.model == model), None
        )
        if gold is not None:
            units = len(gold)
            answered = (
                len(judging.kept_units_among(session, run_id=run.id, units=gold)) if run else 0
            )
        else:
            units = cases_storage.actor_event_count(session, actor=rubric.applies_to)
            answered = run.covered if run is not None else 0
    estimates = [r.tokens_per_answer() for r in ([run] if run is not None else []) + listed]
    return RunPlan(
        prompt=f"{judge}@v{number}",
        endpoint=endpoint,
        model=model,
        scope="the gold units" if scope == "gold" else "every turn",
        units=units,
        answered=min(answered, units),
        tokens_per_request=next((e for e in estimates if e is not None), None),
    )


def run_on_gold_units(
    engine: Engine, actor: Actor, *, rubric: Rubric, prompt: str, endpoint: str
) -> JobView:
    """Queue a background judge run of ``prompt`` (``judge@vN``) at ``endpoint`` on the
    units that have gold, only those (each prompt still shows its conversation up to the
    turn; :func:`plan_run` says how many requests). Policy owners and admins."""
    actor = authorize(engine, actor, "policy_owner")
    if not _gold_units(engine, actor, rubric):
        raise InputError(
            "no unit has gold yet: adjudicate disagreements or draw an audit sample first",
            field="Run on gold units",
        )
    return start_judge_job(
        engine, actor, rubric=rubric.ref, prompt=prompt, endpoint=endpoint, scope=GOLD_SCOPE
    )


def current_job(
    engine: Engine, actor: Actor, *, rubric: Rubric, watched: int | None = None
) -> JobView | None:
    """The judge-run job the workbench shows for ``rubric``: one still queued or running
    (whoever started it, so a reload or another tab finds it), else the job ``watched``
    (the one this session started, to show how it ended). Policy owners and admins."""

    jobs = [
        job
        for job in list_jobs(engine, actor, limit=50, kinds=[JUDGE_RUN])
        if job.parameters.get("rubric") == rubric.ref
    ]
    for job in jobs:
        if not job.finished:
            return job
    return next((job for job in jobs if job.id == watched), None)


@dataclass(frozen=True)
class WorkbenchComparison:
    """What "Is the new version better?" shows: the comparison (``None`` when there is
    no pair), how the pair was found, and a note when the version asked for has no
    complete run."""

    report: RunComparison | None
    pairing: Pairing | None
    """The default pairing (``None`` for a pair chosen by hand)."""
    runs: list[RunListing]
    """Every run of the rubric version, for choosing a pair by hand."""
    note: str | None


def compare_for_workbench(
    engine: Engine,
    actor: Actor,
    *,
    rubric: Rubric,
    prompt: str | None = None,
    endpoint: str | None = None,
    run_ids: tuple[int, int] | None = None,
) -> WorkbenchComparison:
    """The workbench's comparison: ``run_ids`` when chosen by hand; else the complete run
    of ``prompt`` (at ``endpoint`` first) against its default baseline
    (:func:`review_app.services.judging.run_defaults.default_pair`: complete runs, the
    same model at the same endpoint, the earlier prompt first); without a complete run of
    ``prompt``, the newest complete run's, with a note. Policy owners and admins."""

    actor = authorize(engine, actor, "policy_owner")
    runs = list_judge_runs(engine, actor, rubric=rubric)
    if run_ids is not None:
        chosen = compare_judge_runs(engine, actor, rubric=rubric, run_ids=run_ids)
        return WorkbenchComparison(chosen, None, runs, None)
    note = None
    newer = None
    if prompt is not None:
        mine = [run for run in runs if run.prompt == prompt]
        complete = [run for run in mine if run.complete]
        here = [run for run in complete if run.endpoint == endpoint]
        newer = max(here or complete, key=lambda run: run.id) if complete else None
        if newer is None:
            states = "; ".join(f"{run.setup}: {run.state_text}" for run in mine)
            note = f"{prompt} has no complete run yet" + (f" ({states})" if states else "")
    pairing = default_pair(
        runs,
        team_judge(engine, actor, rubric=rubric),
        newer=newer,
        prompts=prompt_refs_for(engine, actor, rubric=rubric),
    )
    if note is not None and pairing.second is not None:
        note += f": the newest complete run is shown, {pairing.second.prompt}"
    report = None
    if pairing.found:
        report = compare_judge_runs(engine, actor, rubric=rubric, run_ids=pairing.ids)
        report["pairing"] = f"default: {pairing.how}"
    return WorkbenchComparison(report, pairing, runs, note)


def run_on_every_turn(
    engine: Engine, actor: Actor, *, rubric: Rubric, prompt: str, endpoint: str
) -> JobView:
    """Queue a background judge run of ``prompt`` at ``endpoint`` on every stored
    conversation (the decision card's and the verdict's "Run on every turn";
    :func:`plan_run` says how many requests first). Policy owners and admins."""
    actor = authorize(engine, actor, "policy_owner")
    return start_judge_job(engine, actor, rubric=rubric.ref, prompt=prompt, endpoint=endpoint)
