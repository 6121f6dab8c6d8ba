"""Audit samples: uniform random draws of turns whose gold makes a random sample

Revision ID: 0008
Revises: 0007
Create Date: 2026-11-30
"""

from __future__ import annotations

import sqlalchemy as sa
import sqlmodel
from alembic import op


revision = '0008'
down_revision = '0007'
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table('audit_samples',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('rubric_id', sqlmodel.sql.sqltypes.AutoString(length=100), nullable=False),
    sa.Column('rubric_version', sa.Integer(), nullable=False),
    sa.Column('seed', sa.Integer(), nullable=False),
    sa.Column('size', sa.Integer(), nullable=False),
    sa.Column('population', sa.Integer(), nullable=False),
    sa.Column('created_by', sa.Integer(), nullable=True),
    sa.Column('created_at', sqlmodel.sql.sqltypes.UTCDateTime(), nullable=False),
    sa.ForeignKeyConstraint(['created_by'], ['reviewers.id'], ),
    sa.PrimaryKeyConstraint('id')
    )
    op.create_table('audit_units',
    sa.Column('sample_id', sa.Integer(), nullable=False),
    sa.Column('case_id', sqlmodel.sql.sqltypes.AutoString(length=200), nullable=False),
    sa.Column('turn', sa.Integer(), nullable=False),
    sa.ForeignKeyConstraint(['case_id'], ['cases.case_id'], ),
    sa.ForeignKeyConstraint(['sample_id'], ['audit_samples.id'], ),
    sa.PrimaryKeyConstraint('sample_id', 'case_id', 'turn')
    )


def downgrade() -> None:
    op.drop_table('audit_units')
    op.drop_table('audit_samples')
