"""Rubric carry-over: carried labels, gold, judge runs and verdicts; the re-review queue

Revision ID: 0013
Revises: 0012
Create Date: 2026-12-02

Publishing version N+1 of a rubric copies the rows whose code keeps its meaning
(``same`` / ``reworded``) into N+1. Each copy points at its source
(``carried_from_id``, unique: nothing is carried twice) and at its publication
(``carry_id`` -> ``rubric_carries``). Units whose code changed meaning go to
``re_reviews``. Plain integer columns (no foreign keys) so that SQLite adds them in
place instead of rebuilding the labels table.
"""

from __future__ import annotations

import sqlalchemy as sa
import sqlmodel
from alembic import op


revision = '0013'
down_revision = '0012'
branch_labels = None
depends_on = None

CARRIED = {
    'labels': ('carried_from_id', 'ux_labels_carried_from'),
    'gold_labels': ('carried_from_id', 'ux_gold_carried_from'),
    'judge_runs': ('carried_from_run_id', 'ux_judge_runs_carried_from'),
    'judge_verdicts': ('carried_from_id', 'ux_judge_verdicts_carried_from'),
}
WITH_CARRY_ID = ('labels', 'gold_labels', 'judge_runs')


def upgrade() -> None:
    op.create_table('rubric_carries',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('rubric_id', sqlmodel.sql.sqltypes.AutoString(length=100), nullable=False),
    sa.Column('from_version', sa.Integer(), nullable=False),
    sa.Column('to_version', sa.Integer(), nullable=False),
    sa.Column('actor', sqlmodel.sql.sqltypes.AutoString(length=200), nullable=False),
    sa.Column('at', sqlmodel.sql.sqltypes.UTCDateTime(), nullable=False),
    sa.Column('summary_json', sa.Text(), nullable=False),
    sa.PrimaryKeyConstraint('id')
    )
    op.create_index('ix_rubric_carries_rubric', 'rubric_carries', ['rubric_id', 'to_version'])
    op.create_table('re_reviews',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('carry_id', sa.Integer(), nullable=False),
    sa.Column('reviewer_id', sa.Integer(), nullable=False),
    sa.Column('rubric_id', sqlmodel.sql.sqltypes.AutoString(length=100), nullable=False),
    sa.Column('rubric_version', sa.Integer(), nullable=False),
    sa.Column('case_id', sqlmodel.sql.sqltypes.AutoString(length=200), nullable=False),
    sa.Column('turn', sa.Integer(), nullable=False),
    sa.Column('old_label_id', sa.Integer(), nullable=False),
    sa.Column('old_code', sqlmodel.sql.sqltypes.AutoString(length=100), nullable=False),
    sa.ForeignKeyConstraint(['carry_id'], ['rubric_carries.id'], ),
    sa.ForeignKeyConstraint(['case_id'], ['cases.case_id'], ),
    sa.ForeignKeyConstraint(['old_label_id'], ['labels.id'], ),
    sa.ForeignKeyConstraint(['reviewer_id'], ['reviewers.id'], ),
    sa.PrimaryKeyConstraint('id')
    )
    op.create_index('ux_re_reviews_old_label', 're_reviews', ['old_label_id'], unique=True)
    op.create_index(
        'ix_re_reviews_reviewer', 're_reviews', ['reviewer_id', 'rubric_id', 'rubric_version']
    )
    for table, (column, index) in CARRIED.items():
        op.add_column(table, sa.Column(column, sa.Integer(), nullable=True))
        op.create_index(index, table, [column], unique=True)
    for table in WITH_CARRY_ID:
        op.add_column(table, sa.Column('carry_id', sa.Integer(), nullable=True))


def downgrade() -> None:
    for table in WITH_CARRY_ID:
        with op.batch_alter_table(table) as batch_op:
            batch_op.drop_column('carry_id')
    for table, (column, index) in CARRIED.items():
        op.drop_index(index, table_name=table)
        with op.batch_alter_table(table) as batch_op:
            batch_op.drop_column(column)
    op.drop_index('ix_re_reviews_reviewer', table_name='re_reviews')
    op.drop_index('ux_re_reviews_old_label', table_name='re_reviews')
    op.drop_table('re_reviews')
    op.drop_index('ix_rubric_carries_rubric', table_name='rubric_carries')
    op.drop_table('rubric_carries')
