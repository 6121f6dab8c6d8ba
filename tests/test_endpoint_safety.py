"""Endpoints files checked whole, no secret stored, no prompt that exhausts the machine
(issue 35), on SQLite and PostgreSQL.

The probe: ``judge endpoints`` printed a traceback for a base URL with a malformed IPv6
host, port 99999 or port ``abc``; a key with a line break hung every run that used it;
an endpoint echoing the request put the key into 12 rows of ``judge_verdicts.error``; a
template repeating ``$conversation`` 60,000 times (840 KB) took 20 s to create, 67 s to
list and grew a run to 13 GB.
"""

from __future__ import annotations

import base64
import json
import resource
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import text

from review_app.services.access.actors import operator_actor
from review_app.services.cases.importing import import_paths
from review_app.services.judging.endpoints import ENDPOINTS_ENV, MAX_ENDPOINTS_FILE_BYTES
from review_app.services.judging.judge_prompts import prompt_for_run
from review_app.services.judging.judge_runner import run_judge
from review_app.services.judging.transport import EndpointSettings
from review_app.services.rubrics.rubric_catalog import sync_rubrics
from storage.models import define_all
from tests.conftest import DEMO_CASES, Database, cli_environment, review_app_command
from tests.judge_support import (
    FakeChatServer,
    Reply,
    run_review_app,
    support_case,
    write_jsonl,
)

SECRET = "sk-echo-NEVER-STORED-5b2e71"
PASSWORD = "hunter2-NEVER-STORED"
BASIC = base64.b64encode(f"judge:{PASSWORD}".encode()).decode()
RUBRIC = "role-adherence@1"
PROMPT = "role-judge@v1"


@pytest.fixture
def server() -> Any:
    fake = FakeChatServer(delay=0.0).start()
    try:
        yield fake
    finally:
        fake.stop()


def _endpoint(name: str, **fields: str) -> str:
    values = {"base_url": "'http://127.0.0.1:9/v1'", "model": "'m'", **fields}
    if fields.get("base_url") == "'http://user:pw@judge.internal/v1'":
        values["api_key"] = "'sk-1'"
    return f"[endpoints.{name}]\n" + "".join(f"{k} = {v}\n" for k, v in values.items())


BAD_FIELDS = [
    ("base_url", "'http://[::1/v1'", "IPv6"),
    ("base_url", "'http://[zz::1]/v1'", "IPv6"),
    ("base_url", "'http://judge.internal:99999/v1'", "port"),
    ("base_url", "'http://judge.internal:abc/v1'", "port"),
    ("base_url", "'http://judge.internal:0/v1'", "port"),
    ("base_url", "'http:///v1'", "no host"),
    ("base_url", "'http://judge internal/v1'", "spaces"),
    ("base_url", '"http://judge.internal/v1\\r\\nX-Evil: 1"', "control"),
    ("base_url", "'http://judge.internal/v1?key=1'", "query"),
    ("base_url", "'gopher://judge.internal/v1'", "http(s)"),
    ("base_url", "['http://127.0.0.1:9/v1', 'http://host:65536/v1']", "port"),
    ("api_key", '"sk-abc\\r\\nX-Injected: yes"', "control character"),
    ("api_key", '"sk-abc\\n"', "control character"),
    ("base_url", "'http://user:pw@judge.internal/v1'", "not both"),
    ("concurrency", "1.5", "1 to 256"),
    ("concurrency", "true", "1 to 256"),
    ("max_prompt_bytes", "'lots'", "whole number of bytes"),
    ("max_prompt_bytes", "10", "whole number of bytes"),
    ("max_prompt_bytes", "inf", "whole number of bytes"),
]

COMMANDS = [
    ("judge", "endpoints"),
    ("judge", "endpoints", "--json"),
    ("judge", "run", "--rubric", RUBRIC, "--prompt", PROMPT, "--endpoint", "judge"),
    ("judge", "run", "--rubric", RUBRIC, "--prompt", PROMPT, "--endpoint", "judge", "--background"),
]


