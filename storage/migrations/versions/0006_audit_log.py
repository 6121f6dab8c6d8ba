"""Audit log: who changed (or exported) what, and when

Revision ID: 0006
Revises: 0005
Create Date: 2026-11-30
"""

from __future__ import annotations

import sqlalchemy as sa
import sqlmodel
from alembic import op


revision = '0006'
down_revision = '0005'
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table('audit_log',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('at', sqlmodel.sql.sqltypes.UTCDateTime(), nullable=False),
    sa.Column('actor', sqlmodel.sql.sqltypes.AutoString(length=200), nullable=False),
    sa.Column('action', sqlmodel.sql.sqltypes.AutoString(length=60), nullable=False),
    sa.Column('object_type', sqlmodel.sql.sqltypes.AutoString(length=60), nullable=False),
    sa.Column('object_key', sa.Text(), nullable=True),
    sa.Column('summary_json', sa.Text(), nullable=False),
    sa.PrimaryKeyConstraint('id')
    )
    with op.batch_alter_table('audit_log', schema=None) as batch_op:
        batch_op.create_index('ix_audit_log_at', ['at'], unique=False)
        batch_op.create_index('ix_audit_log_actor_at', ['actor', 'at'], unique=False)


def downgrade() -> None:
    with op.batch_alter_table('audit_log', schema=None) as batch_op:
        batch_op.drop_index('ix_audit_log_actor_at')
        batch_op.drop_index('ix_audit_log_at')
    op.drop_table('audit_log')
