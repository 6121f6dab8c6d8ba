"""Judge endpoints configured by an admin: ``REVIEW_APP_JUDGE_ENDPOINTS`` names a TOML file.

One table per endpoint (docs/reference.md, "Judge endpoints")::

    [endpoints.gpt]
    base_url = "https://api.openai.com/v1"     # or a list of replicas of one model
    model = "gpt-4o-mini"
    api_key_env = "OPENAI_API_KEY"             # or api_key = "sk-..."
    response_format = "json_schema"
    concurrency = 8

Endpoints are chosen by name (``judge run --endpoint NAME``, a background job, the
judge page); their keys are read from the file or the environment when a run starts
and are never listed, logged, audited, exported or stored with a job. When the
``local-judge`` extra is installed the bundled model is the endpoint ``local``,
started on first use.
"""

from __future__ import annotations

import os
import re
import socket
import subprocess
import threading
import time
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from sqlalchemy import Engine

from review_app import input_policy
from review_app.errors import InputError
from review_app.files.text import short_text_refusal
from review_app.services.access.actors import Actor, authorize
from review_app.services.judging.local_judge import (
    MODEL_ALIAS,
    local_judge_available,
    local_server_command,
    local_server_environment,
)
from review_app.services.judging.transport import (
    DEFAULT_MAX_PROMPT_BYTES,
    MAX_PROMPT_BYTES_LIMIT,
    RESPONSE_FORMATS,
    EndpointSettings,
    check_key,
    control_character,
    url_host,
    url_problem,
)

ENDPOINTS_ENV = "REVIEW_APP_JUDGE_ENDPOINTS"
MAX_ENDPOINTS_FILE_BYTES = 1024 * 1024
"""An endpoints file is read whole: a short text (a few endpoints), so bounded."""
LOCAL = "local"
"""The bundled model's endpoint name (when the ``local-judge`` extra is installed)."""
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}")
_FIELDS = {
    "base_url",
    "model",
    "api_key",
    "api_key_env",
    "response_format",
    "concurrency",
    "max_prompt_bytes",
}


@dataclass(frozen=True)
class Endpoint:
    """One configured endpoint. ``repr`` never shows the key."""

    name: str
    base_urls: tuple[str, ...]
    model: str
    api_key: str | None = field(default=None, repr=False)
    api_key_env: str | None = None
    response_format: str = "json_object"
    concurrency: int = 4
    local: bool = False
    max_prompt_bytes: int = DEFAULT_MAX_PROMPT_BYTES

    def public(self) -> PublicEndpoint:
        """What may be shown: name, model, hosts, concurrency; never a key."""
        return PublicEndpoint(
            name=self.name,
            model=self.model,
            hosts=tuple(_host(url) for url in self.base_urls)
            if not self.local
            else (BUNDLED_HOST,),
            response_format=self.response_format,
            concurrency=self.concurrency,
            max_prompt_bytes=self.max_prompt_bytes,
        )


BUNDLED_HOST = "bundled (started on first use)"
"""The host the bundled model's endpoint shows."""


@dataclass(frozen=True)
class PublicEndpoint:
    """An endpoint as it may be shown (``judge endpoints``, the judge page): never a key,
    and of each URL only ``host[:port]``."""

    name: str
    model: str
    hosts: tuple[str, ...]
    response_format: str
    concurrency: int
    max_prompt_bytes: int = DEFAULT_MAX_PROMPT_BYTES

    def to_dict(self) -> dict[str, Any]:
        """What ``judge endpoints --json`` prints for it."""
        return {
            "name": self.name,
            "model": self.model,
            "hosts": list(self.hosts),
            "response_format": self.response_format,
            "concurrency": self.concurrency,
            "max_prompt_bytes": self.max_prompt_bytes,
        }


def _host(url: str) -> str:
    """``host[:port]`` of a URL: never a user name or password written into it."""
    return url_host(url)


def _line_of(text: str, name: str, key: str | None) -> int | None:
    """The line of ``[endpoints.NAME]`` (or of ``key`` inside that table), 1-based."""
    lines = text.splitlines()
    header = re.compile(rf"^\s*\[\s*endpoints\s*\.\s*[\"']?{re.escape(name)}[\"']?\s*\]")
    for index, line in enumerate(lines):
        if header.match(line):
            if key is None:
                return index + 1
            for offset, inner in enumerate(lines[index + 1 :], start=index + 2):
                if inner.lstrip().startswith("["):
                    break
                if re.match(rf"^\s*{re.escape(key)}\s*=", inner):
                    return offset
            return index + 1
    return None


