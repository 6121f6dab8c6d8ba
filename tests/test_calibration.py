"""Tests of review_app.calibration.

Three kinds of evidence: scikit-learn's reference implementations, synthetic judges whose
error rates and score distributions are known (the expected figures are derived here from
those rates and distributions, not by calling the module), and hypothesis properties.
"""

from __future__ import annotations

import itertools
import json
import math
from collections import Counter

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import integrate
from scipy import stats as sps
from sklearn.calibration import calibration_curve
from sklearn.isotonic import IsotonicRegression
from sklearn.metrics import (
    accuracy_score,
    brier_score_loss,
    cohen_kappa_score,
    confusion_matrix,
    f1_score,
    precision_score,
    recall_score,
)

from review_app.calibration.few_shot import few_shot_examples
from review_app.calibration.first_break import first_break_comparison
from review_app.calibration.reference import (
    AgreementReport,
    classify_disagreement,
    compare_to_reference,
)
from review_app.calibration.score_map import CalibrationMap, fit_calibration_map
from review_app.calibration.scores import reliability, threshold_sweep
from review_app.calibration.versions import compare_prompt_versions
from review_app.stats.core import Estimate, break_mapping_from_verdicts
from tests.builders import ROLE_ADHERENCE_VERDICTS

BREAK_MAPPING = break_mapping_from_verdicts(ROLE_ADHERENCE_VERDICTS)
CODES = sorted(ROLE_ADHERENCE_VERDICTS)
BREAK_CODES = ["scope_break", "tone_break", "authority_break"]


def json_safe(report: object) -> dict:
    data = report.to_dict()  # type: ignore[attr-defined]
    json.dumps(data, allow_nan=False)
    return data


def all_estimates_finite_or_none(report: AgreementReport) -> None:
    for name, estimate in report.estimates().items():
        if estimate.value is None:
            assert estimate.reason, name
        else:
            assert math.isfinite(estimate.value), name


def random_labels(seed: int, n_units: int, agreement: float) -> tuple[dict, dict]:
    rng = np.random.default_rng(seed)
    reference = {}
    judged = {}
    for i in range(n_units):
        unit = (f"case-{i // 3}", 2 * (i % 3) + 2)
        code = CODES[rng.integers(len(CODES))]
        reference[unit] = code
        judged[unit] = code if rng.random() < agreement else CODES[rng.integers(len(CODES))]
    return reference, judged


# --------------------------------------------------------------------------- scikit-learn


@pytest.mark.parametrize("seed", range(6))
def test_agreement_matches_sklearn(seed: int) -> None:
    reference, judged = random_labels(seed, 150, agreement=0.6)
    # Units only one side labelled must be ignored.
    reference[("only-reference", 1)] = "in_role"
    judged[("only-judge", 1)] = "scope_break"
    report = compare_to_reference(
        reference=reference, judged=judged, break_mapping=BREAK_MAPPING, n_resamples=200
    )
    units = sorted(set(reference) & set(judged))
    ref = [reference[u] for u in units]
    jud = [judged[u] for u in units]

    assert report.n_shared == report.n_compared == 150
    assert report.n_only_reference == report.n_only_judged == 1
    assert report.kappa.value == pytest.approx(cohen_kappa_score(ref, jud), abs=1e-9)
    assert report.accuracy.value == pytest.approx(accuracy_score(ref, jud), abs=1e-12)
    labels = sorted(set(ref) | set(jud))
    assert report.confusion.labels == tuple(labels)
    assert np.array_equal(
        np.array(report.confusion.counts), confusion_matrix(ref, jud, labels=labels)
    )
    nested = report.confusion.as_nested_dict()
    assert nested["scope_break"]["in_role"] == sum(
        r == "scope_break" and j == "in_role" for r, j in zip(ref, jud, strict=True)
    )

    pairs = [
        (BREAK_MAPPING[r], BREAK_MAPPING[j])
        for r, j in zip(ref, jud, strict=True)
        if BREAK_MAPPING[r] is not None and BREAK_MAPPING[j] is not None
    ]
    y_ref = [int(r == "break") for r, _ in pairs]
    y_jud = [int(j == "break") for _, j in pairs]
    assert report.n_break_comparable == len(pairs)
    assert report.n_break_excluded == 150 - len(pairs)
    assert report.precision.value == pytest.approx(precision_score(y_ref, y_jud), abs=1e-12)
    assert report.recall.value == pytest.approx(recall_score(y_ref, y_jud), abs=1e-12)
    assert report.tpr.value == report.recall.value
    assert report.f1.value == pytest.approx(f1_score(y_ref, y_jud), abs=1e-12)
    assert report.tnr.value == pytest.approx(recall_score(y_ref, y_jud, pos_label=0), abs=1e-12)
    assert report.break_kappa.value == pytest.approx(cohen_kappa_score(y_ref, y_jud), abs=1e-9)
    assert report.break_accuracy.value == pytest.approx(accuracy_score(y_ref, y_jud))
    for estimate in report.estimates().values():
        assert estimate.ci95 is not None
        assert estimate.ci95[0] <= estimate.value <= estimate.ci95[1]  # type: ignore[operator]
    json_safe(report)


@settings(max_examples=150, deadline=None)
@given(
    st.lists(
        st.tuples(st.sampled_from(CODES[:4]), st.sampled_from(CODES[:4])),
        min_size=1,
        max_size=40,
    )
)
def test_kappa_matches_sklearn_or_is_none(pairs: list[tuple[str, str]]) -> None:
    reference = {(f"c{i}", 1): r for i, (r, _) in enumerate(pairs)}
    judged = {(f"c{i}", 1): j for i, (_, j) in enumerate(pairs)}
    report = compare_to_reference(
        reference=reference, judged=judged, break_mapping=BREAK_MAPPING, n_resamples=0
    )
    ref = [r for r, _ in pairs]
    jud = [j for _, j in pairs]
    expected = _sklearn_kappa(ref, jud)
    if math.isnan(expected):
        assert report.kappa.value is None and report.kappa.reason
    else:
        assert report.kappa.value == pytest.approx(expected, abs=1e-9)
    json_safe(report)


def _sklearn_kappa(ref: list[str], jud: list[str]) -> float:
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return float(cohen_kappa_score(ref, jud))


