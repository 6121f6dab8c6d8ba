"""The team's judge: a rubric version's current judge, chosen by a policy owner

Revision ID: 0019
Revises: 0018
Create Date: 2026-12-10

One row per choice (history): the rubric version, the prompt version with its model and
endpoint, the run it was chosen from, who chose it and when. The newest row of a rubric
version is its current judge; pages and commands default to it.
"""

from __future__ import annotations

import sqlalchemy as sa
import sqlmodel
from alembic import op


revision = '0019'
down_revision = '0018'
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table('team_judges',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('rubric_id', sqlmodel.sql.sqltypes.AutoString(length=100), nullable=False),
    sa.Column('rubric_version', sa.Integer(), nullable=False),
    sa.Column('judge', sqlmodel.sql.sqltypes.AutoString(length=200), nullable=False),
    sa.Column('prompt_version', sqlmodel.sql.sqltypes.AutoString(length=100), nullable=False),
    sa.Column('model', sqlmodel.sql.sqltypes.AutoString(length=200), nullable=False),
    sa.Column('endpoint', sqlmodel.sql.sqltypes.AutoString(length=200), nullable=False),
    sa.Column('run_id', sa.Integer(), nullable=False),
    sa.Column('chosen_by', sqlmodel.sql.sqltypes.AutoString(length=200), nullable=False),
    sa.Column('chosen_at', sqlmodel.sql.sqltypes.UTCDateTime(), nullable=False),
    sa.ForeignKeyConstraint(['run_id'], ['judge_runs.id'], ),
    sa.PrimaryKeyConstraint('id')
    )
    op.create_index(
        'ix_team_judges_rubric', 'team_judges', ['rubric_id', 'rubric_version', 'id']
    )


def downgrade() -> None:
    op.drop_index('ix_team_judges_rubric', table_name='team_judges')
    op.drop_table('team_judges')
