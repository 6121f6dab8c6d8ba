"""Stratified PPI++ against ppi_py per stratum, its coverage, and Neyman allocation."""

from __future__ import annotations

import numpy as np
import ppi_py
import pytest
from scipy import stats

from review_app.stats.ppi import ppi_mean
from review_app.stats.stratified import neyman_allocation, stratified_ppi_mean

Z = float(stats.norm.ppf(0.975))


def judged(rng: np.random.Generator, size: int, *, rate: float, judge_right: float):
    """Truth with break rate ``rate``; the judge gives the truth with probability
    ``judge_right``, else the other answer."""
    truth = (rng.random(size) < rate).astype(float)
    judge = np.where(rng.random(size) < judge_right, truth, 1.0 - truth)
    return truth, judge


def ppi_py_interval(y, f, f_u, **kwargs) -> tuple[float, float, float]:
    value = float(np.ravel(ppi_py.ppi_mean_pointestimate(y, f, f_u, **kwargs))[0])
    low, high = ppi_py.ppi_mean_ci(y, f, f_u, alpha=0.05, **kwargs)
    return value, float(np.ravel(low)[0]), float(np.ravel(high)[0])


@pytest.mark.parametrize("seed", range(6))
def test_stratified_estimate_is_ppi_py_per_stratum_combined_by_stratum_weights(seed: int) -> None:
    rng = np.random.default_rng(seed)
    strata = []
    for _ in range(int(rng.integers(2, 5))):
        size = int(rng.integers(200, 3000))
        truth, judge = judged(
            rng, size, rate=rng.uniform(0.02, 0.5), judge_right=rng.uniform(0.55, 0.99)
        )
        n = int(rng.integers(10, 80))
        strata.append((truth[:n], judge[:n], judge[n:]))
    ours = stratified_ppi_mean(*zip(*strata, strict=True))
    sizes = np.array([len(y) + len(f_u) for y, _, f_u in strata], dtype=float)
    weights = sizes / sizes.sum()
    values, variances = [], []
    for y, f, f_u in strata:
        value, low, high = ppi_py_interval(y, f, f_u)
        values.append(value)
        variances.append(((high - low) / (2 * Z)) ** 2)
    value = float(np.dot(weights, values))
    half = Z * np.sqrt(np.dot(weights**2, variances))
    assert ours.value == pytest.approx(value, abs=1e-9)
    assert ours.ci95 == pytest.approx((value - half, value + half), abs=1e-9)
    assert ours.weights == pytest.approx(tuple(weights))
    for estimate, (y, f, f_u) in zip(ours.strata, strata, strict=True):
        assert estimate.value == pytest.approx(ppi_py_interval(y, f, f_u)[0], abs=1e-9)


@pytest.mark.parametrize("seed", range(4))
def test_weighted_ppi_is_ppi_py_with_sample_weights(seed: int) -> None:
    rng = np.random.default_rng(seed)
    truth, judge = judged(rng, 2000, rate=0.2, judge_right=0.85)
    n = 150
    weights = rng.choice([1.0, 4.0, 10.0], size=n)
    ours = ppi_mean(truth[:n], judge[:n], judge[n:], weights=weights)
    value, low, high = ppi_py_interval(truth[:n], judge[:n], judge[n:], w=weights)
    assert ours.value == pytest.approx(value, abs=1e-9)
    assert ours.ci95 == pytest.approx((low, high), abs=1e-9)
    same = ppi_mean(truth[:n], judge[:n], judge[n:], weights=np.full(n, 3.0))
    assert same.value == pytest.approx(ppi_mean(truth[:n], judge[:n], judge[n:]).value)


STRATA = ((4000, 0.05, 0.98), (3000, 0.3, 0.65), (1000, 0.6, 0.8))
"""(units, break rate, share the judge gets right) per stratum: good, poor, middling."""


def population(rng: np.random.Generator):
    return [judged(rng, size, rate=rate, judge_right=right) for size, rate, right in STRATA]


def audit(rng: np.random.Generator, pop, per_stratum) -> tuple[list, list, list]:
    ys, fs, rests = [], [], []
    for (truth, judge), n in zip(pop, per_stratum, strict=True):
        drawn = np.zeros(truth.size, dtype=bool)
        drawn[rng.choice(truth.size, size=int(n), replace=False)] = True
        ys.append(truth[drawn])
        fs.append(judge[drawn])
        rests.append(judge[~drawn])
    return ys, fs, rests


COVERAGE_STRATA = ((6000, 0.3, 0.9), (4000, 0.4, 0.7), (3000, 0.5, 0.8))
"""Strata where each one's normal approximation holds (300, 300 and 200 gold units, no
rare disagreements)."""


