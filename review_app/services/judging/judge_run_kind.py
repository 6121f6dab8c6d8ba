"""Judge runs as background jobs: queued by the workbench and ``judge run --background``
(:func:`start_judge_job`: the endpoint's name is stored, never its key), run by a worker
through the job kind registered here, with
:func:`~review_app.services.judging.judge_jobs.run_judge_job`, the same assembly as the
command line's foreground run. A run of the gold units (``scope`` ``gold``) reads them
when it runs.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import cast

from sqlalchemy import Engine
from sqlmodel import Session

from review_app.errors import InputError
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
from review_app.services.judging.judge_jobs import (
    GOLD_SCOPE,
    JUDGE_RUN,
    JudgeRunAsked,
    prompt_source,
    resolve_rubric_and_prompt,
    run_judge_job,
)
from review_app.services.labels.adjudication import gold_labels
from storage import jobs as job_storage


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
    units = None
    if asked.get("scope") == GOLD_SCOPE:
        units = sorted(gold_labels(engine, actor, rubric=rubric).labels)
    summary = run_judge_job(
        engine,
        actor,
        rubric=rubric,
        prompt=prompt,
        asked=asked,
        units=units,
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
