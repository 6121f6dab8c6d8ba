"""Two judge runs compared on the same gold units, with a verdict: is one better?

Pure computation (numpy only). :func:`compare_two_runs` takes the gold codes, each
run's codes and a break mapping, keeps the units that have gold and a code from both
runs, and gives:

- each run's Cohen's kappa and accuracy (share of identical codes) against gold, with
  95% percentile intervals from a cluster bootstrap over conversations (Field & Welsh
  2007: each resample draws conversations with replacement and keeps all their turns);
- the **paired** difference ``second - first`` of kappa and of accuracy, from the SAME
  resamples for both runs (one draw of conversations per resample, both runs scored on
  it), so that the units both runs got right or wrong cancel out;
- the exact McNemar test (McNemar 1947) on the break / no-break verdicts: with ``b`` the
  units only the first run gets right and ``c`` the units only the second gets right,
  under H0 ``b ~ Binomial(b + c, 1/2)`` and the two-sided p-value is
  ``min(1, 2 * P(X <= min(b, c)))`` (as ``statsmodels.stats.contingency_tables.mcnemar(
  table, exact=True)``);
- each run's alternative annotator test (:mod:`review_app.stats.alt_test`) on the units
  both runs judged, when reviewers' labels are given;
- the units where the runs' codes differ, with gold.

The verdict is one sentence that reconciles the effect and the test: the kappa
difference's interval (above 0: the second run agrees with gold better; below 0: the
first; containing 0: no detectable change) and McNemar's test at level
:data:`TEST_LEVEL` on break / no break (which run is right where the other is wrong, and
how often). When they agree it says so; when only the test finds a difference the
verdict is "likely better, confirm on more gold"; when only the interval does, the run
tells the codes apart better but not the breaks; when they point opposite ways it is
"mixed". ``outcome`` names the case (:data:`OUTCOMES`). Fewer than
:data:`MIN_COMPARED_UNITS` units give no verdict.

References
----------
McNemar, Q. (1947). Note on the sampling error of the difference between correlated
    proportions or percentages. Psychometrika, 12(2), 153-157.
Cohen, J. (1960). A coefficient of agreement for nominal scales. Educational and
    Psychological Measurement, 20(1), 37-46.
Field, C. A., & Welsh, A. H. (2007). Bootstrapping clustered data. Journal of the Royal
    Statistical Society B, 69(3), 369-390.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Collection, Hashable, Mapping
from dataclasses import dataclass
from typing import Any, TypedDict, cast

import numpy as np

from review_app.stats.alt_test import DEFAULT_EPSILON, AltTestJson, AltTestResult, alt_test
from review_app.stats.checks import check_int
from review_app.stats.codes import BREAK
from review_app.stats.confusion import confusion_from_codes
from review_app.stats.core import (
    MIN_BOOTSTRAP_UNITS,
    Estimate,
    EstimateJson,
    bootstrap_confusions,
    bootstrap_method,
    cluster_codes,
    kappa_from_confusion,
    percentile_interval,
)
from review_app.stats.units import JsonKey

__all__ = [
    "MIN_COMPARED_UNITS",
    "DifferingUnit",
    "DifferingUnitJson",
    "McNemarJson",
    "McNemarResult",
    "PairedComparison",
    "PairedComparisonJson",
    "compare_two_runs",
    "mcnemar_exact",
]

MIN_COMPARED_UNITS = 30
"""No verdict from fewer gold units judged by both runs."""

TEST_LEVEL = 0.05
"""McNemar's p-value below which the verdict counts the test as finding a difference."""

OUTCOMES = (
    "second_better",
    "first_better",
    "second_likely_better",
    "first_likely_better",
    "mixed",
    "no_difference",
    "too_few_units",
    "undefined",
)


class McNemarJson(TypedDict):
    table: list[list[int]]
    rows: str
    columns: str
    n: int
    only_first_right: int
    only_second_right: int
    statistic: int
    p_value: float


""":meth:`McNemarResult.to_dict`."""


class DifferingUnitJson(TypedDict):
    unit: JsonKey
    gold: str
    first: str
    second: str


