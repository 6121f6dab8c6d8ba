"""Stratified prediction-powered inference, and where to place the next audits.

Fisch, A., Maynez, J., Hofer, R. A., Dhingra, B., Globerson, A., & Cohen, W. W. (2024).
Stratified prediction-powered inference for effective hybrid evaluation of language
models. NeurIPS 2024, arXiv:2406.04291. Neyman, J. (1934). On the two different aspects
of the representative method. Journal of the Royal Statistical Society, 97(4), 558-625.
Cochran, W. G. (1977). Sampling Techniques, 3rd ed., sections 5.5 and 5A.

The judged units fall into strata ``s`` (an answer position bin, a lane, ...) of
``M_s`` units, ``n_s`` of them with gold and ``N_s`` without. Each stratum gets its own
PPI++ estimate ``theta_s`` with its own tuned ``lam_s`` (:func:`review_app.stats.ppi.
ppi_mean` on the stratum's units alone) and the break rate is their combination by the
strata's shares ``W_s = M_s / sum M``::

    theta = sum_s W_s theta_s
    var   = sum_s W_s^2 var_s,    var_s = var(lam_s f~_s) / N_s + var(Y_s - lam_s f_s) / n_s
    theta +- z_0.975 * sqrt(var)

which is valid when each stratum's gold is a uniform random sample of that stratum
(strata sampled independently). When the judge is good in one stratum and poor in
another, each ``lam_s`` follows its stratum, and audits placed by stratum (below)
narrow the interval further.

*Neyman allocation.* The variance ``sum_s W_s^2 sigma_s^2 / n_s`` (``sigma_s`` the
spread of ``Y - lam_s f`` in stratum ``s``) is smallest for a fixed total of gold units
when ``n_s`` is proportional to ``M_s sigma_s``. With ``n0_s`` audits so far and ``K``
more, :func:`neyman_allocation` gives stratum ``s`` ``x_s = clip(c M_s sigma_s - n0_s,
0, R_s)`` more (``R_s`` the units still undrawn there), ``c`` chosen so that ``sum x_s =
K``, rounded to whole units by largest remainders (Cochran 5A: the optimum when some
strata already hold more than their share).
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Sequence
from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike, NDArray
from scipy import stats

from review_app.stats.checks import check_confidence
from review_app.stats.ppi import PpiEstimate, ppi_mean

__all__ = [
    "StratifiedBreakRate",
    "StratifiedEstimate",
    "StratumFigures",
    "design_weights",
    "neyman_allocation",
    "stratified_break_rate",
    "stratified_ppi_mean",
    "stratified_variance",
]

IntArray = NDArray[np.int64]
FloatArray = NDArray[np.float64]


def stratified_variance(
    weights: ArrayLike,
    *,
    rectifier_variance: ArrayLike,
    imputed_variance: ArrayLike,
    n_gold: ArrayLike,
    n_unlabeled: ArrayLike,
) -> float:
    """``sum_s W_s^2 (imputed_s / N_s + rectifier_s / n_s)`` (module docstring).

    A stratum with no unlabeled unit left adds no imputed term; one with no gold adds
    an infinite variance.

    Examples
    --------
    >>> round(stratified_variance([0.5, 0.5], rectifier_variance=[0.04, 0.16],
    ...       imputed_variance=[0.0, 0.0], n_gold=[10, 40], n_unlabeled=[90, 60]), 12)
    0.002
    """
    w = np.asarray(weights, dtype=np.float64)
    n = np.asarray(n_gold, dtype=np.float64)
    big_n = np.asarray(n_unlabeled, dtype=np.float64)
    rectifier = np.asarray(rectifier_variance, dtype=np.float64)
    imputed = np.asarray(imputed_variance, dtype=np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        imputed_term = np.where(big_n > 0, imputed / np.maximum(big_n, 1), 0.0)
        rectifier_term = np.where(n > 0, rectifier / np.maximum(n, 1), np.inf)
    return float(np.sum(w**2 * (imputed_term + rectifier_term)))


@dataclass(frozen=True)
class StratifiedEstimate:
    """The stratified estimate, its variance and interval, and each stratum's PPI++."""

    value: float
    ci95: tuple[float, float]
    variance: float
    weights: tuple[float, ...]
    strata: tuple[PpiEstimate, ...]
    confidence: float

    def variance_with(self, added: ArrayLike) -> float:
        """The variance with ``added[s]`` more gold units in stratum ``s`` (taken from its
        unlabeled units), each stratum's ``lam`` and variance terms held fixed."""
        more = np.asarray(added, dtype=np.float64)
        return stratified_variance(
            self.weights,
            rectifier_variance=[s.rectifier_variance for s in self.strata],
            imputed_variance=[s.imputed_variance for s in self.strata],
            n_gold=[s.n_gold + m for s, m in zip(self.strata, more, strict=True)],
            n_unlabeled=[s.n_unlabeled - m for s, m in zip(self.strata, more, strict=True)],
        )

    def width(self, variance: float | None = None) -> float:
        """The interval's width for ``variance`` (by default its own)."""
        z = float(stats.norm.ppf(0.5 + self.confidence / 2.0))
        return 2.0 * z * math.sqrt(self.variance if variance is None else variance)


