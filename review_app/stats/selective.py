"""Certified selective judging: let the judge decide only where it is provably right enough.

Jung, J., Brahman, F., & Choi, Y. (2024). Trust or Escalate: LLM Judges with Provable
Guarantees for Human Agreement. arXiv:2407.18370.

A unit's *confidence* is the judge's probability for the verdict it gave: its score
``s`` (the probability of a break) when it said break, ``1 - s`` otherwise. On ``n``
calibration units with gold, for a threshold ``t`` let ``kept(t)`` be the units with
confidence ``>= t`` and ``d(t)`` the judge's disagreements with gold among them. The
exact one-sided (Clopper-Pearson) upper bound of the disagreement rate at level
``1 - delta`` is::

    U(t) = BetaInv(1 - delta; d + 1, kept - d)      (1 when d == kept)

Fixed-sequence test: candidate thresholds ``k / 1000`` for ``k = 1000, 999, ..., 0``,
skipping those with fewer than ``min_units`` kept units; accept while ``U(t) <= alpha``,
stop at the first that is not. The certified threshold is the last accepted one (or
none: the judge decides nothing). Then, if the calibration units are a random sample
of the units, the disagreement rate among the units the judge decides is at most
``alpha`` with probability at least ``1 - delta`` (Bauer 1991, fixed-sequence testing;
Angelopoulos et al. 2021, "Learn then Test").

Cascade: with several judges (cheapest first), each later judge is certified on the
calibration units no earlier judge decided, and a unit is decided by the first judge
whose confidence reaches that judge's threshold.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike
from scipy import stats

__all__ = [
    "THRESHOLDS",
    "CascadeStep",
    "Certification",
    "certify_threshold",
    "clopper_pearson_upper",
    "route_cascade",
    "verdict_confidence",
]

THRESHOLDS = np.arange(1000, -1, -1) / 1000.0
"""Candidate thresholds k / 1000, from 1 down to 0, in the order they are tested."""


@dataclass(frozen=True)
class Certification:
    """The certified threshold (None: none), with its kept units, disagreements and bound."""

    threshold: float | None
    calibration_units: int
    kept: int
    disagreements: int
    upper_bound: float | None


def _check(alpha: float, delta: float, min_units: int) -> None:
    if not 0.0 < alpha < 1.0:
        raise ValueError(f"alpha must be strictly between 0 and 1, got {alpha}")
    if not 0.0 < delta < 1.0:
        raise ValueError(f"delta must be strictly between 0 and 1, got {delta}")
    if isinstance(min_units, bool) or min_units < 1:
        raise ValueError(f"min_units must be at least 1, got {min_units}")


def verdict_confidence(scores: ArrayLike, said_break: ArrayLike) -> np.ndarray:
    """The judge's probability for the verdict it gave: ``s`` if break, else ``1 - s``.

    Raises ``ValueError("scores must be between 0 and 1")`` for a score outside [0, 1]
    and ``ValueError("scores and said_break must have the same length, got <n> and <m>")``.
    """
    s = np.asarray(scores, dtype=np.float64)
    b = np.asarray(said_break, dtype=bool)
    if s.shape != b.shape:
        raise ValueError(
            f"scores and said_break must have the same length, got {s.size} and {b.size}"
        )
    if not np.all((s >= 0.0) & (s <= 1.0)):
        raise ValueError("scores must be between 0 and 1")
    return np.where(b, s, 1.0 - s)


def clopper_pearson_upper(
    disagreements: ArrayLike, units: ArrayLike, *, delta: float
) -> np.ndarray:
    """Exact one-sided upper bound of a binomial rate at level ``1 - delta``.

    ``BetaInv(1 - delta; d + 1, n - d)``, and 1 when ``d == n`` (Clopper & Pearson
    1934); equal to ``scipy.stats.binomtest(d, n).proportion_ci(1 - 2 delta)``'s upper
    end. ``n`` must be at least 1.
    """
    d = np.asarray(disagreements, dtype=np.float64)
    n = np.asarray(units, dtype=np.float64)
    full = d >= n
    bound = stats.beta.ppf(1.0 - delta, d + 1.0, np.where(full, 1.0, n - d))
    return np.where(full, 1.0, bound)


def certify_threshold(
    confidence: ArrayLike,
    disagree: ArrayLike,
    *,
    alpha: float,
    delta: float,
    min_units: int = 30,
) -> Certification:
    """The lowest threshold the fixed-sequence test certifies (module docstring).

    ``confidence``: the judge's confidence on each calibration unit; ``disagree``: 1
    where its verdict differs from gold. Raises ``ValueError`` with
    ``"alpha must be strictly between 0 and 1, got <a>"``, the same for ``delta``,
    ``"min_units must be at least 1, got <m>"`` and
    ``"confidence and disagree must have the same length, got <n> and <m>"``.
    """
    _check(alpha, delta, min_units)
    conf = np.asarray(confidence, dtype=np.float64)
    wrong = np.asarray(disagree, dtype=bool)
    if conf.shape != wrong.shape or conf.ndim != 1:
        raise ValueError(
            f"confidence and disagree must have the same length, got {conf.size} and {wrong.size}"
        )
    n = conf.size
    order = np.argsort(conf, kind="stable")
    sorted_conf = conf[order]
    # wrong_from[i]: disagreements among the units at sorted positions i, i+1, ...
    wrong_from = np.concatenate((np.cumsum(wrong[order][::-1])[::-1], [0]))
    first = np.searchsorted(sorted_conf, THRESHOLDS, side="left")
    kept = n - first
    errors = wrong_from[first]
    tested = kept >= min_units
    bounds = np.ones(THRESHOLDS.size)
    if tested.any():
        bounds[tested] = clopper_pearson_upper(errors[tested], kept[tested], delta=delta)
    failed = tested & (bounds > alpha)
    stop = int(np.argmax(failed)) if failed.any() else THRESHOLDS.size
    accepted = np.flatnonzero(tested[:stop])
    if accepted.size == 0:
        return Certification(None, n, 0, 0, None)
    last = int(accepted[-1])
    return Certification(
        threshold=float(THRESHOLDS[last]),
        calibration_units=n,
        kept=int(kept[last]),
        disagreements=int(errors[last]),
        upper_bound=float(bounds[last]),
    )


@dataclass(frozen=True)
class CascadeStep:
    """One judge of a cascade: its certification and the units it decides (a mask)."""

    certification: Certification
    decides: np.ndarray


def route_cascade(
    confidences: Sequence[ArrayLike],
    disagreements: Sequence[ArrayLike],
    has_gold: ArrayLike,
    *,
    alpha: float,
    delta: float,
    min_units: int = 30,
) -> list[CascadeStep]:
    """Certify judges in order, each on the gold units no earlier judge decided.

    All arrays are over the same units. ``confidences[r]``: judge r's confidence, NaN
    where it has none (it never decides those); ``disagreements[r]``: 1 where judge r
    disagrees with gold (read only where ``has_gold``). A unit is decided by the first
    judge whose confidence reaches its certified threshold; ``decides`` of each step is
    a boolean mask over all units, and the masks are disjoint.
    """
    _check(alpha, delta, min_units)
    if len(confidences) != len(disagreements):
        raise ValueError(
            "confidences and disagreements must have the same length, got "
            f"{len(confidences)} and {len(disagreements)}"
        )
    gold = np.asarray(has_gold, dtype=bool)
    open_units = np.ones(gold.size, dtype=bool)
    steps: list[CascadeStep] = []
    for conf_r, wrong_r in zip(confidences, disagreements, strict=True):
        conf = np.asarray(conf_r, dtype=np.float64)
        wrong = np.asarray(wrong_r, dtype=bool)
        if conf.shape != gold.shape or wrong.shape != gold.shape:
            raise ValueError("every judge's arrays must cover the same units as has_gold")
        scored = ~np.isnan(conf)
        calibration = open_units & gold & scored
        cert = certify_threshold(
            conf[calibration], wrong[calibration], alpha=alpha, delta=delta, min_units=min_units
        )
        if cert.threshold is None:
            decides = np.zeros(gold.size, dtype=bool)
        else:
            decides = open_units & scored & (np.nan_to_num(conf, nan=-1.0) >= cert.threshold)
        open_units &= ~decides
        steps.append(CascadeStep(cert, decides))
    return steps
