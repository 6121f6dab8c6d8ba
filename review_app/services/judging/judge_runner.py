"""Running a judge prompt against an OpenAI-compatible chat endpoint: the run itself.

A run asks any OpenAI-compatible endpoint (OpenAI, vLLM, Ollama, llama.cpp's server) with
bounded concurrency, retries with backoff, and resumption: verdicts are stored as they
arrive, and a second run of the same judge skips the units already answered (endpoint
failures are retried, unparseable answers are kept as errors: at temperature 0 they
would repeat).

This module is the run's orchestration: which units, the run's row and its status, the
prompts fed as the endpoints take them, verdicts stored in batches, Stop and Ctrl-C.
The HTTP client (settings, requests, retries, proxies, TLS) is
:mod:`~review_app.services.judging.transport`; a unit's prompt is
:mod:`~review_app.services.judging.unit_prompts`.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import Engine
from sqlmodel import Session

from review_app.errors import InputError
from review_app.judging import (
    JudgePrompt,
    PreparedPrompt,
)
from review_app.rubrics.model import Rubric
from review_app.services.access.actors import Actor, authorize
from review_app.services.cases.case_selection import selected_cases
from review_app.services.judging.judge_prompts import store_for_run
from review_app.services.judging.runs import find_or_create_run, run_name
from review_app.services.judging.transport import (
    ANSWER_ERROR,
    ENDPOINT_ERROR,
    EndpointSettings,
    Redactor,
    UnitOutcome,
    event_loop_factory,
    open_endpoints,
    without_credentials,
)
from review_app.services.judging.unit_prompts import CaseToJudge, case_batches, case_prompts

# Kept importable from here, where it was (a unit's messages as a run sends them).
from review_app.services.judging.unit_prompts import unit_messages as unit_messages
from storage import audit, judging
from storage import cases as cases_storage
from storage.engine import read_only


@dataclass
class JudgeRunSummary:
    run_id: int
    name: str
    units: int
    skipped: int
    answered: int = 0
    answer_errors: int = 0
    endpoint_errors: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    seconds: float = 0.0
    stopped: bool = False
    """Stopped on request before every unit was asked (a later run resumes)."""
    scope: str = ""
    """What the pass was asked to judge, in words (``the gold units``, ``every turn``)."""
    first_error: str | None = None
    """The first endpoint failure of this pass."""

    @property
    def asked(self) -> int:
        """Units this pass sent a request for."""
        return self.answered + self.answer_errors + self.endpoint_errors

    @property
    def all_failed(self) -> bool:
        """Every unit asked in this pass failed at the endpoint (nothing answered)."""
        return self.endpoint_errors > 0 and self.endpoint_errors == self.asked

    def failures(self) -> str | None:
        """``3 of 84 failed at the endpoint`` (``None`` when none did)."""
        if not self.endpoint_errors:
            return None
        return f"{self.endpoint_errors} of {self.asked} failed at the endpoint"

    def line(self) -> str:
        rate = self.answered / self.seconds if self.seconds else 0.0
        return (
            f"run {self.run_id} {self.name}: {self.units} units, {self.skipped} already done; "
            f"answered {self.answered}, unparseable answers {self.answer_errors}, endpoint "
            f"failures {self.endpoint_errors}; {self.seconds:.1f} s ({rate:.2f} units/s), "
            f"tokens {self.prompt_tokens} in / {self.completion_tokens} out"
            + ("; stopped on request" if self.stopped else "")
            + (f"; every request failed, the first: {self.first_error}" if self.all_failed else "")
        )

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)

    def count(self, outcome: UnitOutcome) -> None:
        """Add one unit's outcome to the counts."""
        if outcome.error is None:
            self.answered += 1
        elif outcome.error_kind == ANSWER_ERROR:
            self.answer_errors += 1
        else:
            self.endpoint_errors += 1
            if self.first_error is None:
                self.first_error = outcome.error
        self.prompt_tokens += outcome.prompt_tokens or 0
        self.completion_tokens += outcome.completion_tokens or 0


def select_case_ids(
    engine: Engine,
    *,
    case_ids: Sequence[str] | None = None,
    lane: str | None = None,
    limit: int | None = None,
) -> list[str]:
    with Session(read_only(engine)) as session:
        rows = selected_cases(session, case_ids=case_ids, lane=lane, limit=limit)
    return [row.case_id for row in rows]


