"""The judge page's prompt workbench: preview a prompt text on one gold unit, run a
stored version on the units with gold as a background job (docs/reference.md, "Prompt
workbench").

Saving a text as a new version is
:func:`review_app.services.judging.judge_prompts.create_judge_prompt`;
comparing two runs is :func:`review_app.services.judging.judge_compare.compare_judge_runs`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from sqlalchemy import Engine

from review_app.errors import InputError
from review_app.judging import PLACEHOLDERS, ChatMessage, check_prompt_text
from review_app.rubrics import Rubric
from review_app.services.judging.judge_prompts import preview_messages
from review_app.services.labels.adjudication import gold_labels
from review_app.services.operations.jobs import JobView, start_judge_job
from review_app.services.team.people import Actor, authorize

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


def run_on_gold_units(
    engine: Engine, actor: Actor, *, rubric: Rubric, prompt: str, endpoint: str
) -> JobView:
    """Queue a background judge run of ``prompt`` (``judge@vN``) at ``endpoint`` on the
    conversations that have gold (every turn of them is judged; the comparison reads the
    gold units). Policy owners and admins."""
    actor = authorize(engine, actor, "policy_owner")
    case_ids = sorted({case_id for case_id, _ in _gold_units(engine, actor, rubric)})
    if not case_ids:
        raise InputError(
            "no unit has gold yet: adjudicate disagreements or draw an audit sample first",
            field="Run on gold units",
        )
    return start_judge_job(
        engine, actor, rubric=rubric.ref, prompt=prompt, endpoint=endpoint, case_ids=case_ids
    )


def current_job(
    engine: Engine, actor: Actor, *, rubric: Rubric, watched: int | None = None
) -> JobView | None:
    """The judge-run job the workbench shows for ``rubric``: one still queued or running
    (whoever started it, so a reload or another tab finds it), else the job ``watched``
    (the one this session started, to show how it ended). Policy owners and admins."""
    from review_app.services.operations.jobs import JUDGE_RUN, list_jobs

    jobs = [
        job
        for job in list_jobs(engine, actor, limit=50, kinds=[JUDGE_RUN])
        if job.parameters.get("rubric") == rubric.ref
    ]
    for job in jobs:
        if not job.finished:
            return job
    return next((job for job in jobs if job.id == watched), None)


def compare_for_workbench(
    engine: Engine,
    actor: Actor,
    *,
    rubric: Rubric,
    run_ids: tuple[int, int] | None = None,
) -> RunComparison | None:
    """The comparison the workbench shows: ``run_ids`` when chosen, else the newest run
    against the best earlier run of its judge, else (its judge's first run) against the
    run before it. ``None`` with fewer than two runs. Policy owners and admins."""
    from review_app.services.judging.judge_compare import compare_judge_runs
    from review_app.services.judging.runs import list_judge_runs

    actor = authorize(engine, actor, "policy_owner")
    if run_ids is not None:
        return compare_judge_runs(engine, actor, rubric=rubric, run_ids=run_ids)
    ids = sorted(run.id for run in list_judge_runs(engine, actor, rubric=rubric))
    if len(ids) < 2:
        return None
    try:
        return compare_judge_runs(engine, actor, rubric=rubric)
    except InputError:  # the newest run is its judge's first
        return compare_judge_runs(engine, actor, rubric=rubric, run_ids=(ids[-2], ids[-1]))


def run_on_every_turn(
    engine: Engine, actor: Actor, *, rubric: Rubric, prompt: str, endpoint: str
) -> JobView:
    """Queue a background judge run of ``prompt`` at ``endpoint`` on every stored
    conversation (the decision card's "Run on every turn"). Policy owners and admins."""
    actor = authorize(engine, actor, "policy_owner")
    return start_judge_job(engine, actor, rubric=rubric.ref, prompt=prompt, endpoint=endpoint)
