"""How a judge's break scores relate to the truth: threshold sweep, reliability diagram.

Guo et al. (2017) for ECE. Calibration maps are in :mod:`.score_map`.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypedDict

import numpy as np
from numpy.typing import ArrayLike, NDArray

from review_app.stats.checks import check_int, check_labels_and_scores, check_probabilities
from review_app.stats.confusion import binary_metrics
from review_app.stats.core import (
    MIN_MINORITY_UNITS,
    TOO_FEW_BREAKS,
    kappa_from_confusion,
)

DEFAULT_THRESHOLDS: tuple[float, ...] = tuple(round(0.05 * i, 2) for i in range(21))

_TIE_TOLERANCE = 1e-12


def _finite_or_none(value: float | np.floating[Any] | None) -> float | None:
    if value is None:
        return None
    number = float(value)
    return number if math.isfinite(number) else None


class ThresholdPointJson(TypedDict):
    threshold: float
    tp: int
    fp: int
    fn: int
    tn: int
    kappa: float | None
    f1: float | None
    precision: float | None
    recall: float | None
    accuracy: float | None
    is_best: bool
    reasons: dict[str, str]


class ThresholdSweepJson(TypedDict):
    """:meth:`ThresholdSweep.to_dict`."""

    points: list[ThresholdPointJson]
    best_threshold: float | None
    best_reason: str | None
    n: int
    n_break: int


class ReliabilityBinJson(TypedDict):
    lower: float
    upper: float
    count: int
    mean_predicted: float
    observed_frequency: float


class ReliabilityJson(TypedDict):
    """:meth:`ReliabilityReport.to_dict`."""

    bins: list[ReliabilityBinJson]
    n: int
    n_bins: int
    brier_score: float | None
    expected_calibration_error: float | None
    max_calibration_error: float | None
    reason: str | None


@dataclass(frozen=True)
class ThresholdPoint:
    """Metrics when a unit is predicted to break exactly when ``score >= threshold``.

    ``reasons`` names each metric that is ``None`` and why.
    """

    threshold: float
    tp: int
    fp: int
    fn: int
    tn: int
    kappa: float | None
    f1: float | None
    precision: float | None
    recall: float | None
    accuracy: float | None
    is_best: bool
    reasons: Mapping[str, str] = field(default_factory=dict)

    @classmethod
    def from_dict(cls, data: ThresholdPointJson) -> ThresholdPoint:
        return cls(
            threshold=data["threshold"],
            tp=data["tp"],
            fp=data["fp"],
            fn=data["fn"],
            tn=data["tn"],
            kappa=data["kappa"],
            f1=data["f1"],
            precision=data["precision"],
            recall=data["recall"],
            accuracy=data["accuracy"],
            is_best=data["is_best"],
            reasons=data["reasons"],
        )

    def to_dict(self) -> ThresholdPointJson:
        return {
            "threshold": self.threshold,
            "tp": self.tp,
            "fp": self.fp,
            "fn": self.fn,
            "tn": self.tn,
            "kappa": self.kappa,
            "f1": self.f1,
            "precision": self.precision,
            "recall": self.recall,
            "accuracy": self.accuracy,
            "is_best": self.is_best,
            "reasons": dict(self.reasons),
        }


@dataclass(frozen=True)
class ThresholdSweep:
    """Metrics per threshold (ascending) and the threshold with the highest kappa.

    ``best_threshold`` is ``None`` when kappa is undefined at every threshold;
    ``best_reason`` then says why.
    """

    points: tuple[ThresholdPoint, ...]
    best_threshold: float | None
    best_reason: str | None
    n: int
    n_break: int

    @property
    def best(self) -> ThresholdPoint | None:
        return next((p for p in self.points if p.is_best), None)

    @classmethod
    def from_dict(cls, data: ThresholdSweepJson) -> ThresholdSweep:
        """The sweep back from :meth:`to_dict` (e.g. read from a stored report)."""
        return cls(
            points=tuple(ThresholdPoint.from_dict(p) for p in data["points"]),
            best_threshold=data["best_threshold"],
            best_reason=data["best_reason"],
            n=data["n"],
            n_break=data["n_break"],
        )

    def to_dict(self) -> ThresholdSweepJson:
        return {
            "points": [p.to_dict() for p in self.points],
            "best_threshold": self.best_threshold,
            "best_reason": self.best_reason,
            "n": self.n,
            "n_break": self.n_break,
        }


def threshold_sweep(
    *,
    y_true: Sequence[int] | ArrayLike,
    scores: Sequence[float] | ArrayLike,
    thresholds: Sequence[float] | ArrayLike | None = None,
    min_minority_units: int = MIN_MINORITY_UNITS,
) -> ThresholdSweep:
    """Kappa, F1, precision, recall and accuracy of ``score >= t`` for each threshold t.

    ``y_true`` holds the reference classes (1 = break, 0 = no break) and ``scores`` the
    judge's break probabilities. Thresholds default to 0.00, 0.05, ..., 1.00; pass
    ``numpy.unique(scores)`` for an exhaustive search. They are sorted and de-duplicated.
    Kappa is Cohen's (1960) on the 2x2 table; precision TP/(TP+FP), recall TP/(TP+FN),
    F1 2TP/(2TP+FP+FN), accuracy (TP+TN)/n. Recall is non-increasing in the threshold.

    ``best`` maximises kappa; it is not chosen (``best_threshold`` ``None``, reason
    "too few breaks to judge") when either class has fewer than ``min_minority_units``
    units (10 by default). Ties
    (within 1e-12) go to the threshold closest to 0.5,
    the decision threshold a calibrated probability implies under equal costs, so the
    choice departs as little as possible from reading the score as a probability; a
    remaining tie (e.g. 0.4 and 0.6) goes to the lower threshold, which finds more
    breaks.

    Raises ``ValueError`` with these messages:

    - ``"y_true must contain only 0 (no break) and 1 (break), got <value>"``
    - ``"scores must be finite numbers in [0, 1]"``
    - ``"y_true and scores must have the same length, got <a> and <b>"``
    - ``"thresholds must be finite numbers in [0, 1]"``
    - ``"thresholds must not be empty"``
    """
    y, s = check_labels_and_scores(y_true, scores, "scores")
    grid = np.asarray(DEFAULT_THRESHOLDS if thresholds is None else thresholds)
    if grid.size == 0:
        raise ValueError("thresholds must not be empty")
    grid = np.unique(check_probabilities(grid, "thresholds"))

    n = int(y.size)
    n_break = int(y.sum())
    sorted_all = np.sort(s)
    sorted_break = np.sort(s[y == 1])
    predicted = n - np.searchsorted(sorted_all, grid, side="left")
    tp = n_break - np.searchsorted(sorted_break, grid, side="left")
    fp = predicted - tp
    fn = n_break - tp
    tn = (n - n_break) - fp
    binary = np.stack([np.stack([tn, fp], -1), np.stack([fn, tp], -1)], -2)
    kappa = kappa_from_confusion(binary)
    metrics = binary_metrics(binary)

    best_index: int | None = None
    best_reason: str | None
    minority = min(n_break, n - n_break)
    if n and minority < min_minority_units:
        best_reason = (
            f"{TOO_FEW_BREAKS}: {minority} units in the rarer class "
            f"(fewer than {min_minority_units}), so no threshold is chosen"
        )
    elif np.all(np.isnan(kappa)):
        best_reason = (
            "no units"
            if n == 0
            else "kappa is undefined at every threshold: the reference has a single class "
            "and every threshold predicts that class for all units"
        )
    else:
        top = np.nanmax(kappa)
        tied = np.flatnonzero(np.abs(kappa - top) <= _TIE_TOLERANCE)
        best_index = int(min(tied, key=lambda i: (round(abs(float(grid[i]) - 0.5), 12), grid[i])))
        best_reason = (
            "highest kappa"
            if tied.size == 1
            else f"highest kappa, tied at {tied.size} thresholds; the one closest to 0.5 chosen"
        )

    points = []
    for i, threshold in enumerate(grid.tolist()):
        reasons: dict[str, str] = {}
        if n == 0:
            reasons = dict.fromkeys(("kappa", "f1", "precision", "recall", "accuracy"), "no units")
        else:
            if math.isnan(kappa[i]):
                reasons["kappa"] = "kappa is undefined: reference and prediction are one same class"
            if math.isnan(metrics["precision"][i]):
                reasons["precision"] = "precision is undefined: no score reaches the threshold"
            if math.isnan(metrics["recall"][i]):
                reasons["recall"] = "recall is undefined: the reference has no break"
            if math.isnan(metrics["f1"][i]):
                reasons["f1"] = "F1 is undefined: no break in the reference or the prediction"
        points.append(
            ThresholdPoint(
                threshold=float(threshold),
                tp=int(tp[i]),
                fp=int(fp[i]),
                fn=int(fn[i]),
                tn=int(tn[i]),
                kappa=_finite_or_none(kappa[i]),
                f1=_finite_or_none(metrics["f1"][i]),
                precision=_finite_or_none(metrics["precision"][i]),
                recall=_finite_or_none(metrics["recall"][i]),
                accuracy=_finite_or_none(metrics["break_accuracy"][i]),
                is_best=i == best_index,
                reasons=reasons,
            )
        )
    return ThresholdSweep(
        points=tuple(points),
        best_threshold=None if best_index is None else float(grid[best_index]),
        best_reason=best_reason,
        n=n,
        n_break=n_break,
    )


@dataclass(frozen=True)
class ReliabilityBin:
    lower: float
    upper: float
    count: int
    mean_predicted: float
    observed_frequency: float

    @classmethod
    def from_dict(cls, data: ReliabilityBinJson) -> ReliabilityBin:
        return cls(
            lower=data["lower"],
            upper=data["upper"],
            count=data["count"],
            mean_predicted=data["mean_predicted"],
            observed_frequency=data["observed_frequency"],
        )

    def to_dict(self) -> ReliabilityBinJson:
        return {
            "lower": self.lower,
            "upper": self.upper,
            "count": self.count,
            "mean_predicted": self.mean_predicted,
            "observed_frequency": self.observed_frequency,
        }


@dataclass(frozen=True)
class ReliabilityReport:
    """Reliability diagram data and calibration scores of break probabilities.

    ``bins`` lists the non-empty equal-width bins. ``brier_score``,
    ``expected_calibration_error`` and ``max_calibration_error`` are ``None`` (with
    ``reason``) only when there are no units.
    """

    bins: tuple[ReliabilityBin, ...]
    n: int
    n_bins: int
    brier_score: float | None
    expected_calibration_error: float | None
    max_calibration_error: float | None
    reason: str | None

    @classmethod
    def from_dict(cls, data: ReliabilityJson) -> ReliabilityReport:
        """The report back from :meth:`to_dict` (e.g. read from a stored report)."""
        return cls(
            bins=tuple(ReliabilityBin.from_dict(b) for b in data["bins"]),
            n=data["n"],
            n_bins=data["n_bins"],
            brier_score=data["brier_score"],
            expected_calibration_error=data["expected_calibration_error"],
            max_calibration_error=data["max_calibration_error"],
            reason=data["reason"],
        )

    def to_dict(self) -> ReliabilityJson:
        return {
            "bins": [b.to_dict() for b in self.bins],
            "n": self.n,
            "n_bins": self.n_bins,
            "brier_score": self.brier_score,
            "expected_calibration_error": self.expected_calibration_error,
            "max_calibration_error": self.max_calibration_error,
            "reason": self.reason,
        }


def calibration_errors(
    y: NDArray[np.int64], p: NDArray[np.float64], n_bins: int
) -> tuple[list[ReliabilityBin], float, float]:
    """The non-empty reliability bins, ECE and MCE of checked classes ``y`` and
    probabilities ``p`` over ``n_bins`` equal-width bins (see :func:`reliability`)."""
    edges = np.linspace(0.0, 1.0, n_bins + 1)
    # Right-closed bins with 0 in the first one, as sklearn.calibration.calibration_curve.
    bin_ids = np.searchsorted(edges[1:-1], p, side="left")
    counts = np.bincount(bin_ids, minlength=n_bins)
    predicted_sums = np.bincount(bin_ids, weights=p, minlength=n_bins)
    observed_sums = np.bincount(bin_ids, weights=y, minlength=n_bins)
    bins: list[ReliabilityBin] = []
    ece = 0.0
    mce = 0.0
    for i in np.flatnonzero(counts):
        mean_predicted = predicted_sums[i] / counts[i]
        observed = observed_sums[i] / counts[i]
        gap = abs(observed - mean_predicted)
        ece += counts[i] / y.size * gap
        mce = max(mce, gap)
        bins.append(
            ReliabilityBin(
                lower=int(i) / n_bins,
                upper=(int(i) + 1) / n_bins,
                count=int(counts[i]),
                mean_predicted=float(mean_predicted),
                observed_frequency=float(observed),
            )
        )
    return bins, float(ece), float(mce)


def reliability(
    *,
    y_true: Sequence[int] | ArrayLike,
    probabilities: Sequence[float] | ArrayLike,
    n_bins: int = 10,
) -> ReliabilityReport:
    """Reliability diagram, Brier score and calibration errors of break probabilities.

    Bins are ``n_bins`` equal-width intervals of [0, 1], right-closed with 0 in the first
    (the binning of ``sklearn.calibration.calibration_curve(strategy="uniform")``); empty
    bins are omitted. With N units, bin b holding n_b of them:

    - Brier score (Brier 1950) = (1/N) sum_i (p_i - y_i)^2, equal to
      ``sklearn.metrics.brier_score_loss``;
    - expected calibration error (Naeini et al. 2015; Guo et al. 2017)
      ECE = sum_b (n_b / N) |mean(y in b) - mean(p in b)|;
    - maximum calibration error MCE = max_b |mean(y in b) - mean(p in b)|.

    Raises ``ValueError`` with these messages:

    - ``"y_true must contain only 0 (no break) and 1 (break), got <value>"``
    - ``"probabilities must be finite numbers in [0, 1]"``
    - ``"y_true and probabilities must have the same length, got <a> and <b>"``
    - ``"n_bins must be an integer >= 1, got <value>"``
    """
    y, p = check_labels_and_scores(y_true, probabilities, "probabilities")
    n_bins = check_int(n_bins, "n_bins", 1)
    if y.size == 0:
        return ReliabilityReport((), 0, n_bins, None, None, None, "no units")
    bins, ece, mce = calibration_errors(y, p, n_bins)
    brier = float(np.mean((p - y) ** 2))
    return ReliabilityReport(tuple(bins), int(y.size), n_bins, brier, ece, mce, None)