def run_judge(
    engine: Engine,
    actor: Actor,
    *,
    rubric: Rubric,
    prompt: JudgePrompt,
    settings: EndpointSettings | Sequence[EndpointSettings],
    case_ids: Sequence[str],
    units: Sequence[tuple[str, int]] | None = None,
    scope: str = "",
    progress: Callable[[int, int], None] | None = None,
    stop: Callable[[], bool] | None = None,
    counted: Callable[[int, int], None] | None = None,
) -> JudgeRunSummary:
    """Judge every labelable turn of ``case_ids`` (only ``units`` of them, when given: the
    prompt still shows each conversation up to its turn); store verdicts as they come
    (resumable). ``scope`` says in words what was asked (kept with the run's summary).

    The run is named by its judge, prompt version, model and endpoint (the endpoint's
    name, else ``host:port`` of its URL). It ends ``partial`` when stopped, ``failed``
    when every unit it asked failed at the endpoint and it holds no answer at all, else
    ``complete`` (endpoint failures counted in its summary; a later run asks them again).

    ``stop``, when given, is asked a few times a second; once it answers true no more
    units are sent, the answers received are stored and the run is left ``partial``
    (a background job's Stop; the next run of the same judge resumes). ``counted``,
    when given, hears (units, units already answered) before the first request.
    ``settings`` may name several endpoints serving the same model (replicas): units
    are spread over them as their slots free up
    (:class:`~review_app.services.judging.transport.EndpointPool`).
    """
    actor = authorize(engine, actor, "policy_owner")
    endpoints = [settings] if isinstance(settings, EndpointSettings) else list(settings)
    if not endpoints:
        raise InputError("give at least one endpoint", field="--base-url")
    if len({e.model for e in endpoints}) > 1:
        raise InputError("every endpoint of one run serves the same model", field="--model")
    settings = endpoints[0]
    params: dict[str, Any] = {
        "base_url": without_credentials(settings.base_url),
        "max_tokens": settings.max_tokens,
        "response_format": settings.response_format,
        "temperature": 0,
        "prompt_source": prompt.source,
    }
    if len(endpoints) > 1:
        params["base_urls"] = [without_credentials(e.base_url) for e in endpoints]
    with Session(engine) as session:
        written_for = judging.first_run_of_prompt(
            session, judge=prompt.judge, prompt_version=prompt.version, rubric_id=rubric.id
        )
        if written_for is not None and written_for.rubric_version != rubric.version:
            # docs/reference.md, "Rubric versions: mapping and carry-over": a prompt is
            # written for the rubric version of its first run.
            raise InputError(
                f"{prompt.ref} was written for {rubric.id}@{written_for.rubric_version} (its "
                f"first run, {written_for.id}); it is not reused for {rubric.ref}: save it "
                f"as a new prompt version (it may copy the text) and run that",
                field="--prompt",
            )
        # The run uses a stored prompt version, stored now when it is new, refused when
        # its name means another text (docs/reference.md, "Judge prompt versions").
        stored_prompt = store_for_run(session, prompt=prompt, rubric=rubric, actor_name=actor.name)
        params["prompt_id"] = stored_prompt.id
        run = find_or_create_run(
            session,
            rubric=rubric,
            judge=prompt.judge,
            prompt_version=prompt.version,
            model=settings.model,
            endpoint=settings.endpoint_name,
            prompt_sha256=prompt.sha256,
            source="run",
            status="running",
            params_json=json.dumps(params, sort_keys=True),
        )
        if run.prompt_sha256 and run.prompt_sha256 != prompt.sha256:
            raise InputError(
                f"{prompt.source} changed since run {run.id} used {prompt.ref}; a prompt "
                "version is immutable once run: save the change as a new version",
                field="--prompt",
            )
        assert run.id is not None
        run_id, name = run.id, run_name(run)
        done = {
            (v.case_id, v.turn)
            for v in judging.verdicts(session, run_id=run_id)
            if v.error_kind != ENDPOINT_ERROR
        }
        judged = cases_storage.actor_units(
            session, case_ids=list(case_ids), actor=rubric.applies_to
        )
        if run.status != "running":
            judging.touch_run(session, run, status="running")
        session.commit()
    if units is not None:
        wanted = set(units)
        judged = [unit for unit in judged if unit in wanted]
    todo = [unit for unit in judged if unit not in done]
    summary = JudgeRunSummary(
        run_id=run_id, name=name, units=len(judged), skipped=len(judged) - len(todo), scope=scope
    )
    if counted is not None:
        counted(summary.units, summary.skipped)
    cases = case_batches(engine, todo)
    prepared = PreparedPrompt.of(prompt, rubric=rubric)
    started = time.perf_counter()
    interrupted = False
    if todo:
        try:
            with asyncio.Runner(loop_factory=event_loop_factory()) as runner:
                runner.run(
                    _run_jobs(
                        engine,
                        run_id,
                        len(todo),
                        cases,
                        prepared,
                        rubric,
                        endpoints,
                        summary,
                        progress,
                        stop,
                    )
                )
        except KeyboardInterrupt:
            # Ctrl-C: the answers that came are stored (_run_jobs stores them as it is
            # cancelled) and the run is left partial before the interrupt goes on.
            summary.stopped = interrupted = True
    summary.seconds = time.perf_counter() - started
    with Session(engine) as session:
        stored = judging.get_run(session, run_id=run_id)
        assert stored is not None
        previous = json.loads(stored.summary_json) if stored.summary_json else {}
        totals = {
            "seconds": previous.get("seconds", 0.0) + summary.seconds,
            "prompt_tokens": previous.get("prompt_tokens", 0) + summary.prompt_tokens,
            "completion_tokens": previous.get("completion_tokens", 0) + summary.completion_tokens,
            # answers (parsed or not) behind the token totals: tokens per request
            "answers": previous.get("answers", 0) + summary.answered + summary.answer_errors,
            "last": summary.to_dict(),
        }
        answered = judging.run_counts_of(session, run_id=run_id).answered_turns
        if summary.stopped:
            status = "partial"
        elif summary.all_failed and not answered:
            status = "failed"  # nothing was ever answered: the first error says why
        else:
            # complete, with any endpoint failures counted (a later run asks them again)
            status = "complete"
        judging.touch_run(
            session, stored, summary_json=json.dumps(totals, sort_keys=True), status=status
        )
        audit.add_entry(
            session,
            actor=actor.name,
            action="judge_run",
            object_type="judge_run",
            object_key=str(run_id),
            summary={"rubric": rubric.ref, "run": name, **summary.to_dict()},
        )
        session.commit()
    if interrupted:
        raise JudgeRunInterrupted(summary)
    return summary


