"""The prompts of a judge run's units: each case's transcript read in batches as a run
goes, and rendered up to each judged turn (the messages sent for one unit).

Below both :mod:`~review_app.services.judging.judge_runner` (which sends them) and
:mod:`~review_app.services.judging.judge_prompts` (whose preview shows them).
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import orjson
from sqlalchemy import Engine
from sqlmodel import Session

from review_app.errors import InputError, NotFound
from review_app.judging import ChatMessage, JudgePrompt, PreparedPrompt, PromptTooLarge, event_block
from review_app.rubrics.model import Rubric
from review_app.services.judging.transport import DEFAULT_MAX_PROMPT_BYTES, UnitPrompt
from storage import cases as cases_storage
from storage.engine import read_only

_CASES_PER_BATCH = 200
_CASES_IN_FIRST_BATCH = 16
"""A small first batch: the first requests leave once 16 cases are read, not 200."""


def unit_messages(
    engine: Engine, *, prompt: JudgePrompt, rubric: Rubric, case_id: str, turn: int
) -> list[ChatMessage]:
    """The messages a run of ``prompt`` sends for one unit (the workbench's preview).

    A building block: callers authorize. :class:`NotFound` when the case is gone,
    :class:`InputError` when ``turn`` is not one of its judged (``applies_to``) turns."""
    with Session(read_only(engine)) as session:
        judged = cases_storage.actor_units(session, case_ids=[case_id], actor=rubric.applies_to)
    if (case_id, turn) not in judged:
        if not judged:
            raise NotFound(f"no case {case_id!r} in the database")
        raise InputError(
            f"turn {turn} of {case_id} is not a {rubric.applies_to} turn", field="turn"
        )
    prepared = PreparedPrompt.of(prompt, rubric=rubric)
    for batch in case_batches(engine, [(case_id, turn)]):
        for case in batch:
            for job in case_prompts(prepared, case):
                if job.refusal is not None:
                    raise InputError(job.refusal, field="prompt")
                return job.messages
    raise NotFound(f"no turn {turn} in case {case_id!r}")


@dataclass(frozen=True)
class CaseToJudge:
    """One case of a run: its transcript (the events a prompt shows) and its judged turns."""

    case_id: str
    chatbot_role: str | None
    events: list[cases_storage.JudgedEvent]
    turns: frozenset[int]


def case_batches(engine: Engine, units: list[tuple[str, int]]) -> Iterator[list[CaseToJudge]]:
    """The units' cases with their transcripts, read a batch of cases at a time as the
    run goes (a small first batch, so that the first requests leave at once)."""
    by_case: dict[str, list[int]] = {}
    for case_id, turn in units:
        by_case.setdefault(case_id, []).append(turn)
    case_ids = list(by_case)
    bounds = [0, *range(_CASES_IN_FIRST_BATCH, len(case_ids), _CASES_PER_BATCH), len(case_ids)]
    for begin, end in itertools.pairwise(bounds):
        chunk = case_ids[begin:end]
        if not chunk:
            continue
        with Session(read_only(engine)) as session:
            transcripts = cases_storage.judge_transcripts(session, case_ids=chunk)
        yield [
            CaseToJudge(case_id, *transcripts[case_id], frozenset(by_case[case_id]))
            for case_id in chunk
            if case_id in transcripts  # removed since the run started
        ]


def case_prompts(
    prepared: PreparedPrompt, case: CaseToJudge, *, max_bytes: int = DEFAULT_MAX_PROMPT_BYTES
) -> list[UnitPrompt]:
    """One case's units with their prompts: the transcript up to each judged turn. A unit
    whose prompt would be larger than ``max_bytes`` is not rendered: its job carries the
    refusal instead (the size is known from the blocks' sizes, before rendering)."""
    jobs: list[UnitPrompt] = []
    wanted = set(case.turns)
    shown: list[dict[str, Any]] = []
    blocks: list[str] = []
    sizes: list[int] = []
    for event in case.events:
        shown.append(
            {
                "turn": event.turn,
                "actor": event.actor,
                "text": event.text,
                "observed_actions": orjson.loads(event.actions_json)
                if event.actions_json is not None
                else [],
                "set_role": event.set_role,
            }
        )
        blocks.append(block := event_block(shown[-1]))
        sizes.append(len(block) if block.isascii() else len(block.encode("utf-8")))
        if event.turn in wanted:  # the transcript up to the judged turn, no further
            wanted.discard(event.turn)
            try:
                messages = prepared.render(
                    chatbot_role=case.chatbot_role,
                    events=shown,
                    turn=event.turn,
                    blocks=blocks,
                    block_sizes=sizes,
                    max_bytes=max_bytes,
                )
            except PromptTooLarge as refused:
                jobs.append(UnitPrompt(case.case_id, event.turn, [], refusal=str(refused)))
                continue
            jobs.append(UnitPrompt(case.case_id, event.turn, messages))
    return jobs