class PairedComparisonJson(TypedDict):
    """:meth:`PairedComparison.to_dict` (docs/reference.md, "Comparing two judge runs")."""

    first: str
    second: str
    n_units: int
    n_conversations: int
    kappa: dict[str, EstimateJson]
    accuracy: dict[str, EstimateJson]
    kappa_difference: EstimateJson
    accuracy_difference: EstimateJson
    difference_is: str
    mcnemar: McNemarJson
    alt_test: dict[str, AltTestJson] | None
    alt_test_units: int
    differing: list[DifferingUnitJson]
    outcome: str
    verdict: str
    n_resamples: int
    seed: int


@dataclass(frozen=True)
class McNemarResult:
    """The exact McNemar test on which run gets the break / no-break verdict right.

    ``table`` is ``[[both right, only first right], [only second right, both wrong]]``
    (rows: first run right / wrong; columns: second run right / wrong).
    """

    table: tuple[tuple[int, int], tuple[int, int]]
    statistic: int
    p_value: float

    @property
    def n(self) -> int:
        return sum(map(sum, self.table))

    @classmethod
    def from_dict(cls, data: McNemarJson) -> McNemarResult:
        """The test back from :meth:`to_dict` (e.g. a comparison read back from JSON)."""
        (both, only_first), (only_second, neither) = data["table"]
        return cls(((both, only_first), (only_second, neither)), data["statistic"], data["p_value"])

    def to_dict(self) -> McNemarJson:
        return {
            "table": [list(row) for row in self.table],
            "rows": "first run right / wrong",
            "columns": "second run right / wrong",
            "n": self.n,
            "only_first_right": self.table[0][1],
            "only_second_right": self.table[1][0],
            "statistic": self.statistic,
            "p_value": self.p_value,
        }


def mcnemar_exact(only_first: int, only_second: int) -> tuple[int, float]:
    """``(min(b, c), p)``: the exact two-sided McNemar test on the discordant counts.

    p = min(1, 2 * sum_{k <= min(b, c)} C(b + c, k) / 2^(b + c)); 1 when b + c = 0.
    Raises ``ValueError("discordant counts must be integers >= 0, got <b>, <c>")``.
    """
    for value in (only_first, only_second):
        if isinstance(value, bool) or not isinstance(value, int | np.integer) or value < 0:
            raise ValueError(
                f"discordant counts must be integers >= 0, got {only_first!r}, {only_second!r}"
            )
    b, c = int(only_first), int(only_second)
    n, low = b + c, min(b, c)
    if n == 0:
        return low, 1.0
    tail = sum(math.comb(n, k) for k in range(low + 1))
    return low, min(1.0, 2 * tail / 2**n)


@dataclass(frozen=True)
class DifferingUnit:
    unit: Hashable
    gold: str
    first: str
    second: str

    def to_dict(self) -> DifferingUnitJson:
        unit = list(self.unit) if isinstance(self.unit, tuple) else self.unit
        return {
            "unit": cast(JsonKey, unit),
            "gold": self.gold,
            "first": self.first,
            "second": self.second,
        }


@dataclass(frozen=True)
class PairedComparison:
    """Two runs on the same gold units (module docstring); differences are second - first."""

    first: str
    second: str
    n_units: int
    n_conversations: int
    kappa: Mapping[str, Estimate]
    accuracy: Mapping[str, Estimate]
    kappa_difference: Estimate
    accuracy_difference: Estimate
    mcnemar: McNemarResult
    alt_test: Mapping[str, AltTestResult] | None
    alt_test_units: int
    differing: tuple[DifferingUnit, ...]
    outcome: str
    """One of :data:`OUTCOMES`."""
    verdict: str
    """The one sentence reconciling the kappa difference and McNemar's test."""
    n_resamples: int
    seed: int

    def to_dict(self) -> PairedComparisonJson:
        return {
            "first": self.first,
            "second": self.second,
            "n_units": self.n_units,
            "n_conversations": self.n_conversations,
            "kappa": {name: e.to_dict() for name, e in self.kappa.items()},
            "accuracy": {name: e.to_dict() for name, e in self.accuracy.items()},
            "kappa_difference": self.kappa_difference.to_dict(),
            "accuracy_difference": self.accuracy_difference.to_dict(),
            "difference_is": "second - first",
            "mcnemar": self.mcnemar.to_dict(),
            "alt_test": None
            if self.alt_test is None
            else {name: r.to_dict() for name, r in self.alt_test.items()},
            "alt_test_units": self.alt_test_units,
            "differing": [d.to_dict() for d in self.differing],
            "outcome": self.outcome,
            "verdict": self.verdict,
            "n_resamples": self.n_resamples,
            "seed": self.seed,
        }


