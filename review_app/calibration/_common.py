"""Shared helpers of the calibration modules: argument checks, unit order, break-class metrics."""

from __future__ import annotations

import math
from collections.abc import Hashable, Iterable, Mapping, Sequence
from typing import Any, Literal, TypeVar

import numpy as np
from numpy.typing import ArrayLike, NDArray

from review_app.stats.core import (
    BREAK,
    NO_BREAK,
    Estimate,
    kappa_from_confusion,
    percentile_interval,
    ratio,
)

Unit = Hashable
# Mapping keys are invariant: a TypeVar lets callers pass dict[tuple[str, int], str].
UnitT = TypeVar("UnitT", bound=Hashable)
BreakMapping = Mapping[str, str | None]
DisagreementKind = Literal[
    "missed_break", "false_alarm", "wrong_break_kind", "agree", "not_comparable"
]
DISAGREEMENT_KINDS: tuple[str, ...] = (
    "missed_break",
    "false_alarm",
    "wrong_break_kind",
    "agree",
    "not_comparable",
)

MIN_RELIABLE_UNITS = 20
DOMINANT_CLASS_SHARE = 0.9
CALIBRATION_MAP_FORMAT = "role-review/calibration-map"
CALIBRATION_MAP_FORMAT_VERSION = 1

_TIE_TOLERANCE = 1e-12


def _sort_key(value: object) -> tuple[Any, ...]:
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
        return (3, tuple(_sort_key(item) for item in value))
    return (4, repr(value))


def _sorted_units(units: Iterable[UnitT]) -> list[UnitT]:
    return sorted(units, key=_sort_key)


def _json_value(value: object) -> Any:
    """A unit or conversation key as JSON: tuples become lists, exotic objects strings."""
    if value is None or isinstance(value, str | bool | int):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, tuple | list):
        return [_json_value(item) for item in value]
    if isinstance(value, np.integer):
        return int(value)
    if isinstance(value, np.floating):
        return _json_value(float(value))
    return str(value)


def _finite_or_none(value: float | np.floating[Any] | None) -> float | None:
    if value is None:
        return None
    number = float(value)
    return number if math.isfinite(number) else None


def _check_seed(seed: object) -> int:
    if isinstance(seed, bool) or not isinstance(seed, int | np.integer) or seed < 0:
        raise ValueError(f"seed must be a non-negative integer, got {seed!r}")
    return int(seed)


def _binary_array(values: Sequence[int] | ArrayLike, name: str) -> NDArray[np.int64]:
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


def _probability_array(values: Sequence[float] | ArrayLike, name: str) -> NDArray[np.float64]:
    raw = np.asarray(values)
    if raw.size and raw.dtype.kind not in "biuf":
        raise ValueError(f"{name} must be finite numbers in [0, 1]")
    array = raw.astype(np.float64)
    if array.ndim != 1:
        raise ValueError(f"{name} must be one-dimensional, got shape {array.shape}")
    if array.size and (not np.all(np.isfinite(array)) or array.min() < 0 or array.max() > 1):
        raise ValueError(f"{name} must be finite numbers in [0, 1]")
    return array


def _paired(
    y_true: Sequence[int] | ArrayLike,
    scores: Sequence[float] | ArrayLike,
    scores_name: str,
) -> tuple[NDArray[np.int64], NDArray[np.float64]]:
    y = _binary_array(y_true, "y_true")
    s = _probability_array(scores, scores_name)
    if y.size != s.size:
        raise ValueError(
            f"y_true and {scores_name} must have the same length, got {y.size} and {s.size}"
        )
    return y, s


def _estimate(
    value: float,
    n: int,
    resampled: NDArray[np.float64] | None,
    *,
    undefined_reason: str,
    no_interval_reason: str | None,
) -> Estimate:
    if not math.isfinite(value):
        return Estimate(None, n, None, undefined_reason)
    if resampled is None:
        return Estimate(float(value), n, None, no_interval_reason)
    interval, reason = percentile_interval(resampled)
    return Estimate(float(value), n, interval, reason)


def _binary_confusion(
    confusion: NDArray[Any], is_no_break: NDArray[np.int64], is_break: NDArray[np.int64]
) -> NDArray[Any]:
    """Collapse code confusion matrices to ``[[tn, fp], [fn, tp]]`` (rows reference)."""
    collapse = np.stack([is_no_break, is_break], axis=1)  # (K, 2)
    return np.einsum("ki,...kl,lj->...ij", collapse, confusion, collapse)


def _binary_metrics(binary: NDArray[np.int64]) -> dict[str, NDArray[np.float64]]:
    """Break-class metrics of a stack of 2x2 matrices ``[[tn, fp], [fn, tp]]``."""
    tn, fp = binary[..., 0, 0], binary[..., 0, 1]
    fn, tp = binary[..., 1, 0], binary[..., 1, 1]
    recall = ratio(tp, tp + fn)
    return {
        "break_kappa": kappa_from_confusion(binary),
        "break_accuracy": ratio(tp + tn, tp + tn + fp + fn),
        "precision": ratio(tp, tp + fp),
        "recall": recall,
        "f1": ratio(2 * tp, 2 * tp + fp + fn),
        "tpr": recall,
        "tnr": ratio(tn, tn + fp),
    }


def _check_break_mapping(break_mapping: BreakMapping) -> dict[str, str | None]:
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


def _check_codes(codes: Mapping[Any, str], name: str, mapping: Mapping[str, str | None]) -> None:
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
    for unit in _sorted_units(bad)[:1]:
        code = codes[unit]
        if not isinstance(code, str):
            raise ValueError(f"{name} code for unit {unit!r} must be a string, got {code!r}")
        if code not in mapping:
            raise ValueError(f"{name} code {code!r} for unit {unit!r} is not in break_mapping")


def _finite_floats(values: Sequence[Any]) -> tuple[float, ...] | None:
    result = []
    for value in values:
        if isinstance(value, bool) or not isinstance(value, int | float):
            return None
        if not math.isfinite(value):
            return None
        result.append(float(value))
    return tuple(result)
