"""Database engines: SQLite by default, PostgreSQL for teams.

``REVIEW_APP_DATABASE_URL`` (or ``--db``) is any SQLAlchemy URL. Without one, the
database is the SQLite file ``$XDG_DATA_HOME/role-review/review.db``.

SQLite is tuned for several writers in one server process (each browser session
is a thread): WAL journal, a busy timeout, and ``BEGIN IMMEDIATE`` for every
transaction that may write, so a writer waits for the lock instead of failing
with "database is locked" when its read transaction tries to write. Read-only
work can ask for a deferred ``BEGIN`` with :func:`read_only`. ``synchronous=FULL``
makes every commit durable when it returns (a power cut loses nothing acknowledged).
A writer that still waits longer than the busy timeout gets
:class:`~review_app.errors.DatabaseBusy` (its transaction is rolled back), never a bare
driver error.
"""

from __future__ import annotations

import os
import sqlite3
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from sqlalchemy import Engine, create_engine, event
from sqlalchemy.engine import make_url
from sqlalchemy.pool import StaticPool

from review_app.errors import DatabaseBusy
from storage import write_queue
from storage.backup import restore_running

DATABASE_URL_ENV = "REVIEW_APP_DATABASE_URL"
SQLITE_BUSY_TIMEOUT_MS = 30_000
SQLITE_SYNCHRONOUS = "FULL"
_BEGIN_OPTION = "review_app_sqlite_begin"


def default_database_path() -> Path:
    base = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return Path(base) / "role-review" / "review.db"


def database_url(explicit: str | None = None) -> str:
    """The URL to use: ``--db``, else the environment, else the default SQLite file."""
    if explicit:
        return normalise_url(explicit)
    from_env = os.environ.get(DATABASE_URL_ENV)
    if from_env:
        return normalise_url(from_env)
    return f"sqlite:///{default_database_path()}"


def normalise_url(url: str) -> str:
    """Accept ``postgres://`` and ``postgresql://`` and use the psycopg 3 driver."""
    if url.startswith("postgres://"):
        url = "postgresql://" + url[len("postgres://") :]
    if url.startswith("postgresql://"):
        url = "postgresql+psycopg://" + url[len("postgresql://") :]
    return url


def is_sqlite(engine: Engine) -> bool:
    return engine.dialect.name == "sqlite"


def create_database_engine(
    url: str | None = None, *, busy_timeout_ms: int | None = None, **kwargs: Any
) -> Engine:
    """A new engine for ``url`` (see :func:`database_url`), tuned per dialect.

    ``busy_timeout_ms`` is how long a SQLite writer waits for the lock (default
    :data:`SQLITE_BUSY_TIMEOUT_MS`, read at call time); PostgreSQL ignores it.
    """
    url = database_url(url)
    parsed = make_url(url)
    timeout = SQLITE_BUSY_TIMEOUT_MS if busy_timeout_ms is None else busy_timeout_ms
    if parsed.get_backend_name() == "sqlite":
        return _sqlite_engine(url, busy_timeout_ms=timeout, **kwargs)
    kwargs.setdefault("pool_pre_ping", True)
    engine = create_engine(url, **kwargs)
    if parsed.get_backend_name() == "postgresql":
        _bound_postgres_waits(engine, lock_timeout_ms=timeout)
    return engine


POSTGRES_BUSY_STATES = {
    "55P03": "another writer held a lock it needs for more than {seconds} s",
    "40P01": "two writers waited for each other (a deadlock), and this one gave way",
    "40001": "another writer changed the same rows at the same time",
}
"""SQLSTATEs of a PostgreSQL write that had to give way to another writer
(lock_not_available, deadlock_detected, serialization_failure): the transaction stored
nothing and the same action can simply be tried again."""


def _bound_postgres_waits(engine: Engine, *, lock_timeout_ms: int) -> None:
    """PostgreSQL waits for a lock as SQLite does for its write lock: at most the busy
    timeout (``lock_timeout``), then :class:`~review_app.errors.DatabaseBusy`, as do a
    deadlock and a serialization failure. Their driver text (the SQL, the processes,
    a URL) never reaches the user."""
    seconds = f"{lock_timeout_ms / 1000:g}"

    @event.listens_for(engine, "connect")
    def _configure(dbapi_connection: Any, _record: Any) -> None:
        with dbapi_connection.cursor() as cursor:
            cursor.execute(f"SET lock_timeout = {int(lock_timeout_ms)}")
        dbapi_connection.commit()

    @event.listens_for(engine, "handle_error")
    def _busy(context: Any) -> None:
        state = getattr(context.original_exception, "sqlstate", None)
        if state in POSTGRES_BUSY_STATES:
            raise DatabaseBusy(
                f"the database is busy ({POSTGRES_BUSY_STATES[state].format(seconds=seconds)}); "
                "this change was not saved, try again"
            )


