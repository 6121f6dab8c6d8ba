"""The judge's HTTP client: asking an OpenAI-compatible chat endpoint for one unit's verdict.

What a judge run (:mod:`review_app.services.judging.judge_runner`) and the endpoints file
(:mod:`review_app.services.judging.endpoints`) share about talking to an endpoint: its
settings and the checks of its URL and key, the redaction of its secrets, the request's
body (response formats, the verdict's schema), one attempt and its outcome, retries
with backoff, each endpoint's concurrency slots and rest after failures, proxies from
the environment, the TLS context and the event loop.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import functools
import ipaddress
import json
import os
import random
import re
import ssl
import time
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any
from urllib.parse import quote, unquote, urlsplit

import orjson

from review_app import input_policy
from review_app.errors import InputError
from review_app.judging import (
    ChatMessage,
    JudgeAnswerError,
    parse_judge_answer,
)
from review_app.rubrics.model import Rubric

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


@dataclass(frozen=True)
class UnitPrompt:
    """One unit (a case's judged turn) with the chat messages sent for it."""

    case_id: str
    turn: int
    messages: list[ChatMessage]
    refusal: str | None = None
    """Why the unit is not sent (its prompt would be too large), or ``None``."""


@dataclass
class UnitOutcome:
    """What became of one unit: its verdict, or its error and the error's kind
    (:data:`ENDPOINT_ERROR`, :data:`ANSWER_ERROR`), with latency and tokens."""

    job: UnitPrompt
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

    outcome: UnitOutcome | None = None
    problem: str | None = None
    retry_after: float | None = None


async def _attempt(
    client: aiohttp.ClientSession, settings: EndpointSettings, job: UnitPrompt, rubric: Rubric
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
            UnitOutcome(job, error=f"HTTP {status}: {text[:300]!r}", error_kind=ENDPOINT_ERROR)
        )
    try:
        payload = orjson.loads(raw)
        content = payload["choices"][0]["message"]["content"] or ""
        usage = payload.get("usage") or {}
    except (ValueError, KeyError, IndexError, TypeError, AttributeError, RecursionError):
        content, usage = None, None
    if not isinstance(content, str) or not isinstance(usage, dict):
        return _Attempt(
            UnitOutcome(job, error="not a chat-completions response", error_kind=ENDPOINT_ERROR)
        )
    outcome = UnitOutcome(
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
    """A unit waiting for an endpoint's slot, with its attempts so far."""

    job: UnitPrompt
    attempts: int = 0
    started: float = 0.0
    problem: str = "no attempt"


async def _endpoint_worker(
    endpoint: _Endpoint,
    client: aiohttp.ClientSession,
    todo: asyncio.Queue[_Try],
    done: asyncio.Queue[UnitOutcome],
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
                UnitOutcome(
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


def event_loop_factory() -> Callable[[], asyncio.AbstractEventLoop] | None:
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


class EndpointPool:
    """The endpoints of one run, asked together (made by :func:`open_endpoints`).

    :meth:`ask` queues a unit; each endpoint's ``concurrency`` slots take the next one
    whenever free (:func:`_endpoint_worker`), retry it with backoff, and put its
    :class:`UnitOutcome` in the run's ``done`` queue."""

    def __init__(self, done: asyncio.Queue[UnitOutcome]) -> None:
        self._todo: asyncio.Queue[_Try] = asyncio.Queue()
        self._done = done
        self._workers: list[asyncio.Task[None]] = []

    def ask(self, prompt: UnitPrompt) -> None:
        """Queue ``prompt``'s unit for the next free slot."""
        self._todo.put_nowait(_Try(prompt))

    @property
    def waiting(self) -> int:
        """Units queued that no slot has taken yet (retries waiting for their backoff
        not counted)."""
        return self._todo.qsize()

    async def stop(self) -> None:
        """Stop every slot: requests in flight are dropped (a later run asks them again),
        no outcome is put in ``done`` after this returns. Calling it again does nothing."""
        workers, self._workers = self._workers, []
        for worker in workers:
            worker.cancel()
        await asyncio.gather(*workers, return_exceptions=True)


@contextlib.asynccontextmanager
async def open_endpoints(
    endpoints: Sequence[EndpointSettings], rubric: Rubric, done: asyncio.Queue[UnitOutcome]
) -> AsyncIterator[EndpointPool]:
    """A client session per endpoint and its slots, ready for units; on leaving, the
    slots are stopped (:meth:`EndpointPool.stop`) and the sessions closed. The first
    endpoint's ``retries`` applies to every unit (a unit may go to any endpoint)."""
    # aiohttp, not httpx: at a concurrency of 64 httpx and httpcore spent 1.7-2.4 ms of
    # CPU a request on loopback against aiohttp's 0.35 ms, which capped a run near 350
    # units a second whatever the endpoint's speed (benchmarks/bench_judge_endpoints.py).
    import aiohttp

    pool = EndpointPool(done)
    retries = endpoints[0].retries
    tls: ssl.SSLContext | None = None
    async with contextlib.AsyncExitStack() as stack:
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
            pool._workers += [
                asyncio.create_task(
                    _endpoint_worker(endpoint, client, pool._todo, done, rubric, retries)
                )
                for _ in range(settings.concurrency)
            ]
        try:
            yield pool
        finally:
            await pool.stop()
