"""The bundled judge's server never outlives the process that started it (issue 35).

The probe: after SIGKILL of ``serve``, and after ``jobs work`` exited, the llama.cpp
server they had started stayed alive, adopted by init. Here the real bundled model is
started by a background job, in ``serve`` (then SIGKILLed) and in ``jobs work`` (then
left to exit by itself); the server process is gone afterwards.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

from review_app.services.access.actors import operator_actor
from review_app.services.cases.importing import import_paths
from review_app.services.judging.endpoints import ENDPOINTS_ENV
from review_app.services.judging.judge_run_kind import start_judge_job
from review_app.services.rubrics.rubric_catalog import sync_rubrics
from tests.conftest import Database, cli_environment, review_app_command
from tests.judge_support import support_case, write_jsonl
from tests.served import free_port, serving, wait_healthy

pytestmark = [pytest.mark.local_judge, pytest.mark.slow]


def _require_local_judge() -> None:
    from review_app.services.judging.local_judge import local_judge_available

    if local_judge_available():
        return
    if os.environ.get("REVIEW_APP_REQUIRE_LOCAL_JUDGE", "").lower() in ("1", "true", "yes"):
        pytest.fail("the local judge is not installed and REVIEW_APP_REQUIRE_LOCAL_JUDGE=1")
    pytest.skip('the local judge is not installed (pip install ".[local-judge]")')


def _children(parent: int) -> list[int]:
    """Processes whose parent is ``parent`` and that run the bundled judge's server."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            command = (entry / "cmdline").read_bytes()
        except OSError:
            continue
        ppid = int(stat.rpartition(")")[2].split()[1])
        if ppid == parent and b"local_judge_lease" in command:
            found.append(int(entry.name))
    return found


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[0]
    except OSError:
        return False
    return state != "Z"


def _wait(condition, seconds: float, what: str) -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, what
        time.sleep(0.1)


@pytest.fixture(scope="module")
def judge_home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One home for both tests: the bundled model's file is assembled there once."""
    return tmp_path_factory.mktemp("judge-home")


def _judge_started(parent: Any, within: float = 120) -> int:
    """The bundled judge's server ``parent`` (a Popen) started; fails if none comes, or
    if ``parent`` ends first."""
    started: list[int] = []

    def found() -> bool:
        started[:] = _children(parent.pid)
        return bool(started) or parent.poll() is not None

    _wait(found, within, "the bundled judge's server was never started")
    assert started, f"{parent.args} ended before starting the bundled judge"
    (judge,) = started
    return judge


def _queue_local_job(database: Database, tmp_path: Path) -> None:
    cases = [support_case(f"lease{i}", assistant_turns=2, refund_at=None) for i in range(3)]
    import_paths(database.engine, operator_actor(), [write_jsonl(tmp_path / "c.jsonl", cases)])
    sync_rubrics(database.engine, operator_actor())
    start_judge_job(
        database.engine,
        operator_actor(),
        rubric="role-adherence@1",
        prompt="role-judge-mini@v1",
        endpoint="local",
        max_tokens=60,
    )


def test_sigkill_of_serve_leaves_no_judge_server(
    sqlite_database: Database, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, judge_home: Path
) -> None:
    _require_local_judge()
    monkeypatch.delenv(ENDPOINTS_ENV, raising=False)
    _queue_local_job(sqlite_database, tmp_path)
    root = tmp_path / "serve"
    root.mkdir()
    (root / "home").symlink_to(judge_home)
    port = free_port()
    with serving(sqlite_database.url, root, port=port, user="admin") as (server, log):
        wait_healthy(f"http://127.0.0.1:{port}", server, log)
        judge = _judge_started(server)
        server.send_signal(signal.SIGKILL)
        server.wait(timeout=30)
        _wait(lambda: not _alive(judge), 30, f"the judge server {judge} outlived serve")


def test_jobs_work_leaves_no_judge_server_when_it_exits(
    sqlite_database: Database, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, judge_home: Path
) -> None:
    _require_local_judge()
    monkeypatch.delenv(ENDPOINTS_ENV, raising=False)
    _queue_local_job(sqlite_database, tmp_path)
    env = cli_environment()
    env.pop(ENDPOINTS_ENV, None)
    env["HOME"] = str(judge_home)
    worker = subprocess.Popen(
        [*review_app_command(), "jobs", "work", "--until-idle", "--db", sqlite_database.url],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    try:
        judge = _judge_started(worker)
        out, err = worker.communicate(timeout=600)
        assert worker.returncode == 0, err[-2000:]
        assert b"ran 1 job" in out
    finally:
        if worker.poll() is None:
            worker.kill()
    _wait(lambda: not _alive(judge), 30, f"the judge server {judge} outlived jobs work")
