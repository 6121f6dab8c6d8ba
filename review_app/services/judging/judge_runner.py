"""Running a judge prompt against an OpenAI-compatible chat endpoint.

Talks to any OpenAI-compatible endpoint (OpenAI, vLLM, Ollama, llama.cpp's server) with
bounded concurrency, retries with backoff, and resumption: verdicts are stored as they
arrive, and a second run of the same judge skips the units already answered (endpoint
failures are retried, unparseable answers are kept as errors: at temperature 0 they
would repeat).
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import functools
import ipaddress
import itertools
import json
import os
import random
import re
import ssl
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any
from urllib.parse import quote, unquote, urlsplit

import orjson
from sqlalchemy import Engine
from sqlmodel import Session

from review_app import input_policy
from review_app.errors import InputError, NotFound
from review_app.judging import (
    ChatMessage,
    JudgeAnswerError,
    JudgePrompt,
    PreparedPrompt,
    PromptTooLarge,
    event_block,
    parse_judge_answer,
)
from review_app.rubrics.model import Rubric
from review_app.services.access.actors import Actor, authorize
from review_app.services.cases.case_selection import selected_cases
from review_app.services.judging.judge_prompts import store_for_run
from review_app.services.judging.runs import find_or_create_run, run_name
from storage import audit, judging
from storage import cases as cases_storage
from storage.engine import read_only

if TYPE_CHECKING:
    import aiohttp

API_KEY_ENV = "REVIEW_APP_JUDGE_API_KEY"
BASE_URL_ENV = "REVIEW_APP_JUDGE_BASE_URL"
MODEL_ENV = "REVIEW_APP_JUDGE_MODEL"
ENDPOINT_ERROR = "endpoint"
"""``error_kind`` of a failed call to the endpoint: the next run of the judge retries it."""
RESPONSE_FORMATS = ("text", "json_object", "json_object_schema", "json_schema")
ANSWER_ERROR = "answer"
"""``error_kind`` of an answer that could not be parsed: kept (at temperature 0 it repeats)."""
DEFAULT_MAX_PROMPT_BYTES = 256 * 1024
"""The largest rendered prompt sent to an endpoint by default (UTF-8 bytes of its messages'
text); an endpoint's ``max_prompt_bytes`` changes it (docs/reference.md, "Judge endpoints")."""
MAX_PROMPT_BYTES_LIMIT = 64 * 1024 * 1024
REDACTED = "[redacted]"


def control_character(value: str) -> str | None:
    """The first control character of ``value`` as ``U+000D``, or ``None``.

    A key goes into an HTTP header: a line break there would end the header (aiohttp
    refuses it, and a run that met it hung with nothing done)."""
    for char in value:
        if ord(char) < 0x20 or 0x7F <= ord(char) < 0xA0:
            return f"U+{ord(char):04X}"
    return None


def check_key(value: str, *, field: str) -> str:
    """``value`` as a key to send, or :class:`InputError` naming ``field``."""
    found = control_character(value)
    if found is not None:
        raise InputError(
            f"the key holds a control character ({found}); a key is sent in an HTTP header, "
            "where a line break would end it",
            field=field,
        )
    return value


def url_problem(url: str) -> str | None:
    """What is wrong with ``url`` as an endpoint's base URL, or ``None``: an http(s) URL
    with a host, a port from 1 to 65535 if any, no spaces, control characters, query or
    fragment (the request path is added to it)."""
    if not url.startswith(("http://", "https://")):
        return "give an http(s) URL, or a list of them (replicas)"
    if any(char.isspace() for char in url) or control_character(url):
        return "a URL holds no spaces or control characters"
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError as error:
        text = str(error)
        if "IPv6" in text:
            return "the host is not a valid IPv6 address in brackets"
        return "the port is a whole number from 1 to 65535"
    host = parts.hostname
    if not host:
        return "the URL names no host"
    if "[" in parts.netloc.rpartition("@")[2]:
        try:
            ipaddress.IPv6Address(host.partition("%")[0])
        except ValueError:
            return "the host is not a valid IPv6 address in brackets"
    elif not re.fullmatch(r"[A-Za-z0-9._~%-]+", host):
        return f"{host!r} is not a host name"
    if port == 0:
        return "the port is a whole number from 1 to 65535"
    if parts.query or parts.fragment or url.endswith(("?", "#")):
        return "a base URL has no query or fragment (the request path is added to it)"
    return None


