"""The offline judge end to end: llama.cpp's server with the bundled Gemma 3 270M judges
four short demo conversations, and the run is stored and reported.

Four conversations (18 turns), not the whole demo set (111 turns): on a 2-core machine the
model takes 5-10 s a turn, and the pipe (prompt, constrained answer, stored verdict,
report) is the same for every turn.

Skips when the local-judge extra is not installed, unless
``REVIEW_APP_REQUIRE_LOCAL_JUDGE=1`` (set by ``.ci/run``) makes that a failure. The
model is weak on purpose: the test checks the pipe and that the report says so.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import time
from pathlib import Path
from urllib.parse import urlsplit

import httpx
import pytest

from review_app.services.access.actors import operator_actor
from review_app.services.exchange.demo import load_demo
from review_app.services.judging.local_judge import local_judge_available
from storage.engine import create_database_engine
from storage.migrations.upgrade import upgrade_database
from tests.conftest import cli_environment, review_app_command

pytestmark = [pytest.mark.local_judge, pytest.mark.slow]


def _require_local_judge() -> None:
    if local_judge_available():
        return
    message = 'the local judge is not installed (pip install ".[local-judge]")'
    if os.environ.get("REVIEW_APP_REQUIRE_LOCAL_JUDGE", "").lower() in ("1", "true", "yes"):
        pytest.fail(message + " and REVIEW_APP_REQUIRE_LOCAL_JUDGE=1")
    pytest.skip(message)


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@pytest.fixture
def local_server(tmp_path: Path):  # type: ignore[no-untyped-def]
    _require_local_judge()
    port = _free_port()
    log = (tmp_path / "llama-server.log").open("w")
    process = subprocess.Popen(
        [*review_app_command(), "judge", "local-server", "--port", str(port), "--n-ctx", "4096"],
        stdout=log,
        stderr=subprocess.STDOUT,
        env=cli_environment(),
    )
    base_url = f"http://127.0.0.1:{port}/v1"
    try:
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline:
            if process.poll() is not None:
                tail = (tmp_path / "llama-server.log").read_text()[-2000:]
                pytest.fail(f"the llama.cpp server exited: {tail}")
            try:
                if httpx.get(f"{base_url}/models", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                time.sleep(1)
        else:
            pytest.fail("the llama.cpp server did not start within 300 s")
        yield base_url
    finally:
        process.terminate()
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=20)
        log.close()


# Short conversations whose turns have gold labels in the demo set.
JUDGED_CASES = (
    "support-false-refund-claim",
    "support-retry-missing-context",
    "support-unknown-action-store-credit",
    "support-user-fake-role-change",
)
JUDGED_TURNS = 18  # their assistant turns


@pytest.mark.timeout(3600)
def test_local_judge_judges_demo_conversations_and_the_report_shows_it_is_weak(
    tmp_path: Path, local_server: str
) -> None:
    url = f"sqlite:///{tmp_path / 'judge.db'}"
    engine = create_database_engine(url)
    upgrade_database(engine)
    load_demo(engine, operator_actor())
    engine.dispose()
    environment = {
        **cli_environment(),
        "REVIEW_APP_DATABASE_URL": url,
        "HOME": str(tmp_path),
        "XDG_DATA_HOME": str(tmp_path / "data"),
    }

    def cli(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [*review_app_command(), *args],
            capture_output=True,
            text=True,
            env=environment,
            timeout=3000,
        )

    run = cli(
        "judge",
        "run",
        "--rubric",
        "role-adherence@1",
        "--prompt",
        "role-judge-mini@v1",
        "--base-url",
        local_server,
        "--model",
        "gemma-3-270m",
        "--response-format",
        "json_object_schema",
        "--max-tokens",
        "96",
        "--concurrency",
        "1",
        "--timeout",
        "600",
        *(argument for case in JUDGED_CASES for argument in ("--case", case)),
    )
    assert run.returncode == 0, run.stderr
    # the run is named by its endpoint too: host:port of the --base-url
    name = f"role-judge-mini@v1/gemma-3-270m at {urlsplit(local_server).netloc}"
    assert name in run.stdout

    runs = json.loads(cli("judge", "runs", "--json").stdout)
    local = next(r for r in runs if r["name"] == name)
    assert local["source"] == "run"
    assert local["prompt_sha256"]
    assert local["verdicts"] == JUDGED_TURNS  # every assistant turn of the judged cases
    assert local["summary"]["prompt_tokens"] > 0

    report = json.loads(
        cli(
            "judge",
            "report",
            "--rubric",
            "role-adherence@1",
            "--run",
            str(local["id"]),
            "--json",
            "--resamples",
            "200",
        ).stdout
    )
    [entry] = report["runs"]
    assert entry["turn_verdicts"] == JUDGED_TURNS
    answered = entry["turn_verdicts"] - entry["errors"]
    assert answered > 0, "the schema-constrained answers should mostly parse"
    assert entry["vs_gold"] is not None
    assert entry["alt_test"]["verdict"] != "passed" or entry["alt_test"]["baseline"] is not None
    readable = cli(
        "judge",
        "report",
        "--rubric",
        "role-adherence@1",
        "--run",
        str(local["id"]),
        "--resamples",
        "100",
    )
    # The headline is the alternative annotator test, never an "at human level" claim.
    assert "may the judge replace a reviewer?" in readable.stdout
    assert "human level" not in readable.stdout
