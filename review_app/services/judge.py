"""LLM judges: importing their verdicts, running a judge prompt, and the calibration report.

A judge run is identified by judge + prompt version + model (docs/reference.md, "Judge
verdicts"), within one rubric version. Running a prompt talks to any OpenAI-compatible chat endpoint
(OpenAI, vLLM, Ollama, llama.cpp's server) with bounded concurrency, retries with
backoff, and resumption: verdicts are stored as they arrive, and a second run of
the same judge skips the units already answered (endpoint failures are retried,
unparseable answers are kept as errors: at temperature 0 they would repeat).
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import time
from collections import Counter, defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal, cast

import httpx
from sqlalchemy import Engine
from sqlmodel import Session

from review_app import calibration
from review_app.errors import InputError, NotFound
from review_app.judging import (
    JudgeAnswerError,
    JudgePrompt,
    VerdictRecord,
    parse_judge_answer,
    read_verdict_file,
    render_prompt,
)
from review_app.rubrics import Rubric
from review_app.services.adjudication import gold_labels
from review_app.services.agreement import load_label_columns
from review_app.services.audit import file_sha256
from review_app.services.cases import case_view
from review_app.services.people import Actor, authorize
from storage import audit
from storage import judging as queries
from storage.cases import list_case_summaries
from storage.engine import read_only
from storage.labels_bulk import event_actors
from storage.models import JudgeRun

API_KEY_ENV = "REVIEW_APP_JUDGE_API_KEY"
BASE_URL_ENV = "REVIEW_APP_JUDGE_BASE_URL"
MODEL_ENV = "REVIEW_APP_JUDGE_MODEL"
ENDPOINT_ERROR = "endpoint: "
RESPONSE_FORMATS = ("text", "json_object", "json_object_schema", "json_schema")
ANSWER_ERROR = "answer: "


# --- import ------------------------------------------------------------------------------


@dataclass
class JudgeImportSummary:
    runs: dict[str, int] = field(default_factory=dict)
    """``judge@prompt_version/model`` -> verdicts stored."""

    def line(self) -> str:
        parts = ", ".join(f"{name}: {count}" for name, count in sorted(self.runs.items()))
        return f"stored {sum(self.runs.values())} verdicts in {len(self.runs)} runs ({parts})"


def run_name(run: JudgeRun) -> str:
    return f"{run.judge}@{run.prompt_version}/{run.model}"


def import_verdicts(
    engine: Engine, actor: Actor, path: Path, *, rubric: Rubric, score_means: str = "break"
) -> JudgeImportSummary:
    """Import a verdict file (docs/reference.md, "Judge verdicts") in one transaction."""
    actor = authorize(engine, actor, "policy_owner")
    records = read_verdict_file(path, rubric=rubric, score_means=score_means)
    source = str(path)
    summary = JudgeImportSummary()
    now = datetime.now(UTC)
    with Session(engine) as session:
        actors = event_actors(session, case_ids=sorted({r.case_id for r in records}))
        for record in records:
            turns = actors.get(record.case_id)
            if turns is None:
                raise InputError(
                    f"no case {record.case_id!r} in the database",
                    source=source,
                    line=record.line,
                    field="case_id",
                )
            if record.turn is not None and turns.get(record.turn) != rubric.applies_to:
                raise InputError(
                    f"case {record.case_id} has no {rubric.applies_to} turn {record.turn}",
                    source=source,
                    line=record.line,
                    field="turn",
                )
        grouped: dict[tuple[str, str, str], list[VerdictRecord]] = defaultdict(list)
        for record in records:
            grouped[record.run_key].append(record)
        for (judge, prompt_version, model), group in sorted(grouped.items()):
            run = queries.find_run(
                session,
                judge=judge,
                prompt_version=prompt_version,
                model=model,
                rubric_id=rubric.id,
                version=rubric.version,
            )
            if run is None:
                run = queries.create_run(
                    session,
                    judge=judge,
                    prompt_version=prompt_version,
                    model=model,
                    rubric_id=rubric.id,
                    rubric_version=rubric.version,
                    source="import",
                )
            assert run.id is not None
            queries.replace_verdicts(
                session,
                run_id=run.id,
                now=now,
                rows=[
                    (r.case_id, r.turn, r.label, r.score, r.reason, None, None, None, None)
                    for r in group
                ],
            )
            queries.touch_run(session, run, status="complete")
            summary.runs[run_name(run)] = len(group)
        audit.add_entry(
            session,
            actor=actor.name,
            action="verdicts_import",
            object_type="rubric",
            object_key=rubric.ref,
            summary={
                "file": path.name,
                "sha256": file_sha256(path),
                "runs": dict(sorted(summary.runs.items())),
                "score_means": score_means,
            },
        )
        session.commit()
    return summary


# --- running a judge -----------------------------------------------------------------------


@dataclass(frozen=True)
class EndpointSettings:
    base_url: str
    model: str
    api_key: str | None = None
    concurrency: int = 4
    retries: int = 3
    timeout: float = 120.0
    max_tokens: int = 300
    response_format: str = "json_object"
    """``text`` (nothing asked), ``json_object`` (OpenAI, vLLM, llama.cpp),
    ``json_object_schema`` (llama.cpp's server: a JSON object constrained to the
    verdict's schema) or ``json_schema`` (OpenAI structured outputs, vLLM)."""

    @classmethod
    def from_options(
        cls, *, base_url: str | None, model: str | None, api_key: str | None, **options: Any
    ) -> EndpointSettings:
        url = base_url or os.environ.get(BASE_URL_ENV) or os.environ.get("OPENAI_BASE_URL")
        name = model or os.environ.get(MODEL_ENV)
        if not url:
            raise InputError(f"give --base-url (or set {BASE_URL_ENV})", field="--base-url")
        if not name:
            raise InputError(f"give --model (or set {MODEL_ENV})", field="--model")
        key = api_key or os.environ.get(API_KEY_ENV) or os.environ.get("OPENAI_API_KEY")
        settings = cls(base_url=url.rstrip("/"), model=name, api_key=key, **options)
        if settings.concurrency < 1:
            raise InputError("--concurrency is at least 1", field="--concurrency")
        if settings.retries < 0:
            raise InputError("--retries is at least 0", field="--retries")
        if settings.response_format not in RESPONSE_FORMATS:
            raise InputError(
                f"--response-format is one of {', '.join(RESPONSE_FORMATS)}",
                field="--response-format",
            )
        return settings


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

    def line(self) -> str:
        rate = self.answered / self.seconds if self.seconds else 0.0
        return (
            f"run {self.run_id} {self.name}: {self.units} units, {self.skipped} already done; "
            f"answered {self.answered}, unparseable answers {self.answer_errors}, endpoint "
            f"failures {self.endpoint_errors}; {self.seconds:.1f} s ({rate:.2f} units/s), "
            f"tokens {self.prompt_tokens} in / {self.completion_tokens} out"
        )

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


@dataclass(frozen=True)
class _Job:
    case_id: str
    turn: int
    messages: list[dict[str, str]]


@dataclass
class _Outcome:
    job: _Job
    label: str | None = None
    score: float | None = None
    reason: str | None = None
    error: str | None = None
    latency_ms: int = 0
    prompt_tokens: int | None = None
    completion_tokens: int | None = None


def verdict_schema(rubric: Rubric) -> dict[str, Any]:
    """JSON schema of the answer a judge must give."""
    return {
        "type": "object",
        "properties": {
            "label": {"type": "string", "enum": list(rubric.codes)},
            "score": {"type": "number", "minimum": 0, "maximum": 1},
            "reason": {"type": "string"},
        },
        "required": ["label", "score", "reason"],
        "additionalProperties": False,
    }


def _response_format(kind: str, rubric: Rubric) -> dict[str, Any] | None:
    if kind == "json_object":
        return {"type": "json_object"}
    if kind == "json_object_schema":
        return {"type": "json_object", "schema": verdict_schema(rubric)}
    if kind == "json_schema":
        return {
            "type": "json_schema",
            "json_schema": {"name": "verdict", "schema": verdict_schema(rubric), "strict": True},
        }
    return None


async def _ask(
    client: httpx.AsyncClient,
    settings: EndpointSettings,
    job: _Job,
    rubric: Rubric,
    limiter: asyncio.Semaphore,
) -> _Outcome:
    body: dict[str, Any] = {
        "model": settings.model,
        "messages": job.messages,
        "temperature": 0,
        "max_tokens": settings.max_tokens,
    }
    response_format = _response_format(settings.response_format, rubric)
    if response_format is not None:
        body["response_format"] = response_format
    headers = {"Authorization": f"Bearer {settings.api_key}"} if settings.api_key else {}
    async with limiter:
        started = time.perf_counter()
        last_problem = "no attempt"
        for attempt in range(settings.retries + 1):
            if attempt:
                await asyncio.sleep(min(30.0, 0.5 * 2 ** (attempt - 1)) * (1 + random.random()))
            try:
                response = await client.post(
                    f"{settings.base_url}/chat/completions", json=body, headers=headers
                )
            except httpx.HTTPError as error:
                last_problem = f"{type(error).__name__}: {error}"
                continue
            if response.status_code == 429 or response.status_code >= 500:
                last_problem = f"HTTP {response.status_code}"
                retry_after = response.headers.get("retry-after", "")
                if retry_after.isdigit() and attempt < settings.retries:
                    await asyncio.sleep(min(60, int(retry_after)))
                continue
            latency = int((time.perf_counter() - started) * 1000)
            if response.status_code >= 400:
                return _Outcome(
                    job,
                    error=f"{ENDPOINT_ERROR}HTTP {response.status_code}: {response.text[:300]}",
                    latency_ms=latency,
                )
            try:
                payload = response.json()
                content = payload["choices"][0]["message"]["content"] or ""
                usage = payload.get("usage") or {}
            except (ValueError, KeyError, IndexError, TypeError, AttributeError):
                content, usage = None, None
            if not isinstance(content, str) or not isinstance(usage, dict):
                return _Outcome(
                    job,
                    error=f"{ENDPOINT_ERROR}not a chat-completions response",
                    latency_ms=latency,
                )
            outcome = _Outcome(
                job,
                latency_ms=latency,
                prompt_tokens=_token_count(usage.get("prompt_tokens")),
                completion_tokens=_token_count(usage.get("completion_tokens")),
            )
            try:
                answer = parse_judge_answer(content, rubric=rubric)
            except JudgeAnswerError as error:
                outcome.error = f"{ANSWER_ERROR}{error}; the answer was: {content[:500]!r}"
                return outcome
            outcome.label, outcome.score, outcome.reason = answer.label, answer.score, answer.reason
            return outcome
        return _Outcome(
            job,
            error=f"{ENDPOINT_ERROR}{last_problem} after {settings.retries + 1} attempts",
            latency_ms=int((time.perf_counter() - started) * 1000),
        )


def _token_count(value: Any) -> int | None:
    """A token count from a response's ``usage``; anything but a count is unknown."""
    if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
        return value
    return None


def select_case_ids(
    engine: Engine,
    *,
    case_ids: Sequence[str] | None = None,
    lane: str | None = None,
    limit: int | None = None,
) -> list[str]:
    from review_app.evaluator import EVALUATOR_VERSION

    with Session(read_only(engine)) as session:
        rows = list_case_summaries(
            session,
            evaluator_version=EVALUATOR_VERSION,
            lanes=[lane] if lane else None,
            case_ids=list(case_ids) if case_ids else None,
            limit=limit,
        )
    found = [row.case_id for row in rows]
    if case_ids:
        missing = sorted(set(case_ids) - set(found))
        if missing:
            raise InputError(f"no case {missing[0]!r} in the database", field="--case")
    return found


def run_judge(
    engine: Engine,
    actor: Actor,
    *,
    rubric: Rubric,
    prompt: JudgePrompt,
    settings: EndpointSettings,
    case_ids: Sequence[str],
    progress: Callable[[int, int], None] | None = None,
) -> JudgeRunSummary:
    """Judge every labelable turn of ``case_ids``; store verdicts as they come (resumable)."""
    actor = authorize(engine, actor, "policy_owner")
    params = {
        "base_url": settings.base_url,
        "max_tokens": settings.max_tokens,
        "response_format": settings.response_format,
        "temperature": 0,
        "prompt_source": prompt.source,
    }
    with Session(engine) as session:
        run = queries.find_run(
            session,
            judge=prompt.judge,
            prompt_version=prompt.version,
            model=settings.model,
            rubric_id=rubric.id,
            version=rubric.version,
        )
        if run is None:
            run = queries.create_run(
                session,
                judge=prompt.judge,
                prompt_version=prompt.version,
                model=settings.model,
                rubric_id=rubric.id,
                rubric_version=rubric.version,
                prompt_sha256=prompt.sha256,
                source="run",
                status="running",
                params_json=json.dumps(params, sort_keys=True),
            )
        elif run.prompt_sha256 and run.prompt_sha256 != prompt.sha256:
            raise InputError(
                f"{prompt.source} changed since run {run.id} used {prompt.ref}; a prompt "
                "version is immutable once run: save the change as a new version",
                field="--prompt",
            )
        assert run.id is not None
        run_id, name = run.id, run_name(run)
        done = {
            (v.case_id, v.turn)
            for v in queries.verdicts(session, run_id=run_id)
            if v.error is None or not v.error.startswith(ENDPOINT_ERROR)
        }
        units = queries.assistant_units(session, case_ids=list(case_ids), actor=rubric.applies_to)
        session.commit()
    todo = [unit for unit in units if unit not in done]
    summary = JudgeRunSummary(
        run_id=run_id, name=name, units=len(units), skipped=len(units) - len(todo)
    )
    jobs: list[_Job] = []
    views: dict[str, Any] = {}
    with Session(read_only(engine)) as session:
        for case_id, turn in todo:
            if case_id not in views:
                views[case_id] = case_view(session, case_id=case_id)
            view = views[case_id]
            events = []
            for event in view.turns:
                events.append(
                    {
                        "turn": event.turn,
                        "actor": event.actor,
                        "text": event.text,
                        "observed_actions": event.actions,
                        "set_role": event.set_role,
                    }
                )
                if event.turn == turn:
                    break
            jobs.append(
                _Job(
                    case_id,
                    turn,
                    render_prompt(
                        prompt,
                        rubric=rubric,
                        chatbot_role=view.chatbot_role,
                        events=events,
                        turn=turn,
                    ),
                )
            )
    started = time.perf_counter()
    if jobs:
        asyncio.run(_run_jobs(engine, run_id, jobs, rubric, settings, summary, progress))
    summary.seconds = time.perf_counter() - started
    with Session(engine) as session:
        run = queries.get_run(session, run_id=run_id)
        assert run is not None
        previous = json.loads(run.summary_json) if run.summary_json else {}
        totals = {
            "seconds": previous.get("seconds", 0.0) + summary.seconds,
            "prompt_tokens": previous.get("prompt_tokens", 0) + summary.prompt_tokens,
            "completion_tokens": previous.get("completion_tokens", 0) + summary.completion_tokens,
            "last": summary.to_dict(),
        }
        queries.touch_run(
            session,
            run,
            summary_json=json.dumps(totals, sort_keys=True),
            # From what is stored, not from this pass alone: a pass over some of the
            # cases must not call a run complete while other units still wait for retry.
            status="partial"
            if queries.count_errors_starting(session, run_id=run_id, prefix=ENDPOINT_ERROR)
            else "complete",
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
    return summary


async def _run_jobs(
    engine: Engine,
    run_id: int,
    jobs: list[_Job],
    rubric: Rubric,
    settings: EndpointSettings,
    summary: JudgeRunSummary,
    progress: Callable[[int, int], None] | None,
) -> None:
    limiter = asyncio.Semaphore(settings.concurrency)
    pending: list[_Outcome] = []
    finished = 0
    limits = httpx.Limits(max_connections=settings.concurrency)
    async with httpx.AsyncClient(timeout=settings.timeout, limits=limits) as client:
        tasks = [asyncio.create_task(_ask(client, settings, job, rubric, limiter)) for job in jobs]
        for next_done in asyncio.as_completed(tasks):
            outcome = await next_done
            pending.append(outcome)
            finished += 1
            if outcome.error is None:
                summary.answered += 1
            elif outcome.error.startswith(ANSWER_ERROR):
                summary.answer_errors += 1
            else:
                summary.endpoint_errors += 1
            summary.prompt_tokens += outcome.prompt_tokens or 0
            summary.completion_tokens += outcome.completion_tokens or 0
            if progress:
                progress(finished, len(jobs))
            if len(pending) >= 10:
                _store(engine, run_id, pending)
                pending = []
    _store(engine, run_id, pending)


def _store(engine: Engine, run_id: int, outcomes: list[_Outcome]) -> None:
    if not outcomes:
        return
    with Session(engine) as session:
        queries.replace_verdicts(
            session,
            run_id=run_id,
            now=datetime.now(UTC),
            rows=[
                (
                    o.job.case_id,
                    o.job.turn,
                    o.label,
                    o.score,
                    o.reason,
                    o.error,
                    o.latency_ms,
                    o.prompt_tokens,
                    o.completion_tokens,
                )
                for o in outcomes
            ],
        )
        session.commit()


# --- runs and the calibration report ---------------------------------------------------------


def list_judge_runs(
    engine: Engine, actor: Actor, *, rubric: Rubric | None = None
) -> list[dict[str, Any]]:
    authorize(engine, actor, "policy_owner")
    with Session(read_only(engine)) as session:
        runs = queries.list_runs(
            session,
            rubric_id=rubric.id if rubric else None,
            version=rubric.version if rubric else None,
        )
        result = []
        for run in runs:
            assert run.id is not None
            total, errors = queries.verdict_counts(session, run_id=run.id)
            result.append(
                {
                    "id": run.id,
                    "name": run_name(run),
                    "judge": run.judge,
                    "prompt_version": run.prompt_version,
                    "model": run.model,
                    "rubric": f"{run.rubric_id}@{run.rubric_version}",
                    "source": run.source,
                    "status": run.status,
                    "verdicts": total,
                    "errors": errors,
                    "prompt_sha256": run.prompt_sha256,
                    "calibrated": run.calibration_json is not None,
                    "summary": json.loads(run.summary_json) if run.summary_json else None,
                }
            )
    return result


def judge_token(engine: Engine, actor: Actor, *, rubric: Rubric) -> tuple[int, str, int, int]:
    """A value that changes whenever the rubric version's judge runs or verdicts change."""
    authorize(engine, actor, "policy_owner")
    with Session(read_only(engine)) as session:
        return queries.judge_token(session, rubric_id=rubric.id, version=rubric.version)


def _run_verdicts(
    engine: Engine, rubric: Rubric, run_ids: Sequence[int] | None
) -> list[tuple[JudgeRun, list[queries.VerdictRow]]]:
    with Session(read_only(engine)) as session:
        runs = queries.list_runs(session, rubric_id=rubric.id, version=rubric.version)
        if run_ids:
            wanted = set(run_ids)
            unknown = wanted - {r.id for r in runs}
            if unknown:
                raise NotFound(f"no judge run {min(unknown)} for {rubric.ref}")
            runs = [r for r in runs if r.id in wanted]
        result = []
        for run in runs:
            assert run.id is not None
            result.append((run, queries.verdicts(session, run_id=run.id)))
            session.expunge(run)
    return result


def calibration_report(
    engine: Engine,
    actor: Actor,
    *,
    rubric: Rubric,
    run_ids: Sequence[int] | None = None,
    n_resamples: int = 1000,
    seed: int = 0,
) -> dict[str, Any]:
    """How far each judge run agrees with humans, where it fails, and how to trust its scores."""
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
    runs = _run_verdicts(engine, rubric, run_ids)
    report: dict[str, Any] = {
        "rubric": rubric.ref,
        "gold": gold.counts(),
        "reviewers": sorted(by_reviewer),
        "runs": [],
    }
    judged_by_run: dict[str, dict[tuple[str, int], str]] = {}
    for run, rows in runs:
        turn_rows = [r for r in rows if r.turn is not None]
        judged: dict[tuple[str, int], str] = {}
        judged_units: set[tuple[str, int]] = set()
        for unit, r in _turn_units(rows):
            if r.error is None:
                judged_units.add(unit)
                if r.label is not None:
                    judged[unit] = r.label
        judged_by_run[run_name(run)] = judged
        entry: dict[str, Any] = {
            "id": run.id,
            "name": run_name(run),
            "judge": run.judge,
            "prompt_version": run.prompt_version,
            "model": run.model,
            "source": run.source,
            "verdicts": len(rows),
            "turn_verdicts": len(turn_rows),
            "conversation_verdicts": len(rows) - len(turn_rows),
            "errors": sum(1 for r in rows if r.error),
        }
        vs_gold = (
            calibration.compare_to_reference(
                reference=gold_codes,
                judged=judged,
                break_mapping=break_mapping,
                ignore_codes=ignore,
                n_resamples=n_resamples,
                seed=seed,
            )
            if judged
            else None
        )
        entry["vs_gold"] = vs_gold.to_dict() if vs_gold else None
        entry["vs_reviewers"] = {
            reviewer: calibration.compare_to_reference(
                reference=labels,
                judged=judged,
                break_mapping=break_mapping,
                ignore_codes=ignore,
                n_resamples=n_resamples,
                seed=seed,
            ).to_dict()
            for reviewer, labels in sorted(by_reviewer.items())
            if judged
        }
        human = calibration.mean_pairwise_kappa(
            by_reviewer, units=judged_units, n_resamples=n_resamples, seed=seed
        )
        entry["human_ceiling"] = {
            "human_kappa": human.to_dict(),
            **calibration.human_ceiling(
                judge_kappa=vs_gold.kappa.value if vs_gold else None, human_ci95=human.ci95
            ),
        }
        judge_first: dict[str, int | None] = {}
        for (case_id, turn), code in sorted(judged.items()):
            judge_first.setdefault(case_id, None)
            if code in break_codes and judge_first[case_id] is None:
                judge_first[case_id] = turn
        gold_first = gold.first_break_turns(break_codes)
        shared_cases = {c: gold_first[c] for c in gold_first if c in judge_first}
        entry["first_break"] = (
            calibration.first_break_comparison(
                reference=shared_cases, judged={c: judge_first[c] for c in shared_cases}
            ).to_dict()
            if shared_cases
            else None
        )
        entry["scores"] = _score_section(run, turn_rows, gold_codes, break_mapping)
        entry["disagreements"] = _disagreements(turn_rows, gold_codes, break_mapping)
        report["runs"].append(entry)
    # Only runs with codes: one without (scores only, or conversation-level only) would
    # leave no shared unit to compare the others on.
    coded_runs = {name: judged for name, judged in judged_by_run.items() if judged}
    if len(coded_runs) >= 2:
        report["versions"] = calibration.compare_prompt_versions(
            verdicts=coded_runs,
            reference=gold_codes,
            break_mapping=break_mapping,
            ignore_codes=ignore,
            n_resamples=min(n_resamples, 300),
            seed=seed,
        ).to_dict()
    return report


def _turn_units(
    rows: Sequence[queries.VerdictRow],
) -> list[tuple[tuple[str, int], queries.VerdictRow]]:
    """Turn-level verdicts with their unit (conversation-level ones left out)."""
    return [((r.case_id, r.turn), r) for r in rows if r.turn is not None]


def _binary_pairs(
    rows: list[queries.VerdictRow],
    gold_codes: dict[tuple[str, int], str],
    break_mapping: dict[str, str | None],
) -> tuple[list[int], list[float]]:
    y_true, scores = [], []
    for unit, row in _turn_units(rows):
        code = gold_codes.get(unit)
        if code is None or row.score is None or row.error is not None:
            continue
        mapped = break_mapping.get(code)
        if mapped is None:
            continue
        y_true.append(1 if mapped == "break" else 0)
        scores.append(row.score)
    return y_true, scores


def _score_section(
    run: JudgeRun,
    rows: list[queries.VerdictRow],
    gold_codes: dict[tuple[str, int], str],
    break_mapping: dict[str, str | None],
) -> dict[str, Any] | None:
    y_true, scores = _binary_pairs(rows, gold_codes, break_mapping)
    if not scores:
        return None
    section: dict[str, Any] = {"n": len(scores)}
    section["sweep"] = calibration.threshold_sweep(y_true=y_true, scores=scores).to_dict()
    section["reliability"] = calibration.reliability(y_true=y_true, probabilities=scores).to_dict()
    if run.calibration_json:
        stored = calibration.CalibrationMap.from_dict(json.loads(run.calibration_json))
        calibrated = [float(v) for v in stored.transform(scores)]
        section["calibration_map"] = stored.to_dict()
        section["calibrated_reliability"] = calibration.reliability(
            y_true=y_true, probabilities=calibrated
        ).to_dict()
    return section


def _disagreements(
    rows: list[queries.VerdictRow],
    gold_codes: dict[tuple[str, int], str],
    break_mapping: dict[str, str | None],
) -> list[dict[str, Any]]:
    found = []
    for unit, row in _turn_units(rows):
        reference = gold_codes.get(unit)
        if reference is None or row.label is None or row.error is not None:
            continue
        kind = calibration.classify_disagreement(reference, row.label, break_mapping)
        if kind in ("agree", "not_comparable") and reference == row.label:
            continue
        if kind == "agree":
            continue
        found.append(
            {
                "case_id": row.case_id,
                "turn": row.turn,
                "gold": reference,
                "judge": row.label,
                "score": row.score,
                "reason": row.reason,
                "kind": kind,
            }
        )
    return found


def fit_run_calibration(
    engine: Engine,
    actor: Actor,
    *,
    rubric: Rubric,
    run_id: int,
    method: str = "isotonic",
    cv: int = 5,
    seed: int = 0,
) -> dict[str, Any]:
    """Fit a score calibration map on the gold units and store it with the run."""
    actor = authorize(engine, actor, "policy_owner")
    if method not in ("isotonic", "platt"):
        raise InputError("--method is isotonic or platt", field="--method")
    gold = gold_labels(engine, actor, rubric=rubric)
    gold_codes = {unit: g.code for unit, g in gold.labels.items()}
    [(_, rows)] = _run_verdicts(engine, rubric, [run_id])
    y_true, scores = _binary_pairs(
        [r for r in rows if r.turn is not None], gold_codes, rubric.break_mapping()
    )
    try:
        fitted = calibration.fit_calibration_map(
            y_true=y_true,
            scores=scores,
            method=cast(Literal["isotonic", "platt"], method),
            cv=cv,
            seed=seed,
        )
    except ValueError as error:
        raise InputError(f"cannot calibrate run {run_id}: {error}", field="--run") from None
    with Session(engine) as session:
        stored = queries.get_run(session, run_id=run_id)
        assert stored is not None
        before = stored.calibration_json is not None
        queries.touch_run(
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
    return fitted.to_dict()


def calibrated_probability(
    engine: Engine, actor: Actor, *, run_id: int, scores: Sequence[float]
) -> list[float]:
    authorize(engine, actor, "policy_owner")
    with Session(read_only(engine)) as session:
        run = queries.get_run(session, run_id=run_id)
        if run is None:
            raise NotFound(f"no judge run {run_id}")
        if not run.calibration_json:
            raise InputError(f"run {run_id} has no calibration map yet", field="--run")
        mapping = calibration.CalibrationMap.from_dict(json.loads(run.calibration_json))
    return [float(v) for v in mapping.transform(list(scores))]


def few_shot_material(
    engine: Engine,
    actor: Actor,
    *,
    rubric: Rubric,
    run_id: int | None = None,
    per_label: int = 1,
    seed: int = 0,
) -> list[dict[str, Any]]:
    """Adjudicated contrasting examples (pass / fail / borderline per label) for a prompt."""
    actor = authorize(engine, actor, "policy_owner")
    gold = gold_labels(engine, actor, rubric=rubric)
    judge_codes: dict[tuple[str, int], str] = {}
    if run_id is not None:
        [(_, rows)] = _run_verdicts(engine, rubric, [run_id])
        for r in rows:
            if r.turn is not None and r.label is not None:
                judge_codes[(r.case_id, r.turn)] = r.label
    columns = load_label_columns(engine, actor, rubric=rubric)
    agreement: Counter[tuple[str, int]] = Counter()
    raters: Counter[tuple[str, int]] = Counter()
    for case_id, turn, code in zip(columns.case_ids, columns.turns, columns.codes, strict=True):
        raters[(case_id, turn)] += 1
        if gold.labels.get((case_id, turn)) and gold.labels[(case_id, turn)].code == code:
            agreement[(case_id, turn)] += 1
    candidates = []
    with Session(read_only(engine)) as session:
        by_case: dict[str, Any] = {}
        for (case_id, turn), entry in sorted(gold.labels.items()):
            if entry.source != "adjudicated" and not entry.calibration_item:
                continue
            if case_id not in by_case:
                by_case[case_id] = case_view(session, case_id=case_id)
            view = by_case[case_id]
            texts = [t for t in view.turns if t.turn <= turn]
            reply = texts[-1].text if texts and texts[-1].turn == turn else ""
            context = next((t.text for t in reversed(texts[:-1]) if t.actor == "user"), "")
            candidates.append(
                {
                    "case_id": case_id,
                    "turn": turn,
                    "label": entry.code,
                    "reply": reply or "",
                    "context": context or "",
                    "why": entry.note or "",
                    "judge_label": judge_codes.get((case_id, turn)),
                    "agreement": agreement[(case_id, turn)] / raters[(case_id, turn)]
                    if raters[(case_id, turn)]
                    else 0.0,
                }
            )
    return calibration.few_shot_examples(
        candidates,
        verdict_by_code={label.code: label.verdict for label in rubric.labels},
        per_label=per_label,
        seed=seed,
    )


def disagreement_explorer(
    engine: Engine,
    actor: Actor,
    *,
    rubric: Rubric,
    report_run: dict[str, Any],
    kind: str | None = None,
    label: str | None = None,
) -> list[dict[str, Any]]:
    """A run's disagreements with gold beside the reviewers' rationales, filtered.

    ``kind``: ``missed_break`` (the judge misses a break), ``false_alarm`` (it flags a
    clean turn), ``wrong_break_kind``; ``label``: gold or judge code.
    """
    from storage import reviewing

    authorize(engine, actor, "policy_owner")
    rows = [
        item
        for item in report_run.get("disagreements", [])
        if (kind is None or item["kind"] == kind)
        and (label is None or label in (item["gold"], item["judge"]))
    ]
    with Session(read_only(engine)) as session:
        cache: dict[str, list[Any]] = {}
        for item in rows:
            if item["case_id"] not in cache:
                cache[item["case_id"]] = reviewing.labels_for_case(
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
