"""Shared fixtures: real databases (SQLite files and PostgreSQL schemas), the CLI.

PostgreSQL tests use ``REVIEW_APP_TEST_POSTGRES_URL`` (default: the local server's
``test`` database). Each test gets a schema of its own, dropped afterwards. When
the server is unreachable those tests skip, unless ``REVIEW_APP_REQUIRE_POSTGRES=1``
(set by ``.ci/run``) makes that a failure. Interoperability tests use deepeval (the
``interop`` extra) when it is installed and skip otherwise, unless
``REVIEW_APP_REQUIRE_INTEROP=1`` (also set by ``.ci/run``).
"""

from __future__ import annotations

import os
import sqlite3
import subprocess as _subprocess
import sys
import traceback
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest
from sqlalchemy import Engine, create_engine, text

from benchmarks.schemas import schema_of_its_own
from review_app.evaluator import EVALUATOR_VERSION
from review_app.services.cases.case_views import LANES
from storage.engine import create_database_engine
from storage.migrations.upgrade import upgrade_database

REPO = Path(__file__).resolve().parents[1]
DEMO_CASES = REPO / "review_app" / "demo_data" / "cases"
POSTGRES_URL = os.environ.get(
    "REVIEW_APP_TEST_POSTGRES_URL", "postgresql+psycopg://postgres@127.0.0.1:5432/test"
)


def _flag(name: str) -> bool:
    return os.environ.get(name, "").strip().lower() in ("1", "true", "yes")


_postgres_state: dict[str, str | None] = {}


def postgres_unavailable_reason() -> str | None:
    """``None`` when the PostgreSQL server answers, else why not (checked once)."""
    if "reason" not in _postgres_state:
        try:
            probe = create_engine(POSTGRES_URL, connect_args={"connect_timeout": 3})
            with probe.connect() as connection:
                connection.execute(text("SELECT 1"))
            probe.dispose()
            _postgres_state["reason"] = None
        except Exception as error:  # pragma: no cover - depends on the machine
            _postgres_state["reason"] = f"PostgreSQL at {POSTGRES_URL} unreachable: {error}"
    return _postgres_state["reason"]


def require_postgres() -> None:
    reason = postgres_unavailable_reason()
    if reason is None:
        return
    if _flag("REVIEW_APP_REQUIRE_POSTGRES"):
        pytest.fail(reason + " (REVIEW_APP_REQUIRE_POSTGRES=1)")
    pytest.skip(reason)


def require_deepeval() -> None:
    """Skip (or fail, with ``REVIEW_APP_REQUIRE_INTEROP=1``) when deepeval is missing.

    Nothing is installed at run time; deepeval's telemetry is switched off first.
    """
    os.environ.setdefault("DEEPEVAL_TELEMETRY_OPT_OUT", "1")
    try:
        import deepeval  # noqa: F401
    except ImportError as error:
        reason = f"deepeval is not installed (pip install -e '.[interop]'): {error}"
        if _flag("REVIEW_APP_REQUIRE_INTEROP"):
            pytest.fail(reason + " (REVIEW_APP_REQUIRE_INTEROP=1)")
        pytest.skip(reason)


@dataclass(frozen=True)
class Database:
    """A migrated, empty database for one test: its URL and an engine on it."""

    kind: str
    url: str
    engine: Engine


@pytest.fixture
def sqlite_database(tmp_path: Path) -> Iterator[Database]:
    url = f"sqlite:///{tmp_path / 'review.db'}"
    engine = create_database_engine(url)
    upgrade_database(engine)
    yield Database("sqlite", url, engine)
    engine.dispose()


@contextmanager
def postgres_schema() -> Iterator[str]:
    """The URL of a new, empty schema of its own on the test PostgreSQL, dropped on exit."""
    require_postgres()
    with schema_of_its_own(POSTGRES_URL) as url:
        yield url


@pytest.fixture
def postgres_database() -> Iterator[Database]:
    with postgres_schema() as url:
        engine = create_database_engine(url)
        upgrade_database(engine)
        try:
            yield Database("postgres", url, engine)
        finally:
            engine.dispose()


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def database(request: pytest.FixtureRequest) -> Database:
    """Each test using this runs twice: on SQLite and on PostgreSQL."""
    name = "sqlite_database" if request.param == "sqlite" else "postgres_database"
    return request.getfixturevalue(name)  # type: ignore[no-any-return]


@dataclass
class CliResult:
    returncode: int
    stdout: str
    stderr: str


def review_app_command() -> list[str]:
    """``python -m review_app`` with this interpreter.

    The console script of an installed copy may point at another checkout; running
    the module with :func:`cli_environment`'s ``PYTHONPATH`` tests the code of this
    repository, whichever copy is installed.
    """
    return [sys.executable, "-m", "review_app"]


