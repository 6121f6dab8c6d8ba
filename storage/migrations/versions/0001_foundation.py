"""foundation: contracts, cases, events, evaluations, findings

Revision ID: 0001
Revises: 
Create Date: 2026-11-29
"""

from __future__ import annotations

import sqlalchemy as sa
import sqlmodel
from alembic import op


revision = '0001'
down_revision = None
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table('contracts',
    sa.Column('version', sqlmodel.sql.sqltypes.AutoString(length=200), nullable=False),
    sa.Column('sha256', sqlmodel.sql.sqltypes.AutoString(length=64), nullable=False),
    sa.Column('body_json', sa.Text(), nullable=False),
    sa.Column('created_at', sqlmodel.sql.sqltypes.UTCDateTime(), nullable=False),
    sa.PrimaryKeyConstraint('version')
    )
    op.create_table('cases',
    sa.Column('case_id', sqlmodel.sql.sqltypes.AutoString(length=200), nullable=False),
    sa.Column('chatbot_role', sa.Text(), nullable=True),
    sa.Column('contract_version', sqlmodel.sql.sqltypes.AutoString(length=200), nullable=True),
    sa.Column('n_events', sa.Integer(), nullable=False),
    sa.Column('n_assistant_turns', sa.Integer(), nullable=False),
    sa.Column('content_sha256', sqlmodel.sql.sqltypes.AutoString(length=64), nullable=False),
    sa.Column('source', sa.Text(), nullable=True),
    sa.Column('source_format', sqlmodel.sql.sqltypes.AutoString(length=40), nullable=False),
    sa.Column('extra_json', sa.Text(), nullable=True),
    sa.Column('imported_at', sqlmodel.sql.sqltypes.UTCDateTime(), nullable=False),
    sa.ForeignKeyConstraint(['contract_version'], ['contracts.version'], ),
    sa.PrimaryKeyConstraint('case_id')
    )
    with op.batch_alter_table('cases', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_cases_contract_version'), ['contract_version'], unique=False)

    op.create_table('evaluations',
    sa.Column('case_id', sqlmodel.sql.sqltypes.AutoString(length=200), nullable=False),
    sa.Column('evaluator_version', sqlmodel.sql.sqltypes.AutoString(length=20), nullable=False),
    sa.Column('status', sqlmodel.sql.sqltypes.AutoString(length=20), nullable=False),
    sa.Column('lane', sqlmodel.sql.sqltypes.AutoString(length=20), nullable=False),
    sa.Column('first_violation_turn', sa.Integer(), nullable=True),
    sa.Column('diagnostic', sa.Text(), nullable=False),
    sa.Column('role_spans_json', sa.Text(), nullable=False),
    sa.Column('n_fixture_errors', sa.Integer(), nullable=False),
    sa.Column('n_violations', sa.Integer(), nullable=False),
    sa.Column('n_harness_findings', sa.Integer(), nullable=False),
    sa.Column('evaluated_at', sqlmodel.sql.sqltypes.UTCDateTime(), nullable=False),
    sa.ForeignKeyConstraint(['case_id'], ['cases.case_id'], ),
    sa.PrimaryKeyConstraint('case_id', 'evaluator_version')
    )
    with op.batch_alter_table('evaluations', schema=None) as batch_op:
        batch_op.create_index('ix_evaluations_version_lane', ['evaluator_version', 'lane'], unique=False)

    op.create_table('events',
    sa.Column('case_id', sqlmodel.sql.sqltypes.AutoString(length=200), nullable=False),
    sa.Column('seq', sa.Integer(), nullable=False),
    sa.Column('turn', sa.Integer(), nullable=False),
    sa.Column('actor', sqlmodel.sql.sqltypes.AutoString(length=20), nullable=False),
    sa.Column('text', sa.Text(), nullable=True),
    sa.Column('actions_json', sa.Text(), nullable=True),
    sa.Column('set_role', sa.Text(), nullable=True),
    sa.Column('request_json', sa.Text(), nullable=True),
    sa.Column('extra_json', sa.Text(), nullable=True),
    sa.ForeignKeyConstraint(['case_id'], ['cases.case_id'], ),
    sa.PrimaryKeyConstraint('case_id', 'seq')
    )
    op.create_table('findings',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('case_id', sqlmodel.sql.sqltypes.AutoString(length=200), nullable=False),
    sa.Column('evaluator_version', sqlmodel.sql.sqltypes.AutoString(length=20), nullable=False),
    sa.Column('kind', sqlmodel.sql.sqltypes.AutoString(length=20), nullable=False),
    sa.Column('code', sqlmodel.sql.sqltypes.AutoString(length=60), nullable=False),
    sa.Column('turn', sa.Integer(), nullable=True),
    sa.Column('detail_json', sa.Text(), nullable=False),
    sa.ForeignKeyConstraint(['case_id'], ['cases.case_id'], ),
    sa.PrimaryKeyConstraint('id')
    )
    with op.batch_alter_table('findings', schema=None) as batch_op:
        batch_op.create_index('ix_findings_case_version', ['case_id', 'evaluator_version'], unique=False)



def downgrade() -> None:
    with op.batch_alter_table('findings', schema=None) as batch_op:
        batch_op.drop_index('ix_findings_case_version')

    op.drop_table('findings')
    op.drop_table('events')
    with op.batch_alter_table('evaluations', schema=None) as batch_op:
        batch_op.drop_index('ix_evaluations_version_lane')

    op.drop_table('evaluations')
    with op.batch_alter_table('cases', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_cases_contract_version'))

    op.drop_table('cases')
    op.drop_table('contracts')
