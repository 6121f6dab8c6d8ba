"""``review-app backup`` and ``restore``: copies of the whole database.

SQLite: an online, consistent snapshot (servers keep running), restored into the
live database after its current content is saved beside it. PostgreSQL: the
``pg_dump`` / ``pg_restore`` commands to run, printed (the database server's own
tools do this better than an application can).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sqlmodel import Session

from review_app.errors import InputError
from review_app.services.access.actors import Actor, authorize
from storage import audit, backup
from storage.engine import create_database_engine, database_url


@dataclass(frozen=True)
class BackupOutcome:
    done: bool
    """``False`` when the database is not SQLite and ``message`` gives the commands."""
    message: str


@contextmanager
def _admin_database(actor: Actor, db: str | None) -> Iterator[str]:
    """The database URL, for admins only (backups copy everyone's labels; the role is
    read from the database); a backup error in the block is an input error."""
    url = database_url(db)
    engine = create_database_engine(url)
    try:
        authorize(engine, actor, "admin")
    finally:
        engine.dispose()
    try:
        yield url
    except backup.BackupError as error:
        raise InputError(str(error)) from None


def _record(url: str, actor: Actor, *, action: str, path: Path, summary: dict[str, Any]) -> None:
    """One audit entry for a backup or a restore, in the database at ``url`` (after a
    restore: the restored one, which the log then says where it came from)."""
    engine = create_database_engine(url)
    try:
        with Session(engine) as session:
            audit.add_entry(
                session,
                actor=actor.name,
                action=action,
                object_type="file",
                object_key=str(path),
                summary=summary,
            )
            session.commit()
    finally:
        engine.dispose()


def backup_database(actor: Actor, *, db: str | None, path: Path) -> BackupOutcome:
    with _admin_database(actor, db) as url:
        source = backup.sqlite_path(url)
        if source is None:
            dump, restore = backup.postgres_commands(url, str(path))
            _record(url, actor, action="backup", path=path, summary={"done": False})
            return BackupOutcome(
                False,
                "PostgreSQL is backed up with its own tools; run\n"
                f"  {dump}\nand to restore\n  {restore}",
            )
        result = backup.backup_sqlite(source, path)
        _record(
            url,
            actor,
            action="backup",
            path=path,
            summary={"done": True, "pages": result.pages, "bytes": result.bytes},
        )
    return BackupOutcome(
        True, f"backed up {source} to {result.path} ({result.pages} pages, {result.bytes} bytes)"
    )


def restore_database(actor: Actor, *, db: str | None, path: Path) -> BackupOutcome:
    with _admin_database(actor, db) as url:
        target = backup.sqlite_path(url)
        if target is None:
            _, restore = backup.postgres_commands(url, str(path))
            _record(url, actor, action="restore", path=path, summary={"done": False})
            return BackupOutcome(
                False, f"PostgreSQL is restored with its own tools; run\n  {restore}"
            )
        saved = backup.restore_sqlite(path, target)
        _record(
            url,
            actor,
            action="restore",
            path=path,
            summary={"done": True, "before_restore": str(saved) if saved.exists() else None},
        )
    kept = f"; its previous content is in {saved}" if saved.exists() else ""
    return BackupOutcome(True, f"restored {path} into {target}{kept}")