@pytest.mark.parametrize(("field", "value", "words"), BAD_FIELDS)
def test_a_malformed_endpoint_is_one_line_naming_file_endpoint_and_field_on_every_command(
    tmp_path: Path, field: str, value: str, words: str
) -> None:
    path = tmp_path / "endpoints.toml"
    path.write_text(_endpoint("ok") + "\n" + _endpoint("judge", **{field: value}), "utf-8")
    db = f"sqlite:///{tmp_path / 'review.db'}"
    home = tmp_path / "home"
    home.mkdir()
    for command in COMMANDS:
        done = run_review_app(*command, db=db, home=home, env={ENDPOINTS_ENV: str(path)})
        assert done.returncode == 2, (command, done.stdout, done.stderr)
        lines = done.stderr.strip().splitlines()
        assert len(lines) == 1, (command, done.stderr)
        assert lines[0].startswith(f"error: {path}, line ")
        assert f"field endpoints.judge.{field}:" in lines[0] and words in lines[0]
        assert "Traceback" not in done.stderr and done.stdout == ""


def test_an_endpoints_file_over_its_bound_is_refused_unread(tmp_path: Path) -> None:
    """An endpoints file is read whole, so at most MAX_ENDPOINTS_FILE_BYTES of it: a huge
    file (or a device named as one) is one line naming it, not a machine out of memory."""
    path = tmp_path / "endpoints.toml"
    body = _endpoint("judge")
    path.write_text(body + "# " + "x" * MAX_ENDPOINTS_FILE_BYTES + "\n", "utf-8")
    db = f"sqlite:///{tmp_path / 'review.db'}"
    home = tmp_path / "home"
    home.mkdir()
    for command in COMMANDS[:2]:
        done = run_review_app(*command, db=db, home=home, env={ENDPOINTS_ENV: str(path)})
        assert done.returncode == 2, (command, done.stderr)
        (line,) = done.stderr.strip().splitlines()
        assert line == (
            f"error: {path}, field {ENDPOINTS_ENV}: the file is larger than 1024 KB; "
            "an endpoints file is a short text"
        )
    path.write_text(body, "utf-8")
    listed = run_review_app("judge", "endpoints", db=db, home=home, env={ENDPOINTS_ENV: str(path)})
    assert listed.returncode == 0, listed.stderr
    assert "judge" in listed.stdout


def test_a_key_from_the_environment_with_a_line_break_is_refused_when_the_file_is_read(
    tmp_path: Path,
) -> None:
    path = tmp_path / "endpoints.toml"
    path.write_text(_endpoint("judge", api_key_env="'JUDGE_KEY'"), "utf-8")
    db = f"sqlite:///{tmp_path / 'review.db'}"
    home = tmp_path / "home"
    home.mkdir()
    env = {ENDPOINTS_ENV: str(path), "JUDGE_KEY": "sk-abc\r\nX-Injected: yes"}
    for command in COMMANDS:
        done = run_review_app(*command, db=db, home=home, env=env)
        assert done.returncode == 2, (command, done.stderr)
        (line,) = done.stderr.strip().splitlines()
        assert "field endpoints.judge.api_key_env:" in line and "$JUDGE_KEY" in line
        assert "sk-abc" not in line


def test_a_key_on_the_command_line_with_a_line_break_is_refused(tmp_path: Path) -> None:
    db = f"sqlite:///{tmp_path / 'review.db'}"
    home = tmp_path / "home"
    home.mkdir()
    done = run_review_app(
        "judge", "run", "--rubric", RUBRIC, "--prompt", PROMPT,
        "--base-url", "http://127.0.0.1:9/v1", "--model", "m", "--api-key", "sk\r\nX: y",
        db=db, home=home,
    )  # fmt: skip
    assert done.returncode == 2 and "field --api-key" in done.stderr
    assert done.stderr.count("\n") == 1
    bad_url = run_review_app(
        "judge", "run", "--rubric", RUBRIC, "--prompt", PROMPT,
        "--base-url", "http://[::1/v1", "--model", "m", db=db, home=home,
    )  # fmt: skip
    assert bad_url.returncode == 2 and "field --base-url" in bad_url.stderr
    assert "Traceback" not in bad_url.stderr


def _load_demo_cases(database: Database) -> None:
    import_paths(database.engine, operator_actor(), [DEMO_CASES])
    sync_rubrics(database.engine, operator_actor())


def _load_support_cases(database: Database, tmp_path: Path, count: int) -> None:
    """Cases whose prompts name their case, so the loopback endpoint tells units apart."""
    cases = [support_case(f"s{i:03d}", assistant_turns=3, refund_at=None) for i in range(count)]
    import_paths(database.engine, operator_actor(), [write_jsonl(tmp_path / "s.jsonl", cases)])
    sync_rubrics(database.engine, operator_actor())


