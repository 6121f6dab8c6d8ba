"""Where in the conversation the role breaks: break rates by answer position and role.

A unit is an assistant turn; its *position* is its ordinal among the conversation's
assistant turns (1st, 2nd, ... answer). Positions are binned in ordinal bins of doubling
width (1, 2, 3-4, 5-8, 9+), merged where a bin would hold fewer than ``min_units`` units
(:func:`position_bins`). Break rates per group come with a percentile cluster
bootstrap interval resampling conversations (Field & Welsh 2007; turns of one
conversation are not independent). The slope is a logistic regression of break on
position, ``logit P(break) = b0 + b1 * position``, with cluster-robust (by
conversation) standard errors (the sandwich statsmodels' GLM computes for
``cov_type="cluster"``, checked against it in the tests): ``exp(b1)``
is the factor on the break odds per later answer, its 95% interval
``exp(b1 +- 1.96 se)``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TypedDict

import numpy as np
from numpy.typing import ArrayLike

from review_app.stats.core import cluster_draws, percentile_interval

__all__ = [
    "GroupRate",
    "PositionBin",
    "Slope",
    "bin_of_positions",
    "first_break_positions",
    "grouped_rates",
    "position_bins",
    "position_slope",
]


class GroupRate(TypedDict):
    """A group's break rate (:func:`grouped_rates`)."""

    units: int
    breaks: int
    rate: float | None
    ci95: list[float] | None


class Slope(TypedDict):
    """:func:`position_slope`: all figures ``None`` with a ``reason`` when it cannot be
    fitted."""

    odds_ratio: float | None
    ci95: list[float] | None
    log_odds: float | None
    se: float | None
    reason: str | None


@dataclass(frozen=True)
class PositionBin:
    """Positions ``low`` .. ``high`` (``high`` None: ``low`` and later)."""

    low: int
    high: int | None

    @property
    def label(self) -> str:
        if self.high is None:
            return f"{self.low}+"
        return str(self.low) if self.low == self.high else f"{self.low}-{self.high}"


def position_bins(positions: ArrayLike, *, min_units: int = 30) -> list[PositionBin]:
    """Ordinal bins of doubling width, 1, 2, 3-4, 5-8, 9-16, ..., the last one open
    ("9+"), merged as the data allow: a bin with fewer than ``min_units`` units joins the
    next one, and a last (open) bin with fewer joins the one before. So early answers,
    where most units are, keep bins of their own, and the thin tail is pooled. No units:
    no bins; fewer than ``min_units`` in all: one bin "1+".

    Raises ``ValueError("min_units must be at least 1, got <m>")`` and
    ``ValueError("positions must be whole numbers from 1")``.
    """
    if isinstance(min_units, bool) or min_units < 1:
        raise ValueError(f"min_units must be at least 1, got {min_units}")
    p = np.asarray(positions, dtype=np.int64)
    if p.size == 0:
        return []
    if p.min() < 1:
        raise ValueError("positions must be whole numbers from 1")
    counts = np.bincount(p)  # counts[i]: units at position i
    top = int(p.max())
    edges = [1, 2]
    while edges[-1] <= top:
        edges.append(2 * edges[-1] - 1)  # 1, 2, 3, 5, 9, 17, ...
    edges = [edge for edge in edges if edge <= top]
    bins: list[PositionBin] = []
    low, units = edges[0], 0
    for k, start in enumerate(edges):
        last = k + 1 == len(edges)
        units += int(counts[start : top + 1].sum() if last else counts[start : edges[k + 1]].sum())
        if not last and units >= min_units:
            bins.append(PositionBin(low, edges[k + 1] - 1))
            low, units = edges[k + 1], 0
    if units >= min_units or not bins:
        bins.append(PositionBin(low, None))
    else:
        bins[-1] = PositionBin(bins[-1].low, None)
    return bins


def bin_of_positions(positions: ArrayLike, bins: Sequence[PositionBin]) -> np.ndarray:
    """The bin index of each position (the open bin takes everything from its low)."""
    p = np.asarray(positions, dtype=np.int64)
    lows = np.array([b.low for b in bins], dtype=np.int64)
    return np.searchsorted(lows, p, side="right") - 1


def grouped_rates(
    groups: ArrayLike,
    breaks: ArrayLike,
    clusters: ArrayLike,
    *,
    n_groups: int,
    n_resamples: int = 1000,
    seed: int = 0,
) -> list[GroupRate]:
    """``[{"units", "breaks", "rate", "ci95"}]`` per group ``0..n_groups-1``.

    ``clusters``: each unit's conversation, coded ``0..C-1``. A resample draws ``C``
    conversations with replacement; a group's rate in it is its breaks over its units
    among the drawn conversations (undefined when it has none); the interval is the
    percentile interval of those rates (none when the rate is undefined in more than
    half of the resamples, the group has no unit, or ``n_resamples`` is 0).
    """
    g = np.asarray(groups, dtype=np.int64)
    y = np.asarray(breaks, dtype=np.float64)
    c = np.asarray(clusters, dtype=np.int64)
    if not (g.shape == y.shape == c.shape):
        raise ValueError("groups, breaks and clusters must have the same length")
    n_clusters = int(c.max()) + 1 if c.size else 0
    units = np.zeros((max(n_clusters, 1), n_groups))
    hits = np.zeros((max(n_clusters, 1), n_groups))
    np.add.at(units, (c, g), 1.0)
    np.add.at(hits, (c, g), y)
    resampled = np.full((n_resamples, n_groups), np.nan)
    if n_clusters and n_resamples:
        for start, counts, _ in cluster_draws(
            n_clusters, n_resamples=n_resamples, seed=seed, clusters=None
        ):
            weights = counts.astype(np.float64)
            den = weights @ units
            num = weights @ hits
            with np.errstate(invalid="ignore", divide="ignore"):
                resampled[start : start + len(weights)] = np.where(den > 0, num / den, np.nan)
    result: list[GroupRate] = []
    for k in range(n_groups):
        n = int(units[:, k].sum())
        b = int(hits[:, k].sum())
        ci = percentile_interval(resampled[:, k])[0] if n and n_resamples else None
        result.append(
            {
                "units": n,
                "breaks": b,
                "rate": b / n if n else None,
                "ci95": None if ci is None else [ci[0], ci[1]],
            }
        )
    return result


