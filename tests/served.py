"""``review-app serve`` in a subprocess for the browser tests: start, wait, stop; a server
on the demo data (:func:`demo_server`, what most browser modules serve); and the
Chromium they drive it with."""

from __future__ import annotations

import os
import socket
import subprocess
import time
import urllib.request
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import pytest
from sqlalchemy import Engine

from review_app.services.access.actors import operator_actor
from review_app.services.exchange.demo import load_demo
from storage.engine import create_database_engine
from storage.migrations.upgrade import upgrade_database
from tests.conftest import REPO, review_app_command

CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--no-first-run",
    "--disable-sync",
]
T = TypeVar("T")

# The Streamlit app has finished its run (the page is settled).
IDLE = '[data-testid="stApp"][data-test-script-state="notRunning"]'


def require_browser() -> None:
    """Skip without Chromium or the ``playwright`` package; ``REVIEW_APP_REQUIRE_BROWSER=1``
    makes that a failure."""
    problem = None
    if not CHROMIUM.exists():
        problem = f"{CHROMIUM} is missing"
    else:
        try:
            import playwright.sync_api  # noqa: F401
        except ImportError:
            problem = "the playwright package is not installed"
    if problem is None:
        return
    if os.environ.get("REVIEW_APP_REQUIRE_BROWSER", "").strip().lower() in ("1", "true", "yes"):
        pytest.fail(f"{problem} (REVIEW_APP_REQUIRE_BROWSER=1)")
    pytest.skip(problem)


@contextmanager
def chromium() -> Iterator[Any]:
    """A headless Chromium (Playwright's ``Browser``), closed on exit."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        try:
            yield browser
        finally:
            browser.close()


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


@contextmanager
def serving(
    database_url: str,
    root: Path,
    *,
    port: int,
    user: str | None,
    auth: str = "local",
    repo: Path = REPO,
    rubrics_dir: Path | None = None,
    env: dict[str, str] | None = None,
) -> Iterator[tuple[subprocess.Popen[bytes], Path]]:
    """A local-mode server for ``user`` on ``database_url`` (its log in ``root``), stopped
    on exit; ``auth="proxy"``: a server trusting the ``X-Forwarded-User`` header instead
    (``user`` unused). ``repo``: the checkout whose code it runs (benchmarks compare two).
    Waits for nothing: callers choose how (a health request, or only a TCP connect when
    the first HTTP request is the test's subject). ``rubrics_dir``: the server's
    ``REVIEW_APP_RUBRICS_DIR`` (else the checkout's ``rubrics/``); ``env``: more
    variables for the server, set last."""
    environment = dict(os.environ)
    environment.update(
        {
            "PYTHONPATH": os.pathsep.join(
                p for p in (str(repo), environment.get("PYTHONPATH", "")) if p
            ),
            "REVIEW_APP_DATABASE_URL": database_url,
            "REVIEW_APP_AUTH": auth,
            "HOME": str(root / "home"),
        }
    )
    if auth == "local":
        assert user is not None
        environment["REVIEW_APP_LOCAL_USER"] = user
    environment.pop("REVIEW_APP_PROXY_HEADER", None)
    environment.pop("REVIEW_APP_RUBRICS_DIR", None)
    if rubrics_dir is not None:
        environment["REVIEW_APP_RUBRICS_DIR"] = str(rubrics_dir)
    environment.update(env or {})
    log = root / "server.log"
    with log.open("wb") as output:
        process = subprocess.Popen(
            [*review_app_command(), "serve", "--port", str(port), "--host", "127.0.0.1"],
            stdout=output,
            stderr=subprocess.STDOUT,
            env=environment,
            cwd=root,
        )
    try:
        yield process, log
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=10)


def _wait_until(
    ready: Callable[[], bool], what: str, process: subprocess.Popen[bytes], log: Path
) -> None:
    """Until ``ready()`` (60 s at most); fails at once if the server exits."""
    deadline = time.monotonic() + 60
    while True:
        if process.poll() is not None:
            pytest.fail(f"the server exited with {process.returncode}:\n{log.read_text()}")
        try:
            if ready():
                return
        except OSError:
            pass
        if time.monotonic() > deadline:
            pytest.fail(f"the server did not {what} within 60 s:\n{log.read_text()}")
        time.sleep(0.2)


def wait_healthy(url: str, process: subprocess.Popen[bytes], log: Path) -> None:
    """Until the server answers its health check (60 s at most)."""

    def healthy() -> bool:
        with urllib.request.urlopen(f"{url}/_stcore/health", timeout=2) as answer:
            return bool(answer.status == 200)

    _wait_until(healthy, "answer", process, log)


def wait_listening(port: int, process: subprocess.Popen[bytes], log: Path) -> None:
    """Until the server accepts a TCP connection, without sending any request."""

    def listening() -> bool:
        with socket.create_connection(("127.0.0.1", port), timeout=1):
            return True

    _wait_until(listening, "listen", process, log)


def until_equal(
    found: Callable[[], T],
    expected: T,
    *,
    seconds: float = 60,
    pause: Callable[[], object] | None = None,
) -> None:
    """Polls ``found()`` until it equals ``expected``: a generous deadline for a loaded
    machine, not a speed check.

    ``pause`` waits between polls (0.1 s by default). Give a browser test's
    ``lambda: tab.wait_for_timeout(100)``: Playwright's sync API runs its event
    handlers only inside its own calls, so while this loop sleeps a ``context.route``
    handler holds every request the page makes (the labeling panel's frame, which a
    loaded machine draws after the last key, never loaded and no key was stored)."""
    deadline = time.monotonic() + seconds
    while (value := found()) != expected:
        assert time.monotonic() < deadline, f"found {value}, expected {expected}"
        if pause is None:
            time.sleep(0.1)
        else:
            pause()


@dataclass
class Served:
    """A running server: its address, an engine on its database (for reading back what
    the browser stored), its log and the folder it runs in."""

    url: str
    engine: Engine
    log: Path
    root: Path


@contextmanager
def demo_server(
    root: Path,
    *,
    user: str,
    queue_everything: bool = True,
    prepare: Callable[[Engine], object] | None = None,
) -> Iterator[Served]:
    """``review-app serve`` on a demo-loaded SQLite file in ``root``, signed in through local
    mode as ``user``; skipped without a browser (:func:`require_browser`).

    ``queue_everything``: ``user`` is the demo's local user, an admin with every demo case
    in their queue; else the demo is loaded without one and ``prepare`` makes ``user``.
    ``prepare``: more data before the server starts (people, queues, cases)."""
    require_browser()
    database = f"sqlite:///{root / 'review.db'}"
    engine = create_database_engine(database)
    try:
        upgrade_database(engine)
        load_demo(engine, operator_actor(), local_user=user if queue_everything else None)
        if prepare is not None:
            prepare(engine)
        port = free_port()
        url = f"http://127.0.0.1:{port}"
        with serving(database, root, port=port, user=user) as (process, log):
            wait_healthy(url, process, log)
            yield Served(url, engine, log, root)
    finally:
        engine.dispose()
