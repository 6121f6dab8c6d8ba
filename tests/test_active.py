"""Audits drawn by the judge's uncertainty (review_app.stats.active): the probabilities,
the draw, and the active estimate's coverage and width against a uniform draw."""

from __future__ import annotations

import numpy as np
import pytest

from review_app.stats.active import (
    active_mean,
    draw_by_uncertainty,
    uncertainty_probabilities,
    uniform_width,
)


def world(n: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """A calibrated judge: mostly sure, sometimes unsure; errors where it is unsure."""
    rng = np.random.default_rng(seed)
    sure = rng.random(n) < 0.85
    s = np.where(sure, rng.choice([0.02, 0.97], size=n, p=[0.85, 0.15]), rng.uniform(0.3, 0.7, n))
    y = (rng.random(n) < s).astype(float)
    return s, y


def test_probabilities_follow_the_formula_literally() -> None:
    s = np.array([0.1, 0.5, 0.9, 0.0, 1.0, 0.3])
    k, tau = 2, 0.5
    u = [min(x, 1 - x) for x in s]
    b = k / len(s)
    eta = b / (sum(u) / len(u))
    want = [min(1.0, max(0.0, (1 - tau) * eta * ui + tau * b)) for ui in u]
    assert uncertainty_probabilities(s, budget=k, mix=tau).tolist() == pytest.approx(want)
    # tau = 1 is a uniform Poisson draw; every score 0 or 1 leaves only the uniform part.
    assert uncertainty_probabilities(s, budget=3, mix=1.0).tolist() == [0.5] * 6
    assert uncertainty_probabilities([0.0, 1.0], budget=1, mix=0.5).tolist() == [0.25, 0.25]


def test_draw_is_one_uniform_per_turn_from_the_seed() -> None:
    s, _ = world(500, 1)
    pi, drawn = draw_by_uncertainty(s, budget=50, mix=0.5, seed=7)
    assert drawn.tolist() == (np.random.default_rng(7).random(500) < pi).tolist()
    assert pi.sum() == pytest.approx(50, rel=0.05)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"budget": 0}, "budget must be between 1 and the number of turns (3), got 0"),
        ({"budget": 4}, "budget must be between 1 and the number of turns (3), got 4"),
        ({"budget": 1, "mix": 1.5}, "mix must be between 0 and 1, got 1.5"),
    ],
)
def test_bad_options(kwargs: dict, message: str) -> None:
    with pytest.raises(ValueError) as error:
        uncertainty_probabilities([0.1, 0.2, 0.3], **kwargs)
    assert str(error.value) == message


def test_estimate_is_the_literal_formula() -> None:
    s = np.array([0.2, 0.6, 0.9, 0.1])
    y = np.array([0.0, 1.0, 0.0, 0.0])
    xi = np.array([False, True, True, False])
    pi = np.array([0.5, 0.8, 0.25, 0.5])
    terms = [si + ((yi - si) / p if x else 0.0) for si, yi, x, p in zip(s, y, xi, pi, strict=True)]
    got = active_mean(s, y, xi, pi)
    assert got.value == pytest.approx(np.mean(terms))
    half = 1.959963984540054 * np.std(terms, ddof=1) / 2
    assert got.ci95 == pytest.approx((np.mean(terms) - half, np.mean(terms) + half))


def test_coverage_at_95_over_1000_draws_and_narrower_than_uniform() -> None:
    """Each draw a fresh world from the same distribution: the interval covers the
    break rate the turns are drawn from (E[s] for a calibrated judge) 95% of the time."""
    n, budget, draws = 4000, 300, 1000
    rng = np.random.default_rng(11)
    truth = 0.85 * (0.85 * 0.02 + 0.15 * 0.97) + 0.15 * 0.5
    sure = rng.random((draws, n)) < 0.85
    s = np.where(
        sure,
        np.where(rng.random((draws, n)) < 0.85, 0.02, 0.97),
        rng.uniform(0.3, 0.7, (draws, n)),
    )
    y = (rng.random((draws, n)) < s).astype(float)
    z = 1.959963984540054
    u = np.minimum(s, 1 - s)
    b = budget / n
    pi_active = np.clip(0.5 * (b / u.mean(axis=1, keepdims=True)) * u + 0.5 * b, 0, 1)
    assert pi_active[0] == pytest.approx(uncertainty_probabilities(s[0], budget=budget))

    def intervals(pi: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        xi = rng.random((draws, n)) < pi
        terms = s + np.where(xi, (y - s) / pi, 0.0)
        value = terms.mean(axis=1)
        half = z * terms.std(axis=1, ddof=1) / np.sqrt(n)
        return np.abs(value - truth) <= half, 2 * half, xi

    covered, width_active, xi = intervals(pi_active)
    assert 0.93 <= covered.mean() <= 0.97
    # The first draw, through the module's function, agrees with the vectorised one.
    one = active_mean(s[0], y[0], xi[0], pi_active[0])
    assert one.ci95[1] - one.ci95[0] == pytest.approx(width_active[0])

    covered_u, width_uniform, _ = intervals(np.full((draws, n), b))
    assert 0.93 <= covered_u.mean() <= 0.97
    # Errors sit where the judge is unsure: the same budget buys a narrower interval.
    assert width_active.mean() < 0.92 * width_uniform.mean()
    # The budget line's estimate of the uniform width, from an uncertainty draw alone.
    estimated = [
        uniform_width(s[k], y[k], xi[k], pi_active[k], labels=int(xi[k].sum())) for k in range(50)
    ]
    assert np.mean(estimated) == pytest.approx(width_uniform.mean(), rel=0.1)
