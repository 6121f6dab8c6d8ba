"""The bootstrap interval of Krippendorff's alpha, over units or over conversations."""

from __future__ import annotations

from collections.abc import Callable, Hashable
from typing import Any, Literal

import numpy as np

from review_app.agreement.coefficients import (
    Coefficient,
    _alpha_from_totals,
    _alpha_parts,
    _pairable_counts,
    krippendorff_alpha,
)
from review_app.stats.checks import check_confidence, check_positive_int
from review_app.stats.core import (
    BOOTSTRAP_CHUNK_CELLS,
    CLUSTER_METHOD,
    UNIT_METHOD,
    resample_weights,
)
from review_app.stats.core import cluster_codes as cluster_codes_of
from review_app.stats.table import FloatArray, IntArray, RatingTable


def alpha_bootstrap_ci(
    table: RatingTable,
    *,
    n_resamples: int = 1000,
    seed: int = 0,
    confidence: float = 0.95,
    cluster_of: Callable[[Any], Hashable] | None = None,
) -> Coefficient:
    """Nominal alpha with a percentile bootstrap interval over units (or conversations).

    Each resample draws the pairable units with replacement (as many as there
    are) and recomputes alpha from per-unit sufficient statistics: a unit adds
    its value counts to ``n_c`` and its ``sum_c n_uc (n_uc - 1) / (m_u - 1)`` to the
    coincidence diagonal, so a resample is a weight vector (how often each unit
    was drawn) times a units x (values + 1) matrix. Units with identical value
    counts are interchangeable, so when there are few distinct count profiles
    the per-profile draw counts are drawn directly (multinomial), which has the
    same distribution and is much faster. Resamples in which only one value
    occurs have no alpha and are left out (the warning says how many).
    The interval holds the ``(1 - confidence) / 2`` and ``(1 + confidence) / 2``
    quantiles of the resampled alphas (linear interpolation); with the same
    ``seed`` it is the same interval. ``ci95`` holds it at the requested
    ``confidence`` (0.95 by default).

    Returns the point estimate of :func:`krippendorff_alpha` with ``ci95`` set.
    The interval is ``None`` (with a reason) when alpha itself is undefined or no
    resample defines it. Resampling units follows Hayes & Krippendorff (2007) in
    spirit; their algorithm resamples pairable values instead.

    ``cluster_of`` (a unit -> conversation function) makes it a cluster bootstrap:
    each resample draws conversations with replacement and keeps all their pairable
    units (Field & Welsh 2007), because turns of one conversation are not
    independent. ``method`` says which bootstrap was used.
    """
    check_positive_int(n_resamples, "n_resamples")
    check_confidence(confidence)
    point = krippendorff_alpha(table)
    if point.value is None:
        return point
    counts, per_unit = _pairable_counts(table)
    clusters = None
    if cluster_of is not None:
        pairable = np.flatnonzero(table.ratings_per_unit >= 2)
        clusters = cluster_codes_of([cluster_of(table.units[i]) for i in pairable.tolist()])
    alphas = _bootstrap_alphas(
        counts, per_unit, n_resamples=n_resamples, seed=seed, clusters=clusters
    )
    method = UNIT_METHOD if clusters is None else CLUSTER_METHOD
    defined = alphas[np.isfinite(alphas)]
    n_units = point.n_units
    if len(defined) == 0:
        return Coefficient(
            point.value,
            n_units,
            reason="no bootstrap resample had two or more values, so there is no interval",
            warning=point.warning,
            method=method,
        )
    tail = (1.0 - confidence) / 2.0
    low, high = np.quantile(defined, [tail, 1.0 - tail])
    warnings = [point.warning] if point.warning else []
    if len(defined) < n_resamples:
        warnings.append(
            f"{n_resamples - len(defined)} of {n_resamples} bootstrap resamples had a single "
            "value and were left out of the interval"
        )
    return Coefficient(
        point.value,
        n_units,
        ci95=(float(low), float(high)),
        warning="; ".join(warnings) or None,
        method=method,
    )


