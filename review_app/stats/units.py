"""Unit keys: one total order over keys of mixed types, and their JSON form.

A unit is what a verdict is about, normally ``(case_id, turn)``; any hashable value
works (``turn`` may be ``None`` for a conversation-level verdict). Reports list units
in the order of :func:`sort_key` and write them with :func:`json_value`.
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Iterable
from typing import Any, TypeVar

import numpy as np

__all__ = ["JsonKey", "Unit", "UnitT", "json_value", "sort_key", "sorted_units"]

Unit = Hashable
# Mapping keys are invariant: a TypeVar lets callers pass dict[tuple[str, int], str].
UnitT = TypeVar("UnitT", bound=Hashable)
JsonKey = str | int | float | bool | None | list["JsonKey"]
"""A unit or conversation key as JSON (:func:`json_value`): a ``(case_id, turn)`` unit is
``[case_id, turn]``."""


def sort_key(value: object) -> tuple[Any, ...]:
    """A total order over mixed unit keys (None < numbers < strings < tuples < rest)."""
    if value is None:
        return (0,)
    if isinstance(value, bool):
        return (1, int(value))
    if isinstance(value, int | float):
        return (1, value)
    if isinstance(value, str):
        return (2, value)
    if isinstance(value, tuple):
        return (3, tuple(sort_key(item) for item in value))
    return (4, repr(value))


def sorted_units(units: Iterable[UnitT]) -> list[UnitT]:
    """``units`` as a list in the order of :func:`sort_key`.

    Examples
    --------
    >>> sorted_units([("case-b", 2), "case-a", None, 3, ("case-a", 10), ("case-a", 2)])
    [None, 3, 'case-a', ('case-a', 2), ('case-a', 10), ('case-b', 2)]
    """
    return sorted(units, key=sort_key)


def json_value(value: object) -> Any:
    """A unit or conversation key as JSON: tuples become lists, exotic objects strings.

    Examples
    --------
    >>> json_value(("case-1", np.int64(4))), json_value(float("nan"))
    (['case-1', 4], None)
    """
    if value is None or isinstance(value, str | bool | int):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, tuple | list):
        return [json_value(item) for item in value]
    if isinstance(value, np.integer):
        return int(value)
    if isinstance(value, np.floating):
        return json_value(float(value))
    return str(value)
