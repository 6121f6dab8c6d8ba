"""One current label per reviewer and unit, one current gold label per unit; stale flags

Revision ID: 0005
Revises: 0004
Create Date: 2026-11-30

Before the unique indexes can exist, units that already hold several current rows
(concurrent saves on PostgreSQL could leave them) are repaired: the latest row
(highest id) stays current, the others become history. No row is deleted.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = '0005'
down_revision = '0004'
branch_labels = None
depends_on = None

LABEL_UNIT = ('rubric_id', 'rubric_version', 'case_id', 'turn', 'reviewer_id')
GOLD_UNIT = ('rubric_id', 'rubric_version', 'case_id', 'turn')


def _repair(table: str, unit: tuple[str, ...]) -> None:
    same_unit = ' AND '.join(f'later.{column} = {table}.{column}' for column in unit)
    op.execute(
        f'UPDATE {table} SET current = false WHERE current AND EXISTS ('
        f'SELECT 1 FROM {table} AS later WHERE later.current AND {same_unit} '
        f'AND later.id > {table}.id)'
    )


def upgrade() -> None:
    for table in ('labels', 'gold_labels'):
        op.add_column(
            table, sa.Column('stale', sa.Boolean(), nullable=False, server_default=sa.false())
        )
    _repair('labels', LABEL_UNIT)
    _repair('gold_labels', GOLD_UNIT)
    op.create_index(
        'ux_labels_current_unit',
        'labels',
        list(LABEL_UNIT),
        unique=True,
        sqlite_where=sa.text('current'),
        postgresql_where=sa.text('current'),
    )
    op.create_index(
        'ux_gold_current_unit',
        'gold_labels',
        list(GOLD_UNIT),
        unique=True,
        sqlite_where=sa.text('current'),
        postgresql_where=sa.text('current'),
    )


def downgrade() -> None:
    op.drop_index('ux_gold_current_unit', table_name='gold_labels')
    op.drop_index('ux_labels_current_unit', table_name='labels')
    with op.batch_alter_table('gold_labels') as batch_op:
        batch_op.drop_column('stale')
    with op.batch_alter_table('labels') as batch_op:
        batch_op.drop_column('stale')
