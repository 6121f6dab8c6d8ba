"""The rating table: nominal ratings in long form, integer-encoded.

``(unit, rater, value)`` triples become three integer arrays and three tuples of
labels, so every agreement statistic works on integer codes with numpy. Pure
computation: no storage, no Streamlit.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import cached_property
from itertools import compress
from typing import Any

import numpy as np
import numpy.typing as npt

from review_app.stats.core import canonical_order

__all__ = ["FloatArray", "IntArray", "RatingTable", "factorize"]

IntArray = npt.NDArray[np.int64]
FloatArray = npt.NDArray[np.float64]


def _as_1d(name: str, data: Any) -> np.ndarray:
    """A one-dimensional array holding exactly the given elements (tuples stay whole)."""
    if isinstance(data, np.ndarray):
        if data.ndim != 1:
            raise ValueError(f"{name} must be one-dimensional, got an array of shape {data.shape}")
        return data
    if type(data).__module__.startswith("pandas") and hasattr(data, "to_numpy"):
        # a pandas Series or Index (pandas is imported only where a table is built)
        return np.asarray(data.to_numpy())
    items = data if isinstance(data, Sequence) and not isinstance(data, str) else list(data)
    if len(items) and isinstance(items[0], tuple):
        return np.fromiter(items, dtype=object, count=len(items))
    try:
        array = np.asarray(items)
    except ValueError:  # ragged nested sequences
        array = np.empty(0)
    # Strings go to an object array: numpy would turn a NaN among them into "nan".
    if array.ndim != 1 or len(array) != len(items) or array.dtype.kind in "USO":
        array = np.fromiter(items, dtype=object, count=len(items))
    return array


def factorize(array: np.ndarray) -> tuple[IntArray, list[Any]]:
    """Integer codes (-1 for None/NaN) and the distinct Python values they stand for.

    Codes number the values in order of first appearance (``pandas.factorize``). An
    array of strings only (case ids, reviewer names, label codes) is numbered with a
    dict, which gives the same codes without importing pandas (0.4 s of start-up).
    """
    if array.dtype == object and set(map(type, array.tolist())) == {str}:
        items = array.tolist()
        distinct = list(dict.fromkeys(items))
        code = {value: index for index, value in enumerate(distinct)}
        return np.fromiter(map(code.__getitem__, items), dtype=np.int64, count=len(items)), distinct
    import pandas as pd

    codes, uniques = pd.factorize(array, use_na_sentinel=True)
    return codes.astype(np.int64, copy=False), np.asarray(uniques).tolist()


def _encode(array: np.ndarray) -> tuple[IntArray, tuple[Any, ...]]:
    """Codes (-1 for None/NaN) into the sorted distinct values (when they can be sorted)."""
    if array.dtype.kind in "iu" and len(array):
        low, high = int(array.min()), int(array.max())
        if high - low <= 4 * len(array):  # dense integers: a lookup table beats hashing
            offsets = (array - low).astype(np.int64, copy=False)
            present = np.bincount(offsets, minlength=high - low + 1) > 0
            code_of_offset = np.cumsum(present, dtype=np.int64) - 1
            uniques = np.flatnonzero(present) + low
            return code_of_offset[offsets], tuple(uniques.astype(array.dtype).tolist())
    if array.dtype.kind in "biuf":
        import pandas as pd

        codes, uniques = pd.factorize(array, sort=True, use_na_sentinel=True)
        return codes.astype(np.int64, copy=False), tuple(np.asarray(uniques).tolist())
    return canonical_order(*factorize(array))


def _drop_unused(
    codes: IntArray, categories: tuple[Hashable, ...]
) -> tuple[IntArray, tuple[Hashable, ...]]:
    """Codes renumbered to the categories they use, keeping the categories' order."""
    used = np.zeros(len(categories), dtype=bool)
    used[codes] = True
    if used.all():
        return codes, categories
    new_code = np.cumsum(used) - 1
    return new_code[codes], tuple(compress(categories, used.tolist()))


def _readonly(array: npt.ArrayLike) -> IntArray:
    result = np.array(array, dtype=np.int64, copy=True)
    result.setflags(write=False)
    return result


