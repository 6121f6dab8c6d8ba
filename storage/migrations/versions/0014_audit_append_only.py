"""The audit log is append-only in the database: UPDATE and DELETE refused by triggers

Revision ID: 0014
Revises: 0013
Create Date: 2026-12-02

Until now ``audit_log`` was append-only by convention only. A trigger on each database
refuses any UPDATE or DELETE of its rows (raw SQL included); inserts go on as before.
Every database is created through these migrations, so every one has the triggers.
"""

from __future__ import annotations

from alembic import op


revision = '0014'
down_revision = '0013'
branch_labels = None
depends_on = None

MESSAGE = "audit_log is append-only: rows are never updated or deleted"


def upgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        op.execute(
            "CREATE FUNCTION audit_log_append_only() RETURNS trigger LANGUAGE plpgsql AS $$ "
            f"BEGIN RAISE EXCEPTION '{MESSAGE}'; END $$"
        )
        op.execute(
            "CREATE TRIGGER audit_log_append_only BEFORE UPDATE OR DELETE ON audit_log "
            "FOR EACH ROW EXECUTE FUNCTION audit_log_append_only()"
        )
        op.execute(
            "CREATE TRIGGER audit_log_no_truncate BEFORE TRUNCATE ON audit_log "
            "FOR EACH STATEMENT EXECUTE FUNCTION audit_log_append_only()"
        )
        return
    for verb in ("UPDATE", "DELETE"):
        op.execute(
            f"CREATE TRIGGER audit_log_no_{verb.lower()} BEFORE {verb} ON audit_log "
            f"BEGIN SELECT RAISE(ABORT, '{MESSAGE}'); END"
        )


def downgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        op.execute("DROP TRIGGER IF EXISTS audit_log_no_truncate ON audit_log")
        op.execute("DROP TRIGGER IF EXISTS audit_log_append_only ON audit_log")
        op.execute("DROP FUNCTION IF EXISTS audit_log_append_only()")
        return
    for verb in ("update", "delete"):
        op.execute(f"DROP TRIGGER IF EXISTS audit_log_no_{verb}")
