"""The agreement coefficients of one rating table: percent agreement, Krippendorff's alpha,
Fleiss' kappa, Gwet's AC1, pairwise Cohen's kappa and per-label alpha.

See :mod:`review_app.agreement` for the conventions (undefined figures, exact errors)
and the references.
"""

from __future__ import annotations

import math
from collections.abc import Collection, Hashable
from dataclasses import dataclass

import numpy as np

from review_app.stats.confusion import confusion_from_codes
from review_app.stats.core import Estimate, kappa_from_confusion
from review_app.stats.table import FloatArray, IntArray, RatingTable

SMALL_SAMPLE_UNITS = 30
"""Below this many units behind a number, the number carries a warning."""

SMALL_SAMPLE_WARNING = "fewer than 30 pairable units"


# --------------------------------------------------------------------------- results


Coefficient = Estimate
"""An agreement figure is an :class:`~review_app.stats.core.Estimate` (``n`` = units)."""


def small_sample_warning(n_units: int) -> str | None:
    """:data:`SMALL_SAMPLE_WARNING` for a figure on fewer than :data:`SMALL_SAMPLE_UNITS`
    units, else ``None``."""
    return SMALL_SAMPLE_WARNING if n_units < SMALL_SAMPLE_UNITS else None


def _defined(value: float, n_units: int, *, ci95: tuple[float, float] | None = None) -> Coefficient:
    if not math.isfinite(value):  # a guard: the formulas below never divide by zero
        return Coefficient(None, n_units, reason="the computation did not give a finite number")
    return Coefficient(float(value), n_units, ci95=ci95, warning=small_sample_warning(n_units))


def _undefined(n_units: int, reason: str) -> Coefficient:
    return Coefficient(None, n_units, reason=reason)


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


def pairable_counts(table: RatingTable) -> tuple[IntArray, IntArray]:
    """Value counts (units x values) and number of ratings of the units rated at least twice
    (the pairable units, in table order)."""
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
    counts, per_unit = pairable_counts(table)
    n_units = len(per_unit)
    if n_units == 0:
        return _undefined(0, _no_pairs_reason(table))
    return _defined(float(_agreeing_pair_share(counts, per_unit).mean()), n_units)


def alpha_parts(counts: IntArray, per_unit: IntArray) -> tuple[FloatArray, FloatArray]:
    """Per pairable unit: its value counts (its share of ``n_c``) and its ``sum_c o_cc``.

    The sufficient statistics of nominal alpha: summed over any multiset of units (a
    bootstrap resample) they give that multiset's alpha by :func:`alpha_from_totals`.
    """
    diagonal = (counts * (counts - 1)).sum(axis=1) / (per_unit - 1)
    return counts.astype(np.float64), diagonal