def _unit_profiles(counts: IntArray) -> tuple[IntArray, IntArray]:
    """Distinct rows of ``counts`` (ordered by first occurrence) and how often each occurs."""
    order = np.lexsort(counts.T[::-1])
    ordered = counts[order]
    starts_group = np.ones(len(ordered), dtype=bool)
    starts_group[1:] = np.any(ordered[1:] != ordered[:-1], axis=1)
    starts = np.flatnonzero(starts_group)
    first_unit = np.minimum.reduceat(order, starts)
    sizes = np.diff(np.append(starts, len(ordered)))
    by_first_unit = np.argsort(first_unit, kind="stable")
    return ordered[starts][by_first_unit], sizes[by_first_unit].astype(np.int64)


def _bootstrap_alphas(
    counts: IntArray,
    per_unit: IntArray,
    *,
    n_resamples: int,
    seed: int,
    draw: Literal["auto", "units", "profiles"] = "auto",
    clusters: IntArray | None = None,
) -> FloatArray:
    """Alpha of each unit resample (NaN where undefined), for the pairable units' counts.

    Units with the same value counts contribute the same statistics, so a
    resample only needs how many units of each distinct count profile it drew:
    drawing ``N`` units uniformly with replacement is the same as drawing
    multinomial(``N``, profile frequencies) profile counts. When there are few
    profiles (the usual case: few raters, few codes) that is what is drawn;
    otherwise the units themselves are drawn (``draw`` forces one way, for
    tests). Either way each resample is a weight vector times a (units or
    profiles) x (values + 1) statistics matrix, built a bounded number of cells
    at a time. With ``clusters`` (a cluster code per pairable unit) the weights
    come from the cluster bootstrap of :func:`review_app.stats.core.resample_weights`.
    """
    if clusters is not None:
        value_counts, diagonal = _alpha_parts(counts, per_unit)
        cluster_statistics = np.column_stack([value_counts, diagonal]).astype(np.float64)
        cluster_alphas = np.empty(n_resamples, dtype=np.float64)
        for start, cluster_weights in resample_weights(
            counts.shape[0], n_resamples=n_resamples, seed=seed, clusters=clusters
        ):
            totals = cluster_weights @ cluster_statistics
            cluster_alphas[start : start + len(cluster_weights)] = _alpha_from_totals(
                totals[:, :-1], totals[:, -1]
            )
        cluster_alphas[~np.isfinite(cluster_alphas)] = np.nan
        return cluster_alphas
    n_units = counts.shape[0]
    rng = np.random.default_rng(seed)
    profiles, profile_sizes = _unit_profiles(counts)
    # One multinomial cell costs about as much as drawing eight units.
    use_profiles = draw == "profiles" or (draw == "auto" and len(profiles) * 8 <= n_units)
    if use_profiles:
        value_counts, diagonal = _alpha_parts(profiles, profiles.sum(axis=1))
        probabilities = profile_sizes / n_units
    else:
        value_counts, diagonal = _alpha_parts(counts, per_unit)
    statistics = np.column_stack([value_counts, diagonal])
    n_rows = statistics.shape[0]
    rows_per_chunk = max(1, min(n_resamples, BOOTSTRAP_CHUNK_CELLS // n_rows))
    alphas = np.empty(n_resamples, dtype=np.float64)
    for start in range(0, n_resamples, rows_per_chunk):
        rows = min(rows_per_chunk, n_resamples - start)
        if use_profiles:
            weights = rng.multinomial(n_units, probabilities, size=rows)
        else:
            draws = rng.integers(0, n_units, size=(rows, n_units), dtype=np.int64)
            draws += (np.arange(rows, dtype=np.int64) * n_units)[:, np.newaxis]
            weights = np.bincount(draws.ravel(), minlength=rows * n_units).reshape(rows, n_units)
        totals = weights.astype(np.float64) @ statistics
        alphas[start : start + rows] = _alpha_from_totals(totals[:, :-1], totals[:, -1])
    # A resample with a single value has D_e = 0: the division gave inf or NaN.
    alphas[~np.isfinite(alphas)] = np.nan
    return alphas
