"""A judge run as one piece of work, whoever starts it: the command line in the
foreground, or a stored job a worker runs (the workbench's Run buttons, ``judge run
--background``).

:func:`run_judge_job` assembles the run from what it asks (rubric version, prompt,
which cases or units) and runs it: the command line calls it with the settings it was
given, and the worker calls it (through the job kind registered here) with the settings
of the endpoint the job names. :func:`start_judge_job` queues the job: it stores the
endpoint's name, never its key (read when the job runs).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TypedDict, cast

from sqlalchemy import Engine
from sqlmodel import Session

from review_app.errors import InputError
from review_app.rubrics.model import Rubric
from review_app.services.access.actors import Actor, authorize
from review_app.services.jobs.runner import (
    Heartbeat,
    JobKind,
    JobOutcome,
    JobView,
    add_job_row,
    register_job_kind,
)
from review_app.services.judging.endpoints import endpoint_settings, find_endpoint
from review_app.services.judging.judge_prompts import JudgePrompt, prompt_for_run
from review_app.services.judging.judge_runner import (
    JudgeRunSummary,
    run_judge,
    select_case_ids,
)
from review_app.services.judging.transport import EndpointSettings
from review_app.services.labels.adjudication import gold_labels
from review_app.services.rubrics.rubric_catalog import sync_rubrics
from storage import jobs as job_storage

JUDGE_RUN = "judge_run"
GOLD_SCOPE = "gold"
"""A judge run's ``scope`` asking the units with gold only (the workbench's run)."""


class JudgeRunAsked(TypedDict, total=False):
    """What a judge run asks; a job stores it as its parameters (with the endpoint's
    name and the request settings below)."""

    rubric: str
    """``id@version``."""
    prompt: str
    """``judge@vN``, or a template file's path."""
    prompt_source: str
    """What the worker resolves again: ``judge@vN``, or the template's absolute path."""
    judge: str | None
    case_ids: list[str] | None
    lane: str | None
    limit: int | None
    scope: str | None
    endpoint: str
    retries: int
    timeout: float
    max_tokens: int


def prompt_source(given: str) -> str:
    """What the worker resolves again: ``judge@vN``, or a template's absolute path."""
    path = Path(given)
    return str(path.resolve()) if path.suffix == ".txt" and path.exists() else given


def resolve_rubric_and_prompt(
    engine: Engine, actor: Actor, *, rubric: str, prompt: str, judge: str | None
) -> tuple[Rubric, JudgePrompt]:
    """The rubric version and the judge prompt a run names (read again when a job runs):
    a stored ``judge@vN`` (made in the page or from a file) or a template file's path
    (policy owners)."""
    actor = authorize(engine, actor, "policy_owner")
    chosen = sync_rubrics(engine, actor).get(rubric)
    template = prompt_for_run(engine, actor, rubric=chosen, ref=prompt_source(prompt), judge=judge)
    return chosen, template


def scope_words(asked: JudgeRunAsked) -> str:
    """What a judge run asks, in words (kept with the run's summary)."""
    if asked.get("scope") == GOLD_SCOPE:
        return "the gold units"
    case_ids = asked.get("case_ids")
    if case_ids:
        return f"{len(case_ids)} chosen conversations"
    if asked.get("lane") or asked.get("limit"):
        return "the chosen conversations"
    return "every turn"


def start_judge_job(
    engine: Engine,
    actor: Actor,
    *,
    rubric: str,
    prompt: str,
    endpoint: str,
    judge: str | None = None,
    case_ids: Sequence[str] | None = None,
    lane: str | None = None,
    limit: int | None = None,
    scope: str | None = None,
    retries: int = 3,
    timeout: float = 120.0,
    max_tokens: int = 300,
) -> JobView:
    """Queue a judge run of ``prompt`` (``judge@vN``) on ``rubric`` (``id@version``) at the
    endpoint called ``endpoint``; a worker runs it (:func:`run_judge_job`). The job stores
    the endpoint's name, never its key (read when the job runs). ``scope`` ``gold`` asks
    only the units with gold when the job runs (:data:`GOLD_SCOPE`); else every turn of
    the chosen cases."""
    actor = authorize(engine, actor, "policy_owner")
    find_endpoint(endpoint)  # refuse an unknown name now, not in the worker
    chosen, template = resolve_rubric_and_prompt(
        engine, actor, rubric=rubric, prompt=prompt, judge=judge
    )
    if limit is not None and limit < 1:
        raise InputError("--limit is at least 1", field="--limit")
    if scope not in (None, GOLD_SCOPE):
        raise InputError(f"scope is {GOLD_SCOPE!r} or none, got {scope!r}", field="scope")
    asked: JudgeRunAsked = {
        "rubric": chosen.ref,
        "prompt": template.ref,
        "prompt_source": prompt_source(prompt),
        "judge": judge,
        "endpoint": endpoint,
        "case_ids": list(case_ids) if case_ids else None,
        "lane": lane,
        "limit": limit,
        "scope": scope,
        "retries": retries,
        "timeout": timeout,
        "max_tokens": max_tokens,
    }
    parameters = dict(asked)
    with Session(engine) as session:
        same = job_storage.unfinished_same(
            session, kind=JUDGE_RUN, parameters_json=json.dumps(parameters, sort_keys=True)
        )
        if same is not None:
            # Two workers would ask the same units at once; one job does the run.
            raise InputError(
                f"job {same} already runs this judge on these cases; wait for it or stop it",
                field="--background",
            )
        view = add_job_row(session, actor, kind=JUDGE_RUN, parameters=parameters)
        session.commit()
        return view


