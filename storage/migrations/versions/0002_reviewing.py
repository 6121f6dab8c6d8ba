"""reviewers, rubric versions, assignments, labels

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-29
"""

from __future__ import annotations

import sqlalchemy as sa
import sqlmodel
from alembic import op


revision = '0002'
down_revision = '0001'
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table('reviewers',
    sa.Column('name', sqlmodel.sql.sqltypes.AutoString(length=200), nullable=False),
    sa.Column('display_name', sqlmodel.sql.sqltypes.AutoString(length=200), nullable=True),
    sa.Column('role', sqlmodel.sql.sqltypes.AutoString(length=20), nullable=False),
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('active', sa.Boolean(), nullable=False),
    sa.Column('created_at', sqlmodel.sql.sqltypes.UTCDateTime(), nullable=False),
    sa.PrimaryKeyConstraint('id')
    )
    with op.batch_alter_table('reviewers', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_reviewers_name'), ['name'], unique=True)

    op.create_table('rubric_versions',
    sa.Column('rubric_id', sqlmodel.sql.sqltypes.AutoString(length=100), nullable=False),
    sa.Column('version', sa.Integer(), nullable=False),
    sa.Column('sha256', sqlmodel.sql.sqltypes.AutoString(length=64), nullable=False),
    sa.Column('title', sa.Text(), nullable=False),
    sa.Column('body_json', sa.Text(), nullable=False),
    sa.Column('source', sa.Text(), nullable=True),
    sa.Column('loaded_at', sqlmodel.sql.sqltypes.UTCDateTime(), nullable=False),
    sa.PrimaryKeyConstraint('rubric_id', 'version')
    )
    op.create_table('assignments',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('case_id', sqlmodel.sql.sqltypes.AutoString(length=200), nullable=False),
    sa.Column('reviewer_id', sa.Integer(), nullable=False),
    sa.Column('rubric_id', sqlmodel.sql.sqltypes.AutoString(length=100), nullable=False),
    sa.Column('rubric_version', sa.Integer(), nullable=False),
    sa.Column('assigned_by', sa.Integer(), nullable=True),
    sa.Column('created_at', sqlmodel.sql.sqltypes.UTCDateTime(), nullable=False),
    sa.Column('labeled_turns', sa.Integer(), nullable=False),
    sa.Column('completed_at', sqlmodel.sql.sqltypes.UTCDateTime(), nullable=True),
    sa.ForeignKeyConstraint(['assigned_by'], ['reviewers.id'], ),
    sa.ForeignKeyConstraint(['case_id'], ['cases.case_id'], ),
    sa.ForeignKeyConstraint(['reviewer_id'], ['reviewers.id'], ),
    sa.PrimaryKeyConstraint('id')
    )
    with op.batch_alter_table('assignments', schema=None) as batch_op:
        batch_op.create_index('ix_assignments_rubric_case', ['rubric_id', 'rubric_version', 'case_id'], unique=False)
        batch_op.create_index('ux_assignments_reviewer_rubric_case', ['reviewer_id', 'rubric_id', 'rubric_version', 'case_id'], unique=True)

    op.create_table('labels',
    sa.Column('case_id', sqlmodel.sql.sqltypes.AutoString(length=200), nullable=False),
    sa.Column('turn', sa.Integer(), nullable=False),
    sa.Column('rubric_id', sqlmodel.sql.sqltypes.AutoString(length=100), nullable=False),
    sa.Column('rubric_version', sa.Integer(), nullable=False),
    sa.Column('code', sqlmodel.sql.sqltypes.AutoString(length=100), nullable=False),
    sa.Column('rationale', sa.Text(), nullable=True),
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('reviewer_id', sa.Integer(), nullable=False),
    sa.Column('current', sa.Boolean(), nullable=False),
    sa.Column('source', sqlmodel.sql.sqltypes.AutoString(length=20), nullable=False),
    sa.Column('created_at', sqlmodel.sql.sqltypes.UTCDateTime(), nullable=False),
    sa.ForeignKeyConstraint(['case_id'], ['cases.case_id'], ),
    sa.ForeignKeyConstraint(['reviewer_id'], ['reviewers.id'], ),
    sa.PrimaryKeyConstraint('id')
    )
    with op.batch_alter_table('labels', schema=None) as batch_op:
        batch_op.create_index('ix_labels_reviewer_case', ['reviewer_id', 'rubric_id', 'rubric_version', 'case_id'], unique=False)
        batch_op.create_index('ix_labels_rubric_case_turn', ['rubric_id', 'rubric_version', 'case_id', 'turn'], unique=False)



def downgrade() -> None:
    with op.batch_alter_table('labels', schema=None) as batch_op:
        batch_op.drop_index('ix_labels_rubric_case_turn')
        batch_op.drop_index('ix_labels_reviewer_case')

    op.drop_table('labels')
    with op.batch_alter_table('assignments', schema=None) as batch_op:
        batch_op.drop_index('ux_assignments_reviewer_rubric_case')
        batch_op.drop_index('ix_assignments_rubric_case')

    op.drop_table('assignments')
    op.drop_table('rubric_versions')
    with op.batch_alter_table('reviewers', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_reviewers_name'))

    op.drop_table('reviewers')
