"""Audit samples drawn by stratum (Neyman allocation)

Revision ID: 0026
Revises: 0017
Create Date: 2026-12-12

``audit_samples`` gains ``stratified_by`` (``position``, ``lane``, ``code`` or
``finding``: how a ``stratified`` draw split the turns); ``audit_units`` the stratum each
drawn turn was drawn from (its ``probability`` is that stratum's share drawn).
"""

from __future__ import annotations

import sqlalchemy as sa
import sqlmodel
from alembic import op


revision = '0026'
down_revision = '0017'
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table('audit_samples', schema=None) as batch_op:
        batch_op.add_column(
            sa.Column('stratified_by', sqlmodel.sql.sqltypes.AutoString(length=20), nullable=True)
        )
    with op.batch_alter_table('audit_units', schema=None) as batch_op:
        batch_op.add_column(
            sa.Column('stratum', sqlmodel.sql.sqltypes.AutoString(length=200), nullable=True)
        )


def downgrade() -> None:
    with op.batch_alter_table('audit_units', schema=None) as batch_op:
        batch_op.drop_column('stratum')
    with op.batch_alter_table('audit_samples', schema=None) as batch_op:
        batch_op.drop_column('stratified_by')