def test_reliability_matches_sklearn() -> None:
    rng = np.random.default_rng(7)
    probabilities = np.round(rng.random(500), 2)  # rounding puts values exactly on bin edges
    y = (rng.random(500) < probabilities).astype(int)
    report = reliability(y_true=y, probabilities=probabilities, n_bins=10)
    prob_true, prob_pred = calibration_curve(y, probabilities, n_bins=10, strategy="uniform")
    assert [b.observed_frequency for b in report.bins] == pytest.approx(prob_true, abs=1e-12)
    assert [b.mean_predicted for b in report.bins] == pytest.approx(prob_pred, abs=1e-12)
    assert sum(b.count for b in report.bins) == 500
    assert report.brier_score == pytest.approx(brier_score_loss(y, probabilities), abs=1e-12)
    expected_ece = sum(
        b.count / 500 * abs(b.observed_frequency - b.mean_predicted) for b in report.bins
    )
    assert report.expected_calibration_error == pytest.approx(expected_ece)
    json_safe(report)


def test_reliability_bin_edges_and_empty_bins() -> None:
    report = reliability(y_true=[0, 1, 1, 0], probabilities=[0.0, 0.1, 0.7, 1.0], n_bins=10)
    # Right-closed bins: 0.0 and 0.1 share the first bin, 0.7 falls in (0.6, 0.7].
    assert [(b.lower, b.upper, b.count) for b in report.bins] == [
        (0.0, 0.1, 2),
        (0.6, 0.7, 1),
        (0.9, 1.0, 1),
    ]
    assert report.max_calibration_error == pytest.approx(1.0)


def test_threshold_sweep_matches_sklearn_per_threshold() -> None:
    rng = np.random.default_rng(3)
    y = rng.integers(0, 2, 300)
    scores = np.clip(0.35 * y + 0.65 * rng.random(300), 0, 1)
    sweep = threshold_sweep(y_true=y, scores=scores, thresholds=np.unique(scores))
    import warnings

    for point in sweep.points:
        predicted = (scores >= point.threshold).astype(int)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            assert point.kappa == pytest.approx(cohen_kappa_score(y, predicted), abs=1e-9)
            assert point.recall == pytest.approx(recall_score(y, predicted), abs=1e-12)
            assert point.precision == pytest.approx(precision_score(y, predicted), abs=1e-12)
            assert point.f1 == pytest.approx(f1_score(y, predicted), abs=1e-12)
        assert point.accuracy == pytest.approx(accuracy_score(y, predicted), abs=1e-12)
    best = sweep.best
    assert best is not None and best.threshold == sweep.best_threshold
    assert best.kappa == max(p.kappa for p in sweep.points if p.kappa is not None)
    assert sum(p.is_best for p in sweep.points) == 1
    json_safe(sweep)


def test_isotonic_map_equals_sklearn_and_is_monotone() -> None:
    rng = np.random.default_rng(11)
    scores = rng.random(400)
    y = (rng.random(400) < scores**2).astype(int)
    calibration_map = fit_calibration_map(y_true=y, scores=scores, method="isotonic")
    grid = np.linspace(0, 1, 2001)
    sklearn_map = IsotonicRegression(out_of_bounds="clip").fit(scores, y)
    assert np.allclose(calibration_map.transform(grid), sklearn_map.predict(grid), atol=1e-12)
    transformed = calibration_map.transform(grid)
    assert np.all(np.diff(transformed) >= 0)
    assert transformed.min() >= 0 and transformed.max() <= 1


# --------------------------------------------------------------------------- known truth


def test_injected_errors_give_the_known_kappa_and_recall() -> None:
    """A synthetic judge: breaks missed at 15%, false alarms at 5%, wrong kind at 20%."""
    rng = np.random.default_rng(2024)
    n, prevalence, miss, false_alarm, wrong_kind = 20_000, 0.3, 0.15, 0.05, 0.2
    reference: dict[tuple[str, int], str] = {}
    judged: dict[tuple[str, int], str] = {}
    for i in range(n):
        unit = (f"case-{i}", 2)
        if rng.random() < prevalence:
            kind = BREAK_CODES[rng.integers(3)]
            reference[unit] = kind
            if rng.random() < miss:
                judged[unit] = "in_role"
            elif rng.random() < wrong_kind:
                judged[unit] = rng.choice([c for c in BREAK_CODES if c != kind])
            else:
                judged[unit] = kind
        else:
            reference[unit] = "in_role"
            judged[unit] = BREAK_CODES[rng.integers(3)] if rng.random() < false_alarm else "in_role"
    report = compare_to_reference(
        reference=reference, judged=judged, break_mapping=BREAK_MAPPING, n_resamples=300
    )

    # Sample figures by the textbook formulas, counted directly.
    pair_counts = Counter((reference[u], judged[u]) for u in reference)
    reference_margin = Counter(reference.values())
    judged_margin = Counter(judged.values())
    observed = sum(c for (r, j), c in pair_counts.items() if r == j) / n
    chance = sum(reference_margin[c] * judged_margin[c] for c in reference_margin) / n**2
    assert report.kappa.value == pytest.approx((observed - chance) / (1 - chance), abs=1e-12)
    tp = sum(c for (r, j), c in pair_counts.items() if r != "in_role" and j != "in_role")
    fn = sum(c for (r, j), c in pair_counts.items() if r != "in_role" and j == "in_role")
    assert report.recall.value == pytest.approx(tp / (tp + fn), abs=1e-12)

    # Population figures from the injected rates.
    detect = 1 - miss
    population_recall = detect
    judge_break = prevalence * detect + (1 - prevalence) * false_alarm
    p_o = prevalence * detect + (1 - prevalence) * (1 - false_alarm)
    p_e = prevalence * judge_break + (1 - prevalence) * (1 - judge_break)
    population_break_kappa = (p_o - p_e) / (1 - p_e)
    # Codes: in_role plus three equally likely break kinds.
    code_p_o = (1 - prevalence) * (1 - false_alarm) + prevalence * detect * (1 - wrong_kind)
    judge_in_role = (1 - prevalence) * (1 - false_alarm) + prevalence * miss
    judge_each_kind = (1 - judge_in_role) / 3
    code_p_e = (1 - prevalence) * judge_in_role + 3 * (prevalence / 3) * judge_each_kind
    population_kappa = (code_p_o - code_p_e) / (1 - code_p_e)

    assert report.recall.value == pytest.approx(population_recall, abs=0.015)
    assert report.tnr.value == pytest.approx(1 - false_alarm, abs=0.01)
    assert report.break_kappa.value == pytest.approx(population_break_kappa, abs=0.02)
    assert report.kappa.value == pytest.approx(population_kappa, abs=0.02)
    for estimate, truth in (
        (report.recall, population_recall),
        (report.break_kappa, population_break_kappa),
        (report.kappa, population_kappa),
    ):
        assert estimate.ci95 is not None
        low, high = estimate.ci95
        assert low < truth < high
        assert high - low < 0.05
    assert report.disagreement_counts["missed_break"] == fn
    assert report.warnings == ()