def first_break_positions(
    clusters: ArrayLike, positions: ArrayLike, breaks: ArrayLike
) -> np.ndarray:
    """Per conversation ``0..C-1``, the position of its first break; 0 when none."""
    c = np.asarray(clusters, dtype=np.int64)
    p = np.asarray(positions, dtype=np.int64)
    y = np.asarray(breaks, dtype=bool)
    n_clusters = int(c.max()) + 1 if c.size else 0
    first = np.full(n_clusters, np.iinfo(np.int64).max)
    np.minimum.at(first, c[y], p[y])
    return np.where(first == np.iinfo(np.int64).max, 0, first)


def _logistic_cluster_fit(
    x: np.ndarray, y: np.ndarray, clusters: np.ndarray, *, max_iter: int = 100
) -> tuple[float, float] | None:
    """Slope and its cluster-robust standard error of ``logit P(y) = b0 + b1 x``.

    Newton-Raphson (IRLS) for the maximum-likelihood fit; then the sandwich
    ``V = c (X'WX)^-1 (sum_g s_g s_g') (X'WX)^-1`` with ``s_g = X_g'(y_g - mu_g)`` the
    score of cluster ``g`` and ``c = G/(G-1) (N-1)/(N-K)``, the small-sample
    correction statsmodels applies for ``cov_type="cluster"`` (tests check against
    ``statsmodels.GLM(...).fit(cov_type="cluster")``). ``None`` when the fit does not
    converge (separation drives the slope to infinity).
    """
    design = np.column_stack([np.ones_like(x), x])
    beta = np.zeros(2)
    for _ in range(max_iter):
        eta = np.clip(design @ beta, -30.0, 30.0)
        mu = 1.0 / (1.0 + np.exp(-eta))
        weights = mu * (1.0 - mu)
        information = design.T @ (design * weights[:, None])
        try:
            step = np.linalg.solve(information, design.T @ (y - mu))
        except np.linalg.LinAlgError:
            return None
        beta = beta + step
        if np.max(np.abs(step)) < 1e-10:
            break
    else:
        return None
    if not np.all(np.isfinite(beta)) or np.max(np.abs(beta)) > 25:
        return None
    eta = design @ beta
    mu = 1.0 / (1.0 + np.exp(-eta))
    information = design.T @ (design * (mu * (1.0 - mu))[:, None])
    try:
        bread = np.linalg.inv(information)
    except np.linalg.LinAlgError:
        return None
    _, codes = np.unique(clusters, return_inverse=True)
    n_groups = int(codes.max()) + 1
    scores = np.zeros((n_groups, 2))
    np.add.at(scores, codes, design * (y - mu)[:, None])
    n, k = design.shape
    correction = n_groups / (n_groups - 1) * (n - 1) / (n - k)
    covariance = correction * bread @ (scores.T @ scores) @ bread
    variance = float(covariance[1, 1])
    if not (variance > 0 and math.isfinite(variance)):
        return None
    return float(beta[1]), math.sqrt(variance)


def position_slope(positions: ArrayLike, breaks: ArrayLike, clusters: ArrayLike) -> Slope:
    """The logistic slope of break on position with a cluster-robust interval.

    ``{"odds_ratio", "ci95", "log_odds", "se", "reason"}``: ``odds_ratio = exp(b1)``,
    the factor on the odds of a break per later answer. All None with a ``reason``
    when it cannot be fitted (fewer than 2 positions or 2 conversations, no break,
    only breaks, or separation).
    """
    p = np.asarray(positions, dtype=np.float64)
    y = np.asarray(breaks, dtype=np.float64)
    c = np.asarray(clusters, dtype=np.int64)

    def empty(reason: str) -> Slope:
        return {"odds_ratio": None, "ci95": None, "log_odds": None, "se": None, "reason": reason}

    if np.unique(p).size < 2 or np.unique(c).size < 2:
        return empty("needs units at 2 positions or more, from 2 conversations")
    if y.min() == y.max():
        return empty("no slope: every unit is a break, or none is")
    fitted = _logistic_cluster_fit(p, y, c)
    if fitted is None:
        return empty("no slope: the fit did not converge")
    slope, se = fitted
    if not (math.isfinite(slope) and math.isfinite(se)):
        return empty("no slope: the fit did not converge")
    return {
        "odds_ratio": math.exp(slope),
        "ci95": [
            math.exp(slope - 1.959963984540054 * se),
            math.exp(slope + 1.959963984540054 * se),
        ],
        "log_odds": slope,
        "se": se,
        "reason": None,
    }