def parse_endpoints(path: Path) -> dict[str, Endpoint]:
    """The endpoints of the TOML file at ``path``; :class:`InputError` naming the file,
    line and field of the first problem."""
    source = str(path)
    try:
        with path.open("rb") as handle:  # no more than the bound, whatever the file is
            raw = handle.read(MAX_ENDPOINTS_FILE_BYTES + 1)
    except OSError as error:
        raise InputError(
            f"cannot read the judge endpoints file ({error.strerror or error})",
            source=source,
            field=ENDPOINTS_ENV,
        ) from None
    if len(raw) > MAX_ENDPOINTS_FILE_BYTES:
        raise InputError(
            short_text_refusal(MAX_ENDPOINTS_FILE_BYTES, "an endpoints file"),
            source=source,
            field=ENDPOINTS_ENV,
        )
    try:
        text = raw.decode("utf-8")
        data = tomllib.loads(text)
    except UnicodeDecodeError:
        raise InputError("not UTF-8 text", source=source) from None
    except tomllib.TOMLDecodeError as error:
        found = re.search(r"\(at line (\d+), column \d+\)", str(error))
        message = re.sub(r"\s*\(at line \d+, column \d+\)", "", str(error))
        raise InputError(
            f"not valid TOML: {message}", source=source, line=int(found[1]) if found else None
        ) from None
    tables = data.get("endpoints")
    if tables is None:
        raise InputError("no [endpoints.<name>] table", source=source, field="endpoints")
    if not isinstance(tables, dict):
        raise InputError("must be tables [endpoints.<name>]", source=source, field="endpoints")
    endpoints: dict[str, Endpoint] = {}
    for name, table in tables.items():

        def fail(message: str, key: str | None = None, *, name: str = name) -> InputError:
            return InputError(
                message,
                source=source,
                line=_line_of(text, name, key),
                field=f"endpoints.{name}" + (f".{key}" if key else ""),
            )

        if not _NAME.fullmatch(name):
            raise fail("an endpoint name is letters, digits, '.', '-' and '_' (at most 64)")
        if not isinstance(table, dict):
            raise fail("must be a table")
        unknown = sorted(set(table) - _FIELDS)
        if unknown:
            raise fail(f"unknown field (known: {', '.join(sorted(_FIELDS))})", unknown[0])
        urls = table.get("base_url")
        if isinstance(urls, str):
            urls = [urls]
        if not isinstance(urls, list) or not urls or not all(isinstance(u, str) for u in urls):
            raise fail("give an http(s) URL, or a list of them (replicas)", "base_url")
        for url in urls:
            problem = url_problem(url)
            if problem is not None:
                raise fail(problem, "base_url")
        model = table.get("model")
        if not isinstance(model, str) or not model.strip():
            raise fail("give the model name", "model")
        try:
            model = input_policy.check_name(model, field="model", what="a model name")
        except InputError as error:
            raise fail(error.message, "model") from None
        key = table.get("api_key")
        key_env = table.get("api_key_env")
        if key is not None and key_env is not None:
            raise fail("give api_key or api_key_env, not both", "api_key")
        if key is not None and (not isinstance(key, str) or not key):
            raise fail("must be a non-empty string", "api_key")
        if key is not None:
            try:
                check_key(key, field="api_key")
            except InputError as error:
                raise fail(error.message, "api_key") from None
        if key_env is not None and (
            not isinstance(key_env, str) or not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", key_env)
        ):
            raise fail("must name an environment variable", "api_key_env")
        if key_env is not None and control_character(os.environ.get(key_env, "")):
            raise fail(
                f"${key_env} holds a control character; a key is sent in an HTTP header, "
                "where a line break would end it",
                "api_key_env",
            )
        if (key is not None or key_env is not None) and any(
            urlsplit(url).username is not None for url in urls
        ):
            raise fail(
                "a user name in the URL is sent as the Authorization header, which the key "
                "needs too: give api_key (or api_key_env) or the URL's credentials, not both",
                "base_url",
            )
        response_format = table.get("response_format", "json_object")
        if response_format not in RESPONSE_FORMATS:
            raise fail(f"one of {', '.join(RESPONSE_FORMATS)}", "response_format")
        concurrency = table.get("concurrency", 4)
        if (
            not isinstance(concurrency, int)
            or isinstance(concurrency, bool)
            or not 1 <= concurrency <= 256
        ):
            raise fail("an integer from 1 to 256", "concurrency")
        max_prompt_bytes = table.get("max_prompt_bytes", DEFAULT_MAX_PROMPT_BYTES)
        if (
            not isinstance(max_prompt_bytes, int)
            or isinstance(max_prompt_bytes, bool)
            or not 1024 <= max_prompt_bytes <= MAX_PROMPT_BYTES_LIMIT
        ):
            raise fail(
                f"a whole number of bytes from 1024 to {MAX_PROMPT_BYTES_LIMIT}",
                "max_prompt_bytes",
            )
        endpoints[name] = Endpoint(
            name=name,
            base_urls=tuple(u.rstrip("/") for u in urls),
            model=model,
            api_key=key,
            api_key_env=key_env,
            response_format=response_format,
            concurrency=concurrency,
            max_prompt_bytes=max_prompt_bytes,
        )
    return endpoints