class JudgeRunInterrupted(KeyboardInterrupt):
    """Ctrl-C during a run, raised once the answers that came are stored and the run is
    marked partial (the same command resumes it); ``summary`` says how far it went."""

    def __init__(self, summary: JudgeRunSummary) -> None:
        super().__init__()
        self.summary = summary


_READY_AT_LEAST = 512
"""Rendered units kept waiting at least, however low the endpoints' concurrency."""
_FEED_POLL = 0.01
"""Seconds between looks at the queue while enough rendered units wait."""
_STORE_EVERY = 0.25
"""Seconds an answer waits at most before it is written (with those that came since)."""
_STOP_POLL = 0.2
"""Seconds between looks at a stop request while no answer comes."""
_STORE_AT_MOST = 2000
"""Answers written in one batch at most, however little time has passed."""


async def _run_jobs(
    engine: Engine,
    run_id: int,
    n_jobs: int,
    cases: Iterator[list[CaseToJudge]],
    prepared: PreparedPrompt,
    rubric: Rubric,
    endpoints: Sequence[EndpointSettings],
    summary: JudgeRunSummary,
    progress: Callable[[int, int], None] | None,
    stop: Callable[[], bool] | None = None,
) -> None:
    fed: list[int] = []

    # Units waiting with their prompt rendered: enough for the endpoints' slots while
    # the next batch renders, not the whole run (250,000 prompts of 14 KB are 3.5 GB).
    ready_at_most = max(_READY_AT_LEAST, 8 * sum(settings.concurrency for settings in endpoints))
    # A unit may go to any of the endpoints: its prompt must suit the smallest limit.
    max_bytes = min(settings.max_prompt_bytes for settings in endpoints)

    async def feed() -> None:
        # Transcripts are read in a thread, a batch of cases at a time, while the first
        # units are already being asked. Prompts are rendered here, on the event loop,
        # a case at a time: a rendering thread held the interpreter lock for 5 ms at a
        # time while answers waited, 6% of a run's speed at a 50 ms endpoint.
        count = 0
        while (batch := await asyncio.to_thread(next, cases, None)) is not None:
            for case in batch:
                while pool.waiting > ready_at_most:
                    await asyncio.sleep(_FEED_POLL)
                for job in case_prompts(prepared, case, max_bytes=max_bytes):
                    if job.refusal is not None:  # never sent; the next run checks again
                        done.put_nowait(
                            UnitOutcome(job, error=job.refusal, error_kind=ENDPOINT_ERROR)
                        )
                    else:
                        pool.ask(job)
                    count += 1
                await asyncio.sleep(0)  # answers that came in are taken between cases
        fed.append(count)

    done: asyncio.Queue[UnitOutcome] = asyncio.Queue()
    pending: list[UnitOutcome] = []
    redact = Redactor.of(endpoints)
    async with open_endpoints(endpoints, rubric, done) as pool:
        feeder = asyncio.create_task(feed())
        try:
            finished = 0
            oldest = 0.0  # when the oldest answer not yet stored came
            while not fed or finished < fed[0]:
                if stop is not None and stop():
                    summary.stopped = True
                    break
                wait = None if stop is None else _STOP_POLL
                if pending:
                    due = max(0.0, oldest + _STORE_EVERY - time.monotonic())
                    wait = due if wait is None else min(wait, due)
                outcome = await _next_outcome(done, feeder, wait)
                if outcome is not None:
                    finished += 1
                    if not pending:
                        oldest = time.monotonic()
                    pending.append(outcome)
                    summary.count(outcome)
                    if progress:
                        progress(finished, fed[0] if fed else n_jobs)
                if pending and (
                    time.monotonic() - oldest >= _STORE_EVERY or len(pending) >= _STORE_AT_MOST
                ):
                    # Off the event loop: requests keep flowing while a batch is written.
                    # Every answer is written within a quarter second of coming, a batch a
                    # transaction (on SQLite a sync to disk): at hundreds of answers a
                    # second that is a few batches a second, not one transaction each; a
                    # slow endpoint's answer is never kept waiting for others. A stop or
                    # a crash loses at most the answers of the last quarter second (and
                    # the requests in flight), which the next run asks again.
                    batch, pending = pending, []
                    await asyncio.to_thread(_store, engine, run_id, batch, redact)
        finally:
            feeder.cancel()
            await pool.stop()
            await asyncio.gather(feeder, return_exceptions=True)
            # Also when the run is cancelled (Ctrl-C): what was answered is kept, those
            # answers not yet taken from the queue too. A batch being written in its
            # thread when that happened is not in pending.
            while not done.empty():
                pending.append(outcome := done.get_nowait())
                summary.count(outcome)
            _store(engine, run_id, pending, redact)


