"""Judge prompt versions in the database, immutable once a run used them

Revision ID: 0015
Revises: 0014
Create Date: 2026-12-02

``judge_prompts`` holds every version of a judge's prompt template for a rubric
(``<judge>@v<N>``): its full text, sha256, the rubric version it was written for, who
made it and when, and the version it was derived from. A trigger on each database
refuses changing the text, sha256 or name of a version (or deleting it) while a judge
run of that name exists (raw SQL included); the rubric version it was written for may
only be set once (by its first run).
"""

from __future__ import annotations

import sqlalchemy as sa
import sqlmodel
from alembic import op


revision = '0015'
down_revision = '0014'
branch_labels = None
depends_on = None

MESSAGE = "a judge prompt version is immutable once a run used it: save a new version"

# A run "of" a stored version: same rubric id, judge name and prompt version "v<N>".
USED = (
    "EXISTS (SELECT 1 FROM judge_runs WHERE judge_runs.rubric_id = OLD.rubric_id "
    "AND judge_runs.judge = OLD.judge "
    "AND judge_runs.prompt_version = 'v' || CAST(OLD.version AS TEXT))"
)


def _changed(distinct: str) -> str:
    columns = ("text", "sha256", "rubric_id", "judge", "version", "derived_from_id")
    parts = [f"NEW.{c} {distinct} OLD.{c}" for c in columns]
    parts.append(
        f"(OLD.rubric_version IS NOT NULL AND NEW.rubric_version {distinct} OLD.rubric_version)"
    )
    return "(" + " OR ".join(parts) + ")"


def upgrade() -> None:
    op.create_table('judge_prompts',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('rubric_id', sqlmodel.sql.sqltypes.AutoString(length=100), nullable=False),
    sa.Column('rubric_version', sa.Integer(), nullable=True),
    sa.Column('judge', sqlmodel.sql.sqltypes.AutoString(length=200), nullable=False),
    sa.Column('version', sa.Integer(), nullable=False),
    sa.Column('text', sa.Text(), nullable=False),
    sa.Column('sha256', sqlmodel.sql.sqltypes.AutoString(length=64), nullable=False),
    sa.Column('source', sa.Text(), nullable=True),
    sa.Column('created_by', sqlmodel.sql.sqltypes.AutoString(length=200), nullable=False),
    sa.Column('created_at', sqlmodel.sql.sqltypes.UTCDateTime(), nullable=False),
    sa.Column('derived_from_id', sa.Integer(), nullable=True),
    sa.ForeignKeyConstraint(['derived_from_id'], ['judge_prompts.id'], ),
    sa.PrimaryKeyConstraint('id')
    )
    op.create_index(
        'ux_judge_prompts_version', 'judge_prompts', ['rubric_id', 'judge', 'version'],
        unique=True,
    )
    if op.get_bind().dialect.name == "postgresql":
        op.execute(
            "CREATE FUNCTION judge_prompts_immutable() RETURNS trigger LANGUAGE plpgsql AS $$ "
            f"BEGIN IF {USED} AND (TG_OP = 'DELETE' OR {_changed('IS DISTINCT FROM')}) THEN "
            f"RAISE EXCEPTION '{MESSAGE}'; END IF; "
            "IF TG_OP = 'DELETE' THEN RETURN OLD; END IF; RETURN NEW; END $$"
        )
        op.execute(
            "CREATE TRIGGER judge_prompts_immutable BEFORE UPDATE OR DELETE ON judge_prompts "
            "FOR EACH ROW EXECUTE FUNCTION judge_prompts_immutable()"
        )
        return
    op.execute(
        "CREATE TRIGGER judge_prompts_no_update BEFORE UPDATE ON judge_prompts "
        f"WHEN {USED} AND {_changed('IS NOT')} "
        f"BEGIN SELECT RAISE(ABORT, '{MESSAGE}'); END"
    )
    op.execute(
        "CREATE TRIGGER judge_prompts_no_delete BEFORE DELETE ON judge_prompts "
        f"WHEN {USED} BEGIN SELECT RAISE(ABORT, '{MESSAGE}'); END"
    )


def downgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        op.execute("DROP TRIGGER IF EXISTS judge_prompts_immutable ON judge_prompts")
        op.execute("DROP FUNCTION IF EXISTS judge_prompts_immutable()")
    else:
        op.execute("DROP TRIGGER IF EXISTS judge_prompts_no_update")
        op.execute("DROP TRIGGER IF EXISTS judge_prompts_no_delete")
    op.drop_index('ux_judge_prompts_version', table_name='judge_prompts')
    op.drop_table('judge_prompts')