def _sqlite_engine(url: str, *, busy_timeout_ms: int, **kwargs: Any) -> Engine:
    parsed = make_url(url)
    database = parsed.database
    in_memory = not database or database == ":memory:" or parsed.query.get("mode") == "memory"
    connect_args = kwargs.pop("connect_args", {})
    connect_args.setdefault("check_same_thread", False)
    connect_args.setdefault("timeout", busy_timeout_ms / 1000)
    queue_path: Path | None = None
    if in_memory:
        kwargs.setdefault("poolclass", StaticPool)
    elif database:
        Path(database).expanduser().parent.mkdir(parents=True, exist_ok=True)
        if write_queue.write_queue_enabled() and "factory" not in connect_args:
            queue_path = write_queue.lock_path(database)
            connect_args["factory"] = write_queue.QueuedConnection
    engine = create_engine(url, connect_args=connect_args, **kwargs)
    busy_message = (
        f"the database is busy (another writer held it for more than "
        f"{busy_timeout_ms / 1000:g} s); this change was not saved, try again"
    )

    @event.listens_for(engine, "connect")
    def _configure(dbapi_connection: Any, _record: Any) -> None:
        # Let SQLAlchemy's "begin" event below issue BEGIN, not the sqlite3 module.
        dbapi_connection.isolation_level = None
        cursor = dbapi_connection.cursor()
        if not in_memory:
            cursor.execute("PRAGMA journal_mode=WAL")
            # FULL: a commit is on disk when it returns, even if the machine loses power
            # (NORMAL in WAL mode may lose the last commits). Measured cost: see
            # benchmarks/bench_durability.py.
            cursor.execute(f"PRAGMA synchronous={SQLITE_SYNCHRONOUS}")
        cursor.execute(f"PRAGMA busy_timeout={busy_timeout_ms}")
        cursor.execute("PRAGMA foreign_keys=ON")
        cursor.close()

    restored = None if in_memory or not database else Path(database).expanduser()

    @event.listens_for(engine, "begin")
    def _begin(connection: Any) -> None:
        mode = connection.get_execution_options().get(_BEGIN_OPTION, "IMMEDIATE")
        dbapi_connection = connection.connection.dbapi_connection
        queued = queue_path is not None and mode == "IMMEDIATE"
        if queued:
            # Wait in line (storage/write_queue.py), then take SQLite's lock.
            try:
                dbapi_connection.hold_write_lock(queue_path, busy_timeout_ms / 1000)
            except write_queue.WriteQueueTimeout:
                raise DatabaseBusy(busy_message) from None
        try:
            connection.exec_driver_sql(f"BEGIN {mode}")
        except BaseException:
            if queued:
                dbapi_connection.release_write_lock()
            raise
        # A writer holding the lock checks that no restore runs: ``restore`` waits for
        # the writers in flight, then copies the database aside and overwrites it, and
        # a save between those steps would be in neither (see storage/backup.py).
        if mode == "IMMEDIATE" and restored is not None and restore_running(restored):
            connection.exec_driver_sql("ROLLBACK")
            if queued:
                dbapi_connection.release_write_lock()
            raise DatabaseBusy(
                "the database is being restored from a backup; this change was not saved, "
                "try again when the restore is done"
            )

    @event.listens_for(engine, "handle_error")
    def _busy(context: Any) -> None:
        # SQLite's own words for a lock still held when the busy timeout ran out.
        if _is_busy(context.original_exception):
            raise DatabaseBusy(busy_message)

    return engine


def _is_busy(error: BaseException) -> bool:
    code = getattr(error, "sqlite_errorcode", None)
    if isinstance(code, int) and code & 0xFF == sqlite3.SQLITE_BUSY:
        return True
    return str(error) in ("database is locked", "database is busy")


def read_only(engine: Engine) -> Engine:
    """The same engine, but SQLite transactions start deferred (shared read lock only).

    Use it for work that never writes; a transaction that reads and then writes
    must use the plain engine (``BEGIN IMMEDIATE``).
    """
    if not is_sqlite(engine):
        return engine
    return engine.execution_options(**{_BEGIN_OPTION: "DEFERRED"})


def on_every_commit(callback: Callable[[], None]) -> None:
    """Call ``callback`` at every commit of every engine of this process, in the
    committing thread, just before the database commits."""

    def committing(_connection: Any) -> None:
        callback()

    event.listen(Engine, "commit", committing)


_engines: dict[str, Engine] = {}
_engines_lock = threading.Lock()


def shared_engine(url: str | None = None) -> Engine:
    """One engine per URL for this process, created and migrated on first use."""
    from storage.migrations.upgrade import upgrade_database

    resolved = database_url(url)
    with _engines_lock:
        engine = _engines.get(resolved)
        if engine is None:
            engine = create_database_engine(resolved)
            upgrade_database(engine)
            _engines[resolved] = engine
        return engine