def stratified_ppi_mean(
    y_gold: Sequence[ArrayLike],
    judge_gold: Sequence[ArrayLike],
    judge_unlabeled: Sequence[ArrayLike],
    *,
    gold_weights: Sequence[ArrayLike | None] | None = None,
    confidence: float = 0.95,
) -> StratifiedEstimate:
    """The stratified PPI++ estimate of the mean of ``Y`` (module docstring).

    Parameters
    ----------
    y_gold, judge_gold, judge_unlabeled : sequences of arrays, one per stratum
        Each stratum's gold values and the judge's on them, and the judge's on the
        stratum's other units (as :func:`~review_app.stats.ppi.ppi_mean` takes them).
    gold_weights : sequence of arrays or None, optional
        Per stratum, weights of its gold units (inverse inclusion probabilities) or
        None.
    confidence : float, default 0.95

    Raises
    ------
    ValueError
        ``"the strata need as many gold, judge-on-gold and judge-on-other arrays, got
        <a>, <b> and <c>"``, ``"stratified ppi needs at least one stratum"``, and
        :func:`~review_app.stats.ppi.ppi_mean`'s messages for a stratum.

    Examples
    --------
    One stratum is plain PPI++:

    >>> y, f, f_u = [1, 0, 0, 1], [1, 0, 1, 1], [1, 0, 0, 0, 1, 0]
    >>> one = stratified_ppi_mean([y], [f], [f_u])
    >>> round(one.value, 12) == round(ppi_mean(y, f, f_u).value, 12)
    True
    """
    if not len(y_gold) == len(judge_gold) == len(judge_unlabeled):
        raise ValueError(
            "the strata need as many gold, judge-on-gold and judge-on-other arrays, got "
            f"{len(y_gold)}, {len(judge_gold)} and {len(judge_unlabeled)}"
        )
    if not y_gold:
        raise ValueError("stratified ppi needs at least one stratum")
    check_confidence(confidence)
    chosen = list(gold_weights) if gold_weights is not None else [None] * len(y_gold)
    strata = tuple(
        ppi_mean(y, f, f_u, confidence=confidence, weights=w)
        for y, f, f_u, w in zip(y_gold, judge_gold, judge_unlabeled, chosen, strict=True)
    )
    sizes = np.array([s.n_gold + s.n_unlabeled for s in strata], dtype=np.float64)
    weights = sizes / sizes.sum()
    value = float(np.sum(weights * np.array([s.value for s in strata])))
    variance = stratified_variance(
        weights,
        rectifier_variance=[s.rectifier_variance for s in strata],
        imputed_variance=[s.imputed_variance for s in strata],
        n_gold=[s.n_gold for s in strata],
        n_unlabeled=[s.n_unlabeled for s in strata],
    )
    half = float(stats.norm.ppf(0.5 + confidence / 2.0)) * math.sqrt(variance)
    return StratifiedEstimate(
        value=value,
        ci95=(value - half, value + half),
        variance=variance,
        weights=tuple(float(w) for w in weights),
        strata=strata,
        confidence=confidence,
    )