async def _next_outcome(
    done: asyncio.Queue[UnitOutcome], feeder: asyncio.Task[None], timeout: float | None = None
) -> UnitOutcome | None:
    """The next outcome, or ``None`` when the feeder finished first (its error raised)
    or ``timeout`` seconds passed without one."""
    if feeder.done():
        feeder.result()  # raises what the feeder raised
        if timeout is None:
            return await done.get()
        try:
            return await asyncio.wait_for(done.get(), timeout)
        except TimeoutError:
            return None
    getter = asyncio.ensure_future(done.get())
    await asyncio.wait({getter, feeder}, timeout=timeout, return_when=asyncio.FIRST_COMPLETED)
    if getter.done():
        return getter.result()
    getter.cancel()
    if feeder.done():
        feeder.result()
    return None


def _store(engine: Engine, run_id: int, outcomes: list[UnitOutcome], redact: Redactor) -> None:
    """Write answers; no endpoint's secret goes into a stored error or reason."""
    if not outcomes:
        return
    with Session(engine) as session:
        judging.replace_verdicts(
            session,
            run_id=run_id,
            now=datetime.now(UTC),
            rows=[
                (
                    o.job.case_id,
                    o.job.turn,
                    o.label,
                    o.score,
                    redact(o.reason),
                    redact(o.error),
                    o.error_kind,
                    o.latency_ms,
                    o.prompt_tokens,
                    o.completion_tokens,
                )
                for o in outcomes
            ],
        )
        session.commit()


# --- runs and the calibration report ---------------------------------------------------------
