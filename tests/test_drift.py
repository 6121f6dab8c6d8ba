"""Where the role breaks (review_app.stats.drift): bins, rates with cluster intervals,
first breaks and the slope, on conversations with breaks planted late."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from review_app.stats.core import resample_weights
from review_app.stats.drift import (
    PositionBin,
    bin_of_positions,
    first_break_positions,
    grouped_rates,
    position_bins,
    position_slope,
)


def conversations(n: int, seed: int, *, late: bool) -> tuple[np.ndarray, ...]:
    """``n`` conversations of 3 to 12 answers; breaks planted from answer 6 on (late)
    or at a flat 10%."""
    rng = np.random.default_rng(seed)
    lengths = rng.integers(3, 13, size=n)
    clusters = np.repeat(np.arange(n), lengths)
    positions = np.concatenate([np.arange(1, k + 1) for k in lengths])
    p = np.where(positions >= 6, 0.35, 0.03) if late else np.full(positions.size, 0.1)
    return clusters, positions, rng.random(positions.size) < p


EDGES = (1, 2, 3, 5, 9, 17, 33, 65)
"""Where the doubling bins start: 1, 2, 3-4, 5-8, 9-16, ..."""


@pytest.mark.parametrize("seed", range(8))
def test_bins_double_in_width_and_pool_what_is_thin(seed: int) -> None:
    _, positions, _ = conversations(
        int(np.random.default_rng(seed).integers(5, 80)), seed, late=True
    )
    for min_units in (1, 10, 30):
        bins = position_bins(positions, min_units=min_units)
        # contiguous from 1, the last one open, every bound on a doubling edge
        assert bins[0].low == 1 and bins[-1].high is None
        assert all(a.high is not None and a.high + 1 == b.low for a, b in itertools.pairwise(bins))
        assert all(b.low in EDGES for b in bins)
        index = bin_of_positions(positions, bins)
        sizes = np.bincount(index, minlength=len(bins))
        if sizes.sum() >= min_units:
            assert sizes.min() >= min_units
        # as fine as the data allow: a closed bin of several ranges could not have been
        # closed sooner (its first range alone was too thin)
        for b in bins[:-1]:
            assert b.high is not None
            following = [e for e in EDGES if b.low < e <= b.high]
            if following:
                first_range = int(((positions >= b.low) & (positions < following[0])).sum())
                assert first_range < min_units
    # with one unit a bin, every doubling range is a bin of its own
    assert [b.label for b in position_bins(list(range(1, 13)), min_units=1)] == [
        "1",
        "2",
        "3-4",
        "5-8",
        "9+",
    ]
    # a thin tail joins the bin before it; too few units in all: one open bin
    thin_tail = [1] * 40 + [2] * 40 + [3] * 20 + [4] * 20 + [5] * 30 + [9] * 3
    assert [b.label for b in position_bins(thin_tail, min_units=30)] == ["1", "2", "3-4", "5+"]
    assert position_bins([1, 1, 2], min_units=30) == [PositionBin(1, None)]
    assert PositionBin(7, None).label == "7+" and PositionBin(3, 4).label == "3-4"


def test_rates_are_counts_and_intervals_resample_conversations() -> None:
    clusters, positions, breaks = conversations(60, 1, late=True)
    bins = position_bins(positions)
    groups = bin_of_positions(positions, bins)
    rates = grouped_rates(groups, breaks, clusters, n_groups=len(bins), n_resamples=300, seed=4)
    for k, row in enumerate(rates):
        assert row["units"] == int((groups == k).sum())
        assert row["breaks"] == int(breaks[groups == k].sum())
    # The same draws as the project's cluster bootstrap: the same intervals.
    weights = np.vstack([w for _, w in resample_weights(
        len(positions), n_resamples=300, seed=4, clusters=clusters
    )])  # fmt: skip
    for k, row in enumerate(rates):
        mine = groups == k
        with np.errstate(invalid="ignore"):
            resampled = (weights[:, mine] @ breaks[mine]) / weights[:, mine].sum(axis=1)
        low, high = np.percentile(resampled[np.isfinite(resampled)], [2.5, 97.5])
        assert row["ci95"] == pytest.approx([low, high])


def test_planted_late_breaks_show_in_bins_first_breaks_and_slope() -> None:
    clusters, positions, breaks = conversations(400, 2, late=True)
    bins = position_bins(positions)
    groups = bin_of_positions(positions, bins)
    rates = grouped_rates(groups, breaks, clusters, n_groups=len(bins), n_resamples=200, seed=0)
    early = [r for b, r in zip(bins, rates, strict=True) if b.high is not None and b.high <= 5]
    late = [r for b, r in zip(bins, rates, strict=True) if b.low >= 6]
    assert early and late
    assert all(r["ci95"][1] < 0.1 for r in early)
    assert all(r["ci95"][0] > 0.12 for r in late)
    first = first_break_positions(clusters, positions, breaks)
    broke = first[first > 0]
    assert np.mean(broke >= 6) > 0.6
    slope = position_slope(positions, breaks, clusters)
    assert slope["odds_ratio"] > 1 and slope["ci95"][0] > 1

    import statsmodels.api as sm

    model = sm.GLM(
        breaks.astype(float),
        sm.add_constant(positions.astype(float)),
        family=sm.families.Binomial(),
    )
    fit = model.fit(cov_type="cluster", cov_kwds={"groups": clusters})
    assert slope["log_odds"] == pytest.approx(float(fit.params[1]))
    assert slope["se"] == pytest.approx(float(fit.bse[1]))

    clusters, positions, breaks = conversations(400, 3, late=False)
    flat = position_slope(positions, breaks, clusters)
    assert flat["ci95"][0] < 1 < flat["ci95"][1]


def test_first_break_literal_and_slope_refusals() -> None:
    clusters = np.array([0, 0, 0, 1, 1, 2])
    positions = np.array([1, 2, 3, 1, 2, 1])
    breaks = np.array([False, True, True, False, False, True])
    assert first_break_positions(clusters, positions, breaks).tolist() == [2, 0, 1]
    assert position_slope(positions, np.zeros(6), clusters)["reason"].startswith("no slope")
    assert position_slope([1, 1], [0, 1], [0, 1])["odds_ratio"] is None
    with pytest.raises(ValueError, match=r"^min_units must be at least 1, got 0$"):
        position_bins([1], min_units=0)