def neyman_allocation(
    sizes: ArrayLike,
    spreads: ArrayLike,
    *,
    budget: int,
    existing: ArrayLike | None = None,
    capacity: ArrayLike | None = None,
    minimum: int = 0,
) -> IntArray:
    """How many of ``budget`` more audits go to each stratum (module docstring).

    Parameters
    ----------
    sizes : array_like, shape (S,)
        ``M_s``: the units of each stratum.
    spreads : array_like, shape (S,)
        ``sigma_s``: the spread of the judge's error there (non-negative).
    budget : int
        ``K``: the audits to place, at most ``sum(capacity)``.
    existing : array_like, optional
        ``n0_s``: audits so far (0 by default).
    capacity : array_like, optional
        ``R_s``: units still undrawn in each stratum (``sizes - existing`` by default).
    minimum : int, default 0
        First bring every stratum that can hold them up to this many audits in all
        (so each stratum can be estimated), as far as the budget goes; the rest by
        Neyman.

    Returns
    -------
    numpy.ndarray of int64, shape (S,)
        ``x_s``, summing to ``budget``.

    Raises
    ------
    ValueError
        ``"sizes, spreads, existing and capacity must have one entry per stratum"``,
        ``"spreads must be finite and non-negative"``, ``"budget must be between 0 and
        the units still undrawn (<R>), got <K>"``.

    Examples
    --------
    Two strata of 1,000 units; the judge errs little in the first (sigma 0.1) and much
    in the second (sigma 0.5): 100 audits go 17 / 83, as ``M_s sigma_s`` is 100 / 500:

    >>> neyman_allocation([1000, 1000], [0.1, 0.5], budget=100).tolist()
    [17, 83]

    With 30 audits already in the second stratum, the next 60 fill toward the same
    shares:

    >>> neyman_allocation([1000, 1000], [0.1, 0.5], budget=60, existing=[0, 30]).tolist()
    [15, 45]
    """
    m = np.asarray(sizes, dtype=np.float64)
    sigma = np.asarray(spreads, dtype=np.float64)
    n0 = np.zeros_like(m) if existing is None else np.asarray(existing, dtype=np.float64)
    cap = m - n0 if capacity is None else np.asarray(capacity, dtype=np.float64)
    if not (m.ndim == 1 and m.shape == sigma.shape == n0.shape == cap.shape):
        raise ValueError("sizes, spreads, existing and capacity must have one entry per stratum")
    if not np.all(np.isfinite(sigma)) or np.any(sigma < 0):
        raise ValueError("spreads must be finite and non-negative")
    cap = np.maximum(cap, 0.0)
    room = int(cap.sum())
    if isinstance(budget, bool) or not 0 <= budget <= room:
        raise ValueError(
            f"budget must be between 0 and the units still undrawn ({room}), got {budget}"
        )
    placed = np.zeros(m.size, dtype=np.int64)
    left = int(budget)
    if minimum > 0 and left:
        need = np.minimum(np.maximum(minimum - n0, 0), cap).astype(np.int64)
        order = np.argsort(-m * sigma, kind="stable")
        for s in order.tolist():
            take = min(int(need[s]), left)
            placed[s] += take
            left -= take
    if left == 0:
        return placed
    target = m * sigma
    if not np.any(target[cap - placed > 0] > 0):
        target = m.copy()  # no spread known anywhere: in proportion to size
    have = n0 + placed
    free = cap - placed

    def given(c: float) -> FloatArray:
        return np.clip(c * target - have, 0.0, free)

    low, high = 0.0, 1.0
    while given(high).sum() < left and high < 1e18:
        high *= 2.0
    for _ in range(200):
        middle = (low + high) / 2.0
        if given(middle).sum() < left:
            low = middle
        else:
            high = middle
    share = given(high)
    share *= left / share.sum()
    whole = np.minimum(np.floor(share), free).astype(np.int64)
    remainder = share - whole
    short = left - int(whole.sum())
    order = np.argsort(-remainder, kind="stable").tolist()
    while short > 0:
        for s in order:
            if short and whole[s] < free[s]:
                whole[s] += 1
                short -= 1
    return placed + whole


