"""Background jobs: judge runs executed by a worker off the page, with a lease

Revision ID: 0016
Revises: 0015
Create Date: 2026-12-02

One row per job: its kind, parameters (no secrets), who started it, status, progress,
and a lease (owner, expiry, heartbeat) so that exactly one worker executes it and
another resumes it when the lease runs out (storage/jobs.py).
"""

from __future__ import annotations

import sqlalchemy as sa
import sqlmodel
from alembic import op


revision = '0016'
down_revision = '0015'
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table('background_jobs',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('kind', sqlmodel.sql.sqltypes.AutoString(length=40), nullable=False),
    sa.Column('parameters_json', sa.Text(), nullable=False),
    sa.Column('created_by', sqlmodel.sql.sqltypes.AutoString(length=200), nullable=False),
    sa.Column('created_by_id', sa.Integer(), nullable=True),
    sa.Column('status', sqlmodel.sql.sqltypes.AutoString(length=20), nullable=False),
    sa.Column('progress_done', sa.Integer(), nullable=False),
    sa.Column('progress_total', sa.Integer(), nullable=True),
    sa.Column('error', sa.Text(), nullable=True),
    sa.Column('result_json', sa.Text(), nullable=True),
    sa.Column('lease_owner', sqlmodel.sql.sqltypes.AutoString(length=200), nullable=True),
    sa.Column('lease_expires_at', sqlmodel.sql.sqltypes.UTCDateTime(), nullable=True),
    sa.Column('heartbeat_at', sqlmodel.sql.sqltypes.UTCDateTime(), nullable=True),
    sa.Column('claims', sa.Integer(), nullable=False),
    sa.Column('created_at', sqlmodel.sql.sqltypes.UTCDateTime(), nullable=False),
    sa.Column('started_at', sqlmodel.sql.sqltypes.UTCDateTime(), nullable=True),
    sa.Column('finished_at', sqlmodel.sql.sqltypes.UTCDateTime(), nullable=True),
    sa.ForeignKeyConstraint(['created_by_id'], ['reviewers.id'], ),
    sa.PrimaryKeyConstraint('id')
    )
    op.create_index('ix_background_jobs_status', 'background_jobs', ['status', 'id'])


def downgrade() -> None:
    op.drop_index('ix_background_jobs_status', table_name='background_jobs')
    op.drop_table('background_jobs')