def without_credentials(url: str) -> str:
    """``url`` without a user name and password written into it (a run's stored
    parameters name where it asked, never with what)."""
    parts = urlsplit(url)
    if parts.username is None and parts.password is None:
        return url
    host = parts.netloc.rpartition("@")[2]
    return parts._replace(netloc=host).geturl()


class Redactor:
    """Removes an endpoint's secrets from text before it is stored or logged: the key,
    the ``Authorization`` value it makes, and a password written into a base URL, also
    as they appear escaped in JSON, in a Python ``repr`` or in a URL."""

    def __init__(self, secrets: Sequence[str]) -> None:
        variants: set[str] = set()
        for secret in secrets:
            if not secret:
                continue
            variants.update(
                {
                    secret,
                    json.dumps(secret)[1:-1],
                    json.dumps(secret, ensure_ascii=False)[1:-1],
                    repr(secret)[1:-1],
                    quote(secret, safe=""),
                }
            )
        self._variants = sorted((v for v in variants if len(v) >= 4), key=len, reverse=True)

    def __call__(self, text: str | None) -> str | None:
        if text is None or not self._variants:
            return text
        for variant in self._variants:
            if variant in text:
                text = text.replace(variant, REDACTED)
        return text

    @classmethod
    def of(cls, endpoints: Sequence[EndpointSettings]) -> Redactor:
        return cls([secret for settings in endpoints for secret in settings.secrets()])


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
    max_prompt_bytes: int = DEFAULT_MAX_PROMPT_BYTES
    """A unit whose rendered prompt is larger is not sent (its verdict says why)."""

    def secrets(self) -> tuple[str, ...]:
        """What never goes into a stored or logged text: the key, its ``Authorization``
        value, a user name's password written into the base URL (and its Basic value)."""
        found: list[str] = []
        if self.api_key:
            found += [f"Bearer {self.api_key}", self.api_key]
        parts = urlsplit(self.base_url)
        if parts.password:
            credentials = f"{unquote(parts.username or '')}:{unquote(parts.password)}"
            found += [
                base64.b64encode(credentials.encode()).decode(),
                unquote(parts.password),
                parts.password,
            ]
        return tuple(found)

    @functools.cached_property
    def redact(self) -> Redactor:
        """This endpoint's :class:`Redactor` (made once)."""
        return Redactor(self.secrets())

    name: str | None = None
    """The endpoint's name in the endpoints file; ``None`` for ``--base-url``."""

    @property
    def endpoint_name(self) -> str:
        """How a run names where it asked: the endpoint's name, else ``host:port`` of its
        URL (docs/reference.md, "Judge endpoints")."""
        if self.name:
            return self.name
        return url_host(self.base_url)

    @classmethod
    def from_options(
        cls, *, base_url: str | None, model: str | None, api_key: str | None, **options: Any
    ) -> EndpointSettings:
        url = base_url or os.environ.get(BASE_URL_ENV) or os.environ.get("OPENAI_BASE_URL")
        name = model or os.environ.get(MODEL_ENV)
        if not url:
            raise InputError(f"give --base-url (or set {BASE_URL_ENV})", field="--base-url")
        problem = url_problem(url)
        if problem is not None:
            raise InputError(problem, field="--base-url")
        if not name:
            raise InputError(f"give --model (or set {MODEL_ENV})", field="--model")
        name = input_policy.check_name(name, field="--model", what="a model name")
        key = api_key or os.environ.get(API_KEY_ENV) or os.environ.get("OPENAI_API_KEY")
        if key is not None:
            check_key(key, field="--api-key")
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
        if not 1024 <= settings.max_prompt_bytes <= MAX_PROMPT_BYTES_LIMIT:
            raise InputError(
                f"--max-prompt-bytes is from 1024 to {MAX_PROMPT_BYTES_LIMIT}",
                field="--max-prompt-bytes",
            )
        return settings


def url_host(url: str) -> str:
    """``host[:port]`` of a URL: never a user name or password written into it."""
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError:
        return "?"
    host = parts.hostname or "?"
    return f"{host}:{port}" if port else host


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

    def count(self, outcome: _Outcome) -> None:
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


@dataclass(frozen=True)
class _Job:
    case_id: str
    turn: int
    messages: list[ChatMessage]
    refusal: str | None = None
    """Why the unit is not sent (its prompt would be too large), or ``None``."""


@dataclass
class _Outcome:
    job: _Job
    label: str | None = None
    score: float | None = None
    reason: str | None = None
    error: str | None = None
    error_kind: str | None = None
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


