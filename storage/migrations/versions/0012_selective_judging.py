"""Certified judge verdicts (judge route --apply) and audit samples drawn by uncertainty

Revision ID: 0012
Revises: 0010
Create Date: 2026-12-02

``certified_verdicts``: the units a judge decides under a certified threshold, with the
alpha, delta and run. ``audit_samples`` gains its design (``uniform`` for every earlier
sample), the judge run and mix of an uncertainty draw and its expected size;
``audit_units`` the probability each drawn turn had.
"""

from __future__ import annotations

import sqlalchemy as sa
import sqlmodel
from alembic import op


revision = '0012'
down_revision = '0010'
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table('certified_verdicts',
    sa.Column('rubric_id', sqlmodel.sql.sqltypes.AutoString(length=100), nullable=False),
    sa.Column('rubric_version', sa.Integer(), nullable=False),
    sa.Column('case_id', sqlmodel.sql.sqltypes.AutoString(length=200), nullable=False),
    sa.Column('turn', sa.Integer(), nullable=False),
    sa.Column('run_id', sa.Integer(), nullable=False),
    sa.Column('label', sqlmodel.sql.sqltypes.AutoString(length=100), nullable=False),
    sa.Column('confidence', sa.Float(), nullable=False),
    sa.Column('threshold', sa.Float(), nullable=False),
    sa.Column('alpha', sa.Float(), nullable=False),
    sa.Column('delta', sa.Float(), nullable=False),
    sa.Column('created_by', sa.Integer(), nullable=True),
    sa.Column('created_at', sqlmodel.sql.sqltypes.UTCDateTime(), nullable=False),
    sa.ForeignKeyConstraint(['case_id'], ['cases.case_id'], ),
    sa.ForeignKeyConstraint(['created_by'], ['reviewers.id'], ),
    sa.ForeignKeyConstraint(['run_id'], ['judge_runs.id'], ),
    sa.PrimaryKeyConstraint('rubric_id', 'rubric_version', 'case_id', 'turn')
    )
    with op.batch_alter_table('audit_samples', schema=None) as batch_op:
        batch_op.add_column(
            sa.Column('design', sqlmodel.sql.sqltypes.AutoString(length=20), nullable=False,
                      server_default='uniform')
        )
        batch_op.add_column(sa.Column('run_id', sa.Integer(), nullable=True))
        batch_op.add_column(sa.Column('mix', sa.Float(), nullable=True))
        batch_op.add_column(sa.Column('expected_size', sa.Float(), nullable=True))
        batch_op.create_foreign_key(
            'fk_audit_samples_run_id', 'judge_runs', ['run_id'], ['id']
        )
    with op.batch_alter_table('audit_units', schema=None) as batch_op:
        batch_op.add_column(sa.Column('probability', sa.Float(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table('audit_units', schema=None) as batch_op:
        batch_op.drop_column('probability')
    with op.batch_alter_table('audit_samples', schema=None) as batch_op:
        batch_op.drop_constraint('fk_audit_samples_run_id', type_='foreignkey')
        batch_op.drop_column('expected_size')
        batch_op.drop_column('mix')
        batch_op.drop_column('run_id')
        batch_op.drop_column('design')
    op.drop_table('certified_verdicts')
