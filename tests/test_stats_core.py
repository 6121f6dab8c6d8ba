"""The statistics core: Wilson against statsmodels, the cluster bootstrap, kappa, Estimate."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.metrics import cohen_kappa_score, confusion_matrix
from statsmodels.stats.proportion import proportion_confint

from review_app.calibration.like_for_like import kappa_estimate
from review_app.stats import core
from review_app.stats.confusion import confusion_from_codes
from review_app.stats.core import (
    Estimate,
    bootstrap_confusions,
    kappa_from_confusion,
    proportion,
    resample_weights,
    wilson_interval,
)


@pytest.mark.parametrize("n", [1, 2, 5, 10, 37, 100, 1000])
def test_wilson_matches_statsmodels(n: int) -> None:
    for successes in sorted({0, 1, n // 3, n // 2, n - 1, n} & set(range(n + 1))):
        for confidence in (0.9, 0.95, 0.99):
            expected = proportion_confint(successes, n, alpha=1 - confidence, method="wilson")
            ours = wilson_interval(successes, n, confidence=confidence)
            assert ours == pytest.approx(expected, abs=1e-12)


def test_a_proportion_under_ten_units_has_no_interval_and_says_why() -> None:
    small = proportion(3, 9, undefined_reason="none")
    assert small.value == pytest.approx(1 / 3) and small.ci95 is None
    assert small.reason == "no interval: only 9 units behind this proportion (fewer than 10)"
    enough = proportion(3, 10, undefined_reason="none")
    assert enough.ci95 == pytest.approx(proportion_confint(3, 10, method="wilson"))
    assert enough.method == "Wilson score interval"
    empty = proportion(0, 0, undefined_reason="no units")
    assert empty.value is None and empty.reason == "no units"


@pytest.mark.parametrize(
    ("args", "message"),
    [((1, 0), "n must be a positive integer, got 0"),
     ((5, 4), "successes must be an integer in 0..n, got 5")],
)  # fmt: skip
def test_wilson_rejects_bad_counts(args: tuple[int, int], message: str) -> None:
    with pytest.raises(ValueError) as error:
        wilson_interval(*args)
    assert str(error.value) == message


def test_kappa_from_confusion_matches_sklearn() -> None:
    rng = np.random.default_rng(0)
    for _ in range(30):
        a = rng.integers(0, 4, size=60)
        b = np.where(rng.random(60) < 0.6, a, rng.integers(0, 4, size=60))
        confusion = np.bincount(a * 4 + b, minlength=16).reshape(4, 4)
        assert float(kappa_from_confusion(confusion)) == pytest.approx(cohen_kappa_score(a, b))
    assert np.isnan(kappa_from_confusion(np.array([[5, 0], [0, 0]])))


def test_confusion_from_codes_matches_sklearn() -> None:
    rng = np.random.default_rng(2)
    for k in (2, 3, 5):
        a = rng.integers(0, k, size=50)
        b = rng.integers(0, k, size=50)
        expected = confusion_matrix(a, b, labels=list(range(k)))
        assert np.array_equal(confusion_from_codes(a, b, n_categories=k), expected)
    assert confusion_from_codes([0, 0], [0, 0], n_categories=1).tolist() == [[2]]
    empty = confusion_from_codes([], [], n_categories=3)
    assert empty.shape == (3, 3) and not empty.any()


def test_one_turn_per_conversation_makes_both_bootstraps_the_same() -> None:
    rng = np.random.default_rng(1)
    a = rng.integers(0, 3, size=80)
    b = np.where(rng.random(80) < 0.7, a, rng.integers(0, 3, size=80))
    unit = bootstrap_confusions(a, b, 3, n_resamples=300, seed=5)
    cluster = bootstrap_confusions(a, b, 3, n_resamples=300, seed=5, clusters=np.arange(80))
    assert np.array_equal(unit, cluster)
    codes = [str(x) for x in a], [str(x) for x in b]
    by_unit = kappa_estimate(*codes, n_resamples=300, seed=5)
    by_conversation = kappa_estimate(*codes, n_resamples=300, seed=5, clusters=range(80))
    assert by_unit.ci95 == by_conversation.ci95
    assert by_unit.method == "percentile bootstrap over units"
    assert by_conversation.method == ("percentile bootstrap over conversations (cluster bootstrap)")


def test_one_conversation_gives_no_interval_rather_than_a_zero_width_one() -> None:
    a = ["in_role", "scope", "in_role", "tone", "in_role", "scope"]
    b = ["in_role", "scope", "tone", "tone", "in_role", "in_role"]
    alone = kappa_estimate(a, b, n_resamples=200, seed=3, clusters=["case-1"] * 6)
    assert alone.value is not None
    assert alone.ci95 is None
    assert alone.method is None
    assert alone.reason == "no confidence interval from fewer than 2 conversations"
    two = kappa_estimate(a, b, n_resamples=200, seed=3, clusters=["c1"] * 3 + ["c2"] * 3)
    assert two.ci95 is not None


def test_the_cluster_bootstrap_widens_intervals_when_turns_are_alike() -> None:
    # 40 conversations of 10 turns; within a conversation every turn is the same, so
    # there are 40 independent observations, not 400.
    rng = np.random.default_rng(2)
    per_conversation_a = rng.integers(0, 2, size=40)
    per_conversation_b = np.where(rng.random(40) < 0.75, per_conversation_a, 1 - per_conversation_a)
    a = [str(x) for x in np.repeat(per_conversation_a, 10)]
    b = [str(x) for x in np.repeat(per_conversation_b, 10)]
    clusters = [f"c{i // 10}" for i in range(400)]
    unit = kappa_estimate(a, b, n_resamples=1000, seed=0)
    cluster = kappa_estimate(a, b, n_resamples=1000, seed=0, clusters=clusters)
    assert unit.value == cluster.value
    assert unit.ci95 is not None and cluster.ci95 is not None
    unit_width = unit.ci95[1] - unit.ci95[0]
    cluster_width = cluster.ci95[1] - cluster.ci95[0]
    assert cluster_width > 2.5 * unit_width  # about sqrt(10) times as wide
    # ... and the cluster interval is as wide as the unit interval of the 40 conversations.
    alone = kappa_estimate(
        [str(x) for x in per_conversation_a], [str(x) for x in per_conversation_b],
        n_resamples=1000, seed=0,
    )  # fmt: skip
    assert alone.ci95 is not None
    assert cluster_width == pytest.approx(alone.ci95[1] - alone.ci95[0], rel=0.25)


def test_resample_weights_keep_conversations_whole() -> None:
    clusters = np.array([0, 0, 0, 1, 1, 2])
    for _, weights in resample_weights(6, n_resamples=50, seed=3, clusters=clusters):
        assert np.all(weights[:, 0] == weights[:, 1]) and np.all(weights[:, 0] == weights[:, 2])
        assert np.all(weights[:, 3] == weights[:, 4])
        # Three conversations drawn per resample.
        assert np.all(weights[:, [0, 3, 5]].sum(axis=1) == 3)


def test_cluster_confusions_are_the_weighted_counts_of_the_cluster_resamples(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Oracle: summing each drawn conversation's matrix equals counting every turn with its
    # resample weight (the definition, via resample_weights), over several chunks.
    monkeypatch.setattr(core, "BOOTSTRAP_CHUNK_CELLS", 500 * 7)
    rng = np.random.default_rng(4)
    a, b = rng.integers(0, 3, size=500), rng.integers(0, 3, size=500)
    clusters = np.sort(rng.integers(0, 70, size=500))
    clusters = np.unique(clusters, return_inverse=True)[1]
    expected = np.zeros((40, 3, 3))
    for start, weights in resample_weights(500, n_resamples=40, seed=8, clusters=clusters):
        for row, weight in enumerate(weights):
            np.add.at(expected[start + row], (a, b), weight)
    summed = bootstrap_confusions(a, b, 3, n_resamples=40, seed=8, clusters=clusters)
    assert np.array_equal(summed, expected)


def test_estimate_forms() -> None:
    estimate = Estimate(0.5, 12, (0.2, 0.8), None, warning="w", method="m")
    assert estimate.to_dict() == {
        "value": 0.5, "n": 12, "ci95": [0.2, 0.8], "reason": None, "warning": "w", "method": "m",
    }  # fmt: skip
    assert estimate.to_dict(count_key="n_units") == {
        "value": 0.5, "n_units": 12, "reason": None, "ci95": [0.2, 0.8], "warning": "w",
    }  # fmt: skip
    with pytest.raises(ValueError, match="finite"):
        Estimate(float("inf"), 1)


@pytest.mark.parametrize("n_clusters", [1, 7, 300, 70_000])
def test_cluster_counts_are_the_draws_counted_whatever_the_chunks(n_clusters: int) -> None:
    # The definition: resample r draws integers(0, C) C times from default_rng(seed), row
    # after row; counted in one bincount (small chunks) or row by row (large ones).
    rng = np.random.default_rng(4)
    draws = rng.integers(0, n_clusters, size=(40, n_clusters), dtype=np.int64)
    expected = np.vstack([np.bincount(row, minlength=n_clusters) for row in draws])
    for rows_per_chunk in (None, 1, 7):
        chunks = list(
            core.draw_cluster_counts(
                n_clusters, n_resamples=40, seed=4, rows_per_chunk=rows_per_chunk
            )
        )
        assert [start for start, _ in chunks] == sorted({start for start, _ in chunks})
        assert np.array_equal(np.vstack([counts for _, counts in chunks]), expected)
    as_float = np.vstack(
        [
            c
            for _, c in core.draw_cluster_counts(
                n_clusters, n_resamples=40, seed=4, dtype=np.float32
            )
        ]
    )
    assert as_float.dtype == np.float32 and np.array_equal(as_float, expected)


def test_kappa_from_margins_is_kappa_from_confusion() -> None:
    rng = np.random.default_rng(2)
    confusions = rng.integers(0, 9, size=(50, 4, 4)).astype(np.float64)
    confusions[0] = 0.0
    confusions[0, 2, 2] = 5.0  # one category on both sides: undefined
    from_margins = core.kappa_from_margins(
        np.trace(confusions, axis1=-2, axis2=-1), confusions.sum(axis=-1), confusions.sum(axis=-2)
    )
    np.testing.assert_array_equal(from_margins, kappa_from_confusion(confusions))
    assert np.isnan(from_margins[0])