# Class-conditional judge scores: breaks ~ Beta(4, 2), non-breaks ~ Beta(2, 4).
PREVALENCE = 0.3
BREAK_BETA = (4.0, 2.0)
NO_BREAK_BETA = (2.0, 4.0)


def beta_judge(n: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    y = (rng.random(n) < PREVALENCE).astype(int)
    scores = np.where(y == 1, rng.beta(*BREAK_BETA, n), rng.beta(*NO_BREAK_BETA, n))
    return y, scores


def true_posterior(s: np.ndarray | float) -> np.ndarray | float:
    """P(break | score): the two Beta densities share B(4,2) = B(2,4), so f1/f0 = s²/(1-s)²."""
    return PREVALENCE * s**2 / (PREVALENCE * s**2 + (1 - PREVALENCE) * (1 - s) ** 2)


def beta_second_moment(a: float, b: float) -> float:
    return a * (a + 1) / ((a + b) * (a + b + 1))


def test_beta_judge_brier_and_reliability_match_the_distributions() -> None:
    y, scores = beta_judge(60_000, seed=5)
    report = reliability(y_true=y, probabilities=scores, n_bins=10)

    # Brier = π E[(1-S)² | break] + (1-π) E[S² | no break], from the Beta moments.
    a1, b1 = BREAK_BETA
    a0, b0 = NO_BREAK_BETA
    break_term = 1 - 2 * a1 / (a1 + b1) + beta_second_moment(a1, b1)
    population_brier = PREVALENCE * break_term + (1 - PREVALENCE) * beta_second_moment(a0, b0)
    assert population_brier == pytest.approx(1 / 7)
    assert report.brier_score == pytest.approx(population_brier, abs=0.004)

    population_ece = 0.0
    for reliability_bin in report.bins:
        lo, hi = reliability_bin.lower, reliability_bin.upper
        mass_break = PREVALENCE * (sps.beta.cdf(hi, a1, b1) - sps.beta.cdf(lo, a1, b1))
        mass_no_break = (1 - PREVALENCE) * (sps.beta.cdf(hi, a0, b0) - sps.beta.cdf(lo, a0, b0))
        mass = mass_break + mass_no_break
        # ∫ s f_{a,b}(s) ds over the bin = a/(a+b) · (I_hi(a+1, b) − I_lo(a+1, b)).
        first_moment = PREVALENCE * a1 / (a1 + b1) * (
            sps.beta.cdf(hi, a1 + 1, b1) - sps.beta.cdf(lo, a1 + 1, b1)
        ) + (1 - PREVALENCE) * a0 / (a0 + b0) * (
            sps.beta.cdf(hi, a0 + 1, b0) - sps.beta.cdf(lo, a0 + 1, b0)
        )
        observed = mass_break / mass
        predicted = first_moment / mass
        population_ece += mass * abs(observed - predicted)
        tolerance = 4 * math.sqrt(observed * (1 - observed) / reliability_bin.count) + 0.003
        assert reliability_bin.observed_frequency == pytest.approx(observed, abs=tolerance)
        assert reliability_bin.mean_predicted == pytest.approx(predicted, abs=0.003)
        assert reliability_bin.count / 60_000 == pytest.approx(mass, abs=0.004)
    assert report.expected_calibration_error == pytest.approx(population_ece, abs=0.01)
    assert population_ece > 0.05  # the raw judge is visibly miscalibrated


def test_beta_judge_recall_per_threshold() -> None:
    y, scores = beta_judge(30_000, seed=6)
    sweep = threshold_sweep(y_true=y, scores=scores)
    n_break = int(y.sum())
    for point in sweep.points:
        expected_recall = 1 - sps.beta.cdf(point.threshold, *BREAK_BETA)
        tolerance = 4 * math.sqrt(max(expected_recall * (1 - expected_recall), 1e-4) / n_break)
        assert point.recall == pytest.approx(expected_recall, abs=tolerance)
        expected_fpr = 1 - sps.beta.cdf(point.threshold, *NO_BREAK_BETA)
        assert point.fp / (point.fp + point.tn) == pytest.approx(expected_fpr, abs=0.02)


def test_isotonic_calibration_reaches_the_bayes_brier() -> None:
    y, scores = beta_judge(30_000, seed=8)
    calibration_map = fit_calibration_map(y_true=y, scores=scores, method="isotonic", cv=5)

    def irreducible(s: float) -> float:
        """p(1-p) times the score density: the Brier score of the true posterior."""
        density = PREVALENCE * sps.beta.pdf(s, *BREAK_BETA) + (1 - PREVALENCE) * sps.beta.pdf(
            s, *NO_BREAK_BETA
        )
        posterior = float(true_posterior(s))
        return posterior * (1 - posterior) * density

    bayes_brier, _ = integrate.quad(irreducible, 0, 1)
    before = calibration_map.heldout_brier_before
    after_brier = calibration_map.heldout_brier_after
    assert before is not None and after_brier is not None
    assert before == pytest.approx(1 / 7, abs=0.005)
    assert after_brier < before - 0.01
    assert after_brier == pytest.approx(bayes_brier, abs=0.004)
    assert after_brier >= bayes_brier - 0.004
    ece_before, ece_after = calibration_map.heldout_ece_before, calibration_map.heldout_ece_after
    assert ece_before is not None and ece_after is not None
    assert ece_after < 0.02 < ece_before
    grid = np.linspace(0.15, 0.85, 15)
    assert np.allclose(calibration_map.transform(grid), true_posterior(grid), atol=0.05)

    calibrated = calibration_map.transform(scores)
    after = reliability(y_true=y, probabilities=calibrated)
    assert after.expected_calibration_error is not None
    assert after.expected_calibration_error < 0.01


def test_platt_recovers_logistic_coefficients() -> None:
    rng = np.random.default_rng(12)
    slope, intercept = 6.0, -3.0
    scores = rng.random(20_000)
    y = (rng.random(20_000) < 1 / (1 + np.exp(-(slope * scores + intercept)))).astype(int)
    calibration_map = fit_calibration_map(y_true=y, scores=scores, method="platt")
    assert calibration_map.coef == pytest.approx(slope, abs=0.35)
    assert calibration_map.intercept == pytest.approx(intercept, abs=0.2)
    assert calibration_map.coef is not None and calibration_map.intercept is not None
    grid = np.linspace(0, 1, 11)
    expected = 1 / (1 + np.exp(-(calibration_map.coef * grid + calibration_map.intercept)))
    assert np.allclose(calibration_map.transform(grid), expected, atol=1e-15)


def test_platt_stays_finite_on_separable_data() -> None:
    scores = np.linspace(0, 1, 40)
    y = (scores > 0.5).astype(int)
    calibration_map = fit_calibration_map(y_true=y, scores=scores, method="platt", cv=4)
    assert calibration_map.coef is not None and math.isfinite(calibration_map.coef)
    assert calibration_map.coef > 0
    probabilities = calibration_map.transform(scores)
    assert np.all(np.diff(probabilities) > 0)
    assert probabilities[0] < 0.2 and probabilities[-1] > 0.8


@pytest.mark.parametrize("method", ["isotonic", "platt"])
def test_calibration_map_round_trips_through_json(method: str) -> None:
    y, scores = beta_judge(2_000, seed=9)
    calibration_map = fit_calibration_map(y_true=y, scores=scores, method=method, seed=3)  # type: ignore[arg-type]
    stored = json.loads(json.dumps(calibration_map.to_dict(), allow_nan=False))
    restored = CalibrationMap.from_dict(stored)
    assert restored == calibration_map
    grid = np.linspace(0, 1, 1001)
    assert np.array_equal(restored.transform(grid), calibration_map.transform(grid))
    assert np.array_equal(restored.transform(scores), calibration_map.transform(scores))
    assert set(stored) >= {"method", "format", "format_version", "heldout_brier_after"}
    assert restored.transform(0.5).shape == (1,)


def test_calibration_is_deterministic_for_a_seed() -> None:
    y, scores = beta_judge(1_000, seed=10)
    first = fit_calibration_map(y_true=y, scores=scores, seed=1)
    assert fit_calibration_map(y_true=y, scores=scores, seed=1) == first
    assert fit_calibration_map(y_true=y, scores=scores, seed=2).heldout_brier_after != (
        first.heldout_brier_after
    )


# --------------------------------------------------------------------------- properties


pairs_strategy = st.lists(
    st.tuples(st.sampled_from(CODES), st.sampled_from(CODES)), min_size=0, max_size=60
)


def _as_mappings(pairs: list[tuple[str, str]]) -> tuple[dict, dict]:
    reference = {(f"c{i}", i % 4): r for i, (r, _) in enumerate(pairs)}
    judged = {(f"c{i}", i % 4): j for i, (_, j) in enumerate(pairs)}
    return reference, judged


@settings(max_examples=200, deadline=None)
@given(pairs_strategy)
def test_kappa_is_symmetric_in_reference_and_judge(pairs: list[tuple[str, str]]) -> None:
    reference, judged = _as_mappings(pairs)
    forward = compare_to_reference(
        reference=reference, judged=judged, break_mapping=BREAK_MAPPING, n_resamples=0
    )
    backward = compare_to_reference(
        reference=judged, judged=reference, break_mapping=BREAK_MAPPING, n_resamples=0
    )
    for name in ("kappa", "break_kappa", "accuracy", "f1"):
        a, b = getattr(forward, name).value, getattr(backward, name).value
        assert (a is None) == (b is None)
        if a is not None:
            assert a == pytest.approx(b, abs=1e-12)
    assert forward.precision.value == backward.recall.value or (
        forward.precision.value == pytest.approx(backward.recall.value, abs=1e-12)
    )
    all_estimates_finite_or_none(forward)
    json_safe(forward)


@settings(max_examples=200, deadline=None)
@given(pairs_strategy, st.permutations(list(range(len(CODES)))))
def test_bijective_relabelling_leaves_agreement_unchanged(
    pairs: list[tuple[str, str]], permutation: list[int]
) -> None:
    renamed = {code: f"label-{permutation[i]}" for i, code in enumerate(CODES)}
    reference, judged = _as_mappings(pairs)
    original = compare_to_reference(
        reference=reference, judged=judged, break_mapping=BREAK_MAPPING, n_resamples=0
    )
    relabelled = compare_to_reference(
        reference={u: renamed[c] for u, c in reference.items()},
        judged={u: renamed[c] for u, c in judged.items()},
        break_mapping={renamed[c]: v for c, v in BREAK_MAPPING.items()},
        n_resamples=0,
    )
    for name, estimate in original.estimates().items():
        other = relabelled.estimates()[name].value
        if estimate.value is None:
            assert other is None
        else:
            assert other == pytest.approx(estimate.value, abs=1e-12)


@settings(max_examples=200, deadline=None)
@given(
    st.lists(
        st.tuples(st.integers(0, 1), st.floats(0, 1, allow_nan=False)), min_size=0, max_size=80
    ),
    st.lists(st.floats(0, 1, allow_nan=False), min_size=1, max_size=15),
)
def test_sweep_recall_is_non_increasing_in_threshold(
    data: list[tuple[int, float]], thresholds: list[float]
) -> None:
    y = [label for label, _ in data]
    scores = [score for _, score in data]
    sweep = threshold_sweep(y_true=y, scores=scores, thresholds=thresholds)
    assert [p.threshold for p in sweep.points] == sorted(set(thresholds))
    recalls = [p.recall for p in sweep.points]
    if sum(y) == 0:
        assert all(r is None for r in recalls)
    else:
        assert all(r is not None for r in recalls)
        assert all(b <= a for a, b in itertools.pairwise(recalls))  # type: ignore[operator]
    predicted = [p.tp + p.fp for p in sweep.points]
    assert all(b <= a for a, b in itertools.pairwise(predicted))
    for point in sweep.points:
        assert point.tp + point.fp + point.fn + point.tn == len(y)
        for metric in ("kappa", "f1", "precision", "recall", "accuracy"):
            value = getattr(point, metric)
            assert (value is None) == (metric in point.reasons)
    json_safe(sweep)


# --------------------------------------------------------------------------- degenerate input


def test_no_overlap_gives_none_with_reasons() -> None:
    report = compare_to_reference(
        reference={("a", 1): "in_role"},
        judged={("b", 1): "scope_break"},
        break_mapping=BREAK_MAPPING,
    )
    assert report.n_shared == 0
    for estimate in report.estimates().values():
        assert estimate.value is None and estimate.ci95 is None
        assert estimate.reason == "no unit has codes from both the reference and the judge"
    assert report.confusion.labels == ()
    assert report.reference_break_rate is None
    assert any("only 0 units" in w for w in report.warnings)
    data = json_safe(report)
    assert data["kappa"] == {
        "value": None,
        "n": 0,
        "ci95": None,
        "reason": "no unit has codes from both the reference and the judge",
        "warning": None,
        "method": None,
    }


def test_single_class_gives_none_with_reasons() -> None:
    units = [(f"c{i}", 2) for i in range(30)]
    report = compare_to_reference(
        reference=dict.fromkeys(units, "in_role"),
        judged=dict.fromkeys(units, "in_role"),
        break_mapping=BREAK_MAPPING,
    )
    assert report.accuracy.value == 1.0
    assert report.kappa.value is None and "chance agreement is 1" in str(report.kappa.reason)
    assert report.break_kappa.value is None
    assert report.precision.value is None and "no break" in str(report.precision.reason)
    assert report.recall.value is None and report.f1.value is None
    assert report.tnr.value == 1.0
    assert any("100%" in w and "no break" in w for w in report.warnings)
    json_safe(report)


def test_only_borderline_units_are_not_comparable_on_the_break_task() -> None:
    units = [(f"c{i}", 2) for i in range(25)]
    report = compare_to_reference(
        reference=dict.fromkeys(units, "borderline"),
        judged={u: ("borderline" if i % 2 else "scope_break") for i, u in enumerate(units)},
        break_mapping=BREAK_MAPPING,
    )
    assert report.n_compared == 25
    assert report.n_break_comparable == 0 and report.n_break_excluded == 25
    assert report.kappa.value == 0.0
    assert report.precision.value is None
    assert report.precision.reason == (
        "no unit is comparable on the break task (borderline or abstain on a side)"
    )
    assert report.disagreement_counts["not_comparable"] == 13  # even i: scope_break
    assert report.disagreement_counts["agree"] == 12


def test_ignore_codes_drops_units_and_counts_them() -> None:
    reference = {("a", 1): "cannot_judge", ("b", 1): "in_role", ("c", 1): "scope_break"}
    judged = {("a", 1): "in_role", ("b", 1): "cannot_judge", ("c", 1): "scope_break"}
    report = compare_to_reference(
        reference=reference,
        judged=judged,
        break_mapping=BREAK_MAPPING,
        ignore_codes={"cannot_judge"},
    )
    assert report.n_shared == 3 and report.n_ignored == 2 and report.n_compared == 1
    assert report.confusion.labels == ("scope_break",)
    assert report.accuracy.value == 1.0
    assert report.accuracy.ci95 is None
    assert report.accuracy.reason == (
        "no interval: only 1 unit behind this proportion (fewer than 10)"
    )

    one_binary = compare_to_reference(
        reference={("a", 1): "borderline", ("b", 1): "scope_break"},
        judged={("a", 1): "in_role", ("b", 1): "scope_break"},
        break_mapping=BREAK_MAPPING,
    )
    assert one_binary.n_compared == 2 and one_binary.n_break_comparable == 1
    # A proportion over fewer than 10 units gets no interval, and says why.
    assert one_binary.accuracy.ci95 is None
    assert one_binary.recall.value == 1.0 and one_binary.recall.ci95 is None
    assert one_binary.recall.reason == (
        "no interval: only 1 unit behind this proportion (fewer than 10)"
    )
    assert one_binary.break_kappa.reason is not None


def test_small_and_dominated_samples_are_warned_about() -> None:
    units = [(f"c{i}", 2) for i in range(40)]
    reference = {u: ("scope_break" if i < 2 else "in_role") for i, u in enumerate(units)}
    report = compare_to_reference(
        reference=reference, judged=dict(reference), break_mapping=BREAK_MAPPING
    )
    assert len(report.warnings) == 1
    assert report.warnings[0].startswith("95% of the reference units on the break task")
    small = compare_to_reference(
        reference=dict(list(reference.items())[:10]),
        judged=reference,
        break_mapping=BREAK_MAPPING,
    )
    assert small.warnings[0] == (
        "only 10 units are comparable on the break task; estimates from fewer than 20 units "
        "are unreliable"
    )


def test_bootstrap_is_seeded() -> None:
    reference, judged = random_labels(3, 90, agreement=0.5)
    first = compare_to_reference(
        reference=reference, judged=judged, break_mapping=BREAK_MAPPING, seed=4
    )
    again = compare_to_reference(
        reference=reference, judged=judged, break_mapping=BREAK_MAPPING, seed=4
    )
    other = compare_to_reference(
        reference=reference, judged=judged, break_mapping=BREAK_MAPPING, seed=5
    )
    assert first == again
    assert first.kappa.value == other.kappa.value
    assert first.kappa.ci95 != other.kappa.ci95
    off = compare_to_reference(
        reference=reference, judged=judged, break_mapping=BREAK_MAPPING, n_resamples=0
    )
    assert off.kappa.ci95 is None
    assert off.kappa.reason == "no confidence interval: n_resamples is 0"


def test_threshold_sweep_degenerate_inputs() -> None:
    empty = threshold_sweep(y_true=[], scores=[])
    assert empty.best_threshold is None and empty.best_reason == "no units"
    assert all(p.kappa is None and p.reasons["kappa"] == "no units" for p in empty.points)
    json_safe(empty)

    only_no_break = threshold_sweep(y_true=[0, 0, 0], scores=[0.2, 0.4, 0.9], min_minority_units=0)
    assert all(p.recall is None for p in only_no_break.points)
    assert only_no_break.best is not None and only_no_break.best.kappa == 0.0
    assert only_no_break.best_threshold == 0.5

    undefined = threshold_sweep(
        y_true=[0, 0], scores=[0.2, 0.3], thresholds=[0.5, 0.9], min_minority_units=0
    )
    assert undefined.best_threshold is None
    assert undefined.best_reason is not None and "single class" in undefined.best_reason
    json_safe(undefined)


def test_threshold_ties_go_to_the_threshold_closest_to_one_half() -> None:
    y = [0, 0, 1, 1]
    scores = [0.1, 0.1, 0.9, 0.9]
    sweep = threshold_sweep(
        y_true=y, scores=scores, thresholds=[0.2, 0.3, 0.6, 0.8], min_minority_units=0
    )
    assert [p.kappa for p in sweep.points] == [1.0] * 4
    assert sweep.best_threshold == 0.6
    assert "tied at 4 thresholds" in str(sweep.best_reason)
    symmetric = threshold_sweep(
        y_true=y, scores=scores, thresholds=[0.4, 0.6], min_minority_units=0
    )
    assert symmetric.best_threshold == 0.4


def test_no_best_threshold_from_fewer_than_ten_breaks() -> None:
    y = [1] * 9 + [0] * 50
    scores = [0.9] * 9 + [0.1] * 50
    sweep = threshold_sweep(y_true=y, scores=scores)
    assert sweep.best_threshold is None and sweep.best is None
    assert str(sweep.best_reason).startswith("too few breaks to judge: 9 units")
    enough = threshold_sweep(y_true=[1, *y], scores=[0.9, *scores])
    assert enough.best_threshold is not None


def test_reliability_of_no_units() -> None:
    report = reliability(y_true=[], probabilities=[])
    assert report.brier_score is None and report.reason == "no units"
    assert json_safe(report)["bins"] == []


def test_estimate_refuses_nan() -> None:
    with pytest.raises(ValueError, match="finite"):
        Estimate(float("nan"), 3, None, None)


# --------------------------------------------------------------------------- first break


def test_first_break_comparison_counts_and_offsets() -> None:
    reference = {"a": 4, "b": None, "c": 6, "d": None, "e": 2, "f": 8, "only-ref": 2}
    judged = {"a": 4, "b": None, "c": 8, "d": 6, "e": None, "f": 4, "only-judge": 1}
    report = first_break_comparison(reference=reference, judged=judged)
    assert report.n_conversations == 6
    assert report.n_only_reference == report.n_only_judged == 1
    assert report.n_exact == 2 and report.exact_match.value == pytest.approx(2 / 6)
    assert report.n_both_break == 3 and report.n_both_no_break == 1
    assert report.n_missed == 1 and report.n_false_alarm == 1
    assert report.n_judged_earlier == 1 and report.n_judged_later == 1
    offsets = [0, 2, -4]
    assert report.mean_offset.value == pytest.approx(np.mean(offsets))
    assert report.mean_absolute_offset.value == pytest.approx(2.0)
    half = sps.t.ppf(0.975, 2) * np.std(offsets, ddof=1) / math.sqrt(3)
    assert report.mean_offset.ci95 == pytest.approx(
        (np.mean(offsets) - half, np.mean(offsets) + half)
    )
    # Wilson interval for 2 of 6, as statsmodels computes it.

    # Six conversations are too few for an interval on a proportion.
    assert report.exact_match.ci95 is None
    assert report.exact_match.reason == (
        "no interval: only 6 units behind this proportion (fewer than 10)"
    )
    assert [m.conversation for m in report.mismatches] == ["c", "d", "e", "f"]
    json_safe(report)


def test_first_break_without_overlap_or_breaks() -> None:
    none_shared = first_break_comparison(reference={"a": 1}, judged={"b": 1})
    assert none_shared.exact_match.value is None and none_shared.exact_match.reason
    no_breaks = first_break_comparison(reference={"a": None}, judged={"a": None})
    assert no_breaks.exact_match.value == 1.0
    assert no_breaks.mean_offset.value is None and no_breaks.mean_offset.reason
    json_safe(no_breaks)
    with pytest.raises(
        ValueError, match=r"^judged\['a'\] must be an integer turn or None, got '3'$"
    ):
        first_break_comparison(reference={"a": 3}, judged={"a": "3"})  # type: ignore[dict-item]


# --------------------------------------------------------------------------- prompt versions


def test_compare_prompt_versions() -> None:
    reference = {("a", 2): "scope_break", ("a", 4): "in_role", ("b", 2): "tone_break"}
    reference.update({(f"x{i}", 2): "in_role" for i in range(5)})
    v1 = {
        ("a", 2): "in_role",
        ("a", 4): "in_role",
        ("b", 2): "tone_break",
        ("v1-only", 2): "in_role",
    }
    v2 = {("a", 2): "scope_break", ("a", 4): "scope_break", ("b", 2): "tone_break"}
    for i in range(5):
        v1[(f"x{i}", 2)] = "in_role"
        v2[(f"x{i}", 2)] = "in_role"
    comparison = compare_prompt_versions(
        verdicts={"v2": v2, "v1": v1},
        reference=reference,
        break_mapping=BREAK_MAPPING,
        n_resamples=100,
    )
    assert comparison.versions == ("v1", "v2")
    assert comparison.n_shared == 8
    assert [d.unit for d in comparison.differences] == [("a", 2), ("a", 4)]
    first = comparison.differences[0]
    assert (
        first.codes == {"v1": "in_role", "v2": "scope_break"} and first.reference == "scope_break"
    )
    v1_summary = comparison.per_version["v1"]
    assert v1_summary.n_units == 9 and v1_summary.n_shared == 8
    assert v1_summary.break_rate == pytest.approx(1 / 8)
    assert v1_summary.agreement is not None and v1_summary.agreement.n_compared == 8
    assert v1_summary.agreement.recall.value == pytest.approx(0.5)
    v2_agreement = comparison.per_version["v2"].agreement
    assert v2_agreement is not None and v2_agreement.recall.value == 1.0
    shared = sorted(set(v1) & set(v2))
    expected_kappa = cohen_kappa_score([v1[u] for u in shared], [v2[u] for u in shared])
    assert comparison.pairwise_kappa["v1|v2"].value == pytest.approx(expected_kappa, abs=1e-9)
    data = json_safe(comparison)
    assert data["differences"][0]["unit"] == ["a", 2]

    without_reference = compare_prompt_versions(verdicts={"v1": v1}, reference=None)
    assert without_reference.per_version["v1"].agreement is None
    assert without_reference.per_version["v1"].break_rate is None
    assert without_reference.pairwise_kappa == {} and without_reference.differences == ()
    with pytest.raises(ValueError, match=r"^break_mapping is required when a reference is given$"):
        compare_prompt_versions(verdicts={"v1": v1}, reference=reference)
    with pytest.raises(ValueError, match=r"^verdicts must name at least one prompt version$"):
        compare_prompt_versions(verdicts={}, reference=None)


def test_prompt_versions_resample_conversations_when_units_are_turns() -> None:
    # 40 conversations of 10 turns; each version gives every turn of a conversation the
    # same code, so 400 turns carry the information of 40 conversations.
    rng = np.random.default_rng(3)
    first = rng.choice(["in_role", "scope_break"], size=40)
    second = np.where(rng.random(40) < 0.75, first, rng.choice(["in_role", "tone_break"], 40))
    v1 = {(f"c{c:02d}", t): str(first[c]) for c in range(40) for t in range(1, 11)}
    v2 = {(f"c{c:02d}", t): str(second[c]) for c in range(40) for t in range(1, 11)}
    reference = dict(v1)
    options = {"reference": reference, "break_mapping": BREAK_MAPPING, "n_resamples": 1000}
    by_turn = compare_prompt_versions(verdicts={"v1": v1, "v2": v2}, **options)
    by_case = compare_prompt_versions(
        verdicts={"v1": v1, "v2": v2}, cluster_of=lambda unit: unit[0], **options
    )
    units, clusters = by_turn.pairwise_kappa["v1|v2"], by_case.pairwise_kappa["v1|v2"]
    shared = sorted(v1)
    expected = cohen_kappa_score([v1[u] for u in shared], [v2[u] for u in shared])
    assert units.value == clusters.value == pytest.approx(expected, abs=1e-12)
    assert units.method == "percentile bootstrap over units"
    assert clusters.method == "percentile bootstrap over conversations (cluster bootstrap)"
    assert units.ci95 is not None and clusters.ci95 is not None
    assert clusters.ci95[1] - clusters.ci95[0] > 2.5 * (units.ci95[1] - units.ci95[0])
    # The per-version agreement with the reference resamples the same way.
    agreement = by_case.per_version["v2"].agreement
    assert agreement is not None and agreement.kappa.method == clusters.method
    assert (
        agreement.kappa
        == compare_to_reference(
            reference=reference,
            judged=v2,
            break_mapping=BREAK_MAPPING,
            n_resamples=1000,
            cluster_of=lambda unit: unit[0],
        ).kappa
    )
    one_case = {unit: code for unit, code in v1.items() if unit[0] == "c00"}
    other = {unit: ("tone_break" if unit[1] % 2 else "in_role") for unit in one_case}
    alone = compare_prompt_versions(
        verdicts={"v1": one_case, "v2": other}, reference=None, cluster_of=lambda u: u[0]
    ).pairwise_kappa["v1|v2"]
    assert alone.ci95 is None and alone.method is None
    assert alone.reason == "no confidence interval from fewer than 2 conversations"


# --------------------------------------------------------------------------- disagreements


@pytest.mark.parametrize(
    ("reference_code", "judged_code", "expected"),
    [
        ("scope_break", "in_role", "missed_break"),
        ("in_role", "tone_break", "false_alarm"),
        ("scope_break", "tone_break", "wrong_break_kind"),
        ("scope_break", "scope_break", "agree"),
        ("borderline", "borderline", "agree"),
        ("borderline", "scope_break", "not_comparable"),
        ("in_role", "cannot_judge", "not_comparable"),
        (None, "in_role", "not_comparable"),
    ],
)
def test_classify_disagreement(reference_code: str | None, judged_code: str, expected: str) -> None:
    assert classify_disagreement(reference_code, judged_code, BREAK_MAPPING) == expected


def test_two_pass_codes_agree_on_the_break_question() -> None:
    mapping = {"in_role": "no_break", "polite_refusal": "no_break", "scope_break": "break"}
    assert classify_disagreement("in_role", "polite_refusal", mapping) == "agree"


# --------------------------------------------------------------------------- few-shot examples


def candidate(case_id: str, turn: int, label: str, **extra: object) -> dict:
    return {
        "case_id": case_id,
        "turn": turn,
        "label": label,
        "reply": f"reply {case_id}/{turn}",
        **extra,
    }


def test_few_shot_examples_are_deterministic_and_contrasting() -> None:
    candidates = [
        candidate("a", 2, "in_role", agreement=1.0),
        candidate("b", 2, "in_role", agreement=0.6),
        candidate("c", 2, "scope_break", agreement=1.0, why="does the homework"),
        candidate("d", 2, "scope_break", judge_label="in_role", agreement=0.7),
        candidate("e", 4, "borderline"),
        candidate("f", 2, "cannot_judge"),
        candidate("g", 2, "tone_break", context="angry user", rationale="mocks the user"),
        candidate("held-out", 2, "tone_break", judge_label="in_role"),
    ]
    chosen = few_shot_examples(
        candidates, verdict_by_code=ROLE_ADHERENCE_VERDICTS, exclude_units={("held-out", 2)}
    )
    assert [(e["label"], e["kind"], e["case_id"]) for e in chosen] == [
        ("scope_break", "fail", "d"),  # the judge missed it: preferred over a clearer one
        ("tone_break", "fail", "g"),
        ("borderline", "borderline", "e"),
        ("in_role", "pass", "a"),  # higher agreement
    ]
    assert chosen[1]["why"] == "mocks the user" and chosen[1]["context"] == "angry user"
    assert (
        few_shot_examples(
            list(reversed(candidates)),
            verdict_by_code=ROLE_ADHERENCE_VERDICTS,
            exclude_units={("held-out", 2)},
        )
        == chosen
    )
    json.dumps(chosen)

    two = few_shot_examples(
        candidates, verdict_by_code=ROLE_ADHERENCE_VERDICTS, per_label=2, kinds=("fail",)
    )
    assert [e["case_id"] for e in two] == ["d", "c", "held-out", "g"]


def test_few_shot_examples_prefer_unused_conversations() -> None:
    candidates = [
        candidate("a", 2, "scope_break", agreement=1.0),
        candidate("a", 4, "tone_break", agreement=1.0),
        candidate("b", 4, "tone_break", agreement=0.5),
    ]
    chosen = few_shot_examples(candidates, verdict_by_code=ROLE_ADHERENCE_VERDICTS, kinds=("fail",))
    assert [(e["case_id"], e["turn"]) for e in chosen] == [("a", 2), ("b", 4)]


def test_few_shot_examples_validation() -> None:
    with pytest.raises(ValueError, match=r"^candidate 0 lacks the field 'reply'$"):
        few_shot_examples(
            [{"case_id": "a", "turn": 1, "label": "in_role"}],
            verdict_by_code=ROLE_ADHERENCE_VERDICTS,
        )
    with pytest.raises(
        ValueError, match=r"^candidate 0 has label 'nope', which is not a code of the rubric$"
    ):
        few_shot_examples([candidate("a", 1, "nope")], verdict_by_code=ROLE_ADHERENCE_VERDICTS)
    with pytest.raises(ValueError, match=r"^candidate 1 repeats unit \('a', 1\)$"):
        few_shot_examples(
            [candidate("a", 1, "in_role")] * 2, verdict_by_code=ROLE_ADHERENCE_VERDICTS
        )
    with pytest.raises(ValueError, match=r"^per_label must be an integer >= 1, got 0$"):
        few_shot_examples([], verdict_by_code=ROLE_ADHERENCE_VERDICTS, per_label=0)
    with pytest.raises(ValueError, match=r"^kinds must be a subset of pass, fail, borderline"):
        few_shot_examples([], verdict_by_code=ROLE_ADHERENCE_VERDICTS, kinds=("abstain",))


# --------------------------------------------------------------------------- argument errors


def test_compare_to_reference_argument_errors() -> None:
    with pytest.raises(
        ValueError, match=r"^break_mapping\['x'\] must be 'break', 'no_break' or None, got 'fail'$"
    ):
        compare_to_reference(reference={}, judged={}, break_mapping={"x": "fail"})
    with pytest.raises(
        ValueError, match=r"^judged code 'nope' for unit \('a', 1\) is not in break_mapping$"
    ):
        compare_to_reference(
            reference={("a", 1): "in_role"}, judged={("a", 1): "nope"}, break_mapping=BREAK_MAPPING
        )
    with pytest.raises(ValueError, match=r"^n_resamples must be an integer >= 0, got -1$"):
        compare_to_reference(reference={}, judged={}, break_mapping=BREAK_MAPPING, n_resamples=-1)
    with pytest.raises(ValueError, match=r"^seed must be a non-negative integer, got 'x'$"):
        compare_to_reference(reference={}, judged={}, break_mapping=BREAK_MAPPING, seed="x")  # type: ignore[arg-type]


def test_array_argument_errors() -> None:
    with pytest.raises(
        ValueError, match=r"^y_true must contain only 0 \(no break\) and 1 \(break\), got 2$"
    ):
        threshold_sweep(y_true=[0, 2], scores=[0.1, 0.2])
    with pytest.raises(ValueError, match=r"^scores must be finite numbers in \[0, 1\]$"):
        threshold_sweep(y_true=[0, 1], scores=[0.1, 1.2])
    with pytest.raises(ValueError, match=r"^scores must be finite numbers in \[0, 1\]$"):
        threshold_sweep(y_true=[0, 1], scores=[0.1, float("nan")])
    with pytest.raises(
        ValueError, match=r"^y_true and scores must have the same length, got 2 and 1$"
    ):
        threshold_sweep(y_true=[0, 1], scores=[0.1])
    with pytest.raises(ValueError, match=r"^thresholds must not be empty$"):
        threshold_sweep(y_true=[0, 1], scores=[0.1, 0.2], thresholds=[])
    with pytest.raises(ValueError, match=r"^thresholds must be finite numbers in \[0, 1\]$"):
        threshold_sweep(y_true=[0, 1], scores=[0.1, 0.2], thresholds=[-0.1])
    with pytest.raises(ValueError, match=r"^n_bins must be an integer >= 1, got 0$"):
        reliability(y_true=[0], probabilities=[0.1], n_bins=0)
    with pytest.raises(ValueError, match=r"^y_true and probabilities must have the same length"):
        reliability(y_true=[0], probabilities=[0.1, 0.3])


def test_fit_calibration_map_argument_errors() -> None:
    scores = np.linspace(0, 1, 12)
    with pytest.raises(
        ValueError,
        match=r"^fit_calibration_map needs both classes in y_true, got 0 break and 12 no-break "
        r"units$",
    ):
        fit_calibration_map(y_true=[0] * 12, scores=scores)
    with pytest.raises(
        ValueError,
        match=r"^fit_calibration_map needs both classes in y_true, got 0 break and 0 no-break "
        r"units$",
    ):
        fit_calibration_map(y_true=[], scores=[])
    with pytest.raises(
        ValueError,
        match=(
            r"^fit_calibration_map needs at least 5 units of each class for cv=5, "
            "got 3 break and 9 no-break units$"
        ),
    ):
        fit_calibration_map(y_true=[1] * 3 + [0] * 9, scores=scores)
    with pytest.raises(ValueError, match=r"^method must be 'isotonic' or 'platt', got 'beta'$"):
        fit_calibration_map(y_true=[0, 1], scores=[0.1, 0.2], method="beta")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=r"^cv must be an integer >= 2, got 1$"):
        fit_calibration_map(y_true=[0, 1], scores=[0.1, 0.2], cv=1)


