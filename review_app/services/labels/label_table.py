"""Current labels as a rating table, built fast enough for a million labels.

The agreement report, the gold labels and the dashboard all start from every
current label of a rubric version. Fetched row by row, a million labels cost a
Python tuple and four objects each, and :meth:`RatingTable.from_arrays` given
``(case_id, turn)`` tuples then hashes a tuple and two strings per label. Here the
database returns one row per case (see
:func:`storage.labels.current_labels_grouped`), each column is numbered
once (only the distinct case ids, reviewers and codes are sorted), case and turn
numbers make one integer per unit, and only the distinct units become tuples.
The table is the same either way: units, reviewers and codes sorted, the same
integer codes.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

import numpy as np
import numpy.typing as npt
from sqlmodel import Session

from review_app.stats.core import canonical_order
from review_app.stats.table import RatingTable, factorize
from storage import labels
from storage.labels import GroupedLabels, LabelColumns

IntArray = npt.NDArray[np.int64]
Numbered = tuple[IntArray, list[Any]]
"""Each label's code, numbering the distinct values in sorted order; those values."""


def _tuple_units_table(columns: LabelColumns) -> RatingTable:
    """The plain construction (also the one whose errors name the unit)."""
    units = np.empty(len(columns), dtype=object)
    units[:] = list(zip(columns.case_ids, columns.turns, strict=True))
    return RatingTable.from_arrays(units=units, raters=columns.reviewers, values=columns.codes)


def _sorted_codes(values: Sequence[Any]) -> Numbered:
    """Integer codes numbering the distinct values in sorted order (-1 for None)."""
    codes, distinct = factorize(np.asarray(values, dtype=object))
    ranked, ordered = canonical_order(codes, distinct)
    return ranked, list(ordered)


def load_rating_table(session: Session, *, rubric_id: str, version: int) -> RatingTable:
    """The current labels of a rubric version, read case by case where the database can."""
    grouped = labels.current_labels_grouped(session, rubric_id=rubric_id, version=version)
    if grouped is not None:
        table = _grouped_table(grouped)
        if table is not None:
            return table
    return rating_table(labels.current_label_columns(session, rubric_id=rubric_id, version=version))


def _grouped_table(grouped: GroupedLabels) -> RatingTable | None:
    if not len(grouped):
        return RatingTable.from_arrays(units=[], raters=[], values=[])
    order = sorted(range(len(grouped.case_ids)), key=grouped.case_ids.__getitem__)
    case_rank = np.empty(len(order), dtype=np.int64)
    case_rank[order] = np.arange(len(order), dtype=np.int64)
    case_codes = np.repeat(case_rank, grouped.labels_per_case)
    case_ids = [grouped.case_ids[i] for i in order]
    reviewer_ids, reviewer_of_label = np.unique(grouped.reviewer_ids, return_inverse=True)
    if any(int(i) not in grouped.reviewer_names for i in reviewer_ids):
        return None
    name_codes, raters = _sorted_codes([grouped.reviewer_names[int(i)] for i in reviewer_ids])
    if len(raters) != len(reviewer_ids):
        return None  # two ids, one name: cannot happen (names are unique)
    rater_codes = name_codes[reviewer_of_label.reshape(-1)]
    return _numbered_table(
        (case_codes, case_ids), grouped.turns, (rater_codes, raters), _sorted_codes(grouped.codes)
    )


def rating_table(columns: LabelColumns) -> RatingTable:
    """Units ``(case_id, turn)``, raters reviewer names, values label codes."""
    if not len(columns):
        return _tuple_units_table(columns)
    cases = _sorted_codes(columns.case_ids)
    raters = _sorted_codes(columns.reviewers)
    values = _sorted_codes(columns.codes)
    if min(cases[0].min(), raters[0].min(), values[0].min()) < 0:
        return _tuple_units_table(columns)  # a None somewhere: the plain rules apply
    table = _numbered_table(cases, np.asarray(columns.turns, dtype=np.int64), raters, values)
    return table if table is not None else _tuple_units_table(columns)


def _numbered_table(
    cases: Numbered, turn_of_label: IntArray, raters: Numbered, values: Numbered
) -> RatingTable | None:
    """The table from each label's numbered case, turn, rater and value.

    ``None`` when a reviewer has two labels on one unit (the caller then builds the
    table the plain way, whose error message names the unit).
    """
    case_codes, case_ids = cases
    rater_codes, rater_names = raters
    value_codes, value_names = values
    turns, turn_codes = np.unique(turn_of_label, return_inverse=True)
    turn_codes = turn_codes.reshape(-1)
    n_turns = len(turns)
    try:
        numbered = RatingTable.from_arrays(
            units=case_codes * n_turns + turn_codes, raters=rater_codes, values=value_codes
        )
    except ValueError:
        return None
    # Every code occurs, so the numbered table's raters and values are 0..k-1 in order.
    unit_keys = np.asarray(numbered.units, dtype=np.int64)
    case_of_unit = np.asarray(case_ids, dtype=object)[unit_keys // n_turns].tolist()
    turn_of_unit = turns[unit_keys % n_turns].tolist()
    return dataclasses.replace(
        numbered,
        units=tuple(zip(case_of_unit, turn_of_unit, strict=True)),
        raters=tuple(rater_names),
        values=tuple(value_names),
    )
