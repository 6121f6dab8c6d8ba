"""Where a judge locates the first role break of each conversation, against a reference.

Wilson (1927) for the exact-match interval; Student-t intervals for the offsets.
"""

from __future__ import annotations

import math
from collections.abc import Collection, Hashable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypedDict

import numpy as np

from review_app.stats.core import (
    Estimate,
    EstimateJson,
    proportion,
)
from review_app.stats.units import JsonKey, UnitT, json_value, sorted_units


class FirstBreakMismatchJson(TypedDict):
    conversation: JsonKey
    reference_turn: int | None
    judged_turn: int | None


class FirstBreakJson(TypedDict):
    """:meth:`FirstBreakReport.to_dict`."""

    n_conversations: int
    n_only_reference: int
    n_only_judged: int
    exact_match: EstimateJson
    mean_offset: EstimateJson
    mean_absolute_offset: EstimateJson
    n_exact: int
    n_both_break: int
    n_both_no_break: int
    n_missed: int
    n_false_alarm: int
    n_judged_earlier: int
    n_judged_later: int
    mismatches: list[FirstBreakMismatchJson]


@dataclass(frozen=True)
class FirstBreakMismatch:
    conversation: Hashable
    reference_turn: int | None
    judged_turn: int | None

    def to_dict(self) -> FirstBreakMismatchJson:
        return {
            "conversation": json_value(self.conversation),
            "reference_turn": self.reference_turn,
            "judged_turn": self.judged_turn,
        }


@dataclass(frozen=True)
class FirstBreakReport:
    """How well the judge locates the first break of each conversation.

    Offsets are differences of ``turn`` values (judged minus reference), so a negative
    offset means the judge flagged an earlier turn. Counts over the shared
    conversations: ``n_exact`` (same turn, or both no break), ``n_both_break``,
    ``n_both_no_break``, ``n_missed`` (reference break, judge none), ``n_false_alarm``
    (judge break, reference none), ``n_judged_earlier`` / ``n_judged_later``.
    """

    n_conversations: int
    n_only_reference: int
    n_only_judged: int
    exact_match: Estimate
    mean_offset: Estimate
    mean_absolute_offset: Estimate
    n_exact: int
    n_both_break: int
    n_both_no_break: int
    n_missed: int
    n_false_alarm: int
    n_judged_earlier: int
    n_judged_later: int
    mismatches: tuple[FirstBreakMismatch, ...]

    def to_dict(self) -> FirstBreakJson:
        return {
            "n_conversations": self.n_conversations,
            "n_only_reference": self.n_only_reference,
            "n_only_judged": self.n_only_judged,
            "exact_match": self.exact_match.to_dict(),
            "mean_offset": self.mean_offset.to_dict(),
            "mean_absolute_offset": self.mean_absolute_offset.to_dict(),
            "n_exact": self.n_exact,
            "n_both_break": self.n_both_break,
            "n_both_no_break": self.n_both_no_break,
            "n_missed": self.n_missed,
            "n_false_alarm": self.n_false_alarm,
            "n_judged_earlier": self.n_judged_earlier,
            "n_judged_later": self.n_judged_later,
            "mismatches": [m.to_dict() for m in self.mismatches],
        }


def _mean_estimate(values: Sequence[int], what: str) -> Estimate:
    """Mean with a Student-t 95% interval: mean +- t_{0.975, n-1} * s / sqrt(n)."""
    n = len(values)
    if n == 0:
        return Estimate(None, 0, None, f"no conversation where both found a break: no {what}")
    array = np.asarray(values, dtype=np.float64)
    mean = float(array.mean())
    if n == 1:
        return Estimate(mean, 1, None, "no confidence interval from a single conversation")
    from scipy import stats  # only here: a command that never needs t pays nothing

    half = float(stats.t.ppf(0.975, n - 1) * array.std(ddof=1) / math.sqrt(n))
    return Estimate(mean, n, (mean - half, mean + half), None)


def _check_first_breaks(first_breaks: Mapping[Any, int | None], name: str) -> None:
    if not isinstance(first_breaks, Mapping):
        raise ValueError(
            f"{name} must be a mapping of conversation to first break turn, "
            f"got {type(first_breaks).__name__}"
        )
    for conversation, turn in first_breaks.items():
        if turn is not None and (isinstance(turn, bool) or not isinstance(turn, int | np.integer)):
            raise ValueError(
                f"{name}[{conversation!r}] must be an integer turn or None, got {turn!r}"
            )


def first_break_turns(
    codes: Mapping[tuple[str, int], str], break_codes: Collection[str]
) -> dict[str, int | None]:
    """Per case in ``codes`` (``{(case_id, turn): code}``): the first turn whose code is a
    break, ``None`` when none is. Cases in id order."""
    result: dict[str, int | None] = {}
    for (case_id, turn), code in sorted(codes.items()):
        result.setdefault(case_id, None)
        if code in break_codes and result[case_id] is None:
            result[case_id] = turn
    return result


def first_break_comparison(
    *,
    reference: Mapping[UnitT, int | None],
    judged: Mapping[UnitT, int | None],
) -> FirstBreakReport:
    """Compare the first break turn per conversation (``None`` = no break).

    On the conversations present in both mappings: exact-match rate (``None == None``
    counts as a match) with a Wilson (1927) 95% interval (none under 10 conversations);
    mean signed offset
    judged - reference and mean absolute offset over the conversations where both found
    a break, with Student-t 95% intervals.

    Raises ``ValueError("<reference|judged>[<conversation>] must be an integer turn or
    None, got <value>")`` for any other turn value.
    """
    _check_first_breaks(reference, "reference")
    _check_first_breaks(judged, "judged")
    shared = sorted_units(set(reference) & set(judged))
    offsets: list[int] = []
    n_exact = n_both_no_break = n_missed = n_false_alarm = 0
    mismatches: list[FirstBreakMismatch] = []
    for conversation in shared:
        reference_turn, judged_turn = reference[conversation], judged[conversation]
        if reference_turn == judged_turn:
            n_exact += 1
        else:
            mismatches.append(FirstBreakMismatch(conversation, reference_turn, judged_turn))
        if reference_turn is None and judged_turn is None:
            n_both_no_break += 1
        elif judged_turn is None:
            n_missed += 1
        elif reference_turn is None:
            n_false_alarm += 1
        else:
            offsets.append(int(judged_turn) - int(reference_turn))
    n = len(shared)
    exact_match = proportion(
        n_exact, n, undefined_reason="no conversation has a first break from both sides"
    )
    return FirstBreakReport(
        n_conversations=n,
        n_only_reference=len(reference) - n,
        n_only_judged=len(judged) - n,
        exact_match=exact_match,
        mean_offset=_mean_estimate(offsets, "offset"),
        mean_absolute_offset=_mean_estimate([abs(o) for o in offsets], "offset"),
        n_exact=n_exact,
        n_both_break=len(offsets),
        n_both_no_break=n_both_no_break,
        n_missed=n_missed,
        n_false_alarm=n_false_alarm,
        n_judged_earlier=sum(o < 0 for o in offsets),
        n_judged_later=sum(o > 0 for o in offsets),
        mismatches=tuple(mismatches),
    )