def test_calibration_map_from_dict_errors() -> None:
    with pytest.raises(ValueError, match=r"^calibration map must be a mapping, got list$"):
        CalibrationMap.from_dict([])  # type: ignore[arg-type]
    with pytest.raises(
        ValueError, match=r"^calibration map format_version 2 is not supported \(expected 1\)$"
    ):
        CalibrationMap.from_dict(
            {"format_version": 2, "method": "platt", "coef": 1, "intercept": 0}
        )
    with pytest.raises(
        ValueError, match=r"^calibration map method must be 'isotonic' or 'platt', got 'beta'$"
    ):
        CalibrationMap.from_dict({"method": "beta"})
    with pytest.raises(
        ValueError, match=r"^calibration map x_thresholds and y_thresholds must be non-empty"
    ):
        CalibrationMap.from_dict({"method": "isotonic", "x_thresholds": [0.1], "y_thresholds": []})
    with pytest.raises(
        ValueError, match=r"^calibration map x_thresholds must be non-decreasing finite numbers$"
    ):
        CalibrationMap.from_dict(
            {"method": "isotonic", "x_thresholds": [0.5, 0.1], "y_thresholds": [0, 1]}
        )
    with pytest.raises(
        ValueError,
        match=r"^calibration map y_thresholds must be non-decreasing numbers in \[0, 1\]$",
    ):
        CalibrationMap.from_dict(
            {"method": "isotonic", "x_thresholds": [0.1, 0.5], "y_thresholds": [0, 2]}
        )
    with pytest.raises(
        ValueError, match=r"^calibration map coef and intercept must be finite numbers$"
    ):
        CalibrationMap.from_dict({"method": "platt", "coef": "1", "intercept": 0})
    minimal = CalibrationMap.from_dict({"method": "platt", "coef": 2, "intercept": -1})
    assert minimal.heldout_brier_after is None
    assert minimal.transform([0.5])[0] == pytest.approx(1 / (1 + math.exp(0)))
    with pytest.raises(ValueError, match=r"^scores must be finite numbers in \[0, 1\]$"):
        minimal.transform([1.5])


def test_break_mapping_from_verdicts() -> None:
    assert BREAK_MAPPING["in_role"] == "no_break"
    assert BREAK_MAPPING["scope_break"] == "break"
    assert BREAK_MAPPING["borderline"] is None and BREAK_MAPPING["cannot_judge"] is None
    with pytest.raises(
        ValueError,
        match=r"^verdict of code 'x' must be pass, fail, borderline or abstain, got 'meh'$",
    ):
        break_mapping_from_verdicts({"x": "meh"})