@dataclass(frozen=True)
class StratumFigures:
    """One stratum of :func:`stratified_break_rate` (strata pooled when too small)."""

    stratum: str
    members: tuple[str, ...]
    """The strata it holds (one, or those pooled into it)."""
    n_units: int
    n_gold: int
    weight: float
    estimate: PpiEstimate | None
    weighted: bool
    """Its gold units carry unequal design weights (drawn with unequal probabilities)."""


@dataclass(frozen=True)
class StratifiedBreakRate:
    """The stratified estimate over units labelled with their strata."""

    strata: tuple[StratumFigures, ...]
    combined: StratifiedEstimate | None
    reason: str | None
    unrepresented: int
    """Units in a (stratum, design cell) without any gold: the weights cannot reach them."""

    def spread(self, member: str) -> float | None:
        """``sigma_s``, the spread of ``Y - lam f`` in the stratum holding ``member``
        (None when it has no estimate)."""
        for figures in self.strata:
            if member in figures.members and figures.estimate is not None:
                return math.sqrt(figures.estimate.rectifier_variance)
        return None

    def widths(self, audits: int) -> tuple[float, float, float] | None:
        """The interval's width now, with ``audits`` more placed by Neyman allocation over
        these strata, and with as many placed uniformly (in proportion to the units
        without gold); each stratum's ``lam`` and variances held fixed. None without an
        estimate or when fewer units are left."""
        combined = self.combined
        if combined is None:
            return None
        sizes = [s.n_units for s in self.strata]
        left = np.array([s.n_unlabeled for s in combined.strata], dtype=np.float64)
        if audits < 0 or audits > left.sum():
            return None
        spreads = [math.sqrt(s.rectifier_variance) for s in combined.strata]
        neyman = neyman_allocation(
            sizes, spreads, budget=audits, existing=[s.n_gold for s in combined.strata],
            capacity=left,
        )  # fmt: skip
        uniform = audits * left / left.sum()
        return (
            combined.width(),
            combined.width(combined.variance_with(neyman)),
            combined.width(combined.variance_with(uniform)),
        )


def design_weights(
    strata: Sequence[Hashable], cells: Sequence[Hashable], has_gold: ArrayLike
) -> tuple[FloatArray, int]:
    """Per unit, ``N_{s,c} / n_{s,c}``: the units of its stratum and design cell over
    those of them with gold (the inverse of the share audited there), and how many
    units sit where no unit has gold.

    Audit draws that are uniform within the cells of a design (a uniform draw, a draw
    by stratum, or several, each excluding the turns drawn before) leave, within each
    cell, a uniform sample: weighting each gold unit by its cell's inverse share makes
    the gold of any stratum stand for all of it (post-stratification; Cochran 5A.9).

    Examples
    --------
    >>> weights, missing = design_weights(["a"] * 6, [0, 0, 0, 0, 1, 1],
    ...                                    [True, False, False, False, True, False])
    >>> weights.tolist(), missing
    ([4.0, 0.0, 0.0, 0.0, 2.0, 0.0], 0)
    """
    gold = np.asarray(has_gold, dtype=bool)
    keys = list(zip(strata, cells, strict=True))
    totals: dict[tuple[Hashable, Hashable], int] = {}
    with_gold: dict[tuple[Hashable, Hashable], int] = {}
    for key, g in zip(keys, gold.tolist(), strict=True):
        totals[key] = totals.get(key, 0) + 1
        with_gold[key] = with_gold.get(key, 0) + int(g)
    weights = np.array(
        [totals[key] / with_gold[key] if g else 0.0 for key, g in zip(keys, gold.tolist(),
                                                                         strict=True)],
        dtype=np.float64,
    )  # fmt: skip
    missing = sum(n for key, n in totals.items() if with_gold[key] == 0)
    return weights, missing