def _everything_stored(database: Database) -> str:
    """Every value of every table as text (not a row's repr, which SQLAlchemy shortens)."""
    chunks = []
    with database.engine.connect() as connection:
        for table in define_all().sorted_tables:
            for row in connection.execute(text(f"SELECT * FROM {table.name}")):
                chunks.extend(str(value) for value in row)
    return "\n".join(chunks)


def test_an_endpoint_echoing_the_request_leaves_its_key_nowhere(
    database: Database, tmp_path: Path, server: FakeChatServer
) -> None:
    """Every way an answer comes back (an HTTP error body, an unparseable answer, a
    valid answer whose reason quotes the request, an error body cut where the key is)
    carries the key and the Basic credentials of a password in the URL; none reaches a
    table or the command's output."""
    _load_support_cases(database, tmp_path, 2)
    path = tmp_path / "endpoints.toml"
    path.write_text(
        _endpoint("echo", base_url=f"'{server.base_url}'", api_key=f"'{SECRET}'")
        + _endpoint("basic", base_url=f"'http://judge:{PASSWORD}@127.0.0.1:{server.port}/v1'"),
        "utf-8",
    )
    echoes = [
        Reply(status=400, raw=b'{"error": "bad request", "you sent": {request}}', echo=True),
        Reply(content="I cannot judge this. You sent: {request}", echo=True),
        Reply(
            content=json.dumps(
                {"label": "in_role", "score": 0.2, "reason": "Auth was {authorization}."}
            ),
            echo=True,
        ),
        Reply(status=422, raw=b"x" * 290 + b" {authorization}", echo=True),
    ]
    home = tmp_path / "home"
    home.mkdir()
    for name, echo in [(name, echo) for name in ("echo", "basic") for echo in echoes]:
        server.default_reply = echo
        done = run_review_app(
            "judge", "run", "--rubric", RUBRIC, "--prompt", PROMPT, "--endpoint", name,
            "--retries", "0", "--limit", "2", db=database.url, home=home,
            env={ENDPOINTS_ENV: str(path)},
        )  # fmt: skip
        assert done.returncode == 0, done.stderr
        assert SECRET not in done.stdout + done.stderr and PASSWORD not in done.stderr
        with database.engine.connect() as connection:
            seen = connection.execute(
                text(
                    "SELECT error, reason FROM judge_verdicts WHERE error IS NOT NULL "
                    "OR reason IS NOT NULL"
                )
            ).all()
        assert seen, "nothing came back from the echoing endpoint"
        if echo.status != 422:  # that one is cut where the credentials begin
            assert all("[redacted]" in f"{error} {reason}" for error, reason in seen), seen[:2]
        stored = _everything_stored(database)
        for secret in (SECRET, PASSWORD):
            at = stored.find(secret)
            assert at < 0, (secret, stored[max(0, at - 300) : at + 80])
        assert "Bearer sk-" not in stored and BASIC not in stored
        # the next reply kind must be asked again: forget what this one stored
        with database.engine.begin() as connection:
            connection.execute(text("DELETE FROM judge_verdicts"))
    assert {r.authorization for r in server.requests} == {
        f"Bearer {SECRET}",
        f"Basic {BASIC}",
    }


def test_a_request_that_cannot_be_made_fails_its_unit_instead_of_hanging(
    database: Database, server: FakeChatServer
) -> None:
    """A key no header may carry, given past every check (a caller building settings by
    hand): the client refuses the request; each unit ends as an endpoint error and the
    run ends, where it hung before with every request slot dead."""
    _load_demo_cases(database)
    operator = operator_actor()
    catalog = sync_rubrics(database.engine, operator)
    rubric = catalog.get(RUBRIC)
    template = prompt_for_run(database.engine, operator, rubric=rubric, ref=PROMPT)
    settings = EndpointSettings(
        base_url=server.base_url, model="m", api_key="sk\r\nX-Injected: 1", retries=0
    )
    with database.engine.connect() as connection:
        case_ids = connection.execute(text("SELECT case_id FROM cases ORDER BY 1 LIMIT 2")).all()
    summary = run_judge(
        database.engine,
        operator,
        rubric=rubric,
        prompt=template,
        settings=settings,
        case_ids=[row[0] for row in case_ids],
    )
    assert summary.units > 0 and summary.endpoint_errors == summary.units
    assert server.requests == []
    with database.engine.connect() as connection:
        errors = connection.execute(text("SELECT error FROM judge_verdicts")).scalars().all()
    assert errors and all("Injected" not in e and "sk" not in e.split(":")[-1] for e in errors)


