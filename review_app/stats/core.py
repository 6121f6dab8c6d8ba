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
  Welsh 2007) resamples conversations and keeps all of their turns;
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
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Iterator, Sequence
from dataclasses import dataclass
from statistics import NormalDist
from typing import Any, Literal

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

    def to_dict(self, *, count_key: Literal["n", "n_units"] = "n") -> dict[str, Any]:
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
    """Element-wise numerator / denominator, NaN where the denominator is 0."""
    top = np.asarray(numerator, dtype=np.float64)
    bottom = np.asarray(denominator, dtype=np.float64)
    out = np.full(np.broadcast(top, bottom).shape, np.nan)
    np.divide(top, bottom, out=out, where=bottom > 0)
    return out


def kappa_from_confusion(confusion: ArrayLike) -> FloatArray:
    """Cohen's kappa of each confusion matrix in a stack of shape ``(..., K, K)``.

    kappa = (p_o - p_e) / (1 - p_e), with p_o = sum_k C_kk / n and
    p_e = sum_k (row_k * col_k) / n^2 (Cohen 1960). Multiplying by n^2 gives
    (n * trace - chance) / (n^2 - chance) with chance = sum_k row_k col_k; kappa is
    undefined (NaN) when chance == n^2: both sides used one and the same category on
    every unit. Weighted (bootstrap) counts are allowed.
    """
    matrix = np.asarray(confusion, dtype=np.float64)
    return kappa_from_margins(
        np.trace(matrix, axis1=-2, axis2=-1), matrix.sum(axis=-1), matrix.sum(axis=-2)
    )


def kappa_from_margins(trace: ArrayLike, rows: ArrayLike, columns: ArrayLike) -> FloatArray:
    """Cohen's kappa from a confusion matrix's trace and margins, stacked ``(...)`` and
    ``(..., K)``: the sufficient statistics of :func:`kappa_from_confusion` (same formula,
    same result), which a bootstrap can sum over resampled units without the K x K cells.
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
    """Wilson (1927) score interval for a binomial proportion ``successes / n``.

    With p = successes / n and z the normal quantile of (1 + confidence) / 2::

        centre     = (p + z^2 / 2n) / (1 + z^2 / n)
        half-width = z / (1 + z^2 / n) * sqrt(p (1 - p) / n + z^2 / 4n^2)

    It equals ``statsmodels.stats.proportion.proportion_confint(successes, n,
    method="wilson")``. Raises ``ValueError("n must be a positive integer, got <n>")``
    and ``ValueError("successes must be an integer in 0..n, got <successes>")``.
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

    ``n == 0`` gives an undefined value with ``undefined_reason``. A denominator under
    ``min_units`` gives the value without an interval and the reason
    ``"no interval: only <n> units behind this proportion (fewer than <min_units>)"``
    (a proportion over so few units gets no honest interval).
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
    """Efron's percentile interval over the resamples where the statistic is defined.

    No interval (with a reason) when the statistic is undefined in more than half of
    the resamples.
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
    """Bootstrap weights, chunk by chunk: ``(start, weights)`` with weights (rows x units).

    ``weights[r, u]`` is how often unit ``u`` is drawn in resample ``start + r``.

    - Unit bootstrap (``clusters`` is ``None``): each resample draws ``n_units`` units
      with replacement (Efron & Tibshirani 1993, ch. 6).
    - Cluster bootstrap: ``clusters[u]`` is the cluster (conversation) of unit ``u``,
      coded ``0..C-1``. Each resample draws ``C`` clusters with replacement and every
      unit of a drawn cluster comes with it (Field & Welsh 2007), so the dependence of
      turns within a conversation is kept.

    The unit bootstrap is the cluster bootstrap with one unit per cluster (``clusters =
    0..n-1``): both draw from the same generator in the same way, so with one turn per
    conversation they give identical resamples.
    """
    for start, cluster_counts, cluster_of in cluster_draws(
        n_units, n_resamples=n_resamples, seed=seed, clusters=clusters
    ):
        weights = cluster_counts[:, cluster_of] if clusters is not None else cluster_counts
        yield start, weights.astype(np.float64)


def cluster_draws(
    n_units: int, *, n_resamples: int, seed: int, clusters: ArrayLike | None
) -> Iterator[tuple[int, IntArray, IntArray]]:
    """The draws behind :func:`resample_weights`: ``(start, counts, cluster_of)`` with
    ``counts[r, c]`` how often cluster ``c`` is drawn in resample ``start + r`` and
    ``cluster_of`` the cluster code of each unit (``0..n-1`` without clusters)."""
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

    Yields ``(start, counts)`` with ``counts[r, c]`` the number of times cluster ``c`` is
    drawn in resample ``start + r``: each resample draws ``n_clusters`` clusters uniformly
    with replacement from ``numpy.random.default_rng(seed)`` (``integers(0, n_clusters)``,
    row after row). The draws do not depend on how the resamples are chunked, so every
    caller with the same ``seed`` and ``n_clusters`` sees the same resamples. Counting is
    done one resample at a time (a bincount that stays in cache), into an array of
    ``dtype`` (a float type saves a conversion before a matrix product).
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
    """Cluster codes ``0..C-1`` (in order of first appearance) for per-unit cluster keys."""
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

    Shape ``(n_resamples, n_labels, n_labels)``; see :func:`resample_weights`.
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
