"""The current row of a unit in the append-only label tables.

A unit is one turn of one case under one rubric version. ``labels`` keeps one current
row per unit and reviewer, ``gold_labels`` one per unit (the partial unique indexes
``ux_labels_current_unit`` and ``ux_gold_current_unit``); a change adds a row and
supersedes the current one.
"""

from __future__ import annotations

from typing import Any

from sqlmodel import col

from storage.models import GoldLabel, Label


def current_of_unit(
    table: type[Label] | type[GoldLabel],
    *,
    rubric_id: str,
    version: int,
    case_id: str,
    turn: int,
) -> list[Any]:
    """Conditions selecting the unit's current row (in ``labels``, one per reviewer: add
    the reviewer's condition)."""
    return [
        col(table.case_id) == case_id,
        col(table.turn) == turn,
        col(table.rubric_id) == rubric_id,
        col(table.rubric_version) == version,
        col(table.current),
    ]