@dataclass
class _Attempt:
    """One request's result: an outcome to keep, or a problem worth another try."""

    outcome: _Outcome | None = None
    problem: str | None = None
    retry_after: float | None = None


async def _attempt(
    client: aiohttp.ClientSession, settings: EndpointSettings, job: _Job, rubric: Rubric
) -> _Attempt:
    import aiohttp  # loaded by _run_jobs already: a dictionary lookup

    body: dict[str, Any] = {
        "model": settings.model,
        "messages": job.messages,
        "temperature": 0,
        "max_tokens": settings.max_tokens,
    }
    response_format = _response_format(settings.response_format, rubric)
    if response_format is not None:
        body["response_format"] = response_format
    headers = {"Content-Type": "application/json"}
    if settings.api_key:
        headers["Authorization"] = f"Bearer {settings.api_key}"
    try:
        async with client.post(
            f"{settings.base_url}/chat/completions", data=orjson.dumps(body), headers=headers
        ) as response:
            status = response.status
            retry_after = response.headers.get("retry-after", "")
            raw = await response.read()
    except aiohttp.ClientConnectorError as error:
        return _Attempt(problem=f"ConnectError: {error}")
    except TimeoutError:
        return _Attempt(problem=f"Timeout: no answer within {settings.timeout:g} s")
    except aiohttp.ClientError as error:
        return _Attempt(problem=f"{type(error).__name__}: {error}")
    if status == 429 or status >= 500:
        return _Attempt(
            problem=f"HTTP {status}",
            retry_after=min(60.0, float(retry_after)) if retry_after.isdigit() else None,
        )
    if status >= 400:
        # Redacted before it is cut: a key cut in two would no longer be found.
        text = settings.redact(raw.decode("utf-8", errors="replace")) or ""
        return _Attempt(
            _Outcome(job, error=f"HTTP {status}: {text[:300]!r}", error_kind=ENDPOINT_ERROR)
        )
    try:
        payload = orjson.loads(raw)
        content = payload["choices"][0]["message"]["content"] or ""
        usage = payload.get("usage") or {}
    except (ValueError, KeyError, IndexError, TypeError, AttributeError, RecursionError):
        content, usage = None, None
    if not isinstance(content, str) or not isinstance(usage, dict):
        return _Attempt(
            _Outcome(job, error="not a chat-completions response", error_kind=ENDPOINT_ERROR)
        )
    outcome = _Outcome(
        job,
        prompt_tokens=_token_count(usage.get("prompt_tokens")),
        completion_tokens=_token_count(usage.get("completion_tokens")),
    )
    try:
        answer = parse_judge_answer(content, rubric=rubric)
    except JudgeAnswerError as error:
        shown = settings.redact(content) or ""
        outcome.error = f"{settings.redact(str(error))}; the answer was: {shown[:500]!r}"
        outcome.error_kind = ANSWER_ERROR
        return _Attempt(outcome)
    outcome.label, outcome.score, outcome.reason = answer.label, answer.score, answer.reason
    return _Attempt(outcome)


def _backoff(failures: int) -> float:
    """Seconds before another try after ``failures`` failures in a row (with jitter)."""
    return min(30.0, 0.5 * 2 ** (failures - 1)) * (1 + random.random())


@dataclass
class _Endpoint:
    """One endpoint's client and health: its own concurrency and its own backoff."""

    settings: EndpointSettings
    failures_in_a_row: int = 0
    resting_until: float = 0.0

    async def rest(self) -> None:
        """Wait while the endpoint backs off (after failures in a row)."""
        while (delay := self.resting_until - time.monotonic()) > 0:
            await asyncio.sleep(delay)

    def failed(self, retry_after: float | None) -> None:
        self.failures_in_a_row += 1
        # One failure is the unit's own (its retry waits); several in a row are the
        # endpoint's, and it stops taking units for a while so the others take them.
        pause = retry_after if retry_after is not None else 0.0
        if self.failures_in_a_row >= 3:
            pause = max(pause, _backoff(self.failures_in_a_row - 2))
        if pause:
            self.resting_until = max(self.resting_until, time.monotonic() + pause)

    def answered(self) -> None:
        self.failures_in_a_row = 0


@dataclass
class _Try:
    job: _Job
    attempts: int = 0
    started: float = 0.0
    problem: str = "no attempt"


