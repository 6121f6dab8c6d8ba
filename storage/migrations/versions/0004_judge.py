"""LLM judge runs and verdicts

Revision ID: 0004
Revises: 0003
Create Date: 2026-11-29
"""

from __future__ import annotations

import sqlalchemy as sa
import sqlmodel
from alembic import op


revision = '0004'
down_revision = '0003'
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table('judge_runs',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('judge', sqlmodel.sql.sqltypes.AutoString(length=200), nullable=False),
    sa.Column('prompt_version', sqlmodel.sql.sqltypes.AutoString(length=100), nullable=False),
    sa.Column('model', sqlmodel.sql.sqltypes.AutoString(length=200), nullable=False),
    sa.Column('rubric_id', sqlmodel.sql.sqltypes.AutoString(length=100), nullable=False),
    sa.Column('rubric_version', sa.Integer(), nullable=False),
    sa.Column('prompt_sha256', sqlmodel.sql.sqltypes.AutoString(length=64), nullable=True),
    sa.Column('source', sqlmodel.sql.sqltypes.AutoString(length=20), nullable=False),
    sa.Column('status', sqlmodel.sql.sqltypes.AutoString(length=20), nullable=False),
    sa.Column('params_json', sa.Text(), nullable=True),
    sa.Column('summary_json', sa.Text(), nullable=True),
    sa.Column('calibration_json', sa.Text(), nullable=True),
    sa.Column('created_at', sqlmodel.sql.sqltypes.UTCDateTime(), nullable=False),
    sa.Column('updated_at', sqlmodel.sql.sqltypes.UTCDateTime(), nullable=False),
    sa.PrimaryKeyConstraint('id')
    )
    with op.batch_alter_table('judge_runs', schema=None) as batch_op:
        batch_op.create_index('ux_judge_runs_identity', ['judge', 'prompt_version', 'model', 'rubric_id', 'rubric_version'], unique=True)

    op.create_table('judge_verdicts',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('run_id', sa.Integer(), nullable=False),
    sa.Column('case_id', sqlmodel.sql.sqltypes.AutoString(length=200), nullable=False),
    sa.Column('turn', sa.Integer(), nullable=True),
    sa.Column('label', sqlmodel.sql.sqltypes.AutoString(length=100), nullable=True),
    sa.Column('score', sa.Float(), nullable=True),
    sa.Column('reason', sa.Text(), nullable=True),
    sa.Column('error', sa.Text(), nullable=True),
    sa.Column('latency_ms', sa.Integer(), nullable=True),
    sa.Column('prompt_tokens', sa.Integer(), nullable=True),
    sa.Column('completion_tokens', sa.Integer(), nullable=True),
    sa.Column('created_at', sqlmodel.sql.sqltypes.UTCDateTime(), nullable=False),
    sa.ForeignKeyConstraint(['case_id'], ['cases.case_id'], ),
    sa.ForeignKeyConstraint(['run_id'], ['judge_runs.id'], ),
    sa.PrimaryKeyConstraint('id')
    )
    with op.batch_alter_table('judge_verdicts', schema=None) as batch_op:
        batch_op.create_index('ix_judge_verdicts_run_case', ['run_id', 'case_id', 'turn'], unique=False)



def downgrade() -> None:
    with op.batch_alter_table('judge_verdicts', schema=None) as batch_op:
        batch_op.drop_index('ix_judge_verdicts_run_case')

    op.drop_table('judge_verdicts')
    with op.batch_alter_table('judge_runs', schema=None) as batch_op:
        batch_op.drop_index('ux_judge_runs_identity')

    op.drop_table('judge_runs')
