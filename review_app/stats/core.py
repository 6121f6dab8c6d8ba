"""The statistics every report shares: one estimate type, kappa, Wilson, the bootstraps.

Pure computation (numpy/scipy only). Each statistic elsewhere in the app is written on
top of these pieces, so a kappa, a proportion's interval or a resample is computed in
one place:

- :class:`Estimate`: a value, its 95% interval, the number of units behind it, why a
  value or interval is missing, a warning, and how the interval was made;
- :func:`kappa_from_confusion`: Cohen's (1960) kappa of a stack of confusion matrices;
- :func:`wilson_interval` / :func:`proportion`: Wilson (1927) score intervals, and no
  interval at all (with a reason) when the denominator is under
  :data:`MIN_PROPORTION_UNITS`;
- :func:`resample_weights`: unit and cluster bootstrap weights, a bounded number of
  cells at a time (:data:`BOOTSTRAP_CHUNK_CELLS`); the cluster bootstrap (Field &
  Welsh 2007) resamples conversations and keeps all of their turns
  (:func:`cluster_draws` and :func:`draw_cluster_counts` give the draws per cluster);
- :func:`break_mapping_from_verdicts` and :func:`canonical_order`.

References
----------
Cohen, J. (1960). A coefficient of agreement for nominal scales. Educational and
    Psychological Measurement, 20(1), 37-46.
Wilson, E. B. (1927). Probable inference, the law of succession, and statistical
    inference. Journal of the American Statistical Association, 22(158), 209-212.
Efron, B., & Tibshirani, R. J. (1993). An Introduction to the Bootstrap, ch. 6 and 13.
Field, C. A., & Welsh, A. H. (2007). Bootstrapping clustered data. Journal of the Royal
    Statistical Society B, 69(3), 369-390.

Each function's docstring has numpydoc sections and examples on published values where
there are some (tests/test_doctests.py runs them).
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Iterator, Sequence
from dataclasses import dataclass
from statistics import NormalDist
from typing import Any, Literal, TypedDict, final, overload

import numpy as np
from numpy.typing import ArrayLike, NDArray

__all__ = [
    "BOOTSTRAP_CHUNK_CELLS",
    "BREAK",
    "CLUSTER_METHOD",
    "MIN_BOOTSTRAP_UNITS",
    "MIN_MINORITY_UNITS",
    "MIN_PROPORTION_UNITS",
    "NO_BREAK",
    "TOO_FEW_BREAKS",
    "UNIT_METHOD",
    "WILSON_METHOD",
    "Estimate",
    "EstimateJson",
    "UnitsEstimateJson",
    "break_mapping_from_verdicts",
    "canonical_order",
    "cluster_draws",
    "draw_cluster_counts",
    "kappa_from_confusion",
    "kappa_from_margins",
    "percentile_interval",
    "proportion",
    "ratio",
    "resample_weights",
    "wilson_interval",
]

from review_app.stats.checks import check_confidence, check_positive_int
from review_app.stats.codes import BREAK, NO_BREAK, break_mapping_from_verdicts

BOOTSTRAP_CHUNK_CELLS = 1 << 21
"""Resample weights are built this many (resample x unit) cells at a time (~40 MB)."""

SMALL_COUNT_CELLS = 1 << 16
"""Up to this many (resample x cluster) cells are counted in one bincount; larger chunks
are counted one resample at a time, each in a cache-sized array (same counts)."""

MIN_PROPORTION_UNITS = 10
"""A proportion over fewer units than this gets no interval, only a reason."""

MIN_BOOTSTRAP_UNITS = 10
"""A bootstrap over fewer resampled units (conversations, for the cluster bootstrap) than
this gives no interval, only a reason (the rule of :data:`MIN_PROPORTION_UNITS`)."""

MIN_MINORITY_UNITS = 10
"""No verdict ("passed", "best threshold") from fewer units of the rarer class."""

TOO_FEW_BREAKS = "too few breaks to judge"

WILSON_METHOD = "Wilson score interval"
UNIT_METHOD = "percentile bootstrap over units"
CLUSTER_METHOD = "percentile bootstrap over conversations (cluster bootstrap)"

IntArray = NDArray[np.int64]
FloatArray = NDArray[np.float64]


@final
class EstimateJson(TypedDict):
    """:meth:`Estimate.to_dict`: ``{"value", "n", "ci95", "reason", "warning", "method"}``."""

    value: float | None
    n: int
    ci95: list[float] | None
    reason: str | None
    warning: str | None
    method: str | None


@final
class UnitsEstimateJson(TypedDict):
    """``Estimate.to_dict(count_key="n_units")``: the agreement form (docs/reference.md,
    "Agreement JSON")."""

    value: float | None
    n_units: int
    reason: str | None
    ci95: list[float] | None
    warning: str | None


@dataclass(frozen=True)
class Estimate:
    """One statistic and what stands behind it.

    ``value`` is ``None`` exactly when the statistic is undefined for the data; ``reason``
    then says why (a defined value without an interval uses ``reason`` to say why the
    interval is missing). ``n`` counts the units (or conversations) the value is computed
    on; ``ci95`` is a 95% interval or ``None``; ``warning`` flags a value that rests on
    few units; ``method`` names how the interval was made.
    """

    value: float | None
    n: int
    ci95: tuple[float, float] | None = None
    reason: str | None = None
    warning: str | None = None
    method: str | None = None

    def __post_init__(self) -> None:
        if self.value is not None and not math.isfinite(self.value):
            raise ValueError("Estimate.value must be a finite number or None")

    @property
    def n_units(self) -> int:
        """The same as ``n`` (the agreement figures call it so)."""
        return self.n

    @classmethod
    def from_dict(cls, data: EstimateJson | UnitsEstimateJson) -> Estimate:
        """The estimate back from either form of :meth:`to_dict` (e.g. read from a stored
        report); a figure without ``ci95``, ``reason``, ``warning`` or ``method`` has
        none."""
        ci95 = data.get("ci95")
        if "n_units" in data:
            n, method = data["n_units"], None
        else:
            n, method = data["n"], data.get("method")
        return cls(
            value=data["value"],
            n=int(n),
            ci95=None if ci95 is None else (ci95[0], ci95[1]),
            reason=data.get("reason"),
            warning=data.get("warning"),
            method=method,
        )

    @overload
    def to_dict(self, *, count_key: Literal["n"] = "n") -> EstimateJson: ...

    @overload
    def to_dict(self, *, count_key: Literal["n_units"]) -> UnitsEstimateJson: ...

    def to_dict(
        self, *, count_key: Literal["n", "n_units"] = "n"
    ) -> EstimateJson | UnitsEstimateJson:
        """JSON-ready form.

        ``{"value", "n", "ci95", "reason", "warning", "method"}``; with
        ``count_key="n_units"`` the agreement form ``{"value", "n_units", "reason",
        "ci95", "warning"}`` (docs/reference.md, "Agreement JSON").
        """
        value = None if self.value is None else float(self.value)
        ci95 = None if self.ci95 is None else [float(self.ci95[0]), float(self.ci95[1])]
        if count_key == "n_units":
            return {
                "value": value,
                "n_units": int(self.n),
                "reason": self.reason,
                "ci95": ci95,
                "warning": self.warning,
            }
        return {
            "value": value,
            "n": int(self.n),
            "ci95": ci95,
            "reason": self.reason,
            "warning": self.warning,
            "method": self.method,
        }


# --------------------------------------------------------------------------- arithmetic


def ratio(numerator: ArrayLike, denominator: ArrayLike) -> FloatArray:
    """Element-wise ``numerator / denominator``, NaN where the denominator is 0.

    Parameters
    ----------
    numerator, denominator : array_like
        Counts or sums of broadcastable shapes.

    Returns
    -------
    numpy.ndarray of float64
        The quotients, NaN wherever the denominator is not positive (a share of no units
        is undefined, not 0).

    Examples
    --------
    >>> ratio([3, 1, 0], [4, 0, 2]).tolist()
    [0.75, nan, 0.0]
    """
    top = np.asarray(numerator, dtype=np.float64)
    bottom = np.asarray(denominator, dtype=np.float64)
    out = np.full(np.broadcast(top, bottom).shape, np.nan)
    np.divide(top, bottom, out=out, where=bottom > 0)
    return out


def kappa_from_confusion(confusion: ArrayLike) -> FloatArray:
    """Cohen's kappa of each confusion matrix in a stack of shape ``(..., K, K)``.

    kappa = (p_o - p_e) / (1 - p_e), with p_o = sum_k C_kk / n and
    p_e = sum_k (row_k * col_k) / n^2 [1]_. Multiplying by n^2 gives
    (n * trace - chance) / (n^2 - chance) with chance = sum_k row_k col_k; kappa is
    undefined (NaN) when chance == n^2: both sides used one and the same category on
    every unit. It equals ``sklearn.metrics.cohen_kappa_score`` of the rated units.

    Parameters
    ----------
    confusion : array_like, shape (..., K, K)
        Counts of units per (first rating, second rating), for example from
        :func:`review_app.stats.confusion.confusion_from_codes`. Weighted (bootstrap)
        counts are allowed.

    Returns
    -------
    numpy.ndarray of float64, shape (...)
        The kappa of each matrix, NaN where it is undefined.

    See Also
    --------
    kappa_from_margins : the same kappa from the trace and the margins.

    References
    ----------
    .. [1] Cohen, J. (1960). A coefficient of agreement for nominal scales. Educational
       and Psychological Measurement, 20(1), 37-46.
    .. [2] Wikipedia, "Cohen's kappa", the worked example of 50 grant proposals.

    Examples
    --------
    Two readers say yes or no to 50 grant proposals (rows reader A, columns reader B):
    p_o = 0.7, p_e = 0.5, so kappa = 0.4 [2]_.

    >>> round(float(kappa_from_confusion([[20, 5], [10, 15]])), 3)
    0.4

    A stack gives one kappa per matrix; one category on both sides leaves it undefined.

    >>> kappa_from_confusion([[[20, 5], [10, 15]], [[50, 0], [0, 0]]]).round(3).tolist()
    [0.4, nan]
    """
    matrix = np.asarray(confusion, dtype=np.float64)
    return kappa_from_margins(
        np.trace(matrix, axis1=-2, axis2=-1), matrix.sum(axis=-1), matrix.sum(axis=-2)
    )


def kappa_from_margins(trace: ArrayLike, rows: ArrayLike, columns: ArrayLike) -> FloatArray:
    """Cohen's kappa from a confusion matrix's trace and margins.

    The sufficient statistics of :func:`kappa_from_confusion` (same formula, same
    result): a bootstrap can sum them over resampled units without the K x K cells.

    Parameters
    ----------
    trace : array_like, shape (...)
        The number (or weight) of units on which both sides agree.
    rows, columns : array_like, shape (..., K)
        How many units the first (rows) and the second side (columns) put in each
        category.

    Returns
    -------
    numpy.ndarray of float64, shape (...)
        Kappa, NaN where it is undefined (both sides used one and the same category on
        every unit).

    References
    ----------
    .. [1] Cohen, J. (1960). A coefficient of agreement for nominal scales. Educational
       and Psychological Measurement, 20(1), 37-46.

    Examples
    --------
    The 50 grant proposals of :func:`kappa_from_confusion`: 35 agreements, reader A said
    yes 25 times, reader B 30 times.

    >>> round(float(kappa_from_margins(35, [25, 25], [30, 20])), 3)
    0.4
    """
    trace = np.asarray(trace, dtype=np.float64)
    rows = np.asarray(rows, dtype=np.float64)
    columns = np.asarray(columns, dtype=np.float64)
    n = rows.sum(axis=-1)
    chance = (rows * columns).sum(axis=-1)
    denominator = n * n - chance
    # Exact zero for integer counts; a relative guard for float round-off.
    denominator = np.where(np.abs(denominator) <= 1e-12 * np.maximum(n * n, 1.0), 0.0, denominator)
    out = np.full(np.shape(n), np.nan)
    np.divide(n * trace - chance, denominator, out=out, where=denominator != 0)
    return out


# --------------------------------------------------------------------------- intervals


def _z(confidence: float) -> float:
    check_confidence(confidence)
    return NormalDist().inv_cdf(0.5 + confidence / 2.0)


def wilson_interval(successes: int, n: int, *, confidence: float = 0.95) -> tuple[float, float]:
    """Wilson score interval for a binomial proportion ``successes / n`` [1]_.

    With p = successes / n and z the normal quantile of (1 + confidence) / 2::

        centre     = (p + z^2 / 2n) / (1 + z^2 / n)
        half-width = z / (1 + z^2 / n) * sqrt(p (1 - p) / n + z^2 / 4n^2)

    It equals ``statsmodels.stats.proportion.proportion_confint(successes, n,
    method="wilson")``; unlike the Wald interval it stays inside [0, 1] and does not
    collapse at 0 or n successes [2]_.

    Parameters
    ----------
    successes : int
        Successes, ``0 <= successes <= n``.
    n : int
        Trials, at least 1.
    confidence : float, default 0.95
        Coverage, strictly between 0 and 1.

    Returns
    -------
    tuple of float
        ``(low, high)``, clipped to [0, 1].

    Raises
    ------
    ValueError
        ``"n must be a positive integer, got <n>"``, ``"successes must be an integer in
        0..n, got <successes>"`` or ``"confidence must be strictly between 0 and 1, got
        <value>"``.

    References
    ----------
    .. [1] Wilson, E. B. (1927). Probable inference, the law of succession, and
       statistical inference. Journal of the American Statistical Association, 22(158),
       209-212.
    .. [2] Newcombe, R. G. (1998). Two-sided confidence intervals for the single
       proportion: comparison of seven methods. Statistics in Medicine, 17(8), 857-872.

    Examples
    --------
    Newcombe's [2]_ examples 81/263, 15/148 and 0/20, whose Wilson intervals he gives as
    0.2553-0.3662, 0.0624-0.1605 and 0-0.1611:

    >>> [round(bound, 4) for bound in wilson_interval(81, 263)]
    [0.2553, 0.3662]
    >>> [round(bound, 4) for bound in wilson_interval(15, 148)]
    [0.0624, 0.1605]
    >>> [round(bound, 4) for bound in wilson_interval(0, 20)]
    [0.0, 0.1611]
    """
    check_positive_int(n, "n")
    if (
        isinstance(successes, bool)
        or not isinstance(successes, int | np.integer)
        or not 0 <= successes <= n
    ):
        raise ValueError(f"successes must be an integer in 0..n, got {successes!r}")
    z = _z(confidence)
    p = successes / n
    z2 = z * z
    denominator = 1 + z2 / n
    centre = (p + z2 / (2 * n)) / denominator
    half = z / denominator * math.sqrt(p * (1 - p) / n + z2 / (4 * n * n))
    return max(0.0, centre - half), min(1.0, centre + half)


def proportion(
    successes: int,
    n: int,
    *,
    undefined_reason: str,
    min_units: int = MIN_PROPORTION_UNITS,
) -> Estimate:
    """``successes / n`` with a Wilson 95% interval, or no interval under ``min_units``.

    Parameters
    ----------
    successes, n : int
        The count and its denominator.
    undefined_reason : str
        The reason given when ``n == 0`` (the value is then undefined).
    min_units : int, default :data:`MIN_PROPORTION_UNITS`
        A denominator under this gives the value without an interval and the reason
        ``"no interval: only <n> units behind this proportion (fewer than <min_units>)"``
        (a proportion over so few units gets no honest interval).

    Returns
    -------
    Estimate
        The proportion, its :func:`wilson_interval` (``method`` :data:`WILSON_METHOD`),
        ``n`` the denominator.

    Examples
    --------
    >>> share = proportion(81, 263, undefined_reason="no units")
    >>> round(share.value, 4), [round(bound, 4) for bound in share.ci95]
    (0.308, [0.2553, 0.3662])
    >>> proportion(3, 9, undefined_reason="no units").reason
    'no interval: only 9 units behind this proportion (fewer than 10)'
    >>> proportion(0, 0, undefined_reason="no units").value is None
    True
    """
    if n == 0:
        return Estimate(None, 0, None, undefined_reason)
    value = successes / n
    if n < min_units:
        return Estimate(
            value,
            n,
            None,
            f"no interval: only {n} unit{'' if n == 1 else 's'} behind this proportion "
            f"(fewer than {min_units})",
            warning=f"fewer than {min_units} units",
        )
    return Estimate(value, n, wilson_interval(int(successes), int(n)), None, method=WILSON_METHOD)


def percentile_interval(
    resampled: FloatArray, *, confidence: float = 0.95
) -> tuple[tuple[float, float] | None, str | None]:
    """Efron's percentile interval over the resamples where the statistic is defined [1]_.

    Parameters
    ----------
    resampled : numpy.ndarray of float64, shape (n_resamples,)
        The statistic in each bootstrap resample, NaN where it is undefined.
    confidence : float, default 0.95
        The interval holds the ``(1 - confidence) / 2`` and ``(1 + confidence) / 2``
        percentiles (linear interpolation).

    Returns
    -------
    interval : tuple of float or None
        ``(low, high)``, or None when the statistic is undefined in more than half of
        the resamples.
    reason : str or None
        Why there is no interval, else None.

    References
    ----------
    .. [1] Efron, B., & Tibshirani, R. J. (1993). An Introduction to the Bootstrap,
       chapter 13. Chapman & Hall.

    Examples
    --------
    >>> (low, high), reason = percentile_interval(np.arange(101.0))
    >>> round(low, 6), round(high, 6), reason
    (2.5, 97.5, None)
    >>> interval, reason = percentile_interval(np.array([0.5, np.nan, np.nan]))
    >>> interval is None, reason.startswith("no confidence interval: the statistic is undefined")
    (True, True)
    """
    defined = resampled[np.isfinite(resampled)]
    if defined.size == 0 or 2 * defined.size < resampled.size:
        return None, (
            "no confidence interval: the statistic is undefined in more than half of the "
            "bootstrap resamples"
        )
    tail = 50.0 * (1.0 - confidence)
    low, high = np.percentile(defined, [tail, 100.0 - tail])
    return (float(low), float(high)), None


# --------------------------------------------------------------------------- bootstraps


def resample_weights(
    n_units: int,
    *,
    n_resamples: int,
    seed: int,
    clusters: ArrayLike | None = None,
) -> Iterator[tuple[int, FloatArray]]:
    """Bootstrap weights, chunk by chunk: how often each unit is drawn in each resample.

    - Unit bootstrap (``clusters`` is ``None``): each resample draws ``n_units`` units
      with replacement [1]_.
    - Cluster bootstrap: each resample draws ``C`` clusters with replacement and every
      unit of a drawn cluster comes with it [2]_, so the dependence of turns within a
      conversation is kept.

    The unit bootstrap is the cluster bootstrap with one unit per cluster (``clusters =
    0..n-1``): both draw from the same generator in the same way, so with one turn per
    conversation they give identical resamples.

    Parameters
    ----------
    n_units : int
        The units resampled.
    n_resamples : int
        How many resamples, at least 1.
    seed : int
        Seed of ``numpy.random.default_rng``; the same seed gives the same resamples.
    clusters : array_like of int, shape (n_units,), optional
        The cluster (conversation) of each unit, coded ``0..C-1``.

    Yields
    ------
    start : int
        The index of the chunk's first resample.
    weights : numpy.ndarray of float64, shape (rows, n_units)
        ``weights[r, u]`` is how often unit ``u`` is drawn in resample ``start + r``;
        a chunk holds at most about :data:`BOOTSTRAP_CHUNK_CELLS` cells.

    References
    ----------
    .. [1] Efron, B., & Tibshirani, R. J. (1993). An Introduction to the Bootstrap,
       chapter 6. Chapman & Hall.
    .. [2] Field, C. A., & Welsh, A. H. (2007). Bootstrapping clustered data. Journal of
       the Royal Statistical Society B, 69(3), 369-390.

    Examples
    --------
    Every resample draws as many units as there are; units of one cluster come together.

    >>> [(start, w.sum(axis=1).tolist()) for start, w in resample_weights(
    ...     4, n_resamples=3, seed=0)]
    [(0, [4.0, 4.0, 4.0])]
    >>> (_, weights), = resample_weights(3, n_resamples=5, seed=0, clusters=[0, 0, 1])
    >>> bool((weights[:, 0] == weights[:, 1]).all()), weights[:, [0, 2]].sum(axis=1).tolist()
    (True, [2.0, 2.0, 2.0, 2.0, 2.0])
    """
    for start, cluster_counts, cluster_of in cluster_draws(
        n_units, n_resamples=n_resamples, seed=seed, clusters=clusters
    ):
        weights = cluster_counts[:, cluster_of] if clusters is not None else cluster_counts
        yield start, weights.astype(np.float64)


def cluster_draws(
    n_units: int, *, n_resamples: int, seed: int, clusters: ArrayLike | None
) -> Iterator[tuple[int, IntArray, IntArray]]:
    """The draws behind :func:`resample_weights`, per cluster rather than per unit.

    Parameters
    ----------
    n_units, n_resamples, seed, clusters
        As in :func:`resample_weights`.

    Yields
    ------
    start : int
        The index of the chunk's first resample.
    counts : numpy.ndarray of int64, shape (rows, C)
        ``counts[r, c]`` is how often cluster ``c`` is drawn in resample ``start + r``
        (the draws of :func:`draw_cluster_counts`).
    cluster_of : numpy.ndarray of int64, shape (n_units,)
        The cluster code of each unit (``0..n_units-1`` without clusters), so that
        ``counts[:, cluster_of]`` are the unit weights.

    Raises
    ------
    ValueError
        ``"clusters must hold one cluster per unit (<n_units>)"`` or ``"n_resamples must
        be a positive integer, got <value>"``.

    Examples
    --------
    >>> (start, counts, cluster_of), = cluster_draws(
    ...     3, n_resamples=4, seed=0, clusters=[0, 0, 1])
    >>> counts.shape, counts.sum(axis=1).tolist(), cluster_of.tolist()
    ((4, 2), [2, 2, 2, 2], [0, 0, 1])
    """
    check_positive_int(n_resamples, "n_resamples")
    if clusters is None:
        cluster_of = np.arange(n_units, dtype=np.int64)
        n_clusters = n_units
    else:
        cluster_of = np.asarray(clusters, dtype=np.int64)
        if cluster_of.shape != (n_units,):
            raise ValueError(f"clusters must hold one cluster per unit ({n_units})")
        n_clusters = int(cluster_of.max()) + 1 if n_units else 0
    width = max(n_units, n_clusters, 1)
    rows_per_chunk = max(1, min(n_resamples, BOOTSTRAP_CHUNK_CELLS // width))
    for start, counts in draw_cluster_counts(
        n_clusters, n_resamples=n_resamples, seed=seed, rows_per_chunk=rows_per_chunk
    ):
        yield start, counts, cluster_of


def draw_cluster_counts(
    n_clusters: int,
    *,
    n_resamples: int,
    seed: int,
    rows_per_chunk: int | None = None,
    dtype: type[np.generic] = np.int64,
) -> Iterator[tuple[int, NDArray[Any]]]:
    """How often each of ``n_clusters`` clusters is drawn in each resample, chunk by chunk.

    Each resample draws ``n_clusters`` clusters uniformly with replacement from
    ``numpy.random.default_rng(seed)`` (``integers(0, n_clusters)``, row after row). The
    draws do not depend on how the resamples are chunked, so every caller with the same
    ``seed`` and ``n_clusters`` sees the same resamples [1]_.

    Parameters
    ----------
    n_clusters : int
        The clusters (conversations) resampled.
    n_resamples : int
        How many resamples, at least 1.
    seed : int
        Seed of the generator.
    rows_per_chunk : int, optional
        Resamples per chunk; by default about :data:`BOOTSTRAP_CHUNK_CELLS` cells a chunk.
    dtype : numpy scalar type, default numpy.int64
        Type of the counts (a float type saves a conversion before a matrix product).

    Yields
    ------
    start : int
        The index of the chunk's first resample.
    counts : numpy.ndarray, shape (rows, n_clusters)
        ``counts[r, c]`` is the number of times cluster ``c`` is drawn in resample
        ``start + r``. Counting is done in one bincount for small chunks and one
        resample at a time (in cache) for large ones; the counts are the same.

    References
    ----------
    .. [1] Field, C. A., & Welsh, A. H. (2007). Bootstrapping clustered data. Journal of
       the Royal Statistical Society B, 69(3), 369-390.

    Examples
    --------
    The draws do not depend on the chunking:

    >>> whole = np.vstack([c for _, c in draw_cluster_counts(5, n_resamples=6, seed=1)])
    >>> parts = [c for _, c in draw_cluster_counts(5, n_resamples=6, seed=1, rows_per_chunk=4)]
    >>> bool((whole == np.vstack(parts)).all()), whole.sum(axis=1).tolist()
    (True, [5, 5, 5, 5, 5, 5])
    """
    check_positive_int(n_resamples, "n_resamples")
    rng = np.random.default_rng(seed)
    if rows_per_chunk is None:
        rows_per_chunk = max(1, min(n_resamples, BOOTSTRAP_CHUNK_CELLS // max(n_clusters, 1)))
    for start in range(0, n_resamples, rows_per_chunk):
        rows = min(rows_per_chunk, n_resamples - start)
        draws = rng.integers(0, max(n_clusters, 1), size=(rows, n_clusters), dtype=np.int64)
        if rows * n_clusters <= SMALL_COUNT_CELLS:  # one bincount over all rows fits in cache
            draws += (np.arange(rows, dtype=np.int64) * n_clusters)[:, np.newaxis]
            flat = np.bincount(draws.ravel(), minlength=rows * n_clusters)
            yield start, flat.reshape(rows, n_clusters).astype(dtype, copy=False)
            continue
        counts = np.empty((rows, n_clusters), dtype=dtype)
        for row in range(rows):
            counts[row] = np.bincount(draws[row], minlength=n_clusters)
        yield start, counts


def bootstrap_method(clusters: ArrayLike | None) -> str:
    """The ``method`` text of a percentile bootstrap with or without clusters."""
    return UNIT_METHOD if clusters is None else CLUSTER_METHOD


def cluster_codes(keys: Sequence[Hashable]) -> IntArray:
    """Cluster codes ``0..C-1`` (in order of first appearance) for per-unit cluster keys.

    Examples
    --------
    >>> cluster_codes(["case-b", "case-a", "case-b"]).tolist()
    [0, 1, 0]
    """
    code = {key: index for index, key in enumerate(dict.fromkeys(keys))}
    return np.fromiter(map(code.__getitem__, keys), dtype=np.int64, count=len(keys))


def bootstrap_confusions(
    reference_index: IntArray,
    judged_index: IntArray,
    n_labels: int,
    *,
    n_resamples: int,
    seed: int,
    clusters: ArrayLike | None = None,
) -> FloatArray:
    """Confusion matrices (rows reference) of ``n_resamples`` (cluster) bootstrap resamples.

    Parameters
    ----------
    reference_index, judged_index : numpy.ndarray of int64, shape (n,)
        The codes ``0..n_labels-1`` of each unit on both sides.
    n_labels : int
        The number of codes.
    n_resamples, seed, clusters
        As in :func:`resample_weights` (the same resamples).

    Returns
    -------
    numpy.ndarray of float64, shape (n_resamples, n_labels, n_labels)
        Resample ``r``'s confusion matrix: each unit counted as often as it (its
        cluster) is drawn; :func:`kappa_from_confusion` takes the whole stack.

    Examples
    --------
    >>> reference = np.array([0, 0, 1, 1])
    >>> stack = bootstrap_confusions(reference, reference, 2, n_resamples=3, seed=0)
    >>> stack.shape, stack.sum(axis=(1, 2)).tolist(), float(np.abs(stack[:, 0, 1]).sum())
    ((3, 2, 2), [4.0, 4.0, 4.0], 0.0)
    """
    n = int(reference_index.size)
    cells = reference_index * n_labels + judged_index
    per_matrix = n_labels * n_labels
    if clusters is not None:
        # A resample's confusion matrix is the sum of its drawn clusters' matrices: one
        # (resamples x clusters) @ (clusters x cells) product instead of a weight per unit,
        # over the cells that occur at all (the others stay 0).
        flat = np.zeros((n_resamples, per_matrix), dtype=np.float64)
        used = np.unique(cells)
        column = np.searchsorted(used, cells)
        per_cluster: FloatArray | None = None
        for start, cluster_counts, cluster_of in cluster_draws(
            n, n_resamples=n_resamples, seed=seed, clusters=clusters
        ):
            rows, n_clusters = cluster_counts.shape
            if per_cluster is None:
                per_cluster = (
                    np.bincount(cluster_of * used.size + column, minlength=n_clusters * used.size)
                    .reshape(n_clusters, used.size)
                    .astype(np.float64)
                )
            flat[start : start + rows, used] = cluster_counts.astype(np.float64) @ per_cluster
        return flat.reshape(n_resamples, n_labels, n_labels)
    result = np.empty((n_resamples, n_labels, n_labels), dtype=np.float64)
    for start, weights in resample_weights(n, n_resamples=n_resamples, seed=seed):
        rows = weights.shape[0]
        offset_cells = cells[np.newaxis, :] + (np.arange(rows) * per_matrix)[:, np.newaxis]
        counts = np.bincount(
            offset_cells.ravel(), weights=weights.ravel(), minlength=rows * per_matrix
        )
        result[start : start + rows] = counts.reshape(rows, n_labels, n_labels)
    return result


# --------------------------------------------------------------------------- codes


def canonical_order(codes: IntArray, uniques: list[Any]) -> tuple[IntArray, tuple[Any, ...]]:
    """Re-number codes so that the categories come out sorted (if they can be sorted).

    Categories that cannot be compared are ordered by type name and ``repr``; code -1
    (missing) stays -1.

    Parameters
    ----------
    codes : numpy.ndarray of int64
        Codes into ``uniques`` (-1: missing).
    uniques : list
        The category of each code.

    Returns
    -------
    codes : numpy.ndarray of int64
        The same categories, coded in sorted order.
    categories : tuple
        The categories, sorted.

    Examples
    --------
    >>> codes, categories = canonical_order(np.array([0, 1, -1, 0]), ["pass", "fail"])
    >>> codes.tolist(), categories
    ([1, 0, -1, 1], ('fail', 'pass'))
    """
    if not uniques:
        return codes, ()
    try:
        order = sorted(range(len(uniques)), key=uniques.__getitem__)
    except TypeError:
        order = sorted(
            range(len(uniques)),
            key=lambda i: (type(uniques[i]).__name__, repr(uniques[i])),
        )
    rank = np.empty(len(uniques), dtype=np.int64)
    rank[np.asarray(order, dtype=np.int64)] = np.arange(len(uniques), dtype=np.int64)
    if len(codes) and codes.min() < 0:
        recoded = np.where(codes >= 0, rank[np.maximum(codes, 0)], -1)
    else:
        recoded = rank[codes]
    return recoded, tuple([uniques[i] for i in order])
