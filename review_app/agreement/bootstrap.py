"""Bootstrap intervals of Krippendorff's alpha and of pairwise Cohen's kappa, over units or
over conversations."""

from __future__ import annotations

from collections.abc import Callable, Hashable
from dataclasses import replace
from typing import Any, Literal

import numpy as np

from review_app.agreement.coefficients import (
    Coefficient,
    _alpha_from_totals,
    _alpha_parts,
    _cohen_kappa,
    _pairable_counts,
    _rater_pairs,
    krippendorff_alpha,
)
from review_app.stats.checks import check_confidence, check_positive_int
from review_app.stats.core import (
    BOOTSTRAP_CHUNK_CELLS,
    CLUSTER_METHOD,
    MIN_BOOTSTRAP_UNITS,
    UNIT_METHOD,
    bootstrap_confusions,
    bootstrap_method,
    kappa_from_confusion,
    percentile_interval,
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


def kappa_pairs_bootstrap_ci(
    table: RatingTable,
    *,
    n_resamples: int = 1000,
    seed: int = 0,
    confidence: float = 0.95,
    cluster_of: Callable[[Any], Hashable] | None = None,
    min_units: int = MIN_BOOTSTRAP_UNITS,
) -> dict[str, Coefficient]:
    """:func:`cohen_kappa_pairs` with a percentile bootstrap interval for every pair.

    Each pair's shared units are resampled ``n_resamples`` times
    (:func:`review_app.stats.core.bootstrap_confusions`, ``numpy.random.default_rng(seed)``)
    and ``ci95`` holds the ``(1 - confidence) / 2`` and ``(1 + confidence) / 2``
    percentiles of the resampled kappas where they are defined
    (:func:`review_app.stats.core.percentile_interval`). With ``cluster_of`` (a unit ->
    conversation function) it is the cluster bootstrap (Field & Welsh 2007): whole
    conversations are drawn, because turns of one conversation are not independent;
    a pair whose shared units are each in a conversation of their own gets the unit
    bootstrap, which then draws the very same resamples. ``method`` names the one used.

    No interval, with a reason, when kappa is undefined, when the pair shares fewer
    than ``min_units`` resampled units (conversations under the cluster bootstrap;
    ``"no interval: only <n> conversations behind this kappa (fewer than <min_units>)"``)
    or when kappa is undefined in more than half of the resamples.
    """
    check_positive_int(n_resamples, "n_resamples")
    check_confidence(confidence)
    n_values = max(table.n_values, 1)
    conversation_codes = (
        None if cluster_of is None else cluster_codes_of([cluster_of(unit) for unit in table.units])
    )
    result: dict[str, Coefficient] = {}
    for pair in _rater_pairs(table):
        point = _cohen_kappa(
            pair.values_a, pair.values_b, n_values, table, pair.rater_a, pair.rater_b
        )
        if point.value is None:
            result[pair.key] = point
            continue
        clusters: IntArray | None = None
        noun = "unit"
        if conversation_codes is not None:
            _, clusters = np.unique(conversation_codes[pair.units], return_inverse=True)
            clusters = clusters.reshape(-1)
            noun = "conversation"
            if int(clusters.max()) + 1 == len(clusters):
                clusters = None  # one shared unit per conversation: the unit bootstrap
        n_drawn = len(pair.units) if clusters is None else int(clusters.max()) + 1
        if n_drawn < min_units:
            result[pair.key] = replace(
                point,
                reason=f"no interval: only {n_drawn} {noun}{'' if n_drawn == 1 else 's'} "
                f"behind this kappa (fewer than {min_units})",
            )
            continue
        resampled = kappa_from_confusion(
            bootstrap_confusions(
                pair.values_a,
                pair.values_b,
                n_values,
                n_resamples=n_resamples,
                seed=seed,
                clusters=clusters,
            )
        )
        interval, reason = percentile_interval(resampled, confidence=confidence)
        result[pair.key] = replace(
            point,
            ci95=interval,
            reason=reason,
            method=None if interval is None else bootstrap_method(clusters),
        )
    return result


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