async def _endpoint_worker(
    endpoint: _Endpoint,
    client: aiohttp.ClientSession,
    todo: asyncio.Queue[_Try],
    done: asyncio.Queue[_Outcome],
    rubric: Rubric,
    retries: int,
) -> None:
    """One of an endpoint's ``concurrency`` slots: takes the next unit whenever free.

    Units thus go to whichever endpoint has a slot free first (the least loaded
    relative to its concurrency); a slow endpoint takes fewer, a failing one rests
    while the others take its share, and a failed unit is tried again, after its
    backoff, by whichever endpoint is free then.
    """
    while True:
        await endpoint.rest()
        item = await todo.get()
        if not item.attempts:
            item.started = time.perf_counter()
        try:
            result = await _attempt(client, endpoint.settings, item.job, rubric)
        except Exception as error:  # a request that could not be made: never a dead slot
            result = _Attempt(problem=f"{type(error).__name__}: {error}")
        item.attempts += 1
        latency = int((time.perf_counter() - item.started) * 1000)
        if result.outcome is not None:
            endpoint.answered()
            result.outcome.latency_ms = latency
            done.put_nowait(result.outcome)
            continue
        assert result.problem is not None
        item.problem = result.problem
        if item.attempts > retries:
            done.put_nowait(
                _Outcome(
                    item.job,
                    error=f"{item.problem} after {item.attempts} attempts",
                    error_kind=ENDPOINT_ERROR,
                    latency_ms=latency,
                )
            )
            endpoint.answered()  # a unit out of attempts says nothing more of the endpoint
            continue
        endpoint.failed(result.retry_after)
        wait = result.retry_after if result.retry_after is not None else _backoff(item.attempts)
        asyncio.get_running_loop().create_task(_try_again(todo, item, wait))


async def _try_again(todo: asyncio.Queue[_Try], item: _Try, wait: float) -> None:
    await asyncio.sleep(wait)
    todo.put_nowait(item)


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
    are spread over them as their slots free up (:func:`_endpoint_worker`).
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
    cases = _case_batches(engine, todo)
    prepared = PreparedPrompt.of(prompt, rubric=rubric)
    started = time.perf_counter()
    interrupted = False
    if todo:
        try:
            with asyncio.Runner(loop_factory=_event_loop_factory()) as runner:
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


_CASES_PER_BATCH = 200
_CASES_IN_FIRST_BATCH = 16
"""A small first batch: the first requests leave once 16 cases are read, not 200."""
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
    for batch in _case_batches(engine, [(case_id, turn)]):
        for case in batch:
            for job in _case_jobs(prepared, case):
                if job.refusal is not None:
                    raise InputError(job.refusal, field="prompt")
                return job.messages
    raise NotFound(f"no turn {turn} in case {case_id!r}")


@dataclass(frozen=True)
class _CaseToJudge:
    case_id: str
    chatbot_role: str | None
    events: list[cases_storage.JudgedEvent]
    turns: frozenset[int]


def _case_batches(engine: Engine, units: list[tuple[str, int]]) -> Iterator[list[_CaseToJudge]]:
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
            _CaseToJudge(case_id, *transcripts[case_id], frozenset(by_case[case_id]))
            for case_id in chunk
            if case_id in transcripts  # removed since the run started
        ]


def _case_jobs(
    prepared: PreparedPrompt, case: _CaseToJudge, *, max_bytes: int = DEFAULT_MAX_PROMPT_BYTES
) -> list[_Job]:
    """One case's units with their prompts: the transcript up to each judged turn. A unit
    whose prompt would be larger than ``max_bytes`` is not rendered: its job carries the
    refusal instead (the size is known from the blocks' sizes, before rendering)."""
    jobs: list[_Job] = []
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
                jobs.append(_Job(case.case_id, event.turn, [], refusal=str(refused)))
                continue
            jobs.append(_Job(case.case_id, event.turn, messages))
    return jobs


