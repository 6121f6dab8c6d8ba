"""Certified selective judging (review_app.stats.selective) against a literal fixed-sequence
test, the cascade order, and the guarantee's coverage over simulated re-splits."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from review_app.stats.selective import (
    certify_threshold,
    clopper_pearson_upper,
    route_cascade,
    verdict_confidence,
)


def literal(conf: np.ndarray, wrong: np.ndarray, *, alpha: float, delta: float, min_units: int):
    """The fixed-sequence test as the issue words it, one threshold at a time."""
    accepted = None
    for k in range(1000, -1, -1):
        t = k / 1000
        kept = [bool(w) for c, w in zip(conf, wrong, strict=True) if c >= t]
        if len(kept) < min_units:
            continue
        d = sum(kept)
        upper = (
            stats.binomtest(d, len(kept))
            .proportion_ci(confidence_level=1 - 2 * delta, method="exact")
            .high
        )
        if upper <= alpha:
            accepted = (t, len(kept), d, upper)
        else:
            break
    return accepted


def judge(n: int, rng: np.random.Generator, *, confident_errors: bool) -> tuple[np.ndarray, ...]:
    conf = rng.uniform(0.5, 1.0, size=n).round(3)
    # Confident errors: 15% everywhere; else errors sit at low confidence.
    p_wrong = np.full(n, 0.15) if confident_errors else np.clip(2 * (1 - conf) ** 2, 0, 1)
    wrong = rng.random(n) < p_wrong
    return conf, wrong


@pytest.mark.parametrize("seed", range(12))
def test_matches_the_literal_fixed_sequence_test(seed: int) -> None:
    rng = np.random.default_rng(seed)
    conf, wrong = judge(int(rng.integers(40, 600)), rng, confident_errors=seed % 3 == 0)
    alpha = float(rng.choice([0.05, 0.1, 0.2]))
    delta = float(rng.choice([0.05, 0.1]))
    min_units = int(rng.choice([1, 10, 30]))
    got = certify_threshold(conf, wrong, alpha=alpha, delta=delta, min_units=min_units)
    want = literal(conf, wrong, alpha=alpha, delta=delta, min_units=min_units)
    if want is None:
        assert got.threshold is None and got.kept == 0
    else:
        assert got.threshold == want[0]
        assert (got.kept, got.disagreements) == (want[1], want[2])
        assert got.upper_bound == pytest.approx(want[3], abs=1e-9)
    assert got.calibration_units == len(conf)


def test_low_confidence_errors_certify_high_coverage_confident_errors_none() -> None:
    rng = np.random.default_rng(1)
    conf, wrong = judge(3000, rng, confident_errors=False)
    good = certify_threshold(conf, wrong, alpha=0.1, delta=0.1)
    assert good.threshold is not None and good.kept / 3000 > 0.6
    assert good.upper_bound is not None and good.upper_bound <= 0.1
    conf, wrong = judge(3000, rng, confident_errors=True)
    bad = certify_threshold(conf, wrong, alpha=0.1, delta=0.1)
    assert bad.threshold is None and bad.upper_bound is None


def test_the_sequence_stops_at_the_first_failure() -> None:
    # Confident units are wrong: the first tested threshold fails, so lower ones whose
    # bound would pass (many right units dilute the errors) are never reached.
    conf = np.concatenate([np.full(40, 0.99), np.full(4000, 0.6)])
    wrong = np.concatenate([np.ones(40, bool), np.zeros(4000, bool)])
    assert certify_threshold(conf, wrong, alpha=0.05, delta=0.1).threshold is None
    assert literal(conf, wrong, alpha=0.05, delta=0.1, min_units=30) is None


def test_min_units_skips_thin_thresholds() -> None:
    conf = np.concatenate([np.full(5, 1.0), np.full(100, 0.9)])
    wrong = np.zeros(105, bool)
    cert = certify_threshold(conf, wrong, alpha=0.1, delta=0.1, min_units=30)
    assert cert.threshold == 0.0 and cert.kept == 105
    assert certify_threshold(conf, wrong, alpha=0.1, delta=0.1, min_units=200).threshold is None


def test_clopper_pearson_against_scipy() -> None:
    for d, n in [(0, 1), (0, 30), (3, 30), (30, 30), (17, 400)]:
        want = stats.binomtest(d, n).proportion_ci(confidence_level=0.8, method="exact").high
        assert float(clopper_pearson_upper(d, n, delta=0.1)) == pytest.approx(want, abs=1e-12)


def test_confidence_is_the_probability_of_the_given_verdict() -> None:
    assert verdict_confidence([0.9, 0.9, 0.2], [True, False, False]).tolist() == pytest.approx(
        [0.9, 0.1, 0.8]
    )
    with pytest.raises(ValueError, match=r"^scores must be between 0 and 1$"):
        verdict_confidence([1.2], [True])


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"alpha": 0.0, "delta": 0.1}, "alpha must be strictly between 0 and 1, got 0.0"),
        ({"alpha": 0.1, "delta": 1.0}, "delta must be strictly between 0 and 1, got 1.0"),
        ({"alpha": 0.1, "delta": 0.1, "min_units": 0}, "min_units must be at least 1, got 0"),
    ],
)
def test_bad_options(kwargs: dict, message: str) -> None:
    with pytest.raises(ValueError, match=f"^{message}$"):
        certify_threshold([0.9], [False], **kwargs)


def test_cascade_order_later_judges_see_only_undecided_units() -> None:
    rng = np.random.default_rng(3)
    n = 4000
    gold = rng.random(n) < 0.5
    cheap_conf, cheap_wrong = judge(n, rng, confident_errors=False)
    strong_conf, strong_wrong = judge(n, rng, confident_errors=False)
    strong_conf[:10] = np.nan  # the strong judge has no score there
    steps = route_cascade(
        [cheap_conf, strong_conf], [cheap_wrong, strong_wrong], gold, alpha=0.1, delta=0.1
    )
    first, second = steps
    assert first.certification.threshold is not None
    assert first.decides.tolist() == (cheap_conf >= first.certification.threshold).tolist()
    # The second run is certified exactly as alone on the gold the first left open.
    open_gold = gold & ~first.decides & ~np.isnan(strong_conf)
    alone = certify_threshold(strong_conf[open_gold], strong_wrong[open_gold], alpha=0.1, delta=0.1)
    assert second.certification == alone
    assert not (first.decides & second.decides).any()
    assert not second.decides[:10].any()
    if alone.threshold is not None:
        expect = ~first.decides & (np.nan_to_num(strong_conf, nan=-1) >= alone.threshold)
        assert second.decides.tolist() == expect.tolist()
    # Order matters: swapping the runs changes who decides.
    swapped = route_cascade(
        [strong_conf, cheap_conf], [strong_wrong, cheap_wrong], gold, alpha=0.1, delta=0.1
    )
    assert swapped[0].certification.calibration_units == int((gold & ~np.isnan(strong_conf)).sum())


def test_guarantee_holds_over_1000_resplits() -> None:
    """Disagreement among the decided units is at most alpha in >= 1 - delta of re-splits."""
    rng = np.random.default_rng(2024)
    population = 60_000
    conf = rng.uniform(0.5, 1.0, size=population).round(3)
    # Calibrated-ish judge: disagreement probability 1 - conf, so the risk above t is
    # close to alpha somewhere in the range and the test has something to get wrong.
    wrong = rng.random(population) < (1 - conf)
    order = np.argsort(conf)
    sorted_conf = conf[order]
    wrong_from = np.concatenate((np.cumsum(wrong[order][::-1])[::-1], [0]))
    alpha, delta, n_cal, resplits = 0.15, 0.1, 1500, 1000
    violations = 0
    certified = 0
    for _ in range(resplits):
        cal = rng.choice(population, size=n_cal, replace=False)
        cert = certify_threshold(conf[cal], wrong[cal], alpha=alpha, delta=delta)
        if cert.threshold is None:
            continue
        certified += 1
        first = np.searchsorted(sorted_conf, cert.threshold, side="left")
        risk = wrong_from[first] / (population - first)  # the units the judge decides
        violations += risk > alpha
    assert certified > resplits // 2  # the guarantee is not bought by deciding nothing
    slack = 3 * math.sqrt(delta * (1 - delta) / resplits)
    assert violations / resplits <= delta + slack