def configured_endpoints() -> dict[str, Endpoint]:
    """The endpoints of ``$REVIEW_APP_JUDGE_ENDPOINTS`` (none when unset), and ``local``
    when the bundled model is installed and the file names no endpoint ``local``."""
    found: dict[str, Endpoint] = {}
    path = os.environ.get(ENDPOINTS_ENV, "").strip()
    if path:
        found = parse_endpoints(Path(path).expanduser())
    if LOCAL not in found and local_judge_available():
        found[LOCAL] = Endpoint(
            name=LOCAL,
            base_urls=(),
            model=MODEL_ALIAS,
            response_format="json_object_schema",
            concurrency=1,
            local=True,
        )
    return found


def list_endpoints(engine: Engine, actor: Actor) -> list[PublicEndpoint]:
    """The endpoints a policy owner may choose: names, models and hosts, never keys."""
    authorize(engine, actor, "policy_owner")
    return [endpoint.public() for endpoint in configured_endpoints().values()]


def find_endpoint(name: str) -> Endpoint:
    """The endpoint called ``name``; :class:`InputError` (field ``--endpoint``) if none."""
    known = configured_endpoints()
    if name not in known:
        where = (
            f"{ENDPOINTS_ENV} is not set"
            if not os.environ.get(ENDPOINTS_ENV)
            else f"known: {', '.join(sorted(known)) or 'none'}"
        )
        raise InputError(f"no judge endpoint named {name!r} ({where})", field="--endpoint")
    return known[name]


def endpoint_settings(name: str, **options: Any) -> list[EndpointSettings]:
    """The endpoint's settings with its key, read now (one per replica); starts the
    bundled model when ``name`` is ``local``. ``options``: retries, timeout, max_tokens."""
    endpoint = find_endpoint(name)
    key = endpoint.api_key
    if endpoint.api_key_env is not None:
        key = os.environ.get(endpoint.api_key_env) or None
        if key is None:
            raise InputError(
                f"the endpoint {name!r} reads its key from ${endpoint.api_key_env}, "
                "which is not set",
                field="--endpoint",
            )
        check_key(key, field=f"${endpoint.api_key_env} (endpoint {name!r})")
    urls = (ensure_local_server(),) if endpoint.local else endpoint.base_urls
    return [
        EndpointSettings(
            base_url=url,
            model=endpoint.model,
            api_key=key,
            concurrency=endpoint.concurrency,
            response_format=endpoint.response_format,
            max_prompt_bytes=endpoint.max_prompt_bytes,
            name=name,
            **options,
        )
        for url in urls
    ]


_local_lock = threading.Lock()
_local_server: dict[str, Any] = {}


def ensure_local_server(*, timeout: float = 300.0) -> str:
    """The base URL of the bundled model's server, started (once per process) if needed.

    The server holds the read end of a pipe whose write end only this process holds
    (never inherited by its other children): when this process ends, however it ends,
    the server sees the pipe close and exits (:mod:`.local_judge_lease`)."""
    with _local_lock:
        process: subprocess.Popen[bytes] | None = _local_server.get("process")
        if process is not None and process.poll() is None:
            return str(_local_server["url"])
        old_lease = _local_server.pop("lease", None)
        if old_lease is not None:
            os.close(old_lease)
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
            sock.bind(("127.0.0.1", 0))
            port = int(sock.getsockname()[1])
        read_end, write_end = os.pipe()  # both close-on-exec: no other child inherits them
        try:
            process = subprocess.Popen(
                local_server_command(host="127.0.0.1", port=port, lease_fd=read_end),
                env=local_server_environment(),
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                pass_fds=(read_end,),
            )
        except BaseException:
            os.close(write_end)
            raise
        finally:
            os.close(read_end)
        url = f"http://127.0.0.1:{port}/v1"
        _local_server.update(process=process, url=url, lease=write_end)
        _wait_listening(process, port, timeout)
        return url


def _wait_listening(process: subprocess.Popen[bytes], port: int, timeout: float) -> None:
    import httpx

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise InputError(f"the bundled judge's server exited ({process.returncode})")
        try:
            if httpx.get(f"http://127.0.0.1:{port}/v1/models", timeout=2).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.5)
    process.kill()
    raise InputError(f"the bundled judge's server did not start in {timeout:g} s")
