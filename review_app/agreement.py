"""Inter-rater agreement for nominal labels with missing ratings.

Pure computation: nothing here reads a database, a file or a page. The unit of
analysis is whatever the caller says it is (in the app a ``(case_id, turn)``
pair); raters are reviewer names and values are label codes. Any rater may
leave any unit unrated.

Every coefficient comes back as a :class:`Coefficient`. When the data do not
define a coefficient (no unit rated twice, a single category in use, ...) its
``value`` is ``None`` and ``reason`` says why in one sentence; no function here
returns NaN or raises on data that are merely degenerate. Invalid input (a
rater rating the same unit twice, a collapse mapping without an entry for a
code, ...) raises ``ValueError`` with an exact message.

All per-unit work is vectorised with :func:`numpy.bincount` over integer
codes, so a million ratings take milliseconds once the table is built.

References
----------
Krippendorff, K. (2011). Computing Krippendorff's Alpha-Reliability.
    Annenberg School for Communication, University of Pennsylvania.
Hayes, A. F., & Krippendorff, K. (2007). Answering the call for a standard
    reliability measure for coding data. Communication Methods and Measures,
    1(1), 77-89.
Fleiss, J. L. (1971). Measuring nominal scale agreement among many raters.
    Psychological Bulletin, 76(5), 378-382.
Gwet, K. L. (2008). Computing inter-rater reliability and its variance in the
    presence of high agreement. British Journal of Mathematical and Statistical
    Psychology, 61, 29-48.
Gwet, K. L. (2014). Handbook of Inter-Rater Reliability (4th ed.), chapter 4.
    Advanced Analytics.
Cohen, J. (1960). A coefficient of agreement for nominal scales. Educational
    and Psychological Measurement, 20(1), 37-46.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Collection, Hashable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
import numpy.typing as npt

from review_app.stats.core import (
    BOOTSTRAP_CHUNK_CELLS,
    CLUSTER_METHOD,
    UNIT_METHOD,
    Estimate,
    break_mapping_from_verdicts,
    canonical_order,
    kappa_from_confusion,
    resample_weights,
)
from review_app.stats.core import cluster_codes as cluster_codes_of
from review_app.stats.table import FloatArray, IntArray, RatingTable, factorize

__all__ = [
    "SMALL_SAMPLE_UNITS",
    "SMALL_SAMPLE_WARNING",
    "Coefficient",
    "FirstBreakAgreement",
    "RatingTable",
    "agreement_summary",
    "alpha_bootstrap_ci",
    "any_break_alpha",
    "break_mapping_from_verdicts",
    "cohen_kappa_pairs",
    "conversation_first_breaks",
    "first_break_agreement",
    "fleiss_kappa",
    "gwet_ac1",
    "krippendorff_alpha",
    "per_label_alpha",
    "percent_agreement",
    "verdict_mapping_from_verdicts",
]

SMALL_SAMPLE_UNITS = 30
"""Below this many units behind a number, the number carries a warning."""

SMALL_SAMPLE_WARNING = "fewer than 30 pairable units"


# --------------------------------------------------------------------------- results


Coefficient = Estimate
"""An agreement figure is an :class:`~review_app.stats.core.Estimate` (``n`` = units)."""


@dataclass(frozen=True)
class FirstBreakAgreement:
    """Exact agreement on where a conversation first breaks its role.

    ``value`` = ``n_agreeing_pairs / n_pairs``: over every pair of raters who both
    rated a conversation, pooled across conversations, the share of pairs that
    name the same first breaking turn, or that both find no break at all.
    ``n_units`` counts conversations rated by two or more raters.
    ``n_both_break_pairs`` counts pairs in which both raters found a break and
    ``n_same_turn_pairs`` those of them that agree on its turn, so that agreement
    on *where* can be read apart from agreement on *whether*.
    """

    value: float | None
    n_units: int
    n_pairs: int
    n_agreeing_pairs: int
    n_both_break_pairs: int
    n_same_turn_pairs: int
    reason: str | None = None
    warning: str | None = None

    def to_dict(self, *, count_key: Literal["n_units"] = "n_units") -> dict[str, Any]:
        """JSON-ready form: the agreement keys of :meth:`Estimate.to_dict` and the counts."""
        return {
            "value": None if self.value is None else float(self.value),
            "n_units": int(self.n_units),
            "reason": self.reason,
            "ci95": None,
            "warning": self.warning,
            "n_pairs": int(self.n_pairs),
            "n_agreeing_pairs": int(self.n_agreeing_pairs),
            "n_both_break_pairs": int(self.n_both_break_pairs),
            "n_same_turn_pairs": int(self.n_same_turn_pairs),
        }


def _small_sample_warning(n_units: int) -> str | None:
    return SMALL_SAMPLE_WARNING if n_units < SMALL_SAMPLE_UNITS else None


def _defined(value: float, n_units: int, *, ci95: tuple[float, float] | None = None) -> Coefficient:
    if not math.isfinite(value):  # a guard: the formulas below never divide by zero
        return Coefficient(None, n_units, reason="the computation did not give a finite number")
    return Coefficient(float(value), n_units, ci95=ci95, warning=_small_sample_warning(n_units))


def _undefined(n_units: int, reason: str) -> Coefficient:
    return Coefficient(None, n_units, reason=reason)


# --------------------------------------------------------------------------- the table

# RatingTable lives in review_app.stats.table (re-exported here).


# --------------------------------------------------------------------------- helpers


def _no_pairs_reason(table: RatingTable) -> str:
    if table.n_ratings == 0:
        return "there are no ratings"
    if table.n_raters < 2:
        return "only one rater has rated anything, so no two ratings can be compared"
    return "no unit was rated by two or more raters"


def _single_category_reason(table: RatingTable, counts: IntArray, where: str) -> str:
    used = np.flatnonzero(counts.sum(axis=0))
    category = table.values[int(used[0])] if len(used) else None
    return (
        f"only one category ({category!r}) occurs in {where}, "
        "so chance agreement is perfect and the coefficient is undefined"
    )


def _pairable_counts(table: RatingTable) -> tuple[IntArray, IntArray]:
    """Value counts and number of ratings for the units rated at least twice."""
    counts = table.value_counts()
    per_unit = counts.sum(axis=1)
    pairable = per_unit >= 2
    return counts[pairable], per_unit[pairable]


def _agreeing_pair_share(counts: IntArray, per_unit: IntArray) -> FloatArray:
    """Per unit: agreeing ordered rater pairs / all ordered rater pairs."""
    agreeing = (counts * (counts - 1)).sum(axis=1)
    return agreeing / (per_unit * (per_unit - 1))


# --------------------------------------------------------------------------- coefficients


def percent_agreement(table: RatingTable) -> Coefficient:
    """Mean share of agreeing rater pairs per pairable unit.

    For a unit ``u`` rated by ``m_u >= 2`` raters, ``n_uk`` of whom chose value ``k``::

        P_u = sum_k n_uk (n_uk - 1) / (m_u (m_u - 1))

    is the proportion of the ``m_u (m_u - 1) / 2`` rater pairs on ``u`` that chose
    the same value. The result is the unweighted mean of ``P_u`` over the pairable
    units (every unit counts once, however many raters it has); ``n_units`` is
    their number. This is also Gwet's ``p_a``.

    Undefined (``None``) when no unit was rated by two or more raters.
    """
    counts, per_unit = _pairable_counts(table)
    n_units = len(per_unit)
    if n_units == 0:
        return _undefined(0, _no_pairs_reason(table))
    return _defined(float(_agreeing_pair_share(counts, per_unit).mean()), n_units)


def _alpha_parts(counts: IntArray, per_unit: IntArray) -> tuple[FloatArray, FloatArray]:
    """Per pairable unit: its value counts (its share of ``n_c``) and its ``sum_c o_cc``."""
    diagonal = (counts * (counts - 1)).sum(axis=1) / (per_unit - 1)
    return counts.astype(np.float64), diagonal


def _alpha_from_totals(n_c: FloatArray, observed_diagonal: FloatArray) -> FloatArray:
    """Nominal alpha from the value totals and the coincidence diagonal sum.

    Works row-wise: ``n_c`` is (..., V) and ``observed_diagonal`` (...). Cells whose
    expected disagreement is zero come out NaN; callers treat them as undefined.
    """
    n = n_c.sum(axis=-1)
    expected = n * n - (n_c * n_c).sum(axis=-1)
    with np.errstate(divide="ignore", invalid="ignore"):
        return 1.0 - (n - 1.0) * (n - observed_diagonal) / expected


def krippendorff_alpha(table: RatingTable) -> Coefficient:
    """Krippendorff's alpha for nominal data with missing ratings.

    With ``n_uc`` the number of raters giving unit ``u`` value ``c`` and ``m_u``
    the ratings of ``u``, only pairable units (``m_u >= 2``) enter. The
    coincidence matrix is ``o_ck = sum_u (n_uc n_uk - [c = k] n_uc) / (m_u - 1)``,
    its margins ``n_c = sum_k o_ck`` and ``n = sum_c n_c``. For the nominal metric::

        alpha = 1 - D_o / D_e
              = 1 - (n - 1) (n - sum_c o_cc) / (n^2 - sum_c n_c^2)

    (Krippendorff 2011, section C). ``n_units`` is the number of pairable units.

    Undefined (``None``) when no unit was rated by two or more raters, or when a
    single value occurs in the pairable units (expected disagreement ``D_e = 0``).
    """
    counts, per_unit = _pairable_counts(table)
    n_units = len(per_unit)
    if n_units == 0:
        return _undefined(0, _no_pairs_reason(table))
    value_counts, diagonal = _alpha_parts(counts, per_unit)
    n_c = value_counts.sum(axis=0)
    if np.count_nonzero(n_c) < 2:
        return _undefined(n_units, _single_category_reason(table, counts, "the pairable units"))
    return _defined(float(_alpha_from_totals(n_c, np.asarray(diagonal.sum()))), n_units)


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
    if isinstance(n_resamples, bool) or not isinstance(n_resamples, int) or n_resamples < 1:
        raise ValueError(f"n_resamples must be a positive integer, got {n_resamples!r}")
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must be strictly between 0 and 1, got {confidence!r}")
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


def fleiss_kappa(table: RatingTable) -> Coefficient:
    """Fleiss' kappa on the units rated by every rater in the table.

    Fleiss (1971) needs the same number of raters ``r`` on every unit, so only
    the units that all ``r = n_raters`` raters rated are used; ``n_units`` is
    their number and the other units are ignored. With ``N`` such units and
    ``n_uj`` raters putting unit ``u`` in category ``j``::

        P_u     = (sum_j n_uj^2 - r) / (r (r - 1))
        P_bar   = mean_u P_u
        p_j     = sum_u n_uj / (N r)
        P_e     = sum_j p_j^2
        kappa   = (P_bar - P_e) / (1 - P_e)

    Undefined (``None``) with fewer than two raters, when no unit was rated by all
    of them, or when those units use a single category (``P_e = 1``).
    """
    n_raters = table.n_raters
    if n_raters < 2:
        return _undefined(0, _no_pairs_reason(table))
    counts = table.value_counts()
    complete = counts[counts.sum(axis=1) == n_raters]
    n_units = complete.shape[0]
    if n_units == 0:
        return _undefined(0, f"no unit was rated by all {n_raters} raters")
    category_share = complete.sum(axis=0) / (n_units * n_raters)
    chance = float((category_share * category_share).sum())
    if np.count_nonzero(category_share) < 2:
        return _undefined(
            n_units, _single_category_reason(table, complete, "the units rated by every rater")
        )
    unit_agreement = ((complete * complete).sum(axis=1) - n_raters) / (n_raters * (n_raters - 1))
    observed = float(unit_agreement.mean())
    return _defined((observed - chance) / (1.0 - chance), n_units)


def gwet_ac1(table: RatingTable, *, categories: Collection[Hashable] | None = None) -> Coefficient:
    """Gwet's AC1 for any number of raters with missing ratings (Gwet 2014, ch. 4).

    With ``r_u`` the raters of unit ``u``, ``r_uk`` those choosing category ``k``,
    ``n'`` the units with ``r_u >= 2``, ``n`` the units with ``r_u >= 1`` and ``q``
    the number of categories::

        p_a  = (1 / n') sum_{u: r_u >= 2} sum_k r_uk (r_uk - 1) / (r_u (r_u - 1))
        pi_k = (1 / n)  sum_{u: r_u >= 1} r_uk / r_u
        p_e  = (1 / (q - 1)) sum_k pi_k (1 - pi_k)
        AC1  = (p_a - p_e) / (1 - p_e)

    ``q`` counts the categories that occur in the table unless ``categories``
    lists the whole scale (it must then include every value in use). For two
    raters with complete data this is Gwet's (2008) two-rater AC1 with
    ``pi_k`` the mean of the two raters' marginal shares. ``n_units`` is ``n'``.

    Undefined (``None``) when no unit was rated by two or more raters or the
    scale has fewer than two categories. (``p_e <= 1 / q < 1`` otherwise.)
    """
    if categories is None:
        n_categories = table.n_values
    else:
        scale = set(categories)
        unknown = [value for value in table.values if value not in scale]
        if unknown:
            raise ValueError(f"categories does not include the value {unknown[0]!r}")
        n_categories = len(scale)
    counts = table.value_counts()
    per_unit = counts.sum(axis=1)
    pairable = per_unit >= 2
    n_pairable = int(np.count_nonzero(pairable))
    if n_pairable == 0:
        return _undefined(0, _no_pairs_reason(table))
    if n_categories < 2:
        return _undefined(
            n_pairable,
            _single_category_reason(table, counts, "the ratings and no wider scale was given"),
        )
    observed = float(_agreeing_pair_share(counts[pairable], per_unit[pairable]).mean())
    rated = per_unit >= 1
    shares = (counts[rated] / per_unit[rated, np.newaxis]).mean(axis=0)
    chance = float((shares * (1.0 - shares)).sum() / (n_categories - 1))
    return _defined((observed - chance) / (1.0 - chance), n_pairable)


def _pair_key(rater_a: Hashable, rater_b: Hashable) -> str:
    first, second = sorted((str(rater_a), str(rater_b)))
    return f"{first}|{second}"


def cohen_kappa_pairs(table: RatingTable) -> dict[str, Coefficient]:
    """Cohen's kappa for every pair of raters, on the units both of them rated.

    Keys are ``"<a>|<b>"`` with the two rater names (as ``str``) sorted. For a
    pair with ``N`` shared units, ``p_o`` the share of them on which the two agree
    and ``p_a(k)``, ``p_b(k)`` each rater's share of category ``k`` on those units::

        p_e   = sum_k p_a(k) p_b(k)
        kappa = (p_o - p_e) / (1 - p_e)

    (Cohen 1960). ``n_units`` is ``N``. Undefined (``None``) for a pair without
    shared units, or when both raters used one and the same category on all of
    them (``p_e = 1``). A table with fewer than two raters gives ``{}``.
    """
    n_values = max(table.n_values, 1)
    order = np.lexsort((table.unit_idx, table.rater_idx))
    sorted_units = table.unit_idx[order]
    sorted_values = table.value_idx[order]
    bounds = np.concatenate(
        ([0], np.cumsum(np.bincount(table.rater_idx, minlength=table.n_raters)))
    )
    result: dict[str, Coefficient] = {}
    for a in range(table.n_raters):
        units_a = sorted_units[bounds[a] : bounds[a + 1]]
        values_a = sorted_values[bounds[a] : bounds[a + 1]]
        for b in range(a + 1, table.n_raters):
            units_b = sorted_units[bounds[b] : bounds[b + 1]]
            values_b = sorted_values[bounds[b] : bounds[b + 1]]
            _, in_a, in_b = np.intersect1d(
                units_a, units_b, assume_unique=True, return_indices=True
            )
            key = _pair_key(table.raters[a], table.raters[b])
            result[key] = _cohen_kappa(
                values_a[in_a], values_b[in_b], n_values, table, table.raters[a], table.raters[b]
            )
    return dict(sorted(result.items()))


def _cohen_kappa(
    values_a: IntArray,
    values_b: IntArray,
    n_values: int,
    table: RatingTable,
    rater_a: Hashable,
    rater_b: Hashable,
) -> Coefficient:
    n_units = len(values_a)
    if n_units == 0:
        return _undefined(0, f"raters {rater_a!r} and {rater_b!r} share no rated unit")
    confusion = np.bincount(values_a * n_values + values_b, minlength=n_values * n_values)
    confusion = confusion.reshape(n_values, n_values)
    kappa = float(kappa_from_confusion(confusion))
    if not math.isfinite(kappa):
        category = table.values[int(np.argmax(confusion.sum(axis=1)))]
        return _undefined(
            n_units,
            f"raters {rater_a!r} and {rater_b!r} both gave only {category!r} on their "
            "shared units, so chance agreement is perfect and kappa is undefined",
        )
    return _defined(kappa, n_units)


def per_label_alpha(table: RatingTable) -> dict[Hashable, Coefficient]:
    """One-vs-rest nominal alpha for each value in the table.

    For each code ``c`` the ratings are recoded to "``c``" / "not ``c``" and
    :func:`krippendorff_alpha` is taken on the pairable units (``n_units``). A low
    value points at a label whose definition raters read differently. Undefined
    (``None``) for a code that never occurs in a pairable unit, or that every
    rating of every pairable unit uses.
    """
    counts, per_unit = _pairable_counts(table)
    n_units = len(per_unit)
    if n_units == 0:
        reason = _no_pairs_reason(table)
        return {value: _undefined(0, reason) for value in table.values}
    n = float(per_unit.sum())
    rest = per_unit[:, np.newaxis] - counts
    diagonal = ((counts * (counts - 1) + rest * (rest - 1)) / (per_unit - 1)[:, np.newaxis]).sum(
        axis=0
    )
    n_in = counts.sum(axis=0).astype(np.float64)
    n_out = n - n_in
    result: dict[Hashable, Coefficient] = {}
    for position, value in enumerate(table.values):
        if n_in[position] == 0:
            result[value] = _undefined(
                n_units, f"{value!r} is never used in a unit rated by two or more raters"
            )
        elif n_out[position] == 0:
            result[value] = _undefined(
                n_units, f"every rating of the pairable units is {value!r}, so alpha is undefined"
            )
        else:
            expected = 2.0 * n_in[position] * n_out[position]
            alpha = 1.0 - (n - 1.0) * (n - diagonal[position]) / expected
            result[value] = _defined(float(alpha), n_units)
    return result


# --------------------------------------------------------------------------- conversations


@dataclass(frozen=True)
class _FirstBreaks:
    """Long form of "rater r first breaks conversation c at turn t" (has_break false: none)."""

    conversation_idx: IntArray
    rater_idx: IntArray
    has_break: npt.NDArray[np.bool_]
    first_turn: IntArray
    conversations: tuple[Hashable, ...]
    raters: tuple[Hashable, ...]


def _first_breaks_from_table(
    table: RatingTable,
    *,
    conversation_of: Callable[[Any], Hashable],
    turn_of: Callable[[Any], int],
    break_values: Collection[Hashable],
) -> _FirstBreaks:
    conversation_codes, conversation_uniques = factorize(
        np.fromiter(
            (conversation_of(unit) for unit in table.units), dtype=object, count=table.n_units
        )
    )
    if len(conversation_codes) and conversation_codes.min() < 0:
        raise ValueError("conversation_of returned None for a unit")
    conversation_codes, conversations = canonical_order(conversation_codes, conversation_uniques)
    turn_list = [turn_of(unit) for unit in table.units]
    turns = np.asarray(turn_list) if turn_list else np.zeros(0, dtype=np.int64)
    if turns.dtype.kind not in "iu" or turns.ndim != 1:
        for unit, turn in zip(table.units, turn_list, strict=True):
            _checked_turn(turn, unit)
    turns = turns.astype(np.int64, copy=False)
    breaking_value = np.array([value in break_values for value in table.values], dtype=bool)

    rating_conversation = conversation_codes[table.unit_idx]
    rating_turn = turns[table.unit_idx]
    rating_breaks = breaking_value[table.value_idx] if table.n_ratings else np.zeros(0, bool)

    group_key = rating_conversation * max(table.n_raters, 1) + table.rater_idx
    groups, group_of_rating = np.unique(group_key, return_inverse=True)
    group_of_rating = group_of_rating.reshape(-1)
    has_break = np.bincount(group_of_rating, weights=rating_breaks, minlength=len(groups)) > 0
    first_turn = np.zeros(len(groups), dtype=np.int64)
    breaking = np.flatnonzero(rating_breaks)
    if len(breaking):
        order = np.lexsort((rating_turn[breaking], group_of_rating[breaking]))
        ordered_groups = group_of_rating[breaking][order]
        first_of_group = np.concatenate(([True], ordered_groups[1:] != ordered_groups[:-1]))
        first_turn[ordered_groups[first_of_group]] = rating_turn[breaking][order][first_of_group]
    n_raters = max(table.n_raters, 1)
    return _FirstBreaks(
        conversation_idx=(groups // n_raters).astype(np.int64),
        rater_idx=(groups % n_raters).astype(np.int64),
        has_break=has_break,
        first_turn=first_turn,
        conversations=conversations,
        raters=table.raters,
    )


def _checked_turn(turn: Any, where: Hashable) -> int:
    if isinstance(turn, bool) or not isinstance(turn, int | np.integer):
        raise ValueError(f"turn of {where!r} must be an integer, got {turn!r}")
    return int(turn)


def _first_breaks_from_mapping(
    first_break: Mapping[Any, Mapping[Any, int | None]],
) -> _FirstBreaks:
    conversation_ids: list[Hashable] = []
    rater_names: list[Hashable] = []
    has_break: list[bool] = []
    first_turn: list[int] = []
    for conversation, by_rater in first_break.items():
        for rater, turn in by_rater.items():
            conversation_ids.append(conversation)
            rater_names.append(rater)
            has_break.append(turn is not None)
            first_turn.append(0 if turn is None else _checked_turn(turn, conversation))
    conversation_codes, conversations = canonical_order(
        *factorize(np.fromiter(conversation_ids, dtype=object, count=len(conversation_ids)))
    )
    rater_codes, raters = canonical_order(
        *factorize(np.fromiter(rater_names, dtype=object, count=len(rater_names)))
    )
    if (conversation_codes < 0).any() or (rater_codes < 0).any():
        raise ValueError("first_break must not contain a missing conversation or rater (None)")
    return _FirstBreaks(
        conversation_idx=conversation_codes,
        rater_idx=rater_codes,
        has_break=np.asarray(has_break, dtype=bool),
        first_turn=np.asarray(first_turn, dtype=np.int64),
        conversations=conversations,
        raters=raters,
    )


def conversation_first_breaks(
    table: RatingTable,
    *,
    conversation_of: Callable[[Any], Hashable],
    turn_of: Callable[[Any], int],
    break_values: Collection[Hashable] = ("break",),
) -> dict[Hashable, dict[Hashable, int | None]]:
    """Each rater's first breaking turn in each conversation they rated.

    ``conversation_of(unit)`` and ``turn_of(unit)`` take a unit apart (in the app
    ``unit[0]`` and ``unit[1]``). A rating counts as a break when its value is in
    ``break_values``; every other rating counts as "no break", so pass a table
    that holds only countable judgements (the break / no-break collapse, where
    borderline and abstain are already dropped). The result maps conversation ->
    rater -> the lowest turn that rater marked as a break, or ``None`` when they
    rated turns of that conversation and marked none. Raters who rated no turn of
    a conversation do not appear under it.
    """
    breaks = _first_breaks_from_table(
        table, conversation_of=conversation_of, turn_of=turn_of, break_values=break_values
    )
    result: dict[Hashable, dict[Hashable, int | None]] = {}
    for conversation, rater, has_break, turn in zip(
        breaks.conversation_idx.tolist(),
        breaks.rater_idx.tolist(),
        breaks.has_break.tolist(),
        breaks.first_turn.tolist(),
        strict=True,
    ):
        by_rater = result.setdefault(breaks.conversations[conversation], {})
        by_rater[breaks.raters[rater]] = turn if has_break else None
    return result


def _pairs(counts: npt.NDArray[Any]) -> int:
    counts = np.asarray(counts, dtype=np.int64)
    return int((counts * (counts - 1) // 2).sum())


def _outcome_groups(
    conversation_idx: IntArray, has_break: npt.NDArray[np.bool_], outcome: IntArray
) -> tuple[npt.NDArray[np.bool_], IntArray]:
    """Distinct (conversation, has_break, outcome) triples: whether each is a break, and
    how many raters share it. One integer key per triple (a 1-d ``np.unique`` is many
    times faster than ``np.unique(..., axis=1)``) unless the keys could overflow."""
    if not len(outcome):
        return np.zeros(0, dtype=bool), np.zeros(0, dtype=np.int64)
    low = int(outcome.min())
    span = int(outcome.max()) - low + 1
    n_conversations = int(conversation_idx.max()) + 1
    if 2 * n_conversations * span < 2**62:
        keys = (conversation_idx * 2 + has_break) * span + (outcome - low)
        groups, sizes = np.unique(keys, return_counts=True)
        return (groups // span) % 2 == 1, sizes.astype(np.int64)
    stacked = np.stack([conversation_idx, has_break.astype(np.int64), outcome])
    triples, sizes = np.unique(stacked, axis=1, return_counts=True)
    return triples[1] == 1, sizes.astype(np.int64)


def _first_break_agreement(breaks: _FirstBreaks) -> FirstBreakAgreement:
    n_conversations = len(breaks.conversations)
    raters_per_conversation = np.bincount(breaks.conversation_idx, minlength=n_conversations)
    n_units = int(np.count_nonzero(raters_per_conversation >= 2))
    n_pairs = _pairs(raters_per_conversation)
    # Same outcome = same conversation, and the same first turn or both "no break".
    outcome = np.where(breaks.has_break, breaks.first_turn, 0)
    outcome_has_break, outcome_sizes = _outcome_groups(
        breaks.conversation_idx, breaks.has_break, outcome
    )
    n_agreeing = _pairs(outcome_sizes)
    breakers_per_conversation = np.bincount(
        breaks.conversation_idx, weights=breaks.has_break, minlength=n_conversations
    )
    n_both_break = _pairs(breakers_per_conversation.astype(np.int64))
    n_same_turn = _pairs(outcome_sizes[outcome_has_break])
    if n_pairs == 0:
        if len(breaks.raters) < 2:
            reason = "fewer than two raters rated any conversation"
        else:
            reason = "no conversation was rated by two or more raters"
        return FirstBreakAgreement(None, 0, 0, 0, 0, 0, reason=reason, warning=None)
    return FirstBreakAgreement(
        value=n_agreeing / n_pairs,
        n_units=n_units,
        n_pairs=n_pairs,
        n_agreeing_pairs=n_agreeing,
        n_both_break_pairs=n_both_break,
        n_same_turn_pairs=n_same_turn,
        warning=_small_sample_warning(n_units),
    )


def first_break_agreement(
    first_break: Mapping[Any, Mapping[Any, int | None]],
) -> FirstBreakAgreement:
    """Exact-match rate of the first breaking turn over rater pairs, per conversation.

    ``first_break`` maps conversation -> rater -> the first turn that rater marked
    as a role break, or ``None`` for "rated, no break" (see
    :func:`conversation_first_breaks`). For every conversation and every pair of
    raters listed under it, the pair agrees when both give the same turn or both
    give ``None``. The value is agreeing pairs / all pairs, pooled over
    conversations; ``n_units`` counts conversations with two or more raters. See
    :class:`FirstBreakAgreement` for the counts reported alongside.

    Undefined (``None``) when no conversation has two raters.
    """
    return _first_break_agreement(_first_breaks_from_mapping(first_break))


def _any_break_alpha(breaks: _FirstBreaks) -> Coefficient:
    used_values, value_idx = np.unique(breaks.has_break, return_inverse=True)
    table = RatingTable(
        unit_idx=breaks.conversation_idx,
        rater_idx=breaks.rater_idx,
        value_idx=value_idx.reshape(-1),
        units=breaks.conversations,
        raters=breaks.raters,
        values=tuple(bool(value) for value in used_values),
    )
    return krippendorff_alpha(table)


def any_break_alpha(first_break: Mapping[Any, Mapping[Any, int | None]]) -> Coefficient:
    """Nominal alpha on "does this conversation break its role at all?".

    Takes the same mapping as :func:`first_break_agreement`: a rater's rating of
    a conversation is ``True`` when they give a turn and ``False`` for ``None``.
    Units are conversations; ``n_units`` counts those rated by two or more
    raters. Undefined as :func:`krippendorff_alpha` is (no conversation with two
    raters, or every rater saying the same thing about every conversation).
    """
    return _any_break_alpha(_first_breaks_from_mapping(first_break))


# --------------------------------------------------------------------------- collapses


def verdict_mapping_from_verdicts(verdicts: Mapping[Any, str]) -> dict[Any, str | None]:
    """Code -> ``"pass"`` / ``"fail"`` / ``"borderline"`` / ``None`` (abstain is not counted)."""
    kept = {"pass", "fail", "borderline"}
    return {code: (verdict if verdict in kept else None) for code, verdict in verdicts.items()}


# --------------------------------------------------------------------------- summary


def agreement_summary(
    table: RatingTable,
    *,
    break_mapping: Mapping[Any, Hashable | None],
    verdict_mapping: Mapping[Any, Hashable | None],
    conversation_of: Callable[[Any], Hashable],
    turn_of: Callable[[Any], int],
    n_resamples: int = 1000,
    seed: int = 0,
    break_value: Hashable = "break",
) -> dict[str, Any]:
    """Every agreement figure for a turn-level rating table, as one JSON-ready dict.

    ``break_mapping`` collapses codes to break / no break (``break_value`` names
    the break category; ``None`` drops a code) and ``verdict_mapping`` to the
    verdicts; :func:`break_mapping_from_verdicts` and
    :func:`verdict_mapping_from_verdicts` build both from a rubric.
    ``conversation_of`` and ``turn_of`` take a unit apart for the
    conversation-level figures, which are computed on the break collapse.
    ``n_resamples=0`` skips the bootstrap.

    Keys: ``level`` (``"turn"``), ``units``, ``raters``, ``ratings`` (counts),
    ``rater_names``, ``percent_agreement``, ``krippendorff_alpha`` (with its
    ``ci95``), ``alpha_ci95`` (``[low, high]`` or ``null``), ``bootstrap``,
    ``fleiss_kappa`` (units rated by every rater only), ``gwet_ac1``,
    ``cohen_kappa`` (``"a|b"`` -> coefficient), ``per_label`` (code ->
    coefficient), ``alpha_break``, ``alpha_verdict``, ``conversation``
    (``conversations``: how many have a break / no-break rating;
    ``first_break_agreement``, ``any_break_alpha``) and
    ``warnings`` (``"<figure>: <warning>"`` lines). Coefficients are
    :meth:`Coefficient.to_dict` objects. Nothing in it is NaN.
    """
    if n_resamples < 0:
        raise ValueError(f"n_resamples must be zero or a positive integer, got {n_resamples!r}")
    if break_value not in set(break_mapping.values()):
        raise ValueError(f"break_mapping maps no code to the break value {break_value!r}")

    alpha = (
        alpha_bootstrap_ci(table, n_resamples=n_resamples, seed=seed, cluster_of=conversation_of)
        if n_resamples
        else krippendorff_alpha(table)
    )
    break_table = table.collapse(break_mapping)
    verdict_table = table.collapse(verdict_mapping)
    breaks = _first_breaks_from_table(
        break_table,
        conversation_of=conversation_of,
        turn_of=turn_of,
        break_values={break_value},
    )
    figures: dict[str, Coefficient | FirstBreakAgreement] = {
        "percent_agreement": percent_agreement(table),
        "krippendorff_alpha": alpha,
        "fleiss_kappa": fleiss_kappa(table),
        "gwet_ac1": gwet_ac1(table),
        "alpha_break": krippendorff_alpha(break_table),
        "alpha_verdict": krippendorff_alpha(verdict_table),
    }
    pairwise = cohen_kappa_pairs(table)
    first_break = _first_break_agreement(breaks)
    any_break = _any_break_alpha(breaks)

    warnings: list[str] = []
    for name, figure in figures.items():
        if figure.warning:
            warnings.append(f"{name}: {figure.warning}")
    for pair, coefficient in pairwise.items():
        if coefficient.warning:
            warnings.append(f"cohen_kappa {pair}: {coefficient.warning}")
    for name, figure in (("first_break_agreement", first_break), ("any_break_alpha", any_break)):
        if figure.warning:
            warnings.append(f"conversation {name}: {figure.warning}")
    if alpha.value is not None and alpha.ci95 is None and n_resamples:
        warnings.append(f"alpha_ci95: {alpha.reason}")

    summary: dict[str, Any] = {
        "level": "turn",
        "units": table.n_units,
        "raters": table.n_raters,
        "ratings": table.n_ratings,
        "rater_names": [str(rater) for rater in table.raters],
        "alpha_ci95": None if alpha.ci95 is None else [alpha.ci95[0], alpha.ci95[1]],
        "bootstrap": {
            "n_resamples": n_resamples,
            "seed": seed,
            "confidence": 0.95,
            "method": CLUSTER_METHOD,
        },
        "cohen_kappa": {
            pair: coefficient.to_dict(count_key="n_units") for pair, coefficient in pairwise.items()
        },
        "per_label": {
            str(value): coefficient.to_dict(count_key="n_units")
            for value, coefficient in per_label_alpha(table).items()
        },
        "conversation": {
            "conversations": len(breaks.conversations),
            "first_break_agreement": first_break.to_dict(),
            "any_break_alpha": any_break.to_dict(count_key="n_units"),
        },
        "warnings": warnings,
    }
    for name, figure in figures.items():
        summary[name] = figure.to_dict(count_key="n_units")
    return summary