def cli_environment(base: dict[str, str] | None = None) -> dict[str, str]:
    """``base`` (default: this process's environment) with the repository first on
    ``PYTHONPATH``, so a subprocess imports this checkout's ``review_app``."""
    environment = dict(os.environ if base is None else base)
    existing = environment.get("PYTHONPATH")
    environment["PYTHONPATH"] = str(REPO) + (os.pathsep + existing if existing else "")
    return environment


def invoke_cli(
    args: Sequence[str],
    *,
    env: dict[str, str],
    cwd: Path,
    input: str | None = None,
    subprocess: bool = False,
) -> CliResult:
    """``review-app ARGS`` with exactly the environment ``env``, run in ``cwd``.

    In-process by default (Typer's ``CliRunner`` on :data:`review_app.cli.application.app`): the
    environment and working directory are swapped in for the call and put back
    after it and engines the command opened are disposed, so a call sees what a
    fresh process would. An exception that
    escapes the command gives exit code 1 and its traceback on stderr, as Python
    does. ``subprocess=True`` starts the real entry point (``python -m
    review_app``) instead: for tests of the entry point itself.
    """
    if subprocess:
        completed = _subprocess.run(
            [*review_app_command(), *args],
            capture_output=True,
            text=True,
            input=input,
            cwd=cwd,
            env=env,
            timeout=300,
        )
        return CliResult(completed.returncode, completed.stdout, completed.stderr)

    from typer.testing import CliRunner

    from review_app.cli.application import app
    from storage import engine as engines

    saved_environment = dict(os.environ)
    saved_cwd = os.getcwd()
    opened_before = set(engines._engines)
    os.environ.clear()
    os.environ.update(env)
    os.chdir(cwd)
    try:
        result = CliRunner().invoke(app, list(args), input=input)
    finally:
        os.chdir(saved_cwd)
        os.environ.clear()
        os.environ.update(saved_environment)
        for url in set(engines._engines) - opened_before:
            engines._engines.pop(url).dispose()
    stderr = result.stderr
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        stderr += "Traceback (most recent call last):\n" + "".join(
            traceback.format_exception(result.exception)
        )
    return CliResult(result.exit_code, result.stdout, stderr)


def cli_test_environment(home: Path, db: str | None = None) -> dict[str, str]:
    """This process's environment with a private home and no database by default."""
    environment = cli_environment()
    environment["HOME"] = str(home)
    environment["XDG_DATA_HOME"] = str(home / "data")
    environment.pop("REVIEW_APP_DATABASE_URL", None)
    if db is not None:
        environment["REVIEW_APP_DATABASE_URL"] = db
    return environment


@pytest.fixture
def run_cli(tmp_path: Path):  # type: ignore[no-untyped-def]
    """Run ``review-app`` as a user would, with a private home; in-process unless
    ``subprocess=True`` (see :func:`invoke_cli`)."""

    def run(
        *args: str,
        db: str | None = None,
        input: str | None = None,
        cwd: Path | None = None,
        env: dict[str, str] | None = None,
        subprocess: bool = False,
    ) -> CliResult:
        environment = cli_test_environment(tmp_path / "home", db)
        if env:
            environment.update(env)
        return invoke_cli(
            args, env=environment, cwd=cwd or tmp_path, input=input, subprocess=subprocess
        )

    return run


CASE_TABLES = ("contracts", "cases", "events", "evaluations", "findings")


def row_counts(engine: Engine) -> dict[str, int]:
    """Rows in each table that an import writes (to show a refused import stored nothing)."""
    with engine.connect() as connection:
        return {
            table: int(connection.execute(text(f"SELECT count(*) FROM {table}")).scalar_one())
            for table in CASE_TABLES
        }


def lane_counts(engine: Engine) -> dict[str, int]:
    """Cases in each lane (every lane, 0 when empty) under the current evaluator version."""
    with engine.connect() as connection:
        rows = connection.execute(
            text(
                "SELECT lane, count(*) FROM evaluations"
                " WHERE evaluator_version = :version GROUP BY lane"
            ),
            {"version": EVALUATOR_VERSION},
        )
        counts = {lane: int(count) for lane, count in rows}
    return {lane: counts.get(lane, 0) for lane in LANES}


def label_count(engine: Engine) -> int:
    """Rows in the labels table (every version of every label)."""
    with engine.connect() as connection:
        return int(connection.execute(text("SELECT count(*) FROM labels")).scalar_one())


@contextmanager
def write_lock(path: Path) -> Iterator[None]:
    """Another connection holding the SQLite file's write lock (``BEGIN IMMEDIATE``)."""
    holder = sqlite3.connect(path, isolation_level=None)
    try:
        holder.execute("BEGIN IMMEDIATE")
        yield
        holder.execute("ROLLBACK")
    finally:
        holder.close()
