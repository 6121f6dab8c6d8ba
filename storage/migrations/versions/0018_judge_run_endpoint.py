"""A judge run's endpoint is part of its identity

Revision ID: 0018
Revises: 0026
Create Date: 2026-12-10

``judge_runs.endpoint`` names where the model was asked: a configured endpoint's name,
``host:port`` of a ``--base-url`` run, empty for imported verdicts. A run is now one
judge prompt version with one model at one endpoint: the same model name served
elsewhere is another run (docs/reference.md, "Judge endpoints"). Existing runs made
with ``judge run`` get the ``host:port`` of the URL they recorded.
"""

from __future__ import annotations

import json
from urllib.parse import urlsplit

import sqlalchemy as sa
import sqlmodel
from alembic import op


revision = '0018'
down_revision = '0026'
branch_labels = None
depends_on = None

IDENTITY = ['judge', 'prompt_version', 'model', 'rubric_id', 'rubric_version']


def _host(url: object) -> str:
    if not isinstance(url, str):
        return ""
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError:
        return ""
    host = parts.hostname or ""
    return f"{host}:{port}" if host and port else host


def upgrade() -> None:
    # A plain ADD COLUMN on both databases: a batch copy of judge_runs on SQLite would
    # rename the table under the judge_prompts triggers (0015) that name it.
    op.add_column(
        'judge_runs',
        sa.Column(
            'endpoint',
            sqlmodel.sql.sqltypes.AutoString(length=200),
            nullable=False,
            server_default='',
        ),
    )
    bind = op.get_bind()
    runs = bind.execute(
        sa.text("SELECT id, params_json FROM judge_runs WHERE source = 'run'")
    ).all()
    for run_id, params in runs:
        try:
            base_url = json.loads(params or "{}").get("base_url")
        except (ValueError, AttributeError):
            base_url = None
        endpoint = _host(base_url)
        if endpoint:
            bind.execute(
                sa.text("UPDATE judge_runs SET endpoint = :endpoint WHERE id = :id"),
                {"endpoint": endpoint, "id": run_id},
            )
    op.drop_index('ux_judge_runs_identity', table_name='judge_runs')
    op.create_index(
        'ux_judge_runs_identity',
        'judge_runs',
        ['judge', 'prompt_version', 'model', 'endpoint', 'rubric_id', 'rubric_version'],
        unique=True,
    )


def downgrade() -> None:
    op.drop_index('ux_judge_runs_identity', table_name='judge_runs')
    op.create_index('ux_judge_runs_identity', 'judge_runs', IDENTITY, unique=True)
    if op.get_bind().dialect.name == "sqlite":
        # SQLite's own DROP COLUMN (3.35+), not a batch copy (see upgrade)
        op.execute("ALTER TABLE judge_runs DROP COLUMN endpoint")
    else:
        op.drop_column('judge_runs', 'endpoint')