def alpha_from_totals(n_c: FloatArray, observed_diagonal: FloatArray) -> FloatArray:
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

    ([1]_, section C). It equals ``krippendorff.alpha(..., level_of_measurement=
    "nominal")`` on :meth:`RatingTable.to_reliability_data`.

    Parameters
    ----------
    table : RatingTable
        The ratings; any rater may leave any unit unrated.

    Returns
    -------
    Coefficient
        Alpha, ``n_units`` the pairable units. Undefined (``value`` None, with a
        ``reason``) when no unit was rated by two or more raters, or when a single value
        occurs in the pairable units (expected disagreement ``D_e = 0``); a warning
        under :data:`SMALL_SAMPLE_UNITS` units.

    References
    ----------
    .. [1] Krippendorff, K. (2011). Computing Krippendorff's Alpha-Reliability.
       Annenberg School for Communication, University of Pennsylvania.
    .. [2] Wikipedia, "Krippendorff's alpha", the computational example.

    Examples
    --------
    The reliability data of [1]_, section C: four observers, twelve units, values 1-5,
    missing ratings as ``.``; Krippendorff gives nominal alpha = 0.743 on the eleven
    pairable units.

    >>> data = {
    ...     "A": "1 2 3 3 2 1 4 1 2 . . .",
    ...     "B": "1 2 3 3 2 2 4 1 2 5 . 3",
    ...     "C": ". 3 3 3 2 3 4 2 2 5 1 .",
    ...     "D": "1 2 3 3 2 4 4 1 2 5 1 .",
    ... }
    >>> table = RatingTable.from_records(
    ...     (unit, observer, value)
    ...     for observer, row in data.items()
    ...     for unit, value in enumerate(row.split(), start=1)
    ...     if value != "."
    ... )
    >>> alpha = krippendorff_alpha(table)
    >>> round(alpha.value, 3), alpha.n_units
    (0.743, 11)

    The three coders and fifteen units of [2]_ give 0.691:

    >>> data = {
    ...     "A": ". . . . . 3 4 1 2 1 1 3 3 . 3",
    ...     "B": "1 . 2 1 3 3 4 3 . . . . . . .",
    ...     "C": ". . 2 1 3 4 4 . 2 1 1 3 3 . 4",
    ... }
    >>> table = RatingTable.from_records(
    ...     (unit, coder, value)
    ...     for coder, row in data.items()
    ...     for unit, value in enumerate(row.split(), start=1)
    ...     if value != "."
    ... )
    >>> round(krippendorff_alpha(table).value, 3)
    0.691
    """
    counts, per_unit = pairable_counts(table)
    n_units = len(per_unit)
    if n_units == 0:
        return _undefined(0, _no_pairs_reason(table))
    value_counts, diagonal = alpha_parts(counts, per_unit)
    n_c = value_counts.sum(axis=0)
    if np.count_nonzero(n_c) < 2:
        return _undefined(n_units, _single_category_reason(table, counts, "the pairable units"))
    return _defined(float(alpha_from_totals(n_c, np.asarray(diagonal.sum()))), n_units)


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

    Parameters
    ----------
    table : RatingTable
        The ratings.

    Returns
    -------
    Coefficient
        Kappa, ``n_units`` the units rated by every rater. It equals
        ``statsmodels.stats.inter_rater.fleiss_kappa`` on those units' category counts.

    References
    ----------
    .. [1] Fleiss, J. L. (1971). Measuring nominal scale agreement among many raters.
       Psychological Bulletin, 76(5), 378-382.
    .. [2] Wikipedia, "Fleiss' kappa", the worked example.

    Examples
    --------
    The worked example of [2]_: fourteen raters put ten subjects in five categories
    (each row counts the raters per category); kappa = 0.210.

    >>> counts = [
    ...     [0, 0, 0, 0, 14], [0, 2, 6, 4, 2], [0, 0, 3, 5, 6], [0, 3, 9, 2, 0],
    ...     [2, 2, 8, 1, 1], [7, 7, 0, 0, 0], [3, 2, 6, 3, 0], [2, 5, 3, 2, 2],
    ...     [6, 5, 2, 1, 0], [0, 2, 2, 3, 7],
    ... ]
    >>> records = []
    >>> for subject, row in enumerate(counts, start=1):
    ...     chosen = [category for category, n in enumerate(row, start=1) for _ in range(n)]
    ...     records += [(subject, rater, category) for rater, category in enumerate(chosen)]
    >>> kappa = fleiss_kappa(RatingTable.from_records(records))
    >>> round(kappa.value, 3), kappa.n_units
    (0.21, 10)
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

    ([1]_). ``n_units`` is ``N``. Undefined (``None``) for a pair without
    shared units, or when both raters used one and the same category on all of
    them (``p_e = 1``). A table with fewer than two raters gives ``{}``.

    Parameters
    ----------
    table : RatingTable
        The ratings.

    Returns
    -------
    dict of str to Coefficient
        ``"<a>|<b>"`` -> the pair's kappa (:func:`pair_kappa`), in key order.

    References
    ----------
    .. [1] Cohen, J. (1960). A coefficient of agreement for nominal scales. Educational
       and Psychological Measurement, 20(1), 37-46.

    Examples
    --------
    The 50 grant proposals of :func:`review_app.stats.core.kappa_from_confusion`
    (kappa 0.4):

    >>> said = [("yes", "yes")] * 20 + [("yes", "no")] * 5 + [("no", "yes")] * 10
    >>> said += [("no", "no")] * 15
    >>> table = RatingTable.from_records(
    ...     (proposal, reader, answer)
    ...     for proposal, answers in enumerate(said)
    ...     for reader, answer in zip("AB", answers)
    ... )
    >>> {pair: round(kappa.value, 3) for pair, kappa in cohen_kappa_pairs(table).items()}
    {'A|B': 0.4}
    """
    return {pair.key: pair_kappa(pair, table) for pair in rater_pairs(table)}


@dataclass(frozen=True)
class RaterPair:
    """Two raters and the units both rated (table unit indices, ascending) with their codes."""

    key: str
    rater_a: Hashable
    rater_b: Hashable
    units: IntArray
    values_a: IntArray
    values_b: IntArray


def rater_pairs(table: RatingTable) -> list[RaterPair]:
    """Every pair of raters, in key order, with the units both of them rated."""
    order = np.lexsort((table.unit_idx, table.rater_idx))
    sorted_units = table.unit_idx[order]
    sorted_values = table.value_idx[order]
    bounds = np.concatenate(
        ([0], np.cumsum(np.bincount(table.rater_idx, minlength=table.n_raters)))
    )
    pairs: list[RaterPair] = []
    for a in range(table.n_raters):
        units_a = sorted_units[bounds[a] : bounds[a + 1]]
        values_a = sorted_values[bounds[a] : bounds[a + 1]]
        for b in range(a + 1, table.n_raters):
            units_b = sorted_units[bounds[b] : bounds[b + 1]]
            values_b = sorted_values[bounds[b] : bounds[b + 1]]
            shared, in_a, in_b = np.intersect1d(
                units_a, units_b, assume_unique=True, return_indices=True
            )
            pairs.append(
                RaterPair(
                    _pair_key(table.raters[a], table.raters[b]),
                    table.raters[a],
                    table.raters[b],
                    shared,
                    values_a[in_a],
                    values_b[in_b],
                )
            )
    return sorted(pairs, key=lambda pair: pair.key)


def pair_kappa(pair: RaterPair, table: RatingTable) -> Coefficient:
    """Cohen's kappa of one pair of ``table``'s raters on their shared units.

    Undefined (with a reason naming the two raters, and the one value used) when they
    share no unit or both used one value throughout (:func:`cohen_kappa_pairs`).
    """
    rater_a, rater_b = pair.rater_a, pair.rater_b
    n_units = len(pair.values_a)
    if n_units == 0:
        return _undefined(0, f"raters {rater_a!r} and {rater_b!r} share no rated unit")
    confusion = confusion_from_codes(
        pair.values_a, pair.values_b, n_categories=max(table.n_values, 1)
    )
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
    counts, per_unit = pairable_counts(table)
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