def stratified_break_rate(
    strata: Sequence[str],
    judge: ArrayLike,
    gold: ArrayLike,
    *,
    cells: Sequence[Hashable] | None = None,
    min_gold: int = 10,
    order: Sequence[str] = (),
    confidence: float = 0.95,
) -> StratifiedBreakRate:
    """The stratified PPI++ estimate over judged units (module docstring).

    Parameters
    ----------
    strata : sequence of str, one per judged unit
        Its stratum.
    judge : array_like of 0/1
        The judge's verdict (1: break).
    gold : array_like of float
        The gold (1: break, 0: no break), NaN where the unit has none.
    cells : sequence, optional
        The unit's design cell (the strata of every stratified audit draw it fell in);
        gold units are weighted by :func:`design_weights` when their weights differ
        within a stratum.
    min_gold : int, default 10
        A stratum with fewer gold units (or no unit without gold) is pooled with the
        other such strata; a pool with fewer than 2 gold units joins the stratum with
        the most gold.
    order : sequence of str
        The order of the strata in the result (others follow, sorted).

    Examples
    --------
    >>> result = stratified_break_rate(["a"] * 4 + ["b"] * 4, [1, 0, 0, 1, 1, 1, 0, 0],
    ...     [1, 0, np.nan, np.nan, 1, 0, np.nan, np.nan], min_gold=2)
    >>> [(s.stratum, s.n_units, s.n_gold) for s in result.strata]
    [('a', 4, 2), ('b', 4, 2)]
    """
    judged = np.asarray(judge, dtype=np.float64)
    truth = np.asarray(gold, dtype=np.float64)
    if not len(strata) == judged.size == truth.size:
        raise ValueError("strata, judge and gold must have the same length")
    has_gold = ~np.isnan(truth)
    names = [s for s in dict.fromkeys(order) if s in set(strata)]
    names += sorted(set(strata) - set(names))
    counts = {name: [0, 0] for name in names}
    for s, g in zip(strata, has_gold.tolist(), strict=True):
        counts[s][0] += 1
        counts[s][1] += int(g)
    small = [n for n in names if counts[n][1] < min_gold or counts[n][1] == counts[n][0]]
    groups = [[n] for n in names if n not in small]
    if small:
        pooled_gold = sum(counts[n][1] for n in small)
        pooled_rest = sum(counts[n][0] - counts[n][1] for n in small)
        if (pooled_gold < 2 or pooled_rest == 0) and groups:
            richest = max(groups, key=lambda g: sum(counts[n][1] for n in g))
            richest.extend(small)
        else:
            groups.append(small)
    group_of = {n: i for i, group in enumerate(groups) for n in group}
    group_index = np.fromiter((group_of[s] for s in strata), dtype=np.int64, count=len(strata))
    weights, missing = (
        design_weights([group_of[s] for s in strata], cells, has_gold)
        if cells is not None
        else (has_gold.astype(np.float64), 0)
    )
    figures: list[StratumFigures] = []
    inputs: list[tuple[FloatArray, FloatArray, FloatArray, FloatArray | None]] = []
    reason: str | None = None
    for i, group in enumerate(groups):
        inside = group_index == i
        gold_rows = inside & has_gold
        rest_rows = inside & ~has_gold
        w = weights[gold_rows]
        unequal = bool(w.size and not np.allclose(w, w[0]))
        label = group[0] if len(group) == 1 else "(pooled: " + ", ".join(group) + ")"
        estimate = None
        if gold_rows.sum() >= 2 and rest_rows.sum() >= 1:
            estimate = ppi_mean(
                truth[gold_rows], judged[gold_rows], judged[rest_rows], confidence=confidence,
                weights=w if unequal else None,
            )  # fmt: skip
            inputs.append((truth[gold_rows], judged[gold_rows], judged[rest_rows],
                           w if unequal else None))  # fmt: skip
        else:
            reason = (
                f"no stratified estimate: {label} has {int(gold_rows.sum())} units with gold and "
                f"{int(rest_rows.sum())} without (it needs at least 2 and 1)"
            )
        figures.append(
            StratumFigures(
                stratum=label,
                members=tuple(group),
                n_units=int(inside.sum()),
                n_gold=int(gold_rows.sum()),
                weight=float(inside.sum() / max(len(strata), 1)),
                estimate=estimate,
                weighted=unequal,
            )
        )
    combined = None
    if reason is None and inputs:
        combined = stratified_ppi_mean(
            [x[0] for x in inputs], [x[1] for x in inputs], [x[2] for x in inputs],
            gold_weights=[x[3] for x in inputs], confidence=confidence,
        )  # fmt: skip
    elif reason is None:
        reason = "no stratified estimate: no judged unit"
    return StratifiedBreakRate(tuple(figures), combined, reason, missing)