async def _run_jobs(
    engine: Engine,
    run_id: int,
    n_jobs: int,
    cases: Iterator[list[_CaseToJudge]],
    prepared: PreparedPrompt,
    rubric: Rubric,
    endpoints: Sequence[EndpointSettings],
    summary: JudgeRunSummary,
    progress: Callable[[int, int], None] | None,
    stop: Callable[[], bool] | None = None,
) -> None:
    todo: asyncio.Queue[_Try] = asyncio.Queue()

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
                while todo.qsize() > ready_at_most:
                    await asyncio.sleep(_FEED_POLL)
                for job in _case_jobs(prepared, case, max_bytes=max_bytes):
                    if job.refusal is not None:  # never sent; the next run checks again
                        done.put_nowait(_Outcome(job, error=job.refusal, error_kind=ENDPOINT_ERROR))
                    else:
                        todo.put_nowait(_Try(job))
                    count += 1
                await asyncio.sleep(0)  # answers that came in are taken between cases
        fed.append(count)

    done: asyncio.Queue[_Outcome] = asyncio.Queue()
    retries = endpoints[0].retries
    pending: list[_Outcome] = []
    # aiohttp, not httpx: at a concurrency of 64 httpx and httpcore spent 1.7-2.4 ms of
    # CPU a request on loopback against aiohttp's 0.35 ms, which capped a run near 350
    # units a second whatever the endpoint's speed (benchmarks/bench_judge_endpoints.py).
    import aiohttp

    tls: ssl.SSLContext | None = None
    redact = Redactor.of(endpoints)
    async with contextlib.AsyncExitStack() as stack:
        workers = []
        for settings in endpoints:
            # One session per endpoint, a connection per slot. The timeout applies to
            # connecting and to each wait for data, not to the whole answer. The proxy
            # (HTTP(S)_PROXY, NO_PROXY, as httpx honoured them) is looked up once here:
            # aiohttp's trust_env looks it up, and for a .netrc, in a thread at every
            # request.
            proxy, proxy_auth = _env_proxy(settings.base_url)
            # certifi's CAs only for an endpoint (or proxy) reached over TLS: loading them
            # (and httpx, which names them) cost a plain-HTTP run a tenth of a second.
            secure: ssl.SSLContext | bool = True
            if _uses_tls(settings.base_url, proxy):
                tls = secure = tls or _tls_context()
            client = await stack.enter_async_context(
                aiohttp.ClientSession(
                    connector=aiohttp.TCPConnector(
                        limit=settings.concurrency, limit_per_host=0, ssl=secure
                    ),
                    timeout=aiohttp.ClientTimeout(
                        total=None,
                        sock_connect=settings.timeout,
                        sock_read=settings.timeout,
                    ),
                    proxy=proxy,
                    proxy_auth=proxy_auth,
                )
            )
            endpoint = _Endpoint(settings)
            workers += [
                asyncio.create_task(_endpoint_worker(endpoint, client, todo, done, rubric, retries))
                for _ in range(settings.concurrency)
            ]
        feeder = asyncio.create_task(feed())
        workers.append(feeder)
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
            for worker in workers:
                worker.cancel()
            await asyncio.gather(*workers, return_exceptions=True)
            # Also when the run is cancelled (Ctrl-C): what was answered is kept, those
            # answers not yet taken from the queue too. A batch being written in its
            # thread when that happened is not in pending.
            while not done.empty():
                pending.append(outcome := done.get_nowait())
                summary.count(outcome)
            _store(engine, run_id, pending, redact)


@functools.cache
def _uses_tls(base_url: str, proxy: Any) -> bool:
    """Whether requests to ``base_url`` (through ``proxy``, if any) use TLS."""
    schemes = {urlsplit(base_url).scheme.lower()}
    if proxy is not None:
        schemes.add(urlsplit(str(proxy)).scheme.lower())
    return schemes != {"http"}


def _tls_context() -> ssl.SSLContext:
    """certifi's CAs, as httpx used them; made once a process (loading them takes 50 ms)."""
    import httpx

    return httpx.create_ssl_context()


def _event_loop_factory() -> Callable[[], asyncio.AbstractEventLoop] | None:
    """uvloop's event loop where it is installed (not on Windows), else asyncio's.

    A judge run at a fast endpoint is bound by the client's CPU; uvloop's sockets and
    timers took a tenth to a fifth of it off each request on loopback
    (benchmarks/bench_judge_endpoints.py)."""
    try:
        import uvloop
    except ImportError:
        return None
    return uvloop.new_event_loop


def _env_proxy(base_url: str) -> tuple[Any, Any]:
    """The proxy the environment names for ``base_url`` and its credentials, or
    ``(None, None)`` (none named, or the host is in ``NO_PROXY``)."""
    from aiohttp.helpers import get_env_proxy_for_url
    from yarl import URL

    try:
        return get_env_proxy_for_url(URL(base_url))
    except (LookupError, ValueError):
        return None, None


async def _next_outcome(
    done: asyncio.Queue[_Outcome], feeder: asyncio.Task[None], timeout: float | None = None
) -> _Outcome | None:
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


def _store(engine: Engine, run_id: int, outcomes: list[_Outcome], redact: Redactor) -> None:
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
