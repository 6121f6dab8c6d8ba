"""Current labels as a rating table, built fast enough for a million labels.

The agreement report, the gold labels and the dashboard all start from every
current label of a rubric version. :meth:`RatingTable.from_arrays` given
``(case_id, turn)`` tuples and name strings hashes a tuple and three strings per
label; here each column is numbered once (strings hashed without sorting, then
only the distinct ones sorted), case and turn numbers are combined into one
integer per unit, and only the distinct units, reviewers and codes become Python
objects. The table is the same either way: units, reviewers and codes sorted,
the same integer codes.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

import numpy as np
import numpy.typing as npt
import pandas as pd

from review_app.agreement import RatingTable
from storage.adjudication import LabelColumns

IntArray = npt.NDArray[np.int64]


def _tuple_units_table(columns: LabelColumns) -> RatingTable:
    """The plain construction (also the one whose errors name the unit)."""
    units = np.empty(len(columns), dtype=object)
    units[:] = list(zip(columns.case_ids, columns.turns, strict=True))
    return RatingTable.from_arrays(units=units, raters=columns.reviewers, values=columns.codes)


def _sorted_codes(values: Sequence[Any]) -> tuple[IntArray, list[Any]]:
    """Integer codes numbering the distinct values in sorted order (-1 for None)."""
    codes, uniques = pd.factorize(np.asarray(values, dtype=object))
    distinct = np.asarray(uniques, dtype=object).tolist()
    order = sorted(range(len(distinct)), key=distinct.__getitem__)
    rank = np.empty(len(order), dtype=np.int64)
    rank[order] = np.arange(len(order), dtype=np.int64)
    ranked = np.where(codes >= 0, rank[np.maximum(codes, 0)], -1) if len(order) else codes
    return ranked.astype(np.int64, copy=False), [distinct[i] for i in order]


def rating_table(columns: LabelColumns) -> RatingTable:
    """Units ``(case_id, turn)``, raters reviewer names, values label codes."""
    if not len(columns):
        return _tuple_units_table(columns)
    case_codes, case_ids = _sorted_codes(columns.case_ids)
    turns, turn_codes = np.unique(np.asarray(columns.turns, dtype=np.int64), return_inverse=True)
    rater_codes, raters = _sorted_codes(columns.reviewers)
    value_codes, values = _sorted_codes(columns.codes)
    if min(case_codes.min(), rater_codes.min(), value_codes.min()) < 0:
        return _tuple_units_table(columns)  # a None somewhere: the plain rules apply
    n_turns = len(turns)
    try:
        numbered = RatingTable.from_arrays(
            units=case_codes * n_turns + turn_codes.reshape(-1),
            raters=rater_codes,
            values=value_codes,
        )
    except ValueError:
        # A reviewer with two current labels on one turn: let the message name the unit.
        return _tuple_units_table(columns)
    # Every code occurs, so the numbered table's raters and values are 0..k-1 in order.
    unit_keys = np.asarray(numbered.units, dtype=np.int64)
    case_of_unit = np.asarray(case_ids, dtype=object)[unit_keys // n_turns].tolist()
    turn_of_unit = turns[unit_keys % n_turns].tolist()
    return dataclasses.replace(
        numbered,
        units=tuple(zip(case_of_unit, turn_of_unit, strict=True)),
        raters=tuple(raters),
        values=tuple(values),
    )