def _signed(value: float) -> str:
    return f"{value + 0.0:+.2f}"


def _estimate(
    point: float, resampled: np.ndarray | None, n: int, method: str, no_interval: str | None
) -> Estimate:
    if not math.isfinite(point):
        return Estimate(None, n, None, "undefined: every code on both sides is one and the same")
    if resampled is None:
        return Estimate(point, n, None, no_interval)
    interval, reason = percentile_interval(resampled)
    return Estimate(point, n, interval, reason, method=method if interval else None)


def _sorted(units: list[Any]) -> list[Any]:
    try:
        return sorted(units)
    except TypeError:
        return sorted(units, key=lambda u: (type(u).__name__, repr(u)))


def compare_two_runs(
    *,
    gold: Mapping[Any, str],
    first: Mapping[Any, str],
    second: Mapping[Any, str],
    break_mapping: Mapping[str, str | None],
    names: tuple[str, str] = ("first", "second"),
    ignore_codes: Collection[str] = (),
    cluster_of: Callable[[Any], Hashable] | None = None,
    reviewers: Mapping[Any, Mapping[Any, str]] | None = None,
    epsilon: float = DEFAULT_EPSILON,
    n_resamples: int = 1000,
    seed: int = 0,
    min_units: int = MIN_COMPARED_UNITS,
) -> PairedComparison:
    """Compare two runs' codes against ``gold`` on the units all three have (module docstring).

    Units where a side gave a code in ``ignore_codes`` are left out. ``cluster_of`` maps
    a unit to its conversation (None: a unit bootstrap). Intervals need at least 10
    conversations and ``n_resamples > 0``. ``reviewers`` (reviewer -> unit -> code), when
    given, runs each run's alternative annotator test on the units both runs judged.

    Raises ``ValueError`` with these messages:

    - ``"names must be two different texts"``
    - ``"code 'x' is not in break_mapping"``
    - ``"n_resamples must be an integer >= 0, got <value>"``
    - ``"min_units must be an integer >= 1, got <value>"``
    """
    if len(names) != 2 or names[0] == names[1] or not all(isinstance(n, str) for n in names):
        raise ValueError("names must be two different texts")
    n_resamples = check_int(n_resamples, "n_resamples", 0)
    min_units = check_int(min_units, "min_units", 1)
    for codes in (gold, first, second):
        for code in codes.values():
            if code not in break_mapping:
                raise ValueError(f"code {code!r} is not in break_mapping")
    ignored = set(ignore_codes)
    units = _sorted(
        [
            u
            for u in gold
            if u in first and u in second and not ignored & {gold[u], first[u], second[u]}
        ]
    )
    n = len(units)
    labels = sorted({c for u in units for c in (gold[u], first[u], second[u])})
    index = {code: i for i, code in enumerate(labels)}
    k = max(len(labels), 1)
    gold_idx = np.array([index[gold[u]] for u in units], dtype=np.int64)
    first_idx = np.array([index[first[u]] for u in units], dtype=np.int64)
    second_idx = np.array([index[second[u]] for u in units], dtype=np.int64)
    clusters = cluster_codes([cluster_of(u) for u in units]) if cluster_of is not None else None
    n_conversations = int(clusters.max()) + 1 if clusters is not None and n else n
    method = bootstrap_method(clusters)

    point_kappa = [
        float(kappa_from_confusion(confusion_from_codes(gold_idx, idx, n_categories=k)))
        for idx in (first_idx, second_idx)
    ]
    point_accuracy = [
        float(np.mean(idx == gold_idx)) if n else math.nan for idx in (first_idx, second_idx)
    ]
    resampled_kappa: list[np.ndarray] | None = None
    resampled_accuracy: list[np.ndarray] | None = None
    no_interval: str | None = None
    if n_resamples == 0:
        no_interval = "no interval: no bootstrap resamples were asked for"
    elif n_conversations < MIN_BOOTSTRAP_UNITS:
        no_interval = (
            f"no interval: only {n_conversations} "
            f"{'conversations' if clusters is not None else 'units'} (fewer than "
            f"{MIN_BOOTSTRAP_UNITS})"
        )
    else:
        resampled_kappa, resampled_accuracy = [], []
        for idx in (first_idx, second_idx):
            # the same seed and clusters: the same draws of conversations for both runs
            stack = bootstrap_confusions(
                gold_idx, idx, k, n_resamples=n_resamples, seed=seed, clusters=clusters
            )
            totals = stack.sum(axis=(1, 2))
            resampled_kappa.append(kappa_from_confusion(stack))
            trace = np.trace(stack, axis1=1, axis2=2)
            share = np.full(totals.shape, np.nan)
            np.divide(trace, totals, out=share, where=totals > 0)
            resampled_accuracy.append(share)

    def pick(values: list[np.ndarray] | None, i: int) -> np.ndarray | None:
        return None if values is None else values[i]

    def difference(values: list[np.ndarray] | None) -> np.ndarray | None:
        return None if values is None else values[1] - values[0]

    kappa = {
        name: _estimate(point_kappa[i], pick(resampled_kappa, i), n, method, no_interval)
        for i, name in enumerate(names)
    }
    accuracy = {
        name: _estimate(point_accuracy[i], pick(resampled_accuracy, i), n, method, no_interval)
        for i, name in enumerate(names)
    }
    kappa_difference = _estimate(
        point_kappa[1] - point_kappa[0], difference(resampled_kappa), n, method, no_interval
    )
    accuracy_difference = _estimate(
        point_accuracy[1] - point_accuracy[0],
        difference(resampled_accuracy),
        n,
        method,
        no_interval,
    )

    both = only_first = only_second = neither = 0
    for u in units:
        truth = break_mapping[gold[u]]
        said = (break_mapping[first[u]], break_mapping[second[u]])
        if truth is None or None in said:
            continue
        right = (said[0] == truth, said[1] == truth)
        both += right == (True, True)
        only_first += right == (True, False)
        only_second += right == (False, True)
        neither += right == (False, False)
    statistic, p_value = mcnemar_exact(only_first, only_second)
    mcnemar = McNemarResult(((both, only_first), (only_second, neither)), statistic, p_value)

    alt: dict[str, AltTestResult] | None = None
    judged_by_both = [u for u in first if u in second]
    if reviewers is not None:
        break_codes = {code for code, cls in break_mapping.items() if cls == BREAK}
        alt = {
            name: alt_test(
                reviewers,
                {u: run[u] for u in judged_by_both},
                epsilon=epsilon,
                break_codes=break_codes,
                baseline=True,
            )
            for name, run in zip(names, (first, second), strict=True)
        }

    differing = tuple(
        DifferingUnit(u, gold[u], first[u], second[u]) for u in units if first[u] != second[u]
    )
    outcome, verdict = _verdict(names, n, min_units, kappa_difference, mcnemar)
    return PairedComparison(
        first=names[0],
        second=names[1],
        n_units=n,
        n_conversations=n_conversations,
        kappa=kappa,
        accuracy=accuracy,
        kappa_difference=kappa_difference,
        accuracy_difference=accuracy_difference,
        mcnemar=mcnemar,
        alt_test=alt,
        alt_test_units=len(judged_by_both),
        differing=differing,
        outcome=outcome,
        verdict=verdict,
        n_resamples=n_resamples,
        seed=seed,
    )


