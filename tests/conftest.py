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
import subprocess
import sys
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import quote

import pytest
from sqlalchemy import Engine, create_engine, text

from storage.engine import create_database_engine
from storage.migrations import upgrade_database

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


@pytest.fixture
def postgres_database() -> Iterator[Database]:
    require_postgres()
    schema = f"t_{uuid.uuid4().hex[:12]}"
    admin = create_engine(POSTGRES_URL)
    with admin.begin() as connection:
        connection.execute(text(f"CREATE SCHEMA {schema}"))
    separator = "&" if "?" in POSTGRES_URL else "?"
    url = f"{POSTGRES_URL}{separator}options={quote(f'-csearch_path={schema}')}"
    engine = create_database_engine(url)
    upgrade_database(engine)
    try:
        yield Database("postgres", url, engine)
    finally:
        engine.dispose()
        with admin.begin() as connection:
            connection.execute(text(f"DROP SCHEMA {schema} CASCADE"))
        admin.dispose()


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


@pytest.fixture
def run_cli(tmp_path: Path):  # type: ignore[no-untyped-def]
    """Run ``review-app`` as a user would, in a subprocess, with a private home."""

    def run(
        *args: str,
        db: str | None = None,
        input: str | None = None,
        cwd: Path | None = None,
        env: dict[str, str] | None = None,
    ) -> CliResult:
        environment = cli_environment()
        environment["HOME"] = str(tmp_path / "home")
        environment["XDG_DATA_HOME"] = str(tmp_path / "home" / "data")
        environment.pop("REVIEW_APP_DATABASE_URL", None)
        if db is not None:
            environment["REVIEW_APP_DATABASE_URL"] = db
        if env:
            environment.update(env)
        completed = subprocess.run(
            [*review_app_command(), *args],
            capture_output=True,
            text=True,
            input=input,
            cwd=cwd or tmp_path,
            env=environment,
            timeout=300,
        )
        return CliResult(completed.returncode, completed.stdout, completed.stderr)

    return run


CASE_TABLES = ("contracts", "cases", "events", "evaluations", "findings")


def row_counts(engine: Engine) -> dict[str, int]:
    """Rows in each table that an import writes (to show a refused import stored nothing)."""
    with engine.connect() as connection:
        return {
            table: int(connection.execute(text(f"SELECT count(*) FROM {table}")).scalar_one())
            for table in CASE_TABLES
        }