def run_judge_job(
    engine: Engine,
    actor: Actor,
    *,
    rubric: Rubric,
    prompt: JudgePrompt,
    asked: JudgeRunAsked,
    settings: EndpointSettings | Sequence[EndpointSettings],
    progress: Callable[[int, int], None] | None = None,
    stop: Callable[[], bool] | None = None,
    counted: Callable[[int, int], None] | None = None,
) -> JudgeRunSummary:
    """Run ``prompt`` on what ``asked`` names with ``settings``: the one assembly of a
    judge run, for the command line's foreground run and for the worker (both resolve
    ``rubric`` and ``prompt`` first with :func:`resolve_rubric_and_prompt`). Chooses the
    units (the gold ones for ``scope`` ``gold``, else every turn of the chosen cases) and
    runs :func:`~review_app.services.judging.judge_runner.run_judge` (resumable: units
    already answered are not asked again)."""
    actor = authorize(engine, actor, "policy_owner")
    units: list[tuple[str, int]] | None = None
    if asked.get("scope") == GOLD_SCOPE:
        units = sorted(gold_labels(engine, actor, rubric=rubric).labels)
        case_ids = sorted({case_id for case_id, _ in units})
    else:
        case_ids = select_case_ids(
            engine, case_ids=asked.get("case_ids"), lane=asked.get("lane"), limit=asked.get("limit")
        )
    return run_judge(
        engine,
        actor,
        rubric=rubric,
        prompt=prompt,
        settings=settings,
        case_ids=case_ids,
        units=units,
        scope=scope_words(asked),
        progress=progress,
        stop=stop,
        counted=counted,
    )


def _run_judge_run_job(engine: Engine, actor: Actor, view: JobView, beat: Heartbeat) -> JobOutcome:
    asked = cast(JudgeRunAsked, view.parameters)  # stored by start_judge_job
    settings = endpoint_settings(
        asked["endpoint"],
        retries=asked.get("retries", 3),
        timeout=asked.get("timeout", 120.0),
        max_tokens=asked.get("max_tokens", 300),
    )
    skipped = [0]

    def counted(units: int, already: int) -> None:
        skipped[0] = already
        beat.progress(already, units)

    def progress(done: int, total: int) -> None:
        beat.progress(skipped[0] + done, skipped[0] + total)

    rubric, prompt = resolve_rubric_and_prompt(
        engine,
        actor,
        rubric=asked["rubric"],
        prompt=asked.get("prompt_source") or asked["prompt"],
        judge=asked.get("judge"),
    )
    summary = run_judge_job(
        engine,
        actor,
        rubric=rubric,
        prompt=prompt,
        asked=asked,
        settings=settings,
        progress=progress,
        stop=beat.should_stop,
        counted=counted,
    )
    if summary.stopped:
        status = "stopped"
    elif summary.all_failed:
        status = "failed"  # the first error says why; the counts are in the result
    else:
        status = "done"  # any failures are counted in the result ("k of n failed")
    return JobOutcome(
        status=status,
        result=summary.to_dict(),
        done=summary.skipped + summary.answered + summary.answer_errors + summary.endpoint_errors,
        total=summary.units,
        error=f"every request failed at the endpoint; the first: {summary.first_error}"
        if status == "failed"
        else None,
    )


JUDGE_RUN_KIND = register_job_kind(JobKind(name=JUDGE_RUN, handler=_run_judge_run_job))
