"""A run's verdicts as arrays, their units joined by integer codes (the reports' hot path).

A run may hold hundreds of thousands of verdicts while gold covers a few thousand units:
an object or a ``(case_id, turn)`` tuple per verdict is where the time and memory went.
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np
import numpy.typing as npt

from storage.judging import VerdictColumns


class TurnVerdicts:
    """The turn-level verdicts of one run, ``columns`` position by position.

    A unit's key is ``case code * stride + turn - lowest turn``, where the case code
    numbers the case ids in row order; conversation-level verdicts have key -1.
    """

    def __init__(self, columns: VerdictColumns) -> None:
        self.columns = columns
        n = len(columns.ids)
        turns = np.array(columns.turns, dtype=np.float64).reshape(n)  # None becomes nan
        self.has_turn = ~np.isnan(turns)
        self.no_error = np.array(columns.errors, dtype=object).reshape(n) == None  # noqa: E711
        self.has_label = np.array(columns.labels, dtype=object).reshape(n) != None  # noqa: E711
        # Rows come ordered by case id, so one case's rows are adjacent.
        case_ids = columns.case_ids
        cases = np.array(case_ids, dtype=object).reshape(n)
        new_case = cases[1:] != cases[:-1]
        starts = np.concatenate(([0], np.flatnonzero(new_case) + 1)) if n else np.zeros(0, int)
        case_code = np.cumsum(np.concatenate(([False], new_case))) if n else np.zeros(0, int)
        self._case_code = {case_ids[i]: k for k, i in enumerate(starts.tolist())}
        numbered = turns[self.has_turn]
        self._low = int(numbered.min()) if numbered.size else 0
        self.stride = int(numbered.max()) - self._low + 1 if numbered.size else 1
        offsets = np.where(self.has_turn, turns, self._low).astype(np.int64) - self._low
        self.keys = np.where(self.has_turn, case_code * self.stride + offsets, -1)

    @property
    def n_turn(self) -> int:
        return int(np.count_nonzero(self.has_turn))

    def key(self, unit: tuple[str, int]) -> int | None:
        """The key of ``unit``; None when no verdict of the run could have it."""
        case_code = self._case_code.get(unit[0])
        offset = unit[1] - self._low
        if case_code is None or not 0 <= offset < self.stride:
            return None
        return case_code * self.stride + offset

    def rows_of(self, units: Iterable[tuple[str, int]]) -> list[int]:
        """Positions, in row order, of the turn-level verdicts on ``units``."""
        wanted = [k for k in map(self.key, units) if k is not None]
        found = np.isin(self.keys, np.array(wanted, dtype=np.int64)) & self.has_turn
        return np.flatnonzero(found).tolist()

    def positions(self, mask: npt.NDArray[np.bool_]) -> list[int]:
        return np.flatnonzero(mask).tolist()

    def coded(self) -> dict[tuple[str, int], str]:
        """``{unit: code}`` of the turn-level verdicts with a code and no error."""
        rows = self.positions(self.has_turn & self.no_error & self.has_label)
        columns = self.columns
        units = zip(
            map(columns.case_ids.__getitem__, rows),
            map(columns.turns.__getitem__, rows),
            strict=True,
        )
        return dict(zip(units, map(columns.labels.__getitem__, rows), strict=True))  # type: ignore[arg-type]
