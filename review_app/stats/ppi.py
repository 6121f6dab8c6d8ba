"""Prediction-powered estimate of a mean (here: how often the chatbot breaks role).

Angelopoulos, A. N., Duchi, J. C., & Zrnic, T. (2023). PPI++: Efficient
Prediction-Powered Inference. arXiv:2311.01453. (Angelopoulos, Bates, Fannjiang,
Jordan & Zrnic 2023, Science 382, for prediction-powered inference.)

With ``n`` gold units (gold ``Y_i`` and the judge's ``f_i`` on them) and ``N`` other
judged units (``f~_j``), the power-tuned estimate of the mean is::

    theta(lam) = lam * mean(f~) + mean(Y - lam * f)

with ``lam`` the variance-minimising weight, clipped to [0, 1]::

    lam = cov(Y, f) / ((1 + n / N) * var(f, f~))

(``cov`` with divisor n; ``var`` the sample variance, divisor n + N - 1, over the
judge's verdicts on all units). The 95% interval is the normal interval::

    theta +- z_0.975 * sqrt(var(lam f~) / N + var(Y - lam f) / n)     (divisors N and n)

``lam = 0`` is the classical estimate from the gold units alone; ``lam = 1`` is plain
PPI. This is what ``ppi_py.ppi_mean_pointestimate`` / ``ppi_mean_ci`` compute (tests
check it to 1e-6). The interval is valid only when the gold units are a uniform random
sample of the judged units (an audit sample).

*Weights* ``w_i`` on the gold units (inverse inclusion probabilities, when audits were
not drawn uniformly) are scaled to sum to ``n`` and enter as in ``ppi_py``'s ``w``::

    theta(lam) = lam * mean(f~) + mean(w (Y - lam f))
    lam = cov(w (Y - t), w (f - t)) / ((1 + n / N) * var(w (f - t), f~ - t))
    theta +- z_0.975 * sqrt(var(lam f~) / N + var(w (Y - lam f)) / n)

with ``t = theta(1)`` (with ``w = 1`` these are the formulas above).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TypedDict

import numpy as np
from numpy.typing import ArrayLike
from scipy import stats

from review_app.stats.checks import check_confidence, check_finite_vector

__all__ = ["PpiEstimate", "PpiJson", "ppi_mean"]

PpiJson = TypedDict("PpiJson", {"value": float, "ci95": list[float], "lambda": float})
""":meth:`PpiEstimate.to_dict`."""


@dataclass(frozen=True)
class PpiEstimate:
    """The PPI++ mean, its interval, ``lam``, and the variance terms behind the width.

    ``rectifier_variance`` (var(Y - lam f)) and ``imputed_variance`` (var(lam f~)) give
    the budget: :meth:`gold_units_to_halve_width`.
    """

    value: float
    ci95: tuple[float, float]
    lam: float
    n_gold: int
    n_unlabeled: int
    rectifier_variance: float
    imputed_variance: float
    confidence: float

    def to_dict(self) -> PpiJson:
        return {"value": self.value, "ci95": list(self.ci95), "lambda": self.lam}

    def gold_units_to_halve_width(self) -> int | None:
        """More gold units needed to halve the interval's width, ``lam`` held fixed.

        The width is proportional to sqrt(v_i / N + v_r / n); halving it needs
        v_r / n' = (v_i / N + v_r / n) / 4 - v_i / N, so n' = v_r / that. ``None`` when
        that is not positive: the judge-side term alone is more than a quarter of the
        variance, and more audited units cannot halve the width.
        """
        imputed = self.imputed_variance / self.n_unlabeled if self.n_unlabeled else 0.0
        total = imputed + self.rectifier_variance / self.n_gold
        room = total / 4.0 - imputed
        if room <= 0:
            return None
        if self.rectifier_variance == 0:
            return 0
        return max(0, math.ceil(self.rectifier_variance / room) - self.n_gold)


def ppi_mean(
    y_gold: ArrayLike,
    judge_gold: ArrayLike,
    judge_unlabeled: ArrayLike,
    *,
    confidence: float = 0.95,
    lam: float | None = None,
    weights: ArrayLike | None = None,
) -> PpiEstimate:
    """The PPI++ estimate of the mean of ``Y`` (module docstring for the formulas).

    ``y_gold`` and ``judge_gold`` are the gold values and the judge's on the ``n`` gold
    units; ``judge_unlabeled`` the judge's on the ``N`` other units. ``lam=None`` tunes
    it; a given ``lam`` is used as is. ``weights`` (one per gold unit, positive) weigh
    the gold units (module docstring). Raises ``ValueError`` with these messages:

    - ``"y_gold and judge_gold must have the same length, got <n> and <m>"``
    - ``"weights must hold one positive number per gold unit"``
    - ``"ppi needs at least 2 gold units and 1 other judged unit, got <n> and <N>"``
    - ``"<name> must be a one-dimensional array of finite numbers"``
    - ``"confidence must be strictly between 0 and 1, got <value>"``
    """
    y = check_finite_vector(y_gold, "y_gold")
    f = check_finite_vector(judge_gold, "judge_gold")
    f_u = check_finite_vector(judge_unlabeled, "judge_unlabeled")
    if len(y) != len(f):
        raise ValueError(
            f"y_gold and judge_gold must have the same length, got {len(y)} and {len(f)}"
        )
    n, big_n = len(y), len(f_u)
    if n < 2 or big_n < 1:
        raise ValueError(
            f"ppi needs at least 2 gold units and 1 other judged unit, got {n} and {big_n}"
        )
    check_confidence(confidence)
    if weights is None:
        w = np.ones(n)
    else:
        w = np.asarray(weights, dtype=np.float64)
        if w.shape != (n,) or not np.all(np.isfinite(w)) or not np.all(w > 0):
            raise ValueError("weights must hold one positive number per gold unit")
        w = w / w.sum() * n
    if lam is None:
        if weights is None:
            covariance = float(np.mean((y - y.mean()) * (f - f.mean())))
            variance = float(np.var(np.concatenate([f, f_u]), ddof=1))
        else:
            start = float(f_u.mean() + (w * (y - f)).mean())
            grads, grads_judge = w * (y - start), w * (f - start)
            covariance = float(np.mean((grads - grads.mean()) * (grads_judge - grads_judge.mean())))
            variance = float(np.var(np.concatenate([grads_judge, f_u - start]), ddof=1))
        tuned = covariance / ((1.0 + n / big_n) * variance) if variance > 0 else 0.0
        lam = float(np.clip(tuned, 0.0, 1.0))
    value = float(lam * f_u.mean() + (w * (y - lam * f)).mean())
    imputed_variance = float(np.var(lam * f_u))
    rectifier_variance = float(np.var(w * (y - lam * f)))
    half = float(stats.norm.ppf(0.5 + confidence / 2.0)) * math.sqrt(
        imputed_variance / big_n + rectifier_variance / n
    )
    return PpiEstimate(
        value=value,
        ci95=(value - half, value + half),
        lam=lam,
        n_gold=n,
        n_unlabeled=big_n,
        rectifier_variance=rectifier_variance,
        imputed_variance=imputed_variance,
        confidence=confidence,
    )
