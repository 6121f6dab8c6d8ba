"""``review-app backup`` and ``restore``: copies of the whole database.

SQLite: an online, consistent snapshot (servers keep running), restored into the
live database after its current content is saved beside it. PostgreSQL: the
``pg_dump`` / ``pg_restore`` commands to run, printed (the database server's own
tools do this better than an application can).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from review_app.errors import InputError
from review_app.services.people import Actor, require_role
from storage import backup
from storage.engine import database_url


@dataclass(frozen=True)
class BackupOutcome:
    done: bool
    """``False`` when the database is not SQLite and ``message`` gives the commands."""
    message: str


def backup_database(actor: Actor, *, db: str | None, path: Path) -> BackupOutcome:
    require_role(actor, "admin")
    url = database_url(db)
    try:
        source = backup.sqlite_path(url)
        if source is None:
            dump, restore = backup.postgres_commands(url, str(path))
            return BackupOutcome(
                False,
                "PostgreSQL is backed up with its own tools; run\n"
                f"  {dump}\nand to restore\n  {restore}",
            )
        result = backup.backup_sqlite(source, path)
    except backup.BackupError as error:
        raise InputError(str(error)) from None
    return BackupOutcome(
        True, f"backed up {source} to {result.path} ({result.pages} pages, {result.bytes} bytes)"
    )


def restore_database(actor: Actor, *, db: str | None, path: Path) -> BackupOutcome:
    require_role(actor, "admin")
    url = database_url(db)
    try:
        target = backup.sqlite_path(url)
        if target is None:
            _, restore = backup.postgres_commands(url, str(path))
            return BackupOutcome(
                False, f"PostgreSQL is restored with its own tools; run\n  {restore}"
            )
        saved = backup.restore_sqlite(path, target)
    except backup.BackupError as error:
        raise InputError(str(error)) from None
    kept = f"; its previous content is in {saved}" if saved.exists() else ""
    return BackupOutcome(True, f"restored {path} into {target}{kept}")