def _p_text(p: float) -> str:
    return "p < 0.001" if p < 0.001 else f"p = {p:.3g}"


def _units(n: int) -> str:
    return f"{n} unit{'' if n == 1 else 's'}"


MIN_DISCORDANT = 6
"""Fewer units where the runs differ on break / no break cannot reach p < 0.05 in the
exact test however they split (2 * 0.5 ** 5 = 0.0625)."""


def _test_clause(names: tuple[str, str], mcnemar: McNemarResult) -> tuple[int, bool, str]:
    """``(direction, informative, clause)`` of McNemar's test: direction +1 when the
    second run is right where the first was wrong significantly more often, -1 the other
    way round, 0 neither; ``informative`` is false when too few units differ for the test
    to find anything (:data:`MIN_DISCORDANT`)."""
    a, b = names
    only_a, only_b = mcnemar.table[0][1], mcnemar.table[1][0]
    p = _p_text(mcnemar.p_value)
    differ = only_a + only_b
    if differ == 0:
        return 0, True, "on break / no break both are right or wrong on the same units"
    if differ < MIN_DISCORDANT:
        return (
            0,
            False,
            (
                f"on break / no break they differ on only {_units(differ)} (only {a} right on "
                f"{only_a}, only {b} on {only_b}), too few for McNemar's test to tell ({p})"
            ),
        )
    if mcnemar.p_value >= TEST_LEVEL:
        return (
            0,
            True,
            (
                f"each is right where the other is wrong about as often (only {a} on "
                f"{_units(only_a)}, only {b} on {only_b}; McNemar {p})"
            ),
        )
    direction = 1 if only_b > only_a else -1
    winner, loser, wins, losses = (
        (b, a, only_b, only_a) if direction > 0 else (a, b, only_a, only_b)
    )
    reverse = (
        "never the reverse" if losses == 0 else f"{loser} where {winner} was wrong on {losses}"
    )
    return (
        direction,
        True,
        (
            f"{winner} is right where {loser} was wrong on {_units(wins)} and {reverse} "
            f"(McNemar {p})"
        ),
    )


