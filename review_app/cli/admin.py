"""Looking after the database: the ``audit`` log, ``backup`` and ``restore``."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from review_app.cli.output import print_listing, terminal_safe
from review_app.cli.shared import DbOption, JsonOption, open_engine, operator


def audit(
    since: Annotated[
        str | None,
        typer.Option("--since", metavar="ISO", help="Only entries at or after this UTC time."),
    ] = None,
    actor: Annotated[
        str | None, typer.Option("--actor", metavar="NAME", help="Only this person's entries.")
    ] = None,
    action: Annotated[
        str | None,
        typer.Option("--action", metavar="A", help="Only this action (label, gold, export...)."),
    ] = None,
    limit: Annotated[
        int | None, typer.Option("--limit", min=1, help="At most this many entries.")
    ] = None,
    as_json: JsonOption = False,
    db: DbOption = None,
) -> None:
    """The audit log, newest first: who changed or exported what, and when.

    Entries: label and gold changes, case imports (with the file's sha256) and
    --replace, label and verdict imports, rubric publication, exports, people and
    role changes, assignments, calibration fits. See docs/reference.md, "Audit log".
    """
    from review_app.services.operations.audit import audit_entries, audit_line, parse_since

    engine = open_engine(db)
    moment = parse_since(since) if since else None
    entries = audit_entries(engine, operator(), since=moment, by=actor, action=action, limit=limit)
    print_listing(
        entries,
        as_json=as_json,
        line=lambda entry: terminal_safe(audit_line(entry)),
        empty="no audit entries",
    )


def backup(
    path: Annotated[Path, typer.Argument(metavar="PATH", help="The backup file to write.")],
    db: DbOption = None,
) -> None:
    """Back up the database: a consistent SQLite snapshot while servers keep running
    (PostgreSQL: prints the pg_dump command to run)."""
    from review_app.services.operations.backup import backup_database

    outcome = backup_database(operator(), db=db, path=path)
    typer.echo(outcome.message)


def restore(
    path: Annotated[Path, typer.Argument(metavar="PATH", help="A file written by backup.")],
    db: DbOption = None,
) -> None:
    """Restore a backup into the database; the current content is saved first as
    <database>.before-restore (PostgreSQL: prints the pg_restore command to run)."""
    from review_app.services.operations.backup import restore_database

    outcome = restore_database(operator(), db=db, path=path)
    if outcome.done:
        open_engine(db)  # an older backup is migrated now, not by the next command
    typer.echo(outcome.message)
