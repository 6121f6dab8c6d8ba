"""``review-app serve`` in a subprocess for the browser tests: start, wait, stop."""

from __future__ import annotations

import os
import subprocess
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from tests.conftest import REPO, review_app_command


@contextmanager
def serving(
    database_url: str, root: Path, *, port: int, user: str
) -> Iterator[tuple[subprocess.Popen[bytes], Path]]:
    """A local-mode server for ``user`` on ``database_url`` (its log in ``root``), stopped
    on exit. Waits for nothing: callers choose how (a health request, or only a TCP
    connect when the first HTTP request is the test's subject)."""
    environment = dict(os.environ)
    environment.update(
        {
            "PYTHONPATH": os.pathsep.join(
                p for p in (str(REPO), environment.get("PYTHONPATH", "")) if p
            ),
            "REVIEW_APP_DATABASE_URL": database_url,
            "REVIEW_APP_AUTH": "local",
            "REVIEW_APP_LOCAL_USER": user,
            "HOME": str(root / "home"),
        }
    )
    environment.pop("REVIEW_APP_RUBRICS_DIR", None)
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


def wait_healthy(url: str, process: subprocess.Popen[bytes], log: Path) -> None:
    """Until the server answers its health check (60 s at most)."""
    deadline = time.monotonic() + 60
    while True:
        if process.poll() is not None:
            pytest.fail(f"the server exited with {process.returncode}:\n{log.read_text()}")
        try:
            with urllib.request.urlopen(f"{url}/_stcore/health", timeout=2) as answer:
                if answer.status == 200:
                    return
        except OSError:
            pass
        if time.monotonic() > deadline:
            pytest.fail(f"the server did not answer within 60 s:\n{log.read_text()}")
        time.sleep(0.2)