def _verdict(
    names: tuple[str, str],
    n: int,
    min_units: int,
    difference: Estimate,
    mcnemar: McNemarResult,
) -> tuple[str, str]:
    """The outcome and its sentence, from the kappa difference (second - first) and
    McNemar's test, reconciled (module docstring)."""
    a, b = names
    if n < min_units:
        return "too_few_units", (
            f"No verdict: only {_units(n)} with gold judged by both runs "
            f"(at least {min_units} needed)."
        )
    test, informative, clause = _test_clause(names, mcnemar)

    def likely(interval: str) -> tuple[str, str]:
        """The test alone finds a difference: likely better, confirm on more gold."""
        winner, loser = (b, a) if test > 0 else (a, b)
        return (
            "second_likely_better" if test > 0 else "first_likely_better",
            f"{clause}{interval}: {winner} is likely better than {loser}, confirm on more gold.",
        )

    if difference.value is None or difference.ci95 is None:
        why = difference.reason or "the kappa difference has no interval"
        if test:
            return likely(f", but the kappa difference has no interval on {n} units ({why})")
        return "undefined", f"No verdict on {n} units: {why}; {clause}."
    low, high = difference.ci95
    effect = 1 if low > 0 else -1 if high < 0 else 0
    if effect:
        winner, loser = (b, a) if effect > 0 else (a, b)
        sign = effect
        kappa = (
            f"kappa {_signed(sign * difference.value)} "
            f"[{_signed(sign * (low if sign > 0 else high))}, "
            f"{_signed(sign * (high if sign > 0 else low))}] on {n} units"
        )
        better = f"{winner} agrees with gold better than {loser}: {kappa}"
        outcome = "second_better" if effect > 0 else "first_better"
        if test == effect:
            return outcome, f"{better}, and {clause}."
        if test == 0 and not informative:
            return outcome, f"{better}; {clause}."
        if test == 0:
            return outcome, (
                f"{better}; {clause}: {winner} tells the codes apart better, not the breaks."
            )
        return "mixed", (
            f"Mixed: {better}, but {clause}: read the units where they differ before choosing."
        )
    interval = f"kappa {_signed(difference.value)} [{_signed(low)}, {_signed(high)}] on {n} units"
    if test:
        return likely(f"; the kappa interval still includes no change ({interval})")
    return "no_difference", (
        f"No detectable difference: {interval}, and {clause}; neither is shown better "
        f"(keep {a}, or gather more gold to tell them apart)."
    )
