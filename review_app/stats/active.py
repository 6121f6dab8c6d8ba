"""Audits drawn by the judge's uncertainty, and the active estimate of the break rate.

Zrnic, T., & Candes, E. J. (2024). Active Statistical Inference. ICML 2024,
arXiv:2403.03208.

Over the ``N`` judged turns with judge scores ``s`` (the probability of a break), a
budget of ``K`` reviewer labels and a mix ``tau``, each turn is drawn independently
with probability::

    u   = min(s, 1 - s)                 (the judge's uncertainty)
    b   = K / N
    eta = b / mean(u)                   (0 when every u is 0)
    pi  = clip((1 - tau) * eta * u + tau * b, 0, 1)

so the expected number drawn is about ``K`` and every turn keeps probability at least
``tau * b``. With ``xi = 1`` for drawn turns that have gold ``y`` (0 otherwise), the
estimate of the mean of ``y`` and its normal 95% interval are::

    theta = mean(s + (y - s) * xi / pi)           (over all N judged turns)
    theta +- z_0.975 * sd(those terms) / sqrt(N)  (sd with divisor N - 1)

which is unbiased because ``E[xi / pi] = 1`` for every turn.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike
from scipy import stats

__all__ = [
    "ActiveEstimate",
    "active_mean",
    "draw_by_uncertainty",
    "uncertainty_probabilities",
    "uniform_width",
]


def _scores(scores: ArrayLike) -> np.ndarray:
    s = np.asarray(scores, dtype=np.float64)
    if s.ndim != 1 or not np.all((s >= 0.0) & (s <= 1.0)):
        raise ValueError("scores must be a one-dimensional array of numbers between 0 and 1")
    return s


def uncertainty_probabilities(scores: ArrayLike, *, budget: float, mix: float = 0.5) -> np.ndarray:
    """Each turn's probability of being drawn (module docstring).

    Raises ``ValueError`` with ``"budget must be between 1 and the number of turns
    (<N>), got <K>"``, ``"mix must be between 0 and 1, got <tau>"`` or the scores'
    message.
    """
    s = _scores(scores)
    n = s.size
    if not 1 <= budget <= n:
        raise ValueError(f"budget must be between 1 and the number of turns ({n}), got {budget}")
    if not 0.0 <= mix <= 1.0:
        raise ValueError(f"mix must be between 0 and 1, got {mix}")
    u = np.minimum(s, 1.0 - s)
    b = budget / n
    mean_u = float(u.mean())
    eta = b / mean_u if mean_u > 0 else 0.0
    return np.clip((1.0 - mix) * eta * u + mix * b, 0.0, 1.0)


def draw_by_uncertainty(
    scores: ArrayLike, *, budget: float, mix: float = 0.5, seed: int
) -> tuple[np.ndarray, np.ndarray]:
    """``(pi, drawn)``: the probabilities and the draw, one uniform per turn in order
    from ``numpy.random.default_rng(seed)``; a turn is drawn when its uniform < pi."""
    pi = uncertainty_probabilities(scores, budget=budget, mix=mix)
    uniforms = np.random.default_rng(seed).random(pi.size)
    return pi, uniforms < pi


@dataclass(frozen=True)
class ActiveEstimate:
    value: float
    ci95: tuple[float, float]
    sd: float
    n: int


def active_mean(
    scores: ArrayLike,
    gold: ArrayLike,
    labeled: ArrayLike,
    probabilities: ArrayLike,
    *,
    confidence: float = 0.95,
) -> ActiveEstimate:
    """``mean(s + (y - s) * xi / pi)`` and its normal interval (module docstring).

    ``gold`` is read only where ``labeled`` (xi) is true; ``probabilities`` (pi) must be
    positive there. Raises ``ValueError("scores, gold, labeled and probabilities must
    have the same length")``, ``ValueError("a labeled turn has probability 0")`` and
    ``ValueError("the active estimate needs at least 2 judged turns, got <N>")``.
    """
    s = _scores(scores)
    xi = np.asarray(labeled, dtype=bool)
    pi = np.asarray(probabilities, dtype=np.float64)
    y = np.asarray(gold, dtype=np.float64)
    if not (s.shape == xi.shape == pi.shape == y.shape):
        raise ValueError("scores, gold, labeled and probabilities must have the same length")
    if s.size < 2:
        raise ValueError(f"the active estimate needs at least 2 judged turns, got {s.size}")
    if np.any(xi & ~(pi > 0)):
        raise ValueError("a labeled turn has probability 0")
    weight = np.divide(xi, pi, out=np.zeros_like(pi), where=xi)
    terms = s + np.where(xi, y - s, 0.0) * weight
    value = float(terms.mean())
    sd = float(terms.std(ddof=1))
    half = float(stats.norm.ppf(0.5 + confidence / 2.0)) * sd / math.sqrt(s.size)
    return ActiveEstimate(value, (value - half, value + half), sd, int(s.size))


def uniform_width(
    scores: ArrayLike,
    gold: ArrayLike,
    labeled: ArrayLike,
    probabilities: ArrayLike,
    *,
    labels: int,
    confidence: float = 0.95,
) -> float | None:
    """The 95% interval width a uniform draw of ``labels`` turns would give, estimated
    from the uncertainty draw by inverse-probability weighting.

    A uniform draw (probability ``p = labels / N``) has terms ``s + (y - s) xi / p``
    whose variance is ``E[s^2] + 2 E[s (y - s)] + E[(y - s)^2] / p - theta^2``; each
    expectation over turns is estimated by ``mean(g * xi / pi)`` (unbiased for any
    ``g``), ``theta`` by the active estimate. None without labels.
    """
    s = _scores(scores)
    xi = np.asarray(labeled, dtype=bool)
    pi = np.asarray(probabilities, dtype=np.float64)
    y = np.asarray(gold, dtype=np.float64)
    n = s.size
    if labels < 1 or n < 2:
        return None
    weight = np.divide(xi, pi, out=np.zeros_like(pi), where=xi)
    residual = np.where(xi, y - s, 0.0)
    theta = float(np.mean(s + residual * weight))
    p = min(1.0, labels / n)
    variance = (
        float(np.mean(s**2))
        + 2.0 * float(np.mean(s * residual * weight))
        + float(np.mean(residual**2 * weight)) / p
        - theta**2
    )
    z = float(stats.norm.ppf(0.5 + confidence / 2.0))
    return 2.0 * z * math.sqrt(max(variance, 0.0) / n)
