"""Checks of the options and inputs the statistics take, each with its one exact ``ValueError``
message."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from review_app.stats.codes import BREAK, NO_BREAK, BreakMapping
from review_app.stats.units import sorted_units


def check_int(value: object, name: str, minimum: int) -> int:
    """``value`` as an ``int``; ``"<name> must be an integer >= <minimum>, got <value>"``."""
    if isinstance(value, bool) or not isinstance(value, int | np.integer) or value < minimum:
        raise ValueError(f"{name} must be an integer >= {minimum}, got {value!r}")
    return int(value)


def check_positive_int(value: object, name: str) -> int:
    """``value`` as an ``int``; ``"<name> must be a positive integer, got <value>"``."""
    if isinstance(value, bool) or not isinstance(value, int | np.integer) or value < 1:
        raise ValueError(f"{name} must be a positive integer, got {value!r}")
    return int(value)


def check_confidence(confidence: float) -> None:
    """``"confidence must be strictly between 0 and 1, got <value>"`` unless it is."""
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must be strictly between 0 and 1, got {confidence!r}")


def check_seed(seed: object) -> int:
    """``seed`` as an ``int``; ``"seed must be a non-negative integer, got <value>"``."""
    if isinstance(seed, bool) or not isinstance(seed, int | np.integer) or seed < 0:
        raise ValueError(f"seed must be a non-negative integer, got {seed!r}")
    return int(seed)


def check_finite_vector(values: ArrayLike, name: str) -> NDArray[np.float64]:
    """``values`` as a 1-d ``float64`` array; ``"<name> must be a one-dimensional array of
    finite numbers"`` unless it is one."""
    array = np.asarray(values, dtype=np.float64)
    if array.ndim != 1 or not np.all(np.isfinite(array)):
        raise ValueError(f"{name} must be a one-dimensional array of finite numbers")
    return array


def check_binary(values: Sequence[int] | ArrayLike, name: str) -> NDArray[np.int64]:
    """``values`` as a 1-d ``int64`` array of 0 (no break) and 1 (break).

    ``"<name> must be one-dimensional, got shape <shape>"`` or ``"<name> must contain only
    0 (no break) and 1 (break), got <value>"`` otherwise.
    """
    array = np.asarray(values)
    if array.ndim != 1:
        raise ValueError(f"{name} must be one-dimensional, got shape {array.shape}")
    if array.size == 0:
        return np.zeros(0, dtype=np.int64)
    if array.dtype.kind not in "biuf" or not np.all(np.isin(array, (0, 1))):
        for value in array.tolist():
            if not (isinstance(value, bool | int | float) and value in (0, 1)):
                raise ValueError(
                    f"{name} must contain only 0 (no break) and 1 (break), got {value!r}"
                )
    return array.astype(np.int64)


def check_probabilities(values: Sequence[float] | ArrayLike, name: str) -> NDArray[np.float64]:
    """``values`` as a 1-d ``float64`` array of finite numbers in [0, 1].

    ``"<name> must be finite numbers in [0, 1]"`` or ``"<name> must be one-dimensional,
    got shape <shape>"`` otherwise.
    """
    raw = np.asarray(values)
    if raw.size and raw.dtype.kind not in "biuf":
        raise ValueError(f"{name} must be finite numbers in [0, 1]")
    array = raw.astype(np.float64)
    if array.ndim != 1:
        raise ValueError(f"{name} must be one-dimensional, got shape {array.shape}")
    if array.size and (not np.all(np.isfinite(array)) or array.min() < 0 or array.max() > 1):
        raise ValueError(f"{name} must be finite numbers in [0, 1]")
    return array


def check_labels_and_scores(
    y_true: Sequence[int] | ArrayLike,
    scores: Sequence[float] | ArrayLike,
    scores_name: str,
) -> tuple[NDArray[np.int64], NDArray[np.float64]]:
    """``y_true`` (:func:`check_binary`) and ``scores`` (:func:`check_probabilities`) of one
    length; ``"y_true and <scores_name> must have the same length, got <a> and <b>"``."""
    y = check_binary(y_true, "y_true")
    s = check_probabilities(scores, scores_name)
    if y.size != s.size:
        raise ValueError(
            f"y_true and {scores_name} must have the same length, got {y.size} and {s.size}"
        )
    return y, s


def check_break_mapping(break_mapping: BreakMapping) -> dict[str, str | None]:
    """A copy of ``break_mapping`` whose every value is ``"break"``, ``"no_break"`` or None.

    ``"break_mapping must be a mapping of code to 'break', 'no_break' or None, got <type>"``
    or ``"break_mapping[<code>] must be 'break', 'no_break' or None, got <value>"`` otherwise.
    """
    if not isinstance(break_mapping, Mapping):
        raise ValueError(
            f"break_mapping must be a mapping of code to 'break', 'no_break' or None, "
            f"got {type(break_mapping).__name__}"
        )
    for code, value in break_mapping.items():
        if value not in (BREAK, NO_BREAK, None):
            raise ValueError(
                f"break_mapping[{code!r}] must be 'break', 'no_break' or None, got {value!r}"
            )
    return dict(break_mapping)


def check_codes(codes: Mapping[Any, str], name: str, mapping: Mapping[str, str | None]) -> None:
    """Every code of ``codes`` (unit -> code) is a string in ``mapping``.

    The first failing unit (in :func:`~review_app.stats.units.sort_key` order) is named:
    ``"<name> code for unit <unit> must be a string, got <value>"`` or ``"<name> code
    <code> for unit <unit> is not in break_mapping"``; ``"<name> must be a mapping of
    unit to code, got <type>"`` when ``codes`` is no mapping.
    """
    if not isinstance(codes, Mapping):
        raise ValueError(f"{name} must be a mapping of unit to code, got {type(codes).__name__}")
    # Each distinct code once (a run holds many units, few codes); on a failure, check
    # every unit and sort (for a reproducible message) only the units that fail.
    try:
        distinct = set(codes.values())
    except TypeError:  # an unhashable code, so not a string
        distinct = None
    if distinct is not None and all(isinstance(c, str) and c in mapping for c in distinct):
        return
    bad = [u for u, c in codes.items() if not isinstance(c, str) or c not in mapping]
    for unit in sorted_units(bad)[:1]:
        code = codes[unit]
        if not isinstance(code, str):
            raise ValueError(f"{name} code for unit {unit!r} must be a string, got {code!r}")
        if code not in mapping:
            raise ValueError(f"{name} code {code!r} for unit {unit!r} is not in break_mapping")