def test_stratified_interval_covers_95_percent_of_simulated_audits() -> None:
    """1,500 audits of fresh populations: the 95% interval holds the true rate in a
    share within three Monte Carlo standard errors (0.017) of 0.95. (The interval is a
    normal approximation per stratum: over 8,000 such audits it covered 94.5%; with a
    few dozen gold units a stratum, or rare disagreements, less: docs/reference.md,
    "By stratum".)"""
    rng = np.random.default_rng(2024)
    sizes = np.array([s[0] for s in COVERAGE_STRATA], dtype=float)
    truth_rate = float(np.dot(sizes / sizes.sum(), [s[1] for s in COVERAGE_STRATA]))
    repeats, covered = 1500, 0
    for _ in range(repeats):
        pop = [judged(rng, size, rate=rate, judge_right=right)
               for size, rate, right in COVERAGE_STRATA]  # fmt: skip
        estimate = stratified_ppi_mean(*audit(rng, pop, [300, 300, 200]))
        covered += estimate.ci95[0] <= truth_rate <= estimate.ci95[1]
    share = covered / repeats
    assert abs(share - 0.95) <= 3 * np.sqrt(0.95 * 0.05 / repeats), share


def test_neyman_allocation_narrows_the_interval_against_uniform() -> None:
    """The judge is near perfect in a large stratum and poor in a small one: 300 more
    audits placed by Neyman allocation (from a uniform pilot of 100) give narrower
    intervals than 300 more placed uniformly, and still cover the true rate."""
    rng = np.random.default_rng(7)
    strata = ((6000, 0.1, 0.99), (2000, 0.4, 0.6))
    sizes = np.array([s[0] for s in strata], dtype=float)
    truth_rate = float(np.dot(sizes / sizes.sum(), [s[1] for s in strata]))
    widths = {"neyman": [], "uniform": []}
    covered = {"neyman": 0, "uniform": 0}
    repeats = 300
    for _ in range(repeats):
        pop = [judged(rng, size, rate=rate, judge_right=right) for size, rate, right in strata]
        pilot = np.round(100 * sizes / sizes.sum()).astype(int)
        ys, fs, rests = audit(rng, pop, pilot)
        spreads = [
            np.std(y - ppi_mean(y, f, rest).lam * f)
            for y, f, rest in zip(ys, fs, rests, strict=True)
        ]
        placed = {
            "neyman": pilot + neyman_allocation(sizes, spreads, budget=300, existing=pilot),
            "uniform": pilot + np.round(300 * sizes / sizes.sum()).astype(int),
        }
        for design, per_stratum in placed.items():
            estimate = stratified_ppi_mean(*audit(rng, pop, per_stratum))
            widths[design].append(estimate.ci95[1] - estimate.ci95[0])
            covered[design] += estimate.ci95[0] <= truth_rate <= estimate.ci95[1]
    neyman, uniform = np.mean(widths["neyman"]), np.mean(widths["uniform"])
    assert neyman < 0.85 * uniform, (neyman, uniform)
    assert covered["neyman"] / repeats >= 0.95 - 3 * np.sqrt(0.95 * 0.05 / repeats)


def test_projected_variance_follows_the_allocation() -> None:
    rng = np.random.default_rng(1)
    ys, fs, rests = audit(rng, population(rng), [40, 40, 40])
    estimate = stratified_ppi_mean(ys, fs, rests)
    assert estimate.variance_with([0, 0, 0]) == pytest.approx(estimate.variance)
    more = estimate.variance_with([100, 100, 100])
    assert more < estimate.variance
    assert estimate.width(more) < estimate.width()


def test_neyman_allocation_minimum_capacity_and_errors() -> None:
    placed = neyman_allocation([100, 100, 100], [0.0, 0.0, 0.5], budget=20, minimum=2)
    assert placed.tolist() == [2, 2, 16]
    capped = neyman_allocation([100, 100], [0.1, 0.9], budget=50, capacity=[100, 20])
    assert capped.tolist() == [30, 20]
    assert neyman_allocation([50, 150], [0.0, 0.0], budget=20).tolist() == [5, 15]
    for kwargs, message in [
        ({"budget": 5, "existing": [1]}, "sizes, spreads, existing and capacity must have one "
         "entry per stratum"),
        ({"budget": 500}, "budget must be between 0 and the units still undrawn (200), got 500"),
    ]:  # fmt: skip
        with pytest.raises(ValueError) as caught:
            neyman_allocation([100, 100], [0.1, 0.2], **kwargs)
        assert str(caught.value) == message
    with pytest.raises(ValueError, match="spreads must be finite and non-negative"):
        neyman_allocation([100, 100], [0.1, -0.2], budget=5)
    with pytest.raises(ValueError, match="stratified ppi needs at least one stratum"):
        stratified_ppi_mean([], [], [])
