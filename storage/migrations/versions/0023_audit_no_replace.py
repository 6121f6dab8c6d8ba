"""The audit log refuses REPLACE on SQLite: an insert over an existing id is refused

Revision ID: 0023
Revises: 0019
Create Date: 2026-12-10

SQLite carries out ``INSERT OR REPLACE`` / ``REPLACE INTO`` over an existing row by
deleting it first, and that delete fires no DELETE trigger unless ``recursive_triggers``
is on (a setting of the connection, which another program writing the file would not
set). So ``0014``'s triggers let a row be rewritten that way. A trigger before every
insert refuses one whose id is taken, whatever the conflict clause (``OR REPLACE``,
``OR IGNORE``, an upsert); new rows, whose id the database picks, go on as before.
PostgreSQL has no REPLACE, and its upsert fires the UPDATE trigger of ``0014``.
"""

from __future__ import annotations

from alembic import op


revision = '0023'
down_revision = '0019'
branch_labels = None
depends_on = None

MESSAGE = "audit_log is append-only: rows are never updated or deleted"


def upgrade() -> None:
    if op.get_bind().dialect.name != "sqlite":
        return
    op.execute(
        "CREATE TRIGGER audit_log_no_replace BEFORE INSERT ON audit_log "
        "WHEN EXISTS (SELECT 1 FROM audit_log WHERE id = NEW.id) "
        f"BEGIN SELECT RAISE(ABORT, '{MESSAGE}'); END"
    )


def downgrade() -> None:
    if op.get_bind().dialect.name != "sqlite":
        return
    op.execute("DROP TRIGGER IF EXISTS audit_log_no_replace")