@dataclass(frozen=True, eq=False, repr=False)
class RatingTable:
    """Nominal ratings in long form, integer-encoded.

    ``unit_idx[i]``, ``rater_idx[i]`` and ``value_idx[i]`` describe rating ``i``:
    the rater ``raters[rater_idx[i]]`` gave unit ``units[unit_idx[i]]`` the value
    ``values[value_idx[i]]``. Each rater rates a unit at most once. Only units,
    raters and values that occur in at least one rating are listed; ``values``
    (and ``raters`` and ``units``, whenever their elements can be compared) are
    sorted, so the same ratings give the same table whatever their input order.

    Build one with :meth:`from_records` or :meth:`from_arrays`.
    """

    unit_idx: IntArray
    rater_idx: IntArray
    value_idx: IntArray
    units: tuple[Hashable, ...]
    raters: tuple[Hashable, ...]
    values: tuple[Hashable, ...]

    def __post_init__(self) -> None:
        n = len(self.unit_idx)
        if len(self.rater_idx) != n or len(self.value_idx) != n:
            raise ValueError("unit_idx, rater_idx and value_idx must have the same length")
        for name, codes, categories in (
            ("unit_idx", self.unit_idx, self.units),
            ("rater_idx", self.rater_idx, self.raters),
            ("value_idx", self.value_idx, self.values),
        ):
            codes = np.asarray(codes)
            if n and (codes.min() < 0 or codes.max() >= len(categories)):
                raise ValueError(f"{name} holds a code outside 0..{len(categories) - 1}")
            object.__setattr__(self, name, _readonly(codes))

    def __repr__(self) -> str:
        return (
            f"RatingTable(n_units={self.n_units}, n_raters={self.n_raters}, "
            f"n_ratings={self.n_ratings}, values={self.values!r})"
        )

    # ---------------------------------------------------------------- constructors

    @classmethod
    def from_records(cls, records: Iterable[tuple[Any, Any, Any]]) -> RatingTable:
        """A table from ``(unit, rater, value)`` triples.

        A value of ``None`` (or NaN) means "no rating" and the record is skipped.
        Raises ``ValueError`` for a record that is not a triple, a missing unit or
        rater, or a rater who rates the same unit twice.
        """
        units: list[Hashable] = []
        raters: list[Hashable] = []
        values: list[Hashable] = []
        for position, record in enumerate(records):
            try:
                unit, rater, value = record
            except (TypeError, ValueError):
                raise ValueError(
                    f"record {position} is not a (unit, rater, value) triple: {record!r}"
                ) from None
            units.append(unit)
            raters.append(rater)
            values.append(value)
        return cls.from_arrays(
            units=np.fromiter(units, dtype=object, count=len(units)),
            raters=np.fromiter(raters, dtype=object, count=len(raters)),
            values=np.fromiter(values, dtype=object, count=len(values)),
        )

    @classmethod
    def from_arrays(cls, *, units: Any, raters: Any, values: Any) -> RatingTable:
        """A table from three parallel array-likes of equal length.

        Element ``i`` of each says that rater ``raters[i]`` gave unit ``units[i]``
        the value ``values[i]``. Units may be any hashables, tuples included. A
        missing value (``None`` or NaN) skips that rating; a missing unit or rater
        is an error, and so is a rater rating the same unit twice::

            ValueError: rater 'ana' rated unit ('case-1', 3) more than once
        """
        unit_array = _as_1d("units", units)
        rater_array = _as_1d("raters", raters)
        value_array = _as_1d("values", values)
        lengths = (len(unit_array), len(rater_array), len(value_array))
        if len(set(lengths)) != 1:
            raise ValueError(
                "units, raters and values must have the same length, "
                f"got {lengths[0]}, {lengths[1]} and {lengths[2]}"
            )

        value_codes, value_labels = _encode(value_array)
        present = value_codes >= 0
        if not present.all():
            # Every distinct value that factorizing reports occurs in a present rating.
            unit_array = unit_array[present]
            rater_array = rater_array[present]
            value_codes = value_codes[present]

        unit_codes, unit_labels = _encode(unit_array)
        rater_codes, rater_labels = _encode(rater_array)
        for name, codes in (("units", unit_codes), ("raters", rater_codes)):
            if len(codes) and codes.min() < 0:
                raise ValueError(f"{name} must not contain missing entries (None or NaN)")

        table = cls(
            unit_idx=unit_codes,
            rater_idx=rater_codes,
            value_idx=value_codes,
            units=unit_labels,
            raters=rater_labels,
            values=value_labels,
        )
        table._raise_on_duplicates()
        return table

    def _raise_on_duplicates(self) -> None:
        if self.n_ratings < 2:
            return
        keys = self.unit_idx * self.n_raters + self.rater_idx
        n_keys = self.n_units * self.n_raters
        # A dense key range is checked by counting; sorting finds the repeat to report.
        if n_keys <= 4 * self.n_ratings + (1 << 20) and np.bincount(keys).max() < 2:
            return
        order = np.argsort(keys, kind="stable")
        sorted_keys = keys[order]
        repeated = np.flatnonzero(sorted_keys[1:] == sorted_keys[:-1])
        if len(repeated):
            first = order[repeated[0]]
            unit = self.units[int(self.unit_idx[first])]
            rater = self.raters[int(self.rater_idx[first])]
            raise ValueError(f"rater {rater!r} rated unit {unit!r} more than once")

    @classmethod
    def _empty(cls) -> RatingTable:
        nothing = np.zeros(0, dtype=np.int64)
        return cls(
            unit_idx=nothing, rater_idx=nothing, value_idx=nothing, units=(), raters=(), values=()
        )

    # ---------------------------------------------------------------- sizes

    @property
    def n_units(self) -> int:
        """Units with at least one rating."""
        return len(self.units)

    @property
    def n_raters(self) -> int:
        """Raters with at least one rating."""
        return len(self.raters)

    @property
    def n_ratings(self) -> int:
        return len(self.unit_idx)

    @property
    def ratings_per_unit(self) -> IntArray:
        """How many raters rated each unit, aligned with ``units``."""
        return np.bincount(self.unit_idx, minlength=self.n_units).astype(np.int64, copy=False)

    @property
    def pairable_units(self) -> tuple[Hashable, ...]:
        """The units rated by two or more raters (the only ones that show agreement)."""
        return tuple(self.units[i] for i in np.flatnonzero(self.ratings_per_unit >= 2))

    @property
    def n_pairable_units(self) -> int:
        return int(np.count_nonzero(self.ratings_per_unit >= 2))

    # ---------------------------------------------------------------- derived tables

    def _subset(self, keep: npt.NDArray[np.bool_]) -> RatingTable:
        """The ratings where ``keep`` is true, with unused categories dropped."""
        if keep.all():
            return self
        unit_idx = self.unit_idx[keep]
        rater_idx = self.rater_idx[keep]
        value_idx = self.value_idx[keep]
        unit_idx, units = _drop_unused(unit_idx, self.units)
        rater_idx, raters = _drop_unused(rater_idx, self.raters)
        value_idx, values = _drop_unused(value_idx, self.values)
        return RatingTable(
            unit_idx=unit_idx,
            rater_idx=rater_idx,
            value_idx=value_idx,
            units=units,
            raters=raters,
            values=values,
        )

    def collapse(self, mapping: Mapping[Any, Hashable | None]) -> RatingTable:
        """Recode every value through ``mapping``; a value mapped to ``None`` is dropped.

        Used for the break / no-break and pass / fail / borderline views of the
        rubric codes. Every value in the table needs an entry::

            ValueError: collapse mapping has no entry for value 'tone_break'
        """
        targets: list[Hashable | None] = []
        for value in self.values:
            if value not in mapping:
                raise ValueError(f"collapse mapping has no entry for value {value!r}")
            targets.append(mapping[value])
        kept_targets = [target for target in targets if target is not None]
        if not kept_targets:
            return RatingTable._empty()
        target_codes, target_uniques = factorize(
            np.fromiter(kept_targets, dtype=object, count=len(kept_targets))
        )
        target_codes, new_values = canonical_order(target_codes, target_uniques)
        recode = np.full(len(self.values), -1, dtype=np.int64)
        recode[[i for i, target in enumerate(targets) if target is not None]] = target_codes
        new_value_idx = recode[self.value_idx] if self.n_ratings else self.value_idx
        keep = new_value_idx >= 0
        collapsed = RatingTable(
            unit_idx=self.unit_idx,
            rater_idx=self.rater_idx,
            value_idx=np.maximum(new_value_idx, 0),
            units=self.units,
            raters=self.raters,
            values=new_values,
        )
        return collapsed._subset(keep)

    def restrict_units(self, units: Iterable[Hashable]) -> RatingTable:
        """Only the ratings of the given units (units not in the table are ignored)."""
        position = self._unit_positions
        wanted = np.zeros(self.n_units, dtype=bool)
        indices = [position[unit] for unit in units if unit in position]
        wanted[np.asarray(indices, dtype=np.int64)] = True
        return self._subset(wanted[self.unit_idx])

    @cached_property
    def _unit_positions(self) -> dict[Hashable, int]:
        return {unit: i for i, unit in enumerate(self.units)}

    # ---------------------------------------------------------------- matrices

    def value_counts(self) -> IntArray:
        """``counts[u, v]``: how many raters gave unit ``u`` the value ``v`` (units x values)."""
        n_values = max(self.n_values, 1)
        flat = np.bincount(
            self.unit_idx * n_values + self.value_idx, minlength=self.n_units * n_values
        )
        return flat.reshape(self.n_units, n_values).astype(np.int64, copy=False)

    @property
    def n_values(self) -> int:
        return len(self.values)

    def to_reliability_data(self) -> FloatArray:
        """Raters x units matrix of value codes (``values`` positions), NaN where unrated.

        This is the ``reliability_data`` layout of the ``krippendorff`` package.
        """
        matrix = np.full((self.n_raters, self.n_units), np.nan)
        matrix[self.rater_idx, self.unit_idx] = self.value_idx
        return matrix
