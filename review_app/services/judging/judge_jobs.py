"""A judge run as one piece of work, whoever starts it: the command line in the
foreground, or a stored job a worker runs (review_app/services/judging/judge_run_kind.py:
the workbench's Run buttons, ``judge run --background``).

:func:`run_judge_job` assembles the run from what it asks (rubric version, prompt,
which cases or units) and runs it: the command line calls it with the settings it was
given, the worker with the settings of the endpoint the job names. This module stays
light (no statistics): ``judge run``'s start-up is part of its speed target.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TypedDict

from sqlalchemy import Engine

from review_app.errors import InputError
from review_app.rubrics.model import Rubric
from review_app.services.access.actors import Actor, authorize
from review_app.services.judging.judge_prompts import JudgePrompt, prompt_for_run
from review_app.services.judging.judge_runner import (
    JudgeRunSummary,
    run_judge,
    select_case_ids,
)
from review_app.services.judging.transport import EndpointSettings
from review_app.services.rubrics.rubric_catalog import sync_rubrics

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


def run_judge_job(
    engine: Engine,
    actor: Actor,
    *,
    rubric: Rubric,
    prompt: JudgePrompt,
    asked: JudgeRunAsked,
    settings: EndpointSettings | Sequence[EndpointSettings],
    units: Sequence[tuple[str, int]] | None = None,
    progress: Callable[[int, int], None] | None = None,
    stop: Callable[[], bool] | None = None,
    counted: Callable[[int, int], None] | None = None,
) -> JudgeRunSummary:
    """Run ``prompt`` on what ``asked`` names with ``settings``: the one assembly of a
    judge run, for the command line's foreground run and for the worker (both resolve
    ``rubric`` and ``prompt`` first with :func:`resolve_rubric_and_prompt`). Asks
    ``units`` when given (a ``gold`` scope's: the worker reads them,
    review_app/services/judging/judge_run_kind.py), else every turn of the chosen cases,
    and runs :func:`~review_app.services.judging.judge_runner.run_judge` (resumable: units
    already answered are not asked again)."""
    actor = authorize(engine, actor, "policy_owner")
    if units is not None:
        case_ids = sorted({case_id for case_id, _ in units})
    elif asked.get("scope") == GOLD_SCOPE:
        raise InputError(
            "a run of the gold units names them (the worker reads them)", field="scope"
        )
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
        units=list(units) if units is not None else None,
        scope=scope_words(asked),
        progress=progress,
        stop=stop,
        counted=counted,
    )
