"""gold labels from adjudication

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-29
"""

from __future__ import annotations

import sqlalchemy as sa
import sqlmodel
from alembic import op


revision = '0003'
down_revision = '0002'
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table('gold_labels',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('case_id', sqlmodel.sql.sqltypes.AutoString(length=200), nullable=False),
    sa.Column('turn', sa.Integer(), nullable=False),
    sa.Column('rubric_id', sqlmodel.sql.sqltypes.AutoString(length=100), nullable=False),
    sa.Column('rubric_version', sa.Integer(), nullable=False),
    sa.Column('code', sqlmodel.sql.sqltypes.AutoString(length=100), nullable=False),
    sa.Column('note', sa.Text(), nullable=True),
    sa.Column('calibration_item', sa.Boolean(), nullable=False),
    sa.Column('rubric_ambiguity', sa.Text(), nullable=True),
    sa.Column('adjudicator_id', sa.Integer(), nullable=True),
    sa.Column('current', sa.Boolean(), nullable=False),
    sa.Column('created_at', sqlmodel.sql.sqltypes.UTCDateTime(), nullable=False),
    sa.ForeignKeyConstraint(['adjudicator_id'], ['reviewers.id'], ),
    sa.ForeignKeyConstraint(['case_id'], ['cases.case_id'], ),
    sa.PrimaryKeyConstraint('id')
    )
    with op.batch_alter_table('gold_labels', schema=None) as batch_op:
        batch_op.create_index('ix_gold_rubric_case_turn', ['rubric_id', 'rubric_version', 'case_id', 'turn'], unique=False)



def downgrade() -> None:
    with op.batch_alter_table('gold_labels', schema=None) as batch_op:
        batch_op.drop_index('ix_gold_rubric_case_turn')

    op.drop_table('gold_labels')
