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
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike, NDArray
from scipy import stats

from review_app.stats.checks import check_confidence
from review_app.stats.ppi import PpiEstimate, ppi_mean

__all__ = ["StratifiedEstimate", "neyman_allocation", "stratified_ppi_mean", "stratified_variance"]

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
