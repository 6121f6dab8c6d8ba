"""Computed reports: heavy reports stored for the state of the data they read

Revision ID: 0017
Revises: 0016
Create Date: 2026-12-09

One row per report key (kind, rubric version, parameters): the data token it was
computed for, its payload (JSON), how long computing it took and when. Every server reads it before
computing a report again, and replaces it when the token changed
(review_app/services/reports/report_store.py, storage/reports.py). An index on the cases'
import time keeps the cases' part of that token cheap.
"""

from __future__ import annotations

import sqlalchemy as sa
import sqlmodel
from alembic import op


revision = '0017'
down_revision = '0016'
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table('computed_reports',
    sa.Column('key', sqlmodel.sql.sqltypes.AutoString(length=500), nullable=False),
    sa.Column('kind', sqlmodel.sql.sqltypes.AutoString(length=40), nullable=False),
    sa.Column('rubric_id', sqlmodel.sql.sqltypes.AutoString(length=100), nullable=False),
    sa.Column('rubric_version', sa.Integer(), nullable=False),
    sa.Column('token', sa.Text(), nullable=False),
    sa.Column('payload_json', sa.Text(), nullable=False),
    sa.Column('seconds', sa.Float(), nullable=False),
    sa.Column('computed_at', sqlmodel.sql.sqltypes.UTCDateTime(), nullable=False),
    sa.PrimaryKeyConstraint('key')
    )
    # The cases' token (storage/cases.py: cases_token) reads the latest import time.
    op.create_index('ix_cases_imported_at', 'cases', ['imported_at'])


def downgrade() -> None:
    op.drop_index('ix_cases_imported_at', table_name='cases')
    op.drop_table('computed_reports')
