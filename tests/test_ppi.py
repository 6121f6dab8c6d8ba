"""PPI++ against the reference implementation ppi_py (Angelopoulos, Duchi & Zrnic)."""

from __future__ import annotations

import numpy as np
import ppi_py  # the reference implementation (test extra: ppi-python)
import pytest

from review_app.stats.ppi import ppi_mean


def judged_sample(seed: int, n: int, big_n: int, *, miss: float, false_alarm: float, rate: float):
    rng = np.random.default_rng(seed)
    truth = (rng.random(n + big_n) < rate).astype(float)
    flip = np.where(truth == 1, rng.random(n + big_n) < miss, rng.random(n + big_n) < false_alarm)
    judge = np.where(flip, 1 - truth, truth)
    return truth[:n], judge[:n], judge[n:]


@pytest.mark.parametrize("seed", range(12))
def test_matches_ppi_py_to_1e_6(seed: int) -> None:
    rng = np.random.default_rng(seed)
    n = int(rng.integers(20, 400))
    big_n = int(rng.integers(50, 5000))
    y, f, f_u = judged_sample(
        seed, n, big_n, miss=rng.uniform(0, 0.5), false_alarm=rng.uniform(0, 0.2),
        rate=rng.uniform(0.02, 0.4),
    )  # fmt: skip
    ours = ppi_mean(y, f, f_u)
    assert ours.value == pytest.approx(float(ppi_py.ppi_mean_pointestimate(y, f, f_u)[0]), abs=1e-6)
    low, high = ppi_py.ppi_mean_ci(y, f, f_u, alpha=0.05)
    assert ours.ci95[0] == pytest.approx(float(np.ravel(low)[0]), abs=1e-6)
    assert ours.ci95[1] == pytest.approx(float(np.ravel(high)[0]), abs=1e-6)
    assert 0.0 <= ours.lam <= 1.0


def test_fixed_lambda_matches_too_and_zero_is_the_classical_interval() -> None:
    y, f, f_u = judged_sample(3, 200, 3000, miss=0.2, false_alarm=0.05, rate=0.1)
    for lam in (0.0, 0.5, 1.0):
        ours = ppi_mean(y, f, f_u, lam=lam)
        low, high = ppi_py.ppi_mean_ci(y, f, f_u, alpha=0.05, lam=lam)
        assert ours.ci95 == pytest.approx((float(np.ravel(low)[0]), float(np.ravel(high)[0])))
    classical = ppi_mean(y, f, f_u, lam=0.0)
    assert classical.value == pytest.approx(y.mean())


def test_a_good_judge_narrows_the_interval_and_the_budget_is_consistent() -> None:
    y, f, f_u = judged_sample(4, 300, 20000, miss=0.05, false_alarm=0.01, rate=0.1)
    tuned = ppi_mean(y, f, f_u)
    classical = ppi_mean(y, f, f_u, lam=0.0)
    width = tuned.ci95[1] - tuned.ci95[0]
    assert width < classical.ci95[1] - classical.ci95[0]
    more = tuned.gold_units_to_halve_width()
    assert more is not None and more > 0
    # With that many gold units (same variances) the width is at most half.
    n = tuned.n_gold + more
    new_half = 1.959963984540054 * np.sqrt(
        tuned.imputed_variance / tuned.n_unlabeled + tuned.rectifier_variance / n
    )
    assert 2 * new_half <= width / 2 + 1e-12


LENGTHS = "y_gold and judge_gold must have the same length, got 2 and 1"
TOO_FEW = "ppi needs at least 2 gold units and 1 other judged unit, got 1 and 1"
NOT_FINITE = "y_gold must be a one-dimensional array of finite numbers"


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (([1.0, 0.0], [1.0], [0.0]), LENGTHS),
        (([1.0], [1.0], [0.0]), TOO_FEW),
        (([1.0, float("nan")], [1.0, 0.0], [0.0]), NOT_FINITE),
    ],
)
def test_invalid_input_raises_exact_messages(args: tuple, message: str) -> None:
    with pytest.raises(ValueError) as error:
        ppi_mean(*args)
    assert str(error.value) == message
