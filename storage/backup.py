"""Backups of the database: SQLite's online backup API; PostgreSQL's own tools.

A SQLite backup is a consistent snapshot taken while servers keep working (the
backup API copies pages and restarts if a writer changes them meanwhile), written
next to the target and renamed into place, so a crash never leaves half a backup
under the target's name. Restoring copies a backup into the live database with the
same API, after saving the current content beside it: a server that is running
sees the restored data on its next read.

PostgreSQL backups are ``pg_dump`` / ``pg_restore``'s job; :func:`postgres_commands`
says which commands to run for a URL.
"""

from __future__ import annotations

import fcntl
import os
import shlex
import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from sqlalchemy.engine import make_url

SQLITE_HEADER = b"SQLite format 3\x00"


class BackupError(Exception):
    """A backup or restore that cannot be done (the message says why)."""


def sqlite_path(url: str) -> Path | None:
    """The database file of a SQLite URL; ``None`` for other databases."""
    parsed = make_url(url)
    if parsed.get_backend_name() != "sqlite":
        return None
    if not parsed.database or parsed.database == ":memory:" or parsed.query.get("mode") == "memory":
        raise BackupError("an in-memory SQLite database has nothing to back up")
    return Path(parsed.database).expanduser()


@dataclass(frozen=True)
class BackupResult:
    path: Path
    bytes: int
    pages: int


def _connect(path: Path) -> sqlite3.Connection:
    connection = sqlite3.connect(str(path), timeout=30)
    connection.execute("PRAGMA busy_timeout=30000")
    return connection


def _check(path: Path) -> int:
    """Page count of a SQLite file that passes ``PRAGMA quick_check`` and holds this app's
    schema (an ``alembic_version`` row); :class:`BackupError` otherwise."""
    try:
        with path.open("rb") as handle:
            header = handle.read(len(SQLITE_HEADER))
    except OSError as error:
        raise BackupError(f"{path}: cannot read it ({error.strerror})") from None
    if header != SQLITE_HEADER:
        raise BackupError(f"{path}: not a SQLite database")
    connection = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        verdict = connection.execute("PRAGMA quick_check").fetchone()[0]
        if verdict != "ok":
            raise BackupError(f"{path}: the database is damaged ({verdict})")
        try:
            revision = connection.execute("SELECT version_num FROM alembic_version").fetchone()
        except sqlite3.DatabaseError:
            revision = None
        if revision is None:
            raise BackupError(f"{path}: not a Role Review database (no schema version)")
        return int(connection.execute("PRAGMA page_count").fetchone()[0])
    finally:
        connection.close()


def backup_sqlite(source: Path, target: Path) -> BackupResult:
    """A consistent copy of the live database ``source`` at ``target`` (replaced if it exists)."""
    if not source.exists():
        raise BackupError(f"{source}: no database there")
    if target.resolve() == source.resolve():
        raise BackupError(f"{target}: that is the database itself")
    if target.is_dir():
        raise BackupError(f"{target}: is a directory; give a file name")
    if not target.parent.is_dir():
        raise BackupError(f"{target.parent}: no such directory")
    partial = target.with_name(f".{target.name}.partial")
    partial.unlink(missing_ok=True)
    live = _connect(source)
    try:
        copy = sqlite3.connect(str(partial))
        try:
            live.backup(copy)
            copy.execute("PRAGMA journal_mode=DELETE")  # one self-contained file
        finally:
            copy.close()
    finally:
        live.close()
    pages = _check(partial)
    with partial.open("rb") as handle:
        os.fsync(handle.fileno())
    os.replace(partial, target)
    return BackupResult(target, target.stat().st_size, pages)


def restore_marker(database: Path) -> Path:
    """The file a running restore of ``database`` holds locked (``<database>.restoring``)."""
    return database.with_name(database.name + ".restoring")


def restore_running(database: Path) -> bool:
    """Whether a restore into ``database`` runs now: its marker exists and is locked (a
    marker left by a restore that crashed is not locked, and does not count)."""
    try:
        descriptor = os.open(restore_marker(database), os.O_RDONLY)
    except FileNotFoundError:
        return False
    except OSError:
        return False
    try:
        fcntl.flock(descriptor, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    finally:
        os.close(descriptor)
    return False


@contextmanager
def _restoring(database: Path) -> Iterator[None]:
    """Hold ``database``'s restore marker locked for the block (one restore at a time)."""
    marker = restore_marker(database)
    descriptor = os.open(marker, os.O_CREAT | os.O_RDWR, 0o600)
    try:
        try:
            fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise BackupError(f"{database}: another restore into it is running") from None
        try:
            yield
        finally:
            marker.unlink(missing_ok=True)
    finally:
        os.close(descriptor)


def restore_sqlite(backup: Path, target: Path) -> Path:
    """Copy ``backup`` into the database ``target``; returns where the previous content
    was saved (``<target>.before-restore``).

    No save is lost: while this runs, every transaction that may write to ``target``
    through this app's engines is refused with "a restore is running" (see
    :func:`restore_running`); the ones already running are waited for (their write lock
    is taken and given back once) before the current content is copied aside, so each
    acknowledged save is either in that copy or was refused."""
    _check(backup)
    saved = target.with_name(target.name + ".before-restore")
    target.parent.mkdir(parents=True, exist_ok=True)
    with _restoring(target):
        if target.exists():
            live = _connect(target)
            try:
                live.isolation_level = None
                live.execute("BEGIN IMMEDIATE")  # waits for the saves in flight
                live.execute("ROLLBACK")
            finally:
                live.close()
            backup_sqlite(target, saved)
        source = sqlite3.connect(f"file:{backup}?mode=ro", uri=True)
        try:
            live = _connect(target)
            try:
                source.backup(live)
            finally:
                live.close()
        finally:
            source.close()
    return saved


def postgres_commands(url: str, path: str) -> tuple[str, str]:
    """``(dump, restore)`` shell commands for a PostgreSQL URL (the password is not shown:
    give it with ``PGPASSWORD`` or ``~/.pgpass``)."""
    parsed = make_url(url)
    libpq = parsed.set(drivername="postgresql", password=None, query={})
    target = libpq.render_as_string(hide_password=False)
    schema_option = ""
    options = parsed.query.get("options")
    if isinstance(options, str) and "search_path=" in options:
        schema = options.split("search_path=", 1)[1].split()[0]
        schema_option = f" --schema={shlex.quote(schema)}"
    dump = (
        f"pg_dump --format=custom{schema_option} --file={shlex.quote(path)} {shlex.quote(target)}"
    )
    restore = (
        f"pg_restore --clean --if-exists --no-owner --dbname={shlex.quote(target)} "
        f"{shlex.quote(path)}"
    )
    return dump, restore