AMPLIFYING = "Judge with codes $codes.\n" + "$conversation\n" * 60_000


def _limited(seconds: int) -> Any:
    def limit() -> None:  # the child may use at most 2 GB of address space
        resource.setrlimit(resource.RLIMIT_AS, (2 * 1024**3, 2 * 1024**3))

    return limit


def test_an_amplifying_template_is_stored_listed_and_refused_per_unit_without_a_crash(
    database: Database, tmp_path: Path, server: FakeChatServer
) -> None:
    """840 KB of ``$conversation`` lines: creating, listing and showing it stay linear;
    a run of it over the demo's turns sends nothing, stores an endpoint error naming the
    size and the limit for every unit, and stays within 2 GB of address space."""
    _load_demo_cases(database)
    template = tmp_path / "amplifying.txt"
    template.write_text(AMPLIFYING, encoding="utf-8")
    assert 800_000 < template.stat().st_size < 1024**2
    env = cli_environment()
    env.pop("REVIEW_APP_DATABASE_URL", None)
    env["HOME"] = str(tmp_path)
    base = [*review_app_command()]

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [*base, *args, "--db", database.url],
            capture_output=True,
            text=True,
            env=env,
            timeout=120,
            preexec_fn=_limited(120),
        )

    created = run(
        "judge", "prompts", "create", "--rubric", RUBRIC, "--judge", "amp", "--file", str(template)
    )
    assert created.returncode == 0, created.stderr
    listed = run("judge", "prompts", "list", "--rubric", RUBRIC, "--json")
    assert listed.returncode == 0, listed.stderr
    assert "amp@v1" in listed.stdout
    shown = run("judge", "prompts", "show", "amp@v1", "--rubric", RUBRIC)
    assert shown.returncode == 0, shown.stderr
    assert shown.stdout.count("$conversation") == 60_000
    judged = run(
        "judge", "run", "--rubric", RUBRIC, "--prompt", "amp@v1", "--base-url", server.base_url,
        "--model", "m", "--retries", "0",
    )  # fmt: skip
    assert judged.returncode == 0, judged.stderr[-2000:]
    assert server.requests == []
    with database.engine.connect() as connection:
        rows = connection.execute(
            text(
                "SELECT v.error, v.error_kind FROM judge_verdicts v JOIN judge_runs r "
                "ON r.id = v.run_id WHERE r.judge = 'amp'"
            )
        ).all()
        turns = connection.execute(
            text("SELECT count(*) FROM events WHERE actor = 'assistant'")
        ).scalar_one()
    assert len(rows) == turns
    assert all(kind == "endpoint" and "prompt not sent" in error for error, kind in rows)
    assert all("262,144" in error and "max_prompt_bytes" in error for error, _ in rows)


def test_answers_from_a_slow_endpoint_are_stored_within_a_quarter_second(
    database: Database, tmp_path: Path, server: FakeChatServer
) -> None:
    """One request at a time; the fourth is held by the endpoint. Long after the first
    three were answered, the run is killed (SIGKILL): their verdicts are stored, and the
    same command run again asks none of them again (the old rule wrote every ten answers,
    so a crash re-asked up to ten paid answers)."""
    _load_support_cases(database, tmp_path, 3)
    server.hold_from = 4
    command = [
        *review_app_command(), "judge", "run", "--rubric", RUBRIC, "--prompt", PROMPT,
        "--base-url", server.base_url, "--model", "m", "--concurrency", "1", "--retries", "0",
        "--db", database.url,
    ]  # fmt: skip
    env = cli_environment()
    env["HOME"] = str(tmp_path)
    runner = subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        assert server.holding.wait(120), "the fourth request never came"
        time.sleep(1.0)  # four times the quarter second the rule allows
        runner.kill()
        runner.communicate(timeout=30)
    finally:
        if runner.poll() is None:
            runner.kill()
        server.release.set()
    first_three = server.units_requested()[:3]
    with database.engine.connect() as connection:
        stored = connection.execute(
            text("SELECT count(*) FROM judge_verdicts WHERE error IS NULL")
        ).scalar_one()
    assert stored == 3
    server.hold_from = None
    server.reset_log()
    again = subprocess.run(command, env=env, capture_output=True, text=True, timeout=300)
    assert again.returncode == 0, again.stderr
    asked_again = set(server.units_requested()) & set(first_three)
    assert asked_again == set(), asked_again
    # the held request may still be logged after the reset: distinct units count
    assert len(set(server.units_requested())) == 9 - 3
