"""A judge error's kind in its own column instead of a text prefix

Revision ID: 0010
Revises: 0009
Create Date: 2026-11-30

``judge_verdicts.error`` held ``"endpoint: ..."`` (the endpoint failed: retried by the
next run) or ``"answer: ..."`` (the judge's answer could not be parsed: kept). The kind
moves to ``error_kind`` (``endpoint`` or ``answer``) and the prefix leaves the text.
"""

from __future__ import annotations

import sqlalchemy as sa
import sqlmodel
from alembic import op


revision = '0010'
down_revision = '0009'
branch_labels = None
depends_on = None

PREFIXES = {"endpoint": "endpoint: ", "answer": "answer: "}


def upgrade() -> None:
    with op.batch_alter_table('judge_verdicts', schema=None) as batch_op:
        batch_op.add_column(
            sa.Column('error_kind', sqlmodel.sql.sqltypes.AutoString(length=20), nullable=True)
        )
    for kind, prefix in PREFIXES.items():
        op.execute(
            sa.text(
                "UPDATE judge_verdicts SET error_kind = :kind, "
                "error = substr(error, :start) WHERE error LIKE :pattern"
            ).bindparams(kind=kind, start=len(prefix) + 1, pattern=f"{prefix}%")
        )


def downgrade() -> None:
    for kind, prefix in PREFIXES.items():
        op.execute(
            sa.text(
                "UPDATE judge_verdicts SET error = :prefix || error WHERE error_kind = :kind"
            ).bindparams(kind=kind, prefix=prefix)
        )
    with op.batch_alter_table('judge_verdicts', schema=None) as batch_op:
        batch_op.drop_column('error_kind')
