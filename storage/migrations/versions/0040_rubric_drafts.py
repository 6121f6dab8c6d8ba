"""Rubric versions are drafts until published; drafts can be written in the app

Revision ID: 0040
Revises: 0050
Create Date: 2026-12-12

``rubric_versions`` holds every rubric version the application knows: a ``draft``
(a file in the rubrics folder not yet published, or a version written in the app)
or a ``published`` version. Only published versions act: offered for labeling,
named by assignments, a default anywhere (docs/reference.md, "Rubric drafts and
publication"). New columns: ``state``, ``origin`` (``file`` or ``app``), the YAML
text as written, who saved it, and when and by whom it was published.

Existing rows: version 1 of a rubric, a version something was carried into
(``rubric_carries``) and a version labels use are published (they have acted);
any other stored version was read from a file nobody published and is a draft.

Triggers (both databases) refuse a state other than ``draft`` and ``published`` and
turning a published version back into a draft.
"""

from __future__ import annotations

import sqlalchemy as sa
import sqlmodel
from alembic import op


revision = '0040'
down_revision = '0050'
branch_labels = None
depends_on = None

STATE_MESSAGE = "rubric_versions.state is draft or published; a published version stays published"


def upgrade() -> None:
    # Plain ADD COLUMNs on both databases (no batch copy of the table on SQLite).
    op.add_column(
        'rubric_versions',
        sa.Column('state', sa.String(length=16), nullable=False, server_default='draft'),
    )
    op.add_column(
        'rubric_versions',
        sa.Column('origin', sa.String(length=16), nullable=False, server_default='file'),
    )
    op.add_column('rubric_versions', sa.Column('yaml_text', sa.Text(), nullable=True))
    op.add_column('rubric_versions', sa.Column('saved_by', sa.String(length=200), nullable=True))
    op.add_column('rubric_versions', sa.Column('published_at', sqlmodel.sql.sqltypes.UTCDateTime(), nullable=True))
    op.add_column(
        'rubric_versions', sa.Column('published_by', sa.String(length=200), nullable=True)
    )
    op.execute(
        "UPDATE rubric_versions SET state = 'published', published_at = loaded_at "
        "WHERE version = 1 "
        "OR EXISTS (SELECT 1 FROM rubric_carries c WHERE c.rubric_id = rubric_versions.rubric_id "
        "AND c.to_version = rubric_versions.version) "
        "OR EXISTS (SELECT 1 FROM labels l WHERE l.rubric_id = rubric_versions.rubric_id "
        "AND l.rubric_version = rubric_versions.version)"
    )
    if op.get_bind().dialect.name == "postgresql":
        op.execute(
            "CREATE FUNCTION rubric_versions_state() RETURNS trigger LANGUAGE plpgsql AS $$ "
            "BEGIN IF NEW.state NOT IN ('draft', 'published') OR (TG_OP = 'UPDATE' AND "
            "OLD.state = 'published' AND NEW.state <> 'published') THEN "
            f"RAISE EXCEPTION '{STATE_MESSAGE}'; END IF; RETURN NEW; END $$"
        )
        op.execute(
            "CREATE TRIGGER rubric_versions_state BEFORE INSERT OR UPDATE ON rubric_versions "
            "FOR EACH ROW EXECUTE FUNCTION rubric_versions_state()"
        )
        return
    op.execute(
        "CREATE TRIGGER rubric_versions_state_insert BEFORE INSERT ON rubric_versions "
        "WHEN NEW.state NOT IN ('draft', 'published') "
        f"BEGIN SELECT RAISE(ABORT, '{STATE_MESSAGE}'); END"
    )
    op.execute(
        "CREATE TRIGGER rubric_versions_state_update BEFORE UPDATE ON rubric_versions "
        "WHEN NEW.state NOT IN ('draft', 'published') "
        "OR (OLD.state = 'published' AND NEW.state <> 'published') "
        f"BEGIN SELECT RAISE(ABORT, '{STATE_MESSAGE}'); END"
    )


def downgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        op.execute("DROP TRIGGER IF EXISTS rubric_versions_state ON rubric_versions")
        op.execute("DROP FUNCTION IF EXISTS rubric_versions_state()")
    else:
        op.execute("DROP TRIGGER IF EXISTS rubric_versions_state_insert")
        op.execute("DROP TRIGGER IF EXISTS rubric_versions_state_update")
    for column in ('published_by', 'published_at', 'saved_by', 'yaml_text', 'origin', 'state'):
        if op.get_bind().dialect.name == "sqlite":
            op.execute(f"ALTER TABLE rubric_versions DROP COLUMN {column}")
        else:
            op.drop_column('rubric_versions', column)
