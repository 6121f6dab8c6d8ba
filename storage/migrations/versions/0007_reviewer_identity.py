"""Reviewer identity is the NFC, case-folded name ("Ana" and "ana" are one reviewer)

Existing names are rewritten to their identity; the name as it was typed is kept as
the display name when none was set. When two stored reviewers fold to the same
identity (say "Ana" and "ana"), the one already spelled as the identity (else the
oldest) takes it and the others are left as they are, with their labels: nothing is
merged or lost, and an admin can rename or deactivate them.

Revision ID: 0007
Revises: 0006
Create Date: 2026-11-30
"""

from __future__ import annotations

import unicodedata

import sqlalchemy as sa
from alembic import op

revision = '0007'
down_revision = '0006'
branch_labels = None
depends_on = None


def identity(name: str) -> str:
    """The same rule as review_app.input_policy.identity_key (kept here: a migration
    must not change when the application code does)."""
    folded = unicodedata.normalize("NFC", name).strip().casefold()
    return unicodedata.normalize("NFC", folded)


def upgrade() -> None:
    connection = op.get_bind()
    rows = connection.execute(
        sa.text("SELECT id, name, display_name FROM reviewers ORDER BY id")
    ).all()
    taken = {name for _, name, _ in rows}
    for reviewer_id, name, display_name in rows:
        key = identity(name)
        if key == name or key in taken:
            continue
        connection.execute(
            sa.text("UPDATE reviewers SET name = :key, display_name = :display WHERE id = :id"),
            {"key": key, "display": display_name or name, "id": reviewer_id},
        )
        taken.discard(name)
        taken.add(key)


def downgrade() -> None:
    # Names stay folded; the typed form is in display_name. Nothing to undo safely.
    pass
