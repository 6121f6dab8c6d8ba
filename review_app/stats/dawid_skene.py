"""Dawid-Skene: each reviewer's confusion matrix and the units' true codes, from all labels.

Dawid, A. P., & Skene, A. M. (1979). Maximum likelihood estimation of observer
error-rates using the EM algorithm. Journal of the Royal Statistical Society C
(Applied Statistics), 28(1), 20-28.

Units ``i`` have a latent true code ``z_i`` with prior ``p_c = P(z = c)``; reviewer
``w`` gives code ``l`` to a unit whose true code is ``c`` with probability
``e_w[c, l]`` (row ``c`` of ``w``'s confusion matrix). Expectation-maximisation
alternates

- E-step: ``q_i(c) ∝ p_c * prod_{labels (w, l) of unit i} e_w[c, l]`` (the posterior
  of each unit's true code; computed in base-2 logarithms, shifted so the largest is
  0 before exponentiating);
- M-step: ``p_c = mean_i q_i(c)`` and ``e_w[c, l] ∝ sum_{units i that w labelled l}
  q_i(c)``, normalised over ``l``, each count of a code ``w`` used at least once
  clipped below at 1e-10 (a code ``w`` never used keeps probability 0).

It starts from majority vote (``q_i`` = the share of unit ``i``'s labels per code) and
stops after ``max_iter`` rounds or when the evidence lower bound per label, ::

    ELBO / L = (sum_labels sum_c q_i(c) (ln e_w[c, l] + ln p_c)
                - sum_i sum_c q_i(c) ln q_i(c)) / L

grows by less than ``tol``. *Anchors* (adjudicated gold) fix ``q_i`` to their code at
the start and after every E-step. This is the algorithm, the start, the clipping and
the stopping rule of ``crowdkit.aggregation.DawidSkene`` (crowd-kit 1.4; its
``true_labels`` are the anchors), so both give the same estimates (tests/
test_reliability.py checks it to 1e-8). Weights per unit (a bootstrap resample's
counts) multiply its labels and its share of the prior: a unit drawn twice counts as
two units with the same labels.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike, NDArray
from scipy import sparse

from review_app.stats.checks import check_int

__all__ = ["CLIP", "DawidSkeneFit", "dawid_skene"]

CLIP = 1e-10
"""Counts and priors are clipped below at this (crowd-kit's ``_EPS``)."""

FloatArray = NDArray[np.float64]
IntArray = NDArray[np.int64]


@dataclass(frozen=True)
class DawidSkeneFit:
    """The fitted model.

    ``priors[c]``: P(true code c); ``confusion[w, c, l]``: P(reviewer w gives l | true
    code c); ``posteriors[i, c]``: P(unit i's true code is c | every label);
    ``iterations``: EM rounds run; ``converged``: the ELBO stopped growing by ``tol``
    before ``max_iter``; ``elbo``: the last evidence lower bound per label.
    """

    priors: FloatArray
    confusion: FloatArray
    posteriors: FloatArray
    iterations: int
    converged: bool
    elbo: float


def _codes(values: ArrayLike, name: str, size: int) -> IntArray:
    array = np.asarray(values)
    if array.ndim != 1 or (array.size and array.dtype.kind not in "iu"):
        raise ValueError(f"{name} must be a one-dimensional array of integer codes")
    array = array.astype(np.int64)
    if array.size and (array.min() < 0 or array.max() >= size):
        raise ValueError(f"{name} must be codes from 0 to {size - 1}")
    return array


def _m_step(raw: FloatArray, used: NDArray[np.bool_], n_reviewers: int, n_codes: int) -> FloatArray:
    """Per (reviewer, code given) cell and true code, ``e`` from the cells' posterior
    sums ``raw`` (module docstring): used cells clipped, normalised over the codes given."""
    counts = np.where(used[:, np.newaxis], np.maximum(raw, CLIP), 0.0)
    by_reviewer = counts.reshape(n_reviewers, n_codes, n_codes)  # [w, l, c]
    totals = by_reviewer.sum(axis=1, keepdims=True)
    return (by_reviewer / totals).reshape(n_reviewers * n_codes, n_codes)


def _e_step(log_likelihood: FloatArray) -> FloatArray:
    scaled = np.exp2(log_likelihood - log_likelihood.max(axis=1, keepdims=True))
    return scaled / scaled.sum(axis=1, keepdims=True)


def dawid_skene(
    units: ArrayLike,
    reviewers: ArrayLike,
    labels: ArrayLike,
    *,
    n_units: int,
    n_reviewers: int,
    n_codes: int,
    anchors: ArrayLike | None = None,
    weights: ArrayLike | None = None,
    start: tuple[ArrayLike, ArrayLike] | None = None,
    max_iter: int = 100,
    tol: float = 1e-5,
) -> DawidSkeneFit:
    """Fit the Dawid-Skene model by EM (module docstring for the steps).

    Parameters
    ----------
    units, reviewers, labels : array_like of int, shape (L,)
        One entry per label: the unit (``0..n_units-1``), the reviewer
        (``0..n_reviewers-1``) and the code given (``0..n_codes-1``). Every unit has at
        least one label.
    n_units, n_reviewers, n_codes : int
        The sizes.
    anchors : array_like of int, shape (n_units,), optional
        A unit's fixed true code (adjudicated gold), -1 for none.
    weights : array_like of float, shape (n_units,), optional
        How often each unit counts (a bootstrap resample's draws); 1 by default. A unit
        of weight 0 has no effect on the estimates.
    start : (priors, confusion), optional
        Start the EM from these parameters (an E-step) instead of majority vote: a
        bootstrap resample starts from the fit to all the data and converges in a few
        rounds.
    max_iter : int, default 100
        At most this many EM rounds.
    tol : float, default 1e-5
        Stop when the ELBO per label grows by less than this.

    Returns
    -------
    DawidSkeneFit

    Raises
    ------
    ValueError
        ``"units, reviewers and labels must have the same length, got <a>, <b> and
        <c>"``, ``"<name> must be a one-dimensional array of integer codes"``, ``"<name>
        must be codes from 0 to <max>"``, ``"every unit needs at least one label"``,
        ``"anchors must hold one code or -1 per unit"``, ``"weights must hold one
        non-negative weight per unit"``, ``"max_iter must be an integer >= 1, got
        <value>"``.

    Examples
    --------
    Three reviewers on four units, codes 0 and 1; reviewer 2 says 1 where the others
    say 0 on unit 0. Majority vote starts unit 0 at (2/3, 1/3); the fit trusts the
    two who agree everywhere and settles unit 0 on code 0:

    >>> fit = dawid_skene([0, 0, 0, 1, 1, 1, 2, 2, 2, 3, 3, 3],
    ...                   [0, 1, 2] * 4,
    ...                   [0, 0, 1, 1, 1, 1, 0, 0, 0, 1, 1, 1],
    ...                   n_units=4, n_reviewers=3, n_codes=2)
    >>> fit.posteriors.argmax(axis=1).tolist()
    [0, 1, 0, 1]
    >>> round(float(fit.confusion[2, 0, 1]), 2)  # reviewer 2 says 1 on a true 0
    0.5
    """
    unit = _codes(units, "units", n_units)
    reviewer = _codes(reviewers, "reviewers", n_reviewers)
    label = _codes(labels, "labels", n_codes)
    if not unit.size == reviewer.size == label.size:
        raise ValueError(
            "units, reviewers and labels must have the same length, got "
            f"{unit.size}, {reviewer.size} and {label.size}"
        )
    max_iter = check_int(max_iter, "max_iter", 1)
    per_unit = np.bincount(unit, minlength=n_units)
    if n_units and per_unit.min() == 0:
        raise ValueError("every unit needs at least one label")
    anchor = np.full(n_units, -1, dtype=np.int64) if anchors is None else np.asarray(anchors)
    if anchor.shape != (n_units,) or (
        anchor.size and (anchor.min() < -1 or anchor.max() >= n_codes)
    ):
        raise ValueError("anchors must hold one code or -1 per unit")
    weight = np.ones(n_units) if weights is None else np.asarray(weights, dtype=np.float64)
    if weight.shape != (n_units,) or (weight.size and weight.min() < 0):
        raise ValueError("weights must hold one non-negative weight per unit")
    anchored = np.flatnonzero(anchor >= 0)
    if weights is not None and np.any(weight[unit] == 0):
        # Labels of units drawn 0 times are not in the resample; those units' posteriors
        # come out as the prior (they weigh nothing).
        drawn = weight[unit] > 0
        unit, reviewer, label = unit[drawn], reviewer[drawn], label[drawn]
        per_unit = np.bincount(unit, minlength=n_units)

    def fix(posteriors: FloatArray) -> FloatArray:
        if anchored.size:
            posteriors[anchored] = 0.0
            posteriors[anchored, anchor[anchored]] = 1.0
        return posteriors

    def prior_of(posteriors: FloatArray) -> FloatArray:
        total = float(weight.sum())
        return (posteriors * weight[:, np.newaxis]).sum(axis=0) / total

    n_cells = n_reviewers * n_codes
    cell = reviewer * n_codes + label
    used = np.bincount(cell, minlength=n_cells) > 0
    # A label is a (unit, cell) entry: the E-step sums each unit's cells' log e, the
    # M-step each cell's units' posteriors (weighted), both as sparse products.
    of_unit = sparse.csr_matrix(
        (np.ones(unit.size), (unit, cell)), shape=(n_units, n_cells), dtype=np.float64
    )
    of_cell = sparse.csr_matrix(
        (weight[unit], (cell, unit)), shape=(n_cells, n_units), dtype=np.float64
    )
    label_weight = float(weight[unit].sum())
    if start is None:
        votes = np.bincount(unit * n_codes + label, minlength=n_units * n_codes)
        posteriors = fix(votes.reshape(n_units, n_codes) / np.maximum(per_unit, 1)[:, np.newaxis])
        priors = prior_of(posteriors)
        errors = _m_step(of_cell @ posteriors, used, n_reviewers, n_codes)
    else:
        priors = np.asarray(start[0], dtype=np.float64)
        errors = np.transpose(np.asarray(start[1], dtype=np.float64), (0, 2, 1)).reshape(
            n_cells, n_codes
        )
    elbo = -np.inf
    converged = False
    iterations = 0
    while iterations < max_iter:
        iterations += 1
        with np.errstate(divide="ignore"):
            log2_errors = np.log2(errors)
        log_likelihood = of_unit @ np.where(used[:, np.newaxis], log2_errors, 0.0)
        posteriors = fix(_e_step(log_likelihood + np.log2(np.maximum(priors, CLIP))))
        priors = prior_of(posteriors)
        raw = of_cell @ posteriors
        errors = _m_step(raw, used, n_reviewers, n_codes)
        # ELBO = sum_labels sum_c q (ln e + ln p) + entropy, from the cells' sums
        with np.errstate(divide="ignore"):
            log_errors = np.where(
                used[:, np.newaxis], np.log(np.where(errors > 0, errors, 1.0)), 0.0
            )
        joint = float((raw * log_errors).sum()) + float(
            raw.sum(axis=0) @ np.log(np.maximum(priors, CLIP))
        )
        q = np.maximum(posteriors, CLIP)
        entropy = -float(((q * np.log(q)).sum(axis=1) * weight).sum())
        new_elbo = (joint + entropy) / label_weight
        if new_elbo - elbo < tol:
            elbo = new_elbo
            converged = True
            break
        elbo = new_elbo
    confusion = np.transpose(errors.reshape(n_reviewers, n_codes, n_codes), (0, 2, 1))
    return DawidSkeneFit(
        priors=priors,
        confusion=confusion,
        posteriors=posteriors,
        iterations=iterations,
        converged=converged,
        elbo=float(elbo),
    )
