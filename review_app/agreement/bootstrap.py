"""Bootstrap intervals of Krippendorff's alpha and of pairwise Cohen's kappa, over units or
over conversations."""

from __future__ import annotations

from collections.abc import Callable, Hashable
from dataclasses import dataclass, replace
from typing import Any, Literal

import numpy as np

from review_app.agreement.coefficients import (
    Coefficient,
    alpha_from_totals,
    alpha_parts,
    krippendorff_alpha,
    pair_kappa,
    pairable_counts,
    rater_pairs,
)
from review_app.stats.checks import check_confidence, check_positive_int
from review_app.stats.core import (
    BOOTSTRAP_CHUNK_CELLS,
    CLUSTER_METHOD,
    MIN_BOOTSTRAP_UNITS,
    UNIT_METHOD,
    draw_cluster_counts,
    kappa_from_margins,
    percentile_interval,
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
    counts, per_unit = pairable_counts(table)
    clusters = None
    if cluster_of is not None:
        _, clusters = _pairable_clusters(table, cluster_of)
    alphas = _bootstrap_alphas(
        counts, per_unit, n_resamples=n_resamples, seed=seed, clusters=clusters
    )
    return _alpha_interval(
        point,
        alphas,
        confidence=confidence,
        method=UNIT_METHOD if clusters is None else CLUSTER_METHOD,
    )


def _alpha_interval(
    point: Coefficient, alphas: FloatArray, *, confidence: float, method: str
) -> Coefficient:
    """The point estimate with the percentile interval of the resampled ``alphas``."""
    n_resamples = len(alphas)
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
    """:func:`~review_app.agreement.coefficients.cohen_kappa_pairs` with a percentile bootstrap
    interval for every pair.

    Every pair is measured on the same resamples: each draws the table's pairable
    units with replacement (as many as there are) or, with ``cluster_of`` (a unit ->
    conversation function), the conversations that hold a pairable unit, keeping all
    their units (the cluster bootstrap, Field & Welsh 2007: turns of one conversation
    are not independent). These are the resamples of :func:`alpha_bootstrap_ci` with
    the same ``seed`` (:func:`review_app.stats.core.draw_cluster_counts`). A pair's
    kappa in a resample is Cohen's kappa of its shared units there, each counted as
    often as it (its conversation) was drawn; a pair's units are summed per conversation
    into a trace and two margins once, so a resample costs one product of its draw
    counts with those sums (:func:`review_app.stats.core.kappa_from_margins`), the
    same for all pairs. ``ci95`` holds the ``(1 - confidence) / 2`` and
    ``(1 + confidence) / 2`` percentiles of the resampled kappas where they are
    defined (:func:`review_app.stats.core.percentile_interval`). A pair whose shared
    units are each in a conversation of their own is labelled with the unit bootstrap
    (its units are drawn one by one). ``method`` names the one used.

    (Until issue 23 each pair drew its own resamples of its shared units; resampling
    the table once gives the same distribution where a pair covers every conversation,
    and lets all pairs share one draw.)

    No interval, with a reason, when kappa is undefined, when the pair shares fewer
    than ``min_units`` resampled units (conversations under the cluster bootstrap;
    ``"no interval: only <n> conversations behind this kappa (fewer than <min_units>)"``)
    or when kappa is undefined in more than half of the resamples.
    """
    check_positive_int(n_resamples, "n_resamples")
    check_confidence(confidence)
    _, codes = _pairable_clusters(table, cluster_of)
    plan = _plan_pairs(table, codes, by_conversation=cluster_of is not None, min_units=min_units)
    if not plan.measured:
        return plan.result
    n_clusters = int(codes.max()) + 1
    (totals,) = _resampled_totals(n_clusters, [plan.statistics], n_resamples=n_resamples, seed=seed)
    return plan.finish(totals, confidence=confidence)


def intervals_of_alpha_and_pairs(
    table: RatingTable,
    *,
    n_resamples: int = 1000,
    seed: int = 0,
    confidence: float = 0.95,
    cluster_of: Callable[[Any], Hashable],
    min_units: int = MIN_BOOTSTRAP_UNITS,
) -> tuple[Coefficient, dict[str, Coefficient]]:
    """:func:`alpha_bootstrap_ci` and :func:`kappa_pairs_bootstrap_ci` with ``cluster_of``,
    the very same figures, from one draw of the resamples they share (the report's path)."""
    check_positive_int(n_resamples, "n_resamples")
    check_confidence(confidence)
    point = krippendorff_alpha(table)
    _, codes = _pairable_clusters(table, cluster_of)
    plan = _plan_pairs(table, codes, by_conversation=True, min_units=min_units)
    blocks: list[FloatArray] = []
    if point.value is not None:
        counts, per_unit = pairable_counts(table)
        blocks.append(_alpha_cluster_statistics(counts, per_unit, codes))
    if plan.measured:
        blocks.append(plan.statistics)
    if not blocks:
        return point, plan.result
    totals = _resampled_totals(int(codes.max()) + 1, blocks, n_resamples=n_resamples, seed=seed)
    alpha = point
    if point.value is not None:
        alpha_totals = totals.pop(0)
        alphas = alpha_from_totals(alpha_totals[:, :-1], alpha_totals[:, -1])
        alphas[~np.isfinite(alphas)] = np.nan
        alpha = _alpha_interval(point, alphas, confidence=confidence, method=CLUSTER_METHOD)
    pairs = plan.finish(totals[0], confidence=confidence) if plan.measured else plan.result
    return alpha, pairs


@dataclass
class _PairPlan:
    """The pairs of a table: their point estimates (``result``), the pairs that get an
    interval (``measured``: key, estimate, method) and their per-cluster sums side by
    side (``statistics``: clusters x (1 + 2 values) per measured pair)."""

    result: dict[str, Coefficient]
    measured: list[tuple[str, Coefficient, str]]
    statistics: FloatArray
    n_values: int

    def finish(self, totals: FloatArray, *, confidence: float) -> dict[str, Coefficient]:
        """The intervals, from each resample's summed statistics (resamples x columns)."""
        n_values = self.n_values
        width = 1 + 2 * n_values
        stacked = totals.astype(np.float64).reshape(len(totals), -1, width)
        kappas = kappa_from_margins(
            stacked[..., 0], stacked[..., 1 : 1 + n_values], stacked[..., 1 + n_values :]
        )
        result = dict(self.result)
        for column, (key, point, method) in enumerate(self.measured):
            interval, reason = percentile_interval(kappas[:, column], confidence=confidence)
            result[key] = replace(
                point, ci95=interval, reason=reason, method=None if interval is None else method
            )
        return result


def _plan_pairs(
    table: RatingTable, codes: IntArray, *, by_conversation: bool, min_units: int
) -> _PairPlan:
    n_values = max(table.n_values, 1)
    n_clusters = int(codes.max()) + 1 if len(codes) else 0
    cluster_of_unit = np.full(table.n_units, -1, dtype=np.int64)
    cluster_of_unit[table.ratings_per_unit >= 2] = codes
    result: dict[str, Coefficient] = {}
    measured: list[tuple[str, Coefficient, str, IntArray, IntArray, IntArray]] = []
    for pair in rater_pairs(table):
        point = pair_kappa(pair, table)
        result[pair.key] = point
        if point.value is None:
            continue
        clusters = cluster_of_unit[pair.units]
        per_cluster = np.bincount(clusters, minlength=n_clusters)
        n_drawn = int(np.count_nonzero(per_cluster))
        one_each = not by_conversation or n_drawn == len(clusters)
        if n_drawn < min_units:
            noun = "unit" if one_each else "conversation"
            result[pair.key] = replace(
                point,
                reason=f"no interval: only {n_drawn} {noun}{'' if n_drawn == 1 else 's'} "
                f"behind this kappa (fewer than {min_units})",
            )
            continue
        method = UNIT_METHOD if one_each else CLUSTER_METHOD
        measured.append((pair.key, point, method, clusters, pair.values_a, pair.values_b))
    # Whole numbers: float32 is exact while no resample's sum can reach 2^24 (a resample
    # draws n_clusters clusters, so no sum exceeds n_clusters x the largest cluster).
    most = max((int(np.bincount(m[3]).max()) for m in measured), default=0)
    exact32 = most * n_clusters < EXACT_FLOAT32
    width = 1 + 2 * n_values
    statistics = np.zeros(
        (n_clusters, width * len(measured)), dtype=np.float32 if exact32 else np.float64
    )
    for column, (_, _, _, clusters, values_a, values_b) in enumerate(measured):
        block = statistics[:, column * width : (column + 1) * width]
        _pair_sums(block, clusters, values_a, values_b, n_values)
    return _PairPlan(
        result, [(key, point, method) for key, point, method, *_ in measured], statistics, n_values
    )


EXACT_FLOAT32 = 1 << 24
"""Integers below this are exact in float32 (a 24-bit significand)."""


def _resampled_totals(
    n_clusters: int, blocks: list[FloatArray], *, n_resamples: int, seed: int
) -> list[FloatArray]:
    """For each block (clusters x columns): its column sums in every cluster resample
    (:func:`review_app.stats.core.draw_cluster_counts`), resamples x columns.

    One draw serves every block; each block is multiplied in its own dtype (a float32
    block must hold whole numbers whose sums stay below 2^24, so that it is exact).
    """
    totals = [np.empty((n_resamples, block.shape[1]), dtype=block.dtype) for block in blocks]
    all32 = all(block.dtype == np.float32 for block in blocks)
    for start, counts in draw_cluster_counts(
        n_clusters,
        n_resamples=n_resamples,
        seed=seed,
        dtype=np.float32 if all32 else np.float64,
    ):
        stop = start + len(counts)
        for block, out in zip(blocks, totals, strict=True):
            out[start:stop] = counts.astype(block.dtype, copy=False) @ block
    return [out.astype(np.float64) for out in totals]


def _alpha_cluster_statistics(
    counts: IntArray, per_unit: IntArray, clusters: IntArray
) -> FloatArray:
    """Per cluster: the value counts and the coincidence diagonal of its pairable units
    (clusters x (values + 1)); a cluster resample's alpha needs only their sums."""
    value_counts, diagonal = alpha_parts(counts, per_unit)
    n_clusters = int(clusters.max()) + 1 if len(clusters) else 0
    n_columns = value_counts.shape[1]
    cells = (clusters[:, np.newaxis] * n_columns + np.arange(n_columns)).ravel()
    summed = np.bincount(cells, weights=value_counts.ravel(), minlength=n_clusters * n_columns)
    return np.column_stack(
        [
            summed.reshape(n_clusters, n_columns),
            np.bincount(clusters, weights=diagonal, minlength=n_clusters),
        ]
    )


def _pairable_clusters(
    table: RatingTable, cluster_of: Callable[[Any], Hashable] | None
) -> tuple[IntArray, IntArray]:
    """The pairable units (table positions) and a cluster code ``0..C-1`` for each (its
    conversation's, in order of first appearance; without ``cluster_of`` its own)."""
    pairable = np.flatnonzero(table.ratings_per_unit >= 2)
    if cluster_of is None:
        return pairable, np.arange(len(pairable), dtype=np.int64)
    units = table.units
    return pairable, cluster_codes_of(
        list(map(cluster_of, map(units.__getitem__, pairable.tolist())))
    )


def _pair_sums(
    out: FloatArray, clusters: IntArray, values_a: IntArray, values_b: IntArray, n_values: int
) -> None:
    """Into ``out`` (clusters x (1 + 2 values)), per cluster: the pair's agreements, then
    rater a's and rater b's value counts."""
    n_clusters = out.shape[0]
    out[:, 0] = np.bincount(clusters, weights=values_a == values_b, minlength=n_clusters)
    cells = clusters * n_values
    out[:, 1 : 1 + n_values] = np.bincount(
        cells + values_a, minlength=n_clusters * n_values
    ).reshape(n_clusters, n_values)
    out[:, 1 + n_values :] = np.bincount(cells + values_b, minlength=n_clusters * n_values).reshape(
        n_clusters, n_values
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
    come from the cluster bootstrap (:func:`review_app.stats.core.draw_cluster_counts`,
    the same resamples as :func:`review_app.stats.core.resample_weights`), applied to
    the units' statistics summed per cluster.
    """
    if clusters is not None:
        statistics = _alpha_cluster_statistics(counts, per_unit, clusters)
        (totals,) = _resampled_totals(
            statistics.shape[0], [statistics], n_resamples=n_resamples, seed=seed
        )
        cluster_alphas = alpha_from_totals(totals[:, :-1], totals[:, -1])
        cluster_alphas[~np.isfinite(cluster_alphas)] = np.nan
        return cluster_alphas
    n_units = counts.shape[0]
    rng = np.random.default_rng(seed)
    profiles, profile_sizes = _unit_profiles(counts)
    # One multinomial cell costs about as much as drawing eight units.
    use_profiles = draw == "profiles" or (draw == "auto" and len(profiles) * 8 <= n_units)
    if use_profiles:
        value_counts, diagonal = alpha_parts(profiles, profiles.sum(axis=1))
        probabilities = profile_sizes / n_units
    else:
        value_counts, diagonal = alpha_parts(counts, per_unit)
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
        alphas[start : start + rows] = alpha_from_totals(totals[:, :-1], totals[:, -1])
    # A resample with a single value has D_e = 0: the division gave inf or NaN.
    alphas[~np.isfinite(alphas)] = np.nan
    return alphas
