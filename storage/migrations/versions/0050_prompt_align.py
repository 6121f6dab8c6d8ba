"""Suggesting a prompt: confirmation sets with their error budget, align candidates and
the optimiser's answers

Revision ID: 0050
Revises: 0023
Create Date: 2026-12-05

``confirmation_sets`` holds the gold units of a rubric version no optimiser may see;
``confirmation_tests`` the share of a set's error budget each test spent (one slot per
test number, one test per align job: the database refuses a second). ``align_candidates``
ties each prompt version an align job proposed to the job, with its optimisation-set
score; ``align_proposals`` keeps the optimiser's answers, so a resumed job replays them
(docs/reference.md, "Suggesting a prompt").
"""

from __future__ import annotations

import sqlalchemy as sa
import sqlmodel
from alembic import op


revision = '0050'
down_revision = '0023'
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table('confirmation_sets',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('rubric_id', sqlmodel.sql.sqltypes.AutoString(length=100), nullable=False),
    sa.Column('rubric_version', sa.Integer(), nullable=False),
    sa.Column('units_json', sa.Text(), nullable=False),
    sa.Column('units_sha256', sqlmodel.sql.sqltypes.AutoString(length=64), nullable=False),
    sa.Column('alpha', sa.Float(), nullable=False),
    sa.Column('max_tests', sa.Integer(), nullable=False),
    sa.Column('source', sqlmodel.sql.sqltypes.AutoString(length=40), nullable=False),
    sa.Column('created_by', sqlmodel.sql.sqltypes.AutoString(length=200), nullable=False),
    sa.Column('created_at', sqlmodel.sql.sqltypes.UTCDateTime(), nullable=False),
    sa.CheckConstraint('alpha > 0 AND alpha < 1', name='ck_confirmation_sets_alpha'),
    sa.CheckConstraint('max_tests >= 1', name='ck_confirmation_sets_max_tests'),
    sa.PrimaryKeyConstraint('id')
    )
    op.create_index('ix_confirmation_sets_rubric', 'confirmation_sets',
                    ['rubric_id', 'rubric_version', 'id'])
    op.create_table('confirmation_tests',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('set_id', sa.Integer(), nullable=False),
    sa.Column('number', sa.Integer(), nullable=False),
    sa.Column('alpha_spent', sa.Float(), nullable=False),
    sa.Column('p_value', sa.Float(), nullable=True),
    sa.Column('kind', sqlmodel.sql.sqltypes.AutoString(length=20), nullable=False),
    sa.Column('job_id', sa.Integer(), nullable=True),
    sa.Column('first', sqlmodel.sql.sqltypes.AutoString(length=200), nullable=False),
    sa.Column('second', sqlmodel.sql.sqltypes.AutoString(length=200), nullable=False),
    sa.Column('verdict', sqlmodel.sql.sqltypes.AutoString(length=40), nullable=False),
    sa.Column('created_by', sqlmodel.sql.sqltypes.AutoString(length=200), nullable=False),
    sa.Column('created_at', sqlmodel.sql.sqltypes.UTCDateTime(), nullable=False),
    sa.CheckConstraint('number >= 1', name='ck_confirmation_tests_number'),
    sa.CheckConstraint('alpha_spent > 0 AND alpha_spent < 1', name='ck_confirmation_tests_alpha'),
    sa.ForeignKeyConstraint(['set_id'], ['confirmation_sets.id'], ),
    sa.ForeignKeyConstraint(['job_id'], ['background_jobs.id'], ),
    sa.PrimaryKeyConstraint('id')
    )
    op.create_index('ux_confirmation_tests_number', 'confirmation_tests', ['set_id', 'number'],
                    unique=True)
    op.create_index('ux_confirmation_tests_job', 'confirmation_tests', ['set_id', 'job_id'],
                    unique=True)
    op.create_table('align_candidates',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('job_id', sa.Integer(), nullable=False),
    sa.Column('prompt_id', sa.Integer(), nullable=False),
    sa.Column('optimisation_score', sa.Float(), nullable=True),
    sa.Column('scored_units', sa.Integer(), nullable=False),
    sa.Column('created_at', sqlmodel.sql.sqltypes.UTCDateTime(), nullable=False),
    sa.ForeignKeyConstraint(['job_id'], ['background_jobs.id'], ),
    sa.ForeignKeyConstraint(['prompt_id'], ['judge_prompts.id'], ),
    sa.PrimaryKeyConstraint('id')
    )
    op.create_index('ux_align_candidates_job_prompt', 'align_candidates', ['job_id', 'prompt_id'],
                    unique=True)
    op.create_table('align_proposals',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('job_id', sa.Integer(), nullable=False),
    sa.Column('request_sha256', sqlmodel.sql.sqltypes.AutoString(length=64), nullable=False),
    sa.Column('answer', sa.Text(), nullable=False),
    sa.Column('created_at', sqlmodel.sql.sqltypes.UTCDateTime(), nullable=False),
    sa.ForeignKeyConstraint(['job_id'], ['background_jobs.id'], ),
    sa.PrimaryKeyConstraint('id')
    )
    op.create_index('ux_align_proposals_request', 'align_proposals', ['job_id', 'request_sha256'],
                    unique=True)


def downgrade() -> None:
    op.drop_index('ux_align_proposals_request', table_name='align_proposals')
    op.drop_table('align_proposals')
    op.drop_index('ux_align_candidates_job_prompt', table_name='align_candidates')
    op.drop_table('align_candidates')
    op.drop_index('ux_confirmation_tests_job', table_name='confirmation_tests')
    op.drop_index('ux_confirmation_tests_number', table_name='confirmation_tests')
    op.drop_table('confirmation_tests')
    op.drop_index('ix_confirmation_sets_rubric', table_name='confirmation_sets')
    op.drop_table('confirmation_sets')
