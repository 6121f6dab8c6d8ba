"""Tests of review_app.agreement against published values and reference libraries."""

from __future__ import annotations

import itertools
import json
import math
import random
from collections import Counter
from fractions import Fraction
from typing import Any

import krippendorff
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sklearn.metrics import cohen_kappa_score
from statsmodels.stats.inter_rater import aggregate_raters
from statsmodels.stats.inter_rater import fleiss_kappa as statsmodels_fleiss_kappa

from review_app.agreement.bootstrap import (
    _bootstrap_alphas,
    alpha_bootstrap_ci,
    intervals_of_alpha_and_pairs,
    kappa_pairs_bootstrap_ci,
)
from review_app.agreement.coefficients import (
    SMALL_SAMPLE_WARNING,
    Coefficient,
    cohen_kappa_pairs,
    fleiss_kappa,
    gwet_ac1,
    krippendorff_alpha,
    per_label_alpha,
    percent_agreement,
)
from review_app.agreement.conversations import (
    any_break_alpha,
    conversation_first_breaks,
    first_break_agreement,
)
from review_app.agreement.summary import agreement_summary, verdict_mapping_from_verdicts
from review_app.calibration.like_for_like import kappa_estimate
from review_app.stats.core import (
    CLUSTER_METHOD,
    UNIT_METHOD,
    break_mapping_from_verdicts,
    resample_weights,
)
from review_app.stats.table import RatingTable
from tests.builders import ROLE_ADHERENCE_VERDICTS

NAN = math.nan

BREAK_MAPPING = break_mapping_from_verdicts(ROLE_ADHERENCE_VERDICTS)
VERDICT_MAPPING = verdict_mapping_from_verdicts(ROLE_ADHERENCE_VERDICTS)

# Krippendorff (2011), "Computing Krippendorff's Alpha-Reliability", section C.1:
# 4 coders x 12 units with missing values; nominal alpha = 0.743.
KRIPPENDORFF_2011 = [
    [1, 2, 3, 3, 2, 1, 4, 1, 2, NAN, NAN, NAN],
    [1, 2, 3, 3, 2, 2, 4, 1, 2, 5, NAN, 3],
    [NAN, 3, 3, 3, 2, 3, 4, 2, 2, 5, 1, NAN],
    [1, 2, 3, 3, 2, 4, 4, 1, 2, 5, 1, NAN],
]

# Fleiss (1971), Table 1: 30 patients, 6 psychiatrists each, 5 diagnoses
# (1 depression, 2 personality disorder, 3 schizophrenia, 4 neurosis, 5 other).
FLEISS_1971 = [
    [4, 4, 4, 4, 4, 4],
    [2, 2, 2, 5, 5, 5],
    [2, 3, 3, 3, 3, 5],
    [5, 5, 5, 5, 5, 5],
    [2, 2, 2, 4, 4, 4],
    [1, 1, 3, 3, 3, 3],
    [3, 3, 3, 3, 5, 5],
    [1, 1, 3, 3, 3, 4],
    [1, 1, 4, 4, 4, 4],
    [5, 5, 5, 5, 5, 5],
    [1, 4, 4, 4, 4, 4],
    [1, 2, 4, 4, 4, 4],
    [2, 2, 2, 3, 3, 3],
    [1, 4, 4, 4, 4, 4],
    [2, 2, 4, 4, 4, 5],
    [3, 3, 3, 3, 3, 5],
    [1, 1, 1, 4, 5, 5],
    [1, 1, 1, 1, 1, 2],
    [2, 2, 4, 4, 4, 4],
    [1, 3, 3, 5, 5, 5],
    [5, 5, 5, 5, 5, 5],
    [2, 4, 4, 4, 4, 4],
    [2, 2, 4, 5, 5, 5],
    [1, 1, 4, 4, 4, 4],
    [1, 4, 4, 4, 4, 5],
    [2, 2, 2, 2, 2, 4],
    [1, 1, 1, 1, 5, 5],
    [2, 2, 4, 4, 4, 4],
    [1, 3, 3, 3, 3, 3],
    [5, 5, 5, 5, 5, 5],
]


def table_from_matrix(matrix: Any, raters: list[str] | None = None) -> RatingTable:
    """Raters x units matrix (NaN = missing) -> table with units 0..n-1."""
    data = np.asarray(matrix, dtype=float)
    names = raters or [f"coder-{i}" for i in range(data.shape[0])]
    records = [
        (unit, names[rater], int(data[rater, unit]))
        for rater in range(data.shape[0])
        for unit in range(data.shape[1])
        if not math.isnan(data[rater, unit])
    ]
    return RatingTable.from_records(records)


def random_matrix(
    rng: np.random.Generator, n_raters: int, n_units: int, n_values: int, missing: float
) -> np.ndarray:
    truth = rng.integers(0, n_values, size=n_units)
    data = np.where(
        rng.random((n_raters, n_units)) < 0.6,
        truth,
        rng.integers(0, n_values, size=(n_raters, n_units)),
    ).astype(float)
    data[rng.random((n_raters, n_units)) < missing] = NAN
    return data


# --------------------------------------------------------------------------- RatingTable


def test_table_encodes_records_with_sorted_categories() -> None:
    table = RatingTable.from_records(
        [
            (("c2", 1), "zoe", "scope_break"),
            (("c1", 3), "ana", "in_role"),
            (("c1", 3), "zoe", "in_role"),
            (("c2", 1), "ana", None),  # a missing value is skipped
        ]
    )
    assert table.units == (("c1", 3), ("c2", 1))
    assert table.raters == ("ana", "zoe")
    assert table.values == ("in_role", "scope_break")
    assert (table.n_units, table.n_raters, table.n_ratings) == (2, 2, 3)
    assert table.pairable_units == (("c1", 3),)
    assert table.n_pairable_units == 1
    decoded = {
        (table.units[u], table.raters[r], table.values[v])
        for u, r, v in zip(table.unit_idx, table.rater_idx, table.value_idx, strict=True)
    }
    assert decoded == {
        (("c2", 1), "zoe", "scope_break"),
        (("c1", 3), "ana", "in_role"),
        (("c1", 3), "zoe", "in_role"),
    }
    with pytest.raises(ValueError):
        table.unit_idx[0] = 1  # the arrays are read-only


def test_from_arrays_matches_from_records() -> None:
    records = [((f"c{u % 3}", u), f"r{r}", f"v{(u * r) % 4}") for u in range(20) for r in range(3)]
    by_records = RatingTable.from_records(records)
    units, raters, values = zip(*records, strict=True)
    by_arrays = RatingTable.from_arrays(units=list(units), raters=raters, values=np.array(values))
    for name in ("unit_idx", "rater_idx", "value_idx"):
        assert np.array_equal(getattr(by_records, name), getattr(by_arrays, name))
    assert by_records.units == by_arrays.units
    assert by_records.raters == by_arrays.raters
    assert by_records.values == by_arrays.values


@pytest.mark.parametrize("spread", [1, 10**12])
def test_integer_columns_are_encoded_sorted(spread: int) -> None:
    rng = np.random.default_rng(0)
    units = rng.integers(-50, 50, size=400) * spread
    raters = rng.integers(0, 3, size=400)
    keys = {(int(u), int(r)) for u, r in zip(units, raters, strict=True)}
    unique_units = np.array([u for u, _ in sorted(keys)])
    unique_raters = np.array([r for _, r in sorted(keys)])
    values = rng.integers(0, 2, size=len(unique_units)).astype(bool)
    table = RatingTable.from_arrays(units=unique_units, raters=unique_raters, values=values)
    assert list(table.units) == sorted(set(unique_units.tolist()))
    assert table.raters == (0, 1, 2)
    assert table.values == (False, True)
    assert all(type(unit) is int for unit in table.units)
    decoded = np.array(table.units)[table.unit_idx]
    assert np.array_equal(decoded, unique_units)
    assert np.array_equal(np.array(table.values)[table.value_idx], values)


def test_duplicate_rating_is_an_error_with_exact_message() -> None:
    with pytest.raises(ValueError) as raised:
        RatingTable.from_records(
            [(("c1", 2), "ana", "in_role"), (("c1", 3), "ana", "in_role"), (("c1", 2), "ana", "x")]
        )
    assert str(raised.value) == "rater 'ana' rated unit ('c1', 2) more than once"
    # Many units and raters but few ratings: the sparse check (by sorting) finds it too.
    sparse = [(unit, f"r{unit}", "x") for unit in range(1500)]
    RatingTable.from_records(sparse)
    with pytest.raises(ValueError) as raised:
        RatingTable.from_records([*sparse, (700, "r700", "y")])
    assert str(raised.value) == "rater 'r700' rated unit 700 more than once"


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        (
            {"units": [1, 2], "raters": ["a"], "values": ["x", "y"]},
            "units, raters and values must have the same length, got 2, 1 and 2",
        ),
        (
            {"units": [1, None], "raters": ["a", "a"], "values": ["x", "y"]},
            "units must not contain missing entries (None or NaN)",
        ),
        (
            {"units": [1, 2], "raters": ["a", NAN], "values": ["x", "y"]},
            "raters must not contain missing entries (None or NaN)",
        ),
        (
            {"units": np.zeros((2, 2)), "raters": ["a", "b"], "values": ["x", "y"]},
            "units must be one-dimensional, got an array of shape (2, 2)",
        ),
    ],
)
def test_from_arrays_rejects_bad_input(arguments: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError) as raised:
        RatingTable.from_arrays(**arguments)
    assert str(raised.value) == message


def test_from_records_rejects_a_non_triple() -> None:
    with pytest.raises(ValueError) as raised:
        RatingTable.from_records([(1, "a", "x"), (2, "b")])  # type: ignore[list-item]
    assert str(raised.value) == "record 1 is not a (unit, rater, value) triple: (2, 'b')"


def test_collapse_recodes_and_drops() -> None:
    table = RatingTable.from_records(
        [
            (1, "ana", "scope_break"),
            (1, "ben", "tone_break"),
            (2, "ana", "in_role"),
            (2, "ben", "cannot_judge"),
            (3, "ben", "borderline"),
        ]
    )
    collapsed = table.collapse(BREAK_MAPPING)
    assert collapsed.values == ("break", "no_break")
    assert collapsed.units == (1, 2)  # unit 3 had only a borderline rating
    assert collapsed.n_ratings == 3
    assert krippendorff_alpha(table.collapse({**BREAK_MAPPING, "in_role": "break"})).reason
    with pytest.raises(ValueError) as raised:
        table.collapse({"scope_break": "break"})
    assert str(raised.value) == "collapse mapping has no entry for value 'borderline'"
    nothing = table.collapse(dict.fromkeys(table.values))
    assert (nothing.n_units, nothing.n_raters, nothing.n_ratings, nothing.values) == (0, 0, 0, ())


def test_restrict_units_keeps_only_those_units() -> None:
    table = table_from_matrix(KRIPPENDORFF_2011)
    restricted = table.restrict_units([0, 1, 2, 99])
    assert restricted.units == (0, 1, 2)
    assert restricted.n_ratings == 3 + 4 + 4
    expected = krippendorff.alpha(
        reliability_data=np.asarray(KRIPPENDORFF_2011)[:, :3], level_of_measurement="nominal"
    )
    assert krippendorff_alpha(restricted).value == pytest.approx(expected, abs=1e-12)


def test_reliability_data_round_trip() -> None:
    table = table_from_matrix(KRIPPENDORFF_2011)
    matrix = table.to_reliability_data()
    assert matrix.shape == (4, 12)
    decoded = np.where(
        np.isnan(matrix), NAN, np.take(np.array(table.values), np.nan_to_num(matrix).astype(int))
    )
    assert np.array_equal(decoded, np.asarray(KRIPPENDORFF_2011), equal_nan=True)


def test_empty_table() -> None:
    table = RatingTable.from_records([])
    assert (table.n_units, table.n_raters, table.n_ratings) == (0, 0, 0)
    for coefficient in (
        percent_agreement(table),
        krippendorff_alpha(table),
        alpha_bootstrap_ci(table, n_resamples=10),
        fleiss_kappa(table),
        gwet_ac1(table),
    ):
        assert coefficient.value is None
        assert coefficient.reason == "there are no ratings"
    assert cohen_kappa_pairs(table) == {}
    assert per_label_alpha(table) == {}


# --------------------------------------------------------------------------- Krippendorff's alpha


def test_alpha_reproduces_krippendorff_2011_nominal_example() -> None:
    table = table_from_matrix(KRIPPENDORFF_2011)
    alpha = krippendorff_alpha(table)
    assert alpha.value is not None
    assert round(alpha.value, 3) == 0.743
    # By hand from the paper's coincidence matrix: diagonal (7, 10, 8, 4, 3), so
    # sum o_cc = 32; n_c = (9, 13, 10, 5, 3), n = 40:
    # alpha = 1 - (n - 1)(n - sum o_cc) / (n^2 - sum n_c^2) = 1 - 39 * 8 / (1600 - 384).
    assert alpha.value == pytest.approx(1 - 39 * 8 / (1600 - 384), abs=1e-12)
    reference = krippendorff.alpha(
        reliability_data=KRIPPENDORFF_2011, level_of_measurement="nominal"
    )
    assert alpha.value == pytest.approx(reference, abs=1e-9)
    assert alpha.n_units == 11  # unit 11 has a single rating
    assert alpha.warning == SMALL_SAMPLE_WARNING


def test_alpha_matches_krippendorff_docstring_example() -> None:
    data = [
        [NAN, NAN, NAN, NAN, NAN, 3, 4, 1, 2, 1, 1, 3, 3, NAN, 3],
        [1, NAN, 2, 1, 3, 3, 4, 3, NAN, NAN, NAN, NAN, NAN, NAN, NAN],
        [NAN, NAN, 2, 1, 3, 4, 4, NAN, 2, 1, 1, 3, 3, NAN, 4],
    ]
    alpha = krippendorff_alpha(table_from_matrix(data))
    assert alpha.value == pytest.approx(0.691358, abs=1e-6)


@pytest.mark.parametrize("seed", range(12))
def test_alpha_matches_krippendorff_package_on_random_data(seed: int) -> None:
    rng = np.random.default_rng(seed)
    data = random_matrix(
        rng,
        n_raters=int(rng.integers(2, 7)),
        n_units=int(rng.integers(5, 300)),
        n_values=int(rng.integers(2, 8)),
        missing=float(rng.uniform(0, 0.6)),
    )
    table = table_from_matrix(data)
    reference = krippendorff.alpha(reliability_data=data, level_of_measurement="nominal")
    assert krippendorff_alpha(table).value == pytest.approx(reference, abs=1e-9)


def test_alpha_is_one_for_perfect_agreement() -> None:
    records = [
        (unit, rater, "in_role" if unit % 3 else "tone_break")
        for unit in range(10)
        for rater in "abc"
    ]
    records.append((10, "a", "scope_break"))  # an unpaired rating changes nothing
    table = RatingTable.from_records(records)
    assert krippendorff_alpha(table).value == 1.0
    assert percent_agreement(table).value == 1.0
    assert fleiss_kappa(table).value == pytest.approx(1.0)
    assert gwet_ac1(table).value == pytest.approx(1.0)
    assert all(
        coefficient.value == pytest.approx(1.0) for coefficient in cohen_kappa_pairs(table).values()
    )


def test_alpha_is_undefined_for_a_single_category() -> None:
    table = RatingTable.from_records(
        [(unit, rater, "in_role") for unit in range(40) for rater in ("ana", "ben")]
        + [(99, "ana", "tone_break")]  # a second value, but not in any pairable unit
    )
    alpha = krippendorff_alpha(table)
    assert alpha.value is None
    assert alpha.n_units == 40
    assert alpha.reason == (
        "only one category ('in_role') occurs in the pairable units, "
        "so chance agreement is perfect and the coefficient is undefined"
    )
    assert alpha_bootstrap_ci(table).value is None


def test_alpha_is_undefined_without_pairable_units_and_with_one_rater() -> None:
    no_pairs = RatingTable.from_records([(1, "ana", "x"), (2, "ben", "y"), (3, "ana", "y")])
    alpha = krippendorff_alpha(no_pairs)
    assert (alpha.value, alpha.n_units) == (None, 0)
    assert alpha.reason == "no unit was rated by two or more raters"
    one_rater = RatingTable.from_records([(1, "ana", "x"), (2, "ana", "y")])
    assert krippendorff_alpha(one_rater).reason == (
        "only one rater has rated anything, so no two ratings can be compared"
    )
    assert percent_agreement(one_rater).value is None
    assert fleiss_kappa(one_rater).value is None
    assert gwet_ac1(one_rater).value is None
    assert cohen_kappa_pairs(one_rater) == {}


# --------------------------------------------------------------------------- bootstrap


def typical_table(n_units: int = 300, seed: int = 3) -> RatingTable:
    rng = np.random.default_rng(seed)
    return table_from_matrix(
        random_matrix(rng, n_raters=4, n_units=n_units, n_values=4, missing=0.25)
    )


def test_bootstrap_is_reproducible_and_contains_the_point_estimate() -> None:
    table = typical_table()
    first = alpha_bootstrap_ci(table, n_resamples=500, seed=11)
    again = alpha_bootstrap_ci(table, n_resamples=500, seed=11)
    other = alpha_bootstrap_ci(table, n_resamples=500, seed=12)
    assert first == again
    assert first.ci95 != other.ci95
    assert first.value == krippendorff_alpha(table).value
    assert first.ci95 is not None and first.value is not None
    low, high = first.ci95
    assert low < first.value < high
    assert high - low < 0.3
    assert first.warning is None
    wider = alpha_bootstrap_ci(table, n_resamples=500, seed=11, confidence=0.99)
    assert wider.ci95 is not None
    assert wider.ci95[0] <= low and wider.ci95[1] >= high


def test_bootstrap_matches_a_plain_loop_over_resampled_units() -> None:
    table = typical_table(n_units=80)
    counts = table.value_counts()
    pairable = counts[counts.sum(axis=1) >= 2]
    rng = np.random.default_rng(5)
    plain = []
    for _ in range(300):
        drawn = pairable[rng.integers(0, len(pairable), size=len(pairable))]
        plain.append(krippendorff.alpha(value_counts=drawn, level_of_measurement="nominal"))
    fast = _bootstrap_alphas(pairable, pairable.sum(axis=1), n_resamples=300, seed=5, draw="units")
    assert np.allclose(fast, plain, atol=1e-12)


def test_bootstrap_profile_and_unit_draws_agree_in_distribution() -> None:
    table = typical_table(n_units=2000, seed=8)
    counts = table.value_counts()
    pairable = counts[counts.sum(axis=1) >= 2]
    by_units = _bootstrap_alphas(
        pairable, pairable.sum(axis=1), n_resamples=2000, seed=1, draw="units"
    )
    by_profiles = _bootstrap_alphas(
        pairable, pairable.sum(axis=1), n_resamples=2000, seed=1, draw="profiles"
    )
    assert abs(by_units.mean() - by_profiles.mean()) < 0.003
    assert by_units.std() == pytest.approx(by_profiles.std(), rel=0.1)


def test_bootstrap_rejects_bad_options() -> None:
    table = typical_table(n_units=20)
    with pytest.raises(ValueError, match="n_resamples must be a positive integer, got 0"):
        alpha_bootstrap_ci(table, n_resamples=0)
    with pytest.raises(ValueError, match=r"confidence must be strictly between 0 and 1, got 1\.5"):
        alpha_bootstrap_ci(table, confidence=1.5)


def test_bootstrap_leaves_out_single_value_resamples() -> None:
    # Two pairable units with different values: every resample drawing one unit twice has D_e = 0.
    table = RatingTable.from_records([(1, "a", "x"), (1, "b", "x"), (2, "a", "y"), (2, "b", "y")])
    result = alpha_bootstrap_ci(table, n_resamples=200, seed=0)
    assert result.value == 1.0
    assert result.ci95 == (1.0, 1.0)
    assert result.warning is not None and "bootstrap resamples had a single value" in result.warning


# --------------------------------------------------------------------------- Fleiss


def test_fleiss_reproduces_fleiss_1971() -> None:
    data = np.asarray(FLEISS_1971)
    kappa = fleiss_kappa(table_from_matrix(data.T))
    assert kappa.value is not None
    assert round(kappa.value, 3) == 0.430
    assert kappa.value == pytest.approx(0.4302445, abs=1e-7)  # R irr::kappam.fleiss
    counts, _ = aggregate_raters(data)
    assert kappa.value == pytest.approx(statsmodels_fleiss_kappa(counts), abs=1e-9)
    assert kappa.n_units == 30


@pytest.mark.parametrize("seed", range(8))
def test_fleiss_matches_statsmodels_on_complete_units(seed: int) -> None:
    rng = np.random.default_rng(seed)
    n_raters = int(rng.integers(2, 8))
    data = random_matrix(
        rng, n_raters=n_raters, n_units=120, n_values=int(rng.integers(2, 6)), missing=0.0
    )
    data[:, :20] = np.where(rng.random((n_raters, 20)) < 0.5, NAN, data[:, :20])
    data[0, 20:30] = NAN  # incomplete units are left out
    complete = data[:, ~np.isnan(data).any(axis=0)]
    counts, _ = aggregate_raters(complete.T.astype(int))
    kappa = fleiss_kappa(table_from_matrix(data))
    assert kappa.n_units == complete.shape[1]
    assert kappa.value == pytest.approx(statsmodels_fleiss_kappa(counts), abs=1e-9)


def test_fleiss_undefined_cases() -> None:
    no_complete = RatingTable.from_records(
        [(1, "a", "x"), (1, "b", "y"), (2, "c", "x"), (2, "a", "x")]
    )
    kappa = fleiss_kappa(no_complete)
    assert (kappa.value, kappa.n_units) == (None, 0)
    assert kappa.reason == "no unit was rated by all 3 raters"
    one_category = RatingTable.from_records([(1, "a", "x"), (1, "b", "x"), (2, "a", "y")])
    assert fleiss_kappa(one_category).value is None
    assert "only one category ('x')" in str(fleiss_kappa(one_category).reason)


# --------------------------------------------------------------------------- Gwet's AC1


GWET_EXAMPLE = [
    ("u1", "r1", "a"), ("u1", "r2", "a"), ("u1", "r3", "a"),
    ("u2", "r1", "a"), ("u2", "r2", "b"),
    ("u3", "r1", "b"), ("u3", "r2", "b"), ("u3", "r3", "c"),
    ("u4", "r1", "c"),
    ("u5", "r1", "a"), ("u5", "r2", "a"), ("u5", "r3", "b"),
]  # fmt: skip


def gwet_by_hand(records: list[tuple[str, str, str]], n_categories: int) -> Fraction:
    """Gwet (2014) AC1 with missing ratings, written out with exact fractions."""
    by_unit: dict[str, Counter[str]] = {}
    for unit, _rater, value in records:
        by_unit.setdefault(unit, Counter())[value] += 1
    pairable = [counts for counts in by_unit.values() if sum(counts.values()) >= 2]
    p_a = sum(
        Fraction(sum(k * (k - 1) for k in c.values()), sum(c.values()) * (sum(c.values()) - 1))
        for c in pairable
    ) / len(pairable)
    categories = {value for _, _, value in records}
    pi = {
        k: sum(Fraction(c[k], sum(c.values())) for c in by_unit.values()) / len(by_unit)
        for k in categories
    }
    p_e = sum(p * (1 - p) for p in pi.values()) / (n_categories - 1)
    return Fraction((p_a - p_e) / (1 - p_e))


def test_gwet_hand_worked_example() -> None:
    # p_a = (1 + 0 + 1/3 + 1/3) / 4 = 5/12 (u4 has one rating and is not pairable);
    # pi = (13/30, 9/30, 8/30) over all 5 units; p_e = (1/2) * 586/900 = 293/900;
    # AC1 = (5/12 - 293/900) / (1 - 293/900) = 82/607.
    assert gwet_by_hand(GWET_EXAMPLE, 3) == Fraction(82, 607)
    ac1 = gwet_ac1(RatingTable.from_records(GWET_EXAMPLE))
    assert ac1.value == pytest.approx(82 / 607, abs=1e-12)
    assert ac1.n_units == 4
    wider = gwet_ac1(RatingTable.from_records(GWET_EXAMPLE), categories=["a", "b", "c", "d"])
    assert wider.value == pytest.approx(float(gwet_by_hand(GWET_EXAMPLE, 4)), abs=1e-12)
    with pytest.raises(ValueError, match="categories does not include the value 'c'"):
        gwet_ac1(RatingTable.from_records(GWET_EXAMPLE), categories=["a", "b"])


@pytest.mark.parametrize("seed", range(6))
def test_gwet_matches_two_rater_formula(seed: int) -> None:
    rng = np.random.default_rng(seed)
    n_values = int(rng.integers(2, 6))
    data = random_matrix(rng, n_raters=2, n_units=60, n_values=n_values, missing=0.0)
    table = table_from_matrix(data)
    q = table.n_values
    contingency = np.zeros((q, q))
    for first, second in zip(
        table.to_reliability_data()[0], table.to_reliability_data()[1], strict=True
    ):
        contingency[int(first), int(second)] += 1
    contingency /= contingency.sum()
    p_a = np.trace(contingency)
    pi = (contingency.sum(axis=1) + contingency.sum(axis=0)) / 2
    p_e = (pi * (1 - pi)).sum() / (q - 1)
    assert gwet_ac1(table).value == pytest.approx((p_a - p_e) / (1 - p_e), abs=1e-12)


@settings(max_examples=60, deadline=None)
@given(
    st.dictionaries(
        keys=st.tuples(st.integers(0, 8), st.sampled_from(["r1", "r2", "r3", "r4"])),
        values=st.sampled_from(["a", "b", "c"]),
        max_size=30,
    )
)
def test_gwet_matches_hand_formula_on_random_data(ratings: dict[tuple[int, str], str]) -> None:
    records = [(f"u{unit}", rater, value) for (unit, rater), value in ratings.items()]
    ac1 = gwet_ac1(RatingTable.from_records(records))
    n_categories = len({value for _, _, value in records})
    pairable = RatingTable.from_records(records).n_pairable_units if records else 0
    if not pairable or n_categories < 2:
        assert ac1.value is None and ac1.reason
    else:
        assert ac1.value == pytest.approx(float(gwet_by_hand(records, n_categories)), abs=1e-12)


def test_gwet_single_category_is_undefined() -> None:
    table = RatingTable.from_records([(1, "a", "x"), (1, "b", "x")])
    assert gwet_ac1(table).value is None
    assert gwet_ac1(table, categories=["x", "y"]).value == 1.0


# --------------------------------------------------------------------------- Cohen's kappa


def test_cohen_textbook_two_by_two_example() -> None:
    # 50 grant proposals read by A and B: yes/yes 20, yes/no 5, no/yes 10, no/no 15.
    # p_o = 0.7, p_e = 0.5 * 0.6 + 0.5 * 0.4 = 0.5, kappa = 0.4.
    cells = [("yes", "yes", 20), ("yes", "no", 5), ("no", "yes", 10), ("no", "no", 15)]
    records = []
    unit = 0
    for first, second, count in cells:
        for _ in range(count):
            records += [(unit, "A", first), (unit, "B", second)]
            unit += 1
    pairs = cohen_kappa_pairs(RatingTable.from_records(records))
    assert list(pairs) == ["A|B"]
    assert pairs["A|B"].value == pytest.approx(0.4, abs=1e-12)
    assert pairs["A|B"].n_units == 50
    assert pairs["A|B"].warning is None


@pytest.mark.parametrize("seed", range(8))
def test_cohen_matches_sklearn_on_shared_units(seed: int) -> None:
    rng = np.random.default_rng(seed)
    names = ["zoe", "ana", "Bob", "carl"][: int(rng.integers(2, 5))]
    data = random_matrix(
        rng, n_raters=len(names), n_units=150, n_values=int(rng.integers(2, 6)), missing=0.3
    )
    pairs = cohen_kappa_pairs(table_from_matrix(data, raters=names))
    assert len(pairs) == len(names) * (len(names) - 1) // 2
    for i, j in itertools.combinations(range(len(names)), 2):
        shared = ~np.isnan(data[i]) & ~np.isnan(data[j])
        expected = cohen_kappa_score(data[i][shared], data[j][shared])
        key = "|".join(sorted((names[i], names[j])))
        assert pairs[key].value == pytest.approx(expected, abs=1e-9)
        assert pairs[key].n_units == int(shared.sum())


def test_cohen_undefined_cases() -> None:
    table = RatingTable.from_records(
        [
            (1, "ana", "x"),
            (2, "ben", "x"),
            (3, "cy", "x"),
            (3, "dee", "x"),
            (4, "cy", "x"),
            (4, "dee", "x"),
        ]
    )
    pairs = cohen_kappa_pairs(table)
    assert pairs["ana|ben"].value is None
    assert pairs["ana|ben"].reason == "raters 'ana' and 'ben' share no rated unit"
    assert pairs["cy|dee"].value is None
    assert pairs["cy|dee"].n_units == 2
    assert pairs["cy|dee"].reason == (
        "raters 'cy' and 'dee' both gave only 'x' on their shared units, "
        "so chance agreement is perfect and kappa is undefined"
    )


# --------------------------------------------------------------------------- percent, per label


def test_percent_agreement_definition() -> None:
    # Per pairable unit: u1 3 of 3 pairs agree, u2 0 of 1, u3 1 of 3, u5 1 of 3.
    result = percent_agreement(RatingTable.from_records(GWET_EXAMPLE))
    assert result.value == pytest.approx((1 + 0 + 1 / 3 + 1 / 3) / 4, abs=1e-12)
    assert result.n_units == 4


def test_per_label_alpha_is_one_vs_rest_alpha() -> None:
    data = np.asarray(KRIPPENDORFF_2011)
    table = table_from_matrix(data)
    per_label = per_label_alpha(table)
    assert list(per_label) == [1, 2, 3, 4, 5]
    for code, coefficient in per_label.items():
        binary = np.where(np.isnan(data), NAN, (data == code).astype(float))
        expected = krippendorff.alpha(reliability_data=binary, level_of_measurement="nominal")
        assert coefficient.value == pytest.approx(expected, abs=1e-9)
        assert coefficient.n_units == 11


def test_per_label_alpha_undefined_cases() -> None:
    table = RatingTable.from_records(
        [(1, "a", "x"), (1, "b", "x"), (2, "a", "x"), (2, "b", "x"), (3, "a", "y")]
    )
    per_label = per_label_alpha(table)
    assert (
        per_label["x"].reason == "every rating of the pairable units is 'x', so alpha is undefined"
    )
    assert per_label["y"].reason == "'y' is never used in a unit rated by two or more raters"


# --------------------------------------------------------------------------- properties


ratings_strategy = st.dictionaries(
    keys=st.tuples(
        st.tuples(st.sampled_from(["case-a", "case-b", "case-c"]), st.integers(1, 5)),
        st.sampled_from(["ana", "ben", "cy", "dee"]),
    ),
    values=st.sampled_from([*sorted(ROLE_ADHERENCE_VERDICTS)[:5], "borderline", "cannot_judge"]),
    max_size=45,
)


def figures(table: RatingTable) -> dict[str, Coefficient]:
    result = {
        "percent": percent_agreement(table),
        "alpha": krippendorff_alpha(table),
        "fleiss": fleiss_kappa(table),
        "gwet": gwet_ac1(table),
    }
    result.update({f"label {value}": c for value, c in per_label_alpha(table).items()})
    result.update({f"cohen {pair}": c for pair, c in cohen_kappa_pairs(table).items()})
    return result


def assert_same_figures(first: dict[str, Coefficient], second: dict[str, Coefficient]) -> None:
    assert first.keys() == second.keys()
    for name in first:
        a, b = first[name], second[name]
        assert (a.value is None) == (b.value is None), name
        if a.value is not None and b.value is not None:
            assert a.value == pytest.approx(b.value, abs=1e-12), name
        assert a.n_units == b.n_units, name


def records_of(ratings: dict[tuple[Any, str], str]) -> list[tuple[Any, str, str]]:
    return [(unit, rater, value) for (unit, rater), value in ratings.items()]


@settings(max_examples=80, deadline=None)
@given(ratings_strategy, st.randoms(use_true_random=False))
def test_invariant_to_record_order_and_unit_names(
    ratings: dict[tuple[Any, str], str], rng: random.Random
) -> None:
    records = records_of(ratings)
    shuffled = records[:]
    rng.shuffle(shuffled)
    assert_same_figures(
        figures(RatingTable.from_records(records)), figures(RatingTable.from_records(shuffled))
    )
    # Rename units so that their sorted order reverses.
    renamed = [((case[::-1], 100 - turn), rater, value) for (case, turn), rater, value in records]
    assert_same_figures(
        figures(RatingTable.from_records(records)), figures(RatingTable.from_records(renamed))
    )


@settings(max_examples=80, deadline=None)
@given(ratings_strategy, st.permutations(["ana", "ben", "cy", "dee"]))
def test_invariant_to_rater_order(ratings: dict[tuple[Any, str], str], permuted: list[str]) -> None:
    rename = dict(zip(["ana", "ben", "cy", "dee"], permuted, strict=True))
    original = figures(RatingTable.from_records(records_of(ratings)))
    relabelled = figures(
        RatingTable.from_records(
            [(unit, rename[rater], value) for unit, rater, value in records_of(ratings)]
        )
    )
    translated = {}
    for name, coefficient in original.items():
        if name.startswith("cohen "):
            a, b = name.removeprefix("cohen ").split("|")
            name = "cohen " + "|".join(sorted((rename[a], rename[b])))
        translated[name] = coefficient
    assert_same_figures(translated, relabelled)


@settings(max_examples=80, deadline=None)
@given(ratings_strategy, st.permutations(range(7)))
def test_invariant_to_renaming_codes(
    ratings: dict[tuple[Any, str], str], permutation: list[int]
) -> None:
    codes = [*sorted(ROLE_ADHERENCE_VERDICTS)[:5], "borderline", "cannot_judge"]
    rename = {code: f"code-{permutation[i]}" for i, code in enumerate(codes)}
    original = figures(RatingTable.from_records(records_of(ratings)))
    relabelled = figures(
        RatingTable.from_records(
            [(unit, rater, rename[value]) for unit, rater, value in records_of(ratings)]
        )
    )
    translated = {
        (f"label {rename[name.removeprefix('label ')]}" if name.startswith("label ") else name): c
        for name, c in original.items()
    }
    assert_same_figures(translated, relabelled)


@settings(max_examples=80, deadline=None)
@given(ratings_strategy)
def test_pairwise_kappa_is_symmetric(ratings: dict[tuple[Any, str], str]) -> None:
    table = RatingTable.from_records(records_of(ratings))
    pairs = cohen_kappa_pairs(table)
    matrix = table.to_reliability_data()
    for (i, a), (j, b) in itertools.combinations(enumerate(table.raters), 2):
        key = f"{a}|{b}"
        assert key in pairs
        shared = ~np.isnan(matrix[i]) & ~np.isnan(matrix[j])
        if pairs[key].value is not None:
            forward = cohen_kappa_score(matrix[i][shared], matrix[j][shared])
            backward = cohen_kappa_score(matrix[j][shared], matrix[i][shared])
            assert pairs[key].value == pytest.approx(forward, abs=1e-9)
            assert pairs[key].value == pytest.approx(backward, abs=1e-9)
        else:
            assert pairs[key].reason


@settings(max_examples=80, deadline=None)
@given(ratings_strategy)
def test_values_are_finite_or_none_with_a_reason(ratings: dict[tuple[Any, str], str]) -> None:
    table = RatingTable.from_records(records_of(ratings))
    for name, coefficient in figures(table).items():
        if coefficient.value is None:
            assert coefficient.reason, name
        else:
            assert math.isfinite(coefficient.value), name
            assert coefficient.reason is None, name
            assert (coefficient.warning == SMALL_SAMPLE_WARNING) == (coefficient.n_units < 30)
    alpha = krippendorff_alpha(table)
    if alpha.value is not None and table.n_values >= 2:
        reference = krippendorff.alpha(
            reliability_data=table.to_reliability_data(), level_of_measurement="nominal"
        )
        assert alpha.value == pytest.approx(reference, abs=1e-9)


@settings(max_examples=60, deadline=None)
@given(
    st.lists(st.sampled_from(["a", "b", "c"]), min_size=2, max_size=3, unique=True),
    st.integers(2, 5),
    st.integers(1, 12),
)
def test_perfect_agreement_gives_alpha_one(codes: list[str], n_raters: int, n_units: int) -> None:
    records = [
        (unit, f"r{rater}", codes[unit % len(codes)])
        for unit in range(max(n_units, len(codes)))
        for rater in range(n_raters)
    ]
    assert krippendorff_alpha(RatingTable.from_records(records)).value == 1.0


# --------------------------------------------------------------------------- conversations


def test_first_break_agreement_counts_pairs() -> None:
    first_break: dict[str, dict[str, int | None]] = {
        "A": {"r1": 3, "r2": 3, "r3": None},  # 1 of 3 pairs agree
        "B": {"r1": None, "r2": None},  # 1 of 1
        "C": {"r1": 2},  # no pair
        "D": {"r1": 1, "r3": 4},  # 0 of 1, both found a break
    }
    result = first_break_agreement(first_break)
    assert result.value == pytest.approx(2 / 5)
    assert (result.n_units, result.n_pairs, result.n_agreeing_pairs) == (3, 5, 2)
    assert (result.n_both_break_pairs, result.n_same_turn_pairs) == (2, 1)
    assert result.warning == SMALL_SAMPLE_WARNING
    assert result.to_dict()["n_pairs"] == 5


def test_first_break_agreement_undefined() -> None:
    result = first_break_agreement({"A": {"r1": 3}, "B": {"r2": None}})
    assert result.value is None
    assert result.reason == "no conversation was rated by two or more raters"
    assert first_break_agreement({}).reason == "fewer than two raters rated any conversation"
    with pytest.raises(ValueError, match="turn of 'A' must be an integer, got '3'"):
        first_break_agreement({"A": {"r1": "3"}})  # type: ignore[dict-item]
    with pytest.raises(ValueError, match="first_break must not contain a missing conversation"):
        first_break_agreement({None: {"r1": 3, "r2": None}})


def test_any_break_alpha_is_alpha_on_conversations() -> None:
    first_break: dict[str, dict[str, int | None]] = {
        "A": {"r1": 3, "r2": 5, "r3": None},
        "B": {"r1": None, "r2": None},
        "C": {"r1": 2},
        "D": {"r1": 1, "r3": 4},
        "E": {"r2": None, "r3": 7},
    }
    matrix = [
        [1, 0, 1, 1, NAN],
        [1, 0, NAN, NAN, 0],
        [0, NAN, NAN, 1, 1],
    ]
    expected = krippendorff.alpha(reliability_data=matrix, level_of_measurement="nominal")
    result = any_break_alpha(first_break)
    assert result.value == pytest.approx(expected, abs=1e-12)
    assert result.n_units == 4
    assert any_break_alpha({"A": {"r1": None, "r2": None}}).value is None


def test_conversation_first_breaks_from_a_turn_table() -> None:
    table = RatingTable.from_records(
        [
            (("A", 1), "ana", "in_role"),
            (("A", 3), "ana", "tone_break"),
            (("A", 5), "ana", "scope_break"),
            (("A", 1), "ben", "in_role"),
            (("A", 3), "ben", "borderline"),
            (("A", 5), "ben", "persona_break"),
            (("B", 2), "ana", "in_role"),
            (("B", 2), "ben", "cannot_judge"),
        ]
    )
    collapsed = table.collapse(BREAK_MAPPING)
    result = conversation_first_breaks(
        collapsed, conversation_of=lambda unit: unit[0], turn_of=lambda unit: unit[1]
    )
    # ben's only countable rating of B was cannot_judge: he does not appear under B.
    assert result == {"A": {"ana": 3, "ben": 5}, "B": {"ana": None}}
    with pytest.raises(ValueError, match=r"turn of \('A', 1\) must be an integer, got 'x'"):
        conversation_first_breaks(
            collapsed,
            conversation_of=lambda unit: unit[0],
            turn_of=lambda unit: "x",  # type: ignore[arg-type,return-value]
        )


# --------------------------------------------------------------------------- summary


def app_table(seed: int = 0, n_conversations: int = 20, turns: int = 4) -> RatingTable:
    rng = random.Random(seed)
    codes = list(ROLE_ADHERENCE_VERDICTS)
    records = []
    for conversation in range(n_conversations):
        for turn in range(1, turns + 1):
            truth = "in_role" if rng.random() < 0.6 else rng.choice(codes)
            for reviewer in ("ana", "ben", "cy"):
                if rng.random() < 0.8:
                    value = truth if rng.random() < 0.75 else rng.choice(codes)
                    records.append(((f"case-{conversation:03d}", turn), reviewer, value))
    return RatingTable.from_records(records)


def summarise(table: RatingTable, **options: Any) -> dict[str, Any]:
    return agreement_summary(
        table,
        break_mapping=BREAK_MAPPING,
        verdict_mapping=VERDICT_MAPPING,
        conversation_of=lambda unit: unit[0],
        turn_of=lambda unit: unit[1],
        **options,
    )


COEFFICIENT_KEYS = {"value", "n_units", "reason", "ci95", "warning"}


def test_summary_shape_and_values() -> None:
    table = app_table()
    summary = summarise(table, n_resamples=200, seed=4)
    json.dumps(summary, allow_nan=False)
    required = {
        "level", "units", "raters", "ratings", "percent_agreement", "krippendorff_alpha",
        "alpha_ci95", "fleiss_kappa", "gwet_ac1", "cohen_kappa", "per_label", "alpha_break",
        "alpha_verdict", "conversation", "warnings",
    }  # fmt: skip
    assert required <= summary.keys()
    assert summary["level"] == "turn"
    assert (summary["units"], summary["raters"], summary["ratings"]) == (
        table.n_units, table.n_raters, table.n_ratings,
    )  # fmt: skip
    for name in (
        "percent_agreement",
        "krippendorff_alpha",
        "fleiss_kappa",
        "gwet_ac1",
        "alpha_break",
        "alpha_verdict",
    ):
        assert summary[name].keys() >= COEFFICIENT_KEYS
    assert summary["krippendorff_alpha"]["value"] == krippendorff_alpha(table).value
    # Turn-level intervals resample conversations (turns of one conversation are not
    # independent), and the summary says so.
    assert summary["alpha_ci95"] == list(
        alpha_bootstrap_ci(table, n_resamples=200, seed=4, cluster_of=lambda unit: unit[0]).ci95
        or []
    )
    assert summary["bootstrap"]["method"].startswith("percentile bootstrap over conversations")
    assert (
        summary["alpha_break"]["value"] == krippendorff_alpha(table.collapse(BREAK_MAPPING)).value
    )
    assert (
        summary["alpha_verdict"]["value"]
        == krippendorff_alpha(table.collapse(VERDICT_MAPPING)).value
    )
    assert set(summary["cohen_kappa"]) == {"ana|ben", "ana|cy", "ben|cy"}
    assert set(summary["per_label"]) == set(table.values)
    first_breaks = conversation_first_breaks(
        table.collapse(BREAK_MAPPING), conversation_of=lambda u: u[0], turn_of=lambda u: u[1]
    )
    assert (
        summary["conversation"]["first_break_agreement"]
        == first_break_agreement(first_breaks).to_dict()
    )
    assert summary["conversation"]["any_break_alpha"] == any_break_alpha(first_breaks).to_dict(
        count_key="n_units"
    )
    assert summary["conversation"]["conversations"] == 20
    assert summary["fleiss_kappa"]["n_units"] == fleiss_kappa(table).n_units
    assert "conversation first_break_agreement: fewer than 30 pairable units" in summary["warnings"]
    assert summary["krippendorff_alpha"]["warning"] is None


def test_summary_of_degenerate_tables_is_json_without_nan() -> None:
    all_in_role = RatingTable.from_records(
        [((f"c{u}", 1), reviewer, "in_role") for u in range(5) for reviewer in ("ana", "ben")]
    )
    summary = summarise(all_in_role, n_resamples=50)
    json.dumps(summary, allow_nan=False)
    assert summary["krippendorff_alpha"]["value"] is None
    assert summary["krippendorff_alpha"]["reason"]
    assert summary["alpha_ci95"] is None
    assert summary["alpha_break"]["value"] is None
    assert summary["conversation"]["first_break_agreement"]["value"] == 1.0
    empty = summarise(RatingTable.from_records([]), n_resamples=0)
    json.dumps(empty, allow_nan=False)
    assert empty["units"] == 0 and empty["cohen_kappa"] == {} and empty["per_label"] == {}


def test_summary_rejects_a_break_mapping_without_break() -> None:
    with pytest.raises(ValueError, match="break_mapping maps no code to the break value 'break'"):
        agreement_summary(
            app_table(),
            break_mapping={code: "no" for code in ROLE_ADHERENCE_VERDICTS},
            verdict_mapping=VERDICT_MAPPING,
            conversation_of=lambda unit: unit[0],
            turn_of=lambda unit: unit[1],
        )


@settings(max_examples=40, deadline=None)
@given(ratings_strategy)
def test_summary_never_contains_nan(ratings: dict[tuple[Any, str], str]) -> None:
    summary = summarise(RatingTable.from_records(records_of(ratings)), n_resamples=20)
    json.dumps(summary, allow_nan=False)


# --------------------------------------------------------------------------- scale


def test_a_million_ratings_build_and_alpha() -> None:
    """Correct at scale; how fast is measured by benchmarks/bench_agreement.py."""
    rng = np.random.default_rng(0)
    present = rng.random((250_000, 5)) >= 0.2
    unit_ids, rater_ids = np.nonzero(present)
    values = np.array(["in_role", "scope_break", "tone_break", "borderline"], dtype=object)[
        rng.integers(0, 4, size=len(unit_ids))
    ]
    raters = np.array(["ana", "ben", "cy", "dee", "eve"], dtype=object)[rater_ids]
    table = RatingTable.from_arrays(units=unit_ids, raters=raters, values=values)
    alpha = krippendorff_alpha(table)
    assert table.n_ratings == len(unit_ids) > 990_000
    # Codes drawn independently of the unit: no agreement beyond chance.
    assert alpha.value is not None and abs(alpha.value) < 0.01


# ------------------------------------------------------------------- pairwise kappa intervals


def by_case(unit: tuple[str, int]) -> str:
    return unit[0]


def copied_conversations(
    n_conversations: int, turns: int, seed: int = 2
) -> tuple[RatingTable, list[int], list[int]]:
    """Two raters; every turn of a conversation is a copy of its first (40 observations
    behind 400 turns when there are 40 conversations of 10 turns)."""
    rng = np.random.default_rng(seed)
    first = rng.integers(0, 2, size=n_conversations)
    second = np.where(rng.random(n_conversations) < 0.75, first, 1 - first)
    records = []
    for c in range(n_conversations):
        for turn in range(1, turns + 1):
            records.append(((f"c{c:03d}", turn), "ana", f"code-{first[c]}"))
            records.append(((f"c{c:03d}", turn), "ben", f"code-{second[c]}"))
    return RatingTable.from_records(records), first.tolist(), second.tolist()


def test_the_pair_interval_resamples_conversations_and_widens_when_turns_are_copies() -> None:
    table, first, second = copied_conversations(40, 10)
    by_conversation = kappa_pairs_bootstrap_ci(table, n_resamples=1000, cluster_of=by_case)[
        "ana|ben"
    ]
    by_turn = kappa_pairs_bootstrap_ci(table, n_resamples=1000)["ana|ben"]
    assert by_conversation.value == by_turn.value == cohen_kappa_pairs(table)["ana|ben"].value
    assert by_conversation.method == CLUSTER_METHOD and by_turn.method == UNIT_METHOD
    assert by_conversation.ci95 is not None and by_turn.ci95 is not None
    cluster_width = by_conversation.ci95[1] - by_conversation.ci95[0]
    unit_width = by_turn.ci95[1] - by_turn.ci95[0]
    assert cluster_width > 2.5 * unit_width  # about sqrt(10) times as wide
    # ... as wide as the unit interval of the 40 conversations themselves.
    alone = kappa_estimate(
        [str(x) for x in first], [str(x) for x in second], n_resamples=1000, seed=0
    )
    assert alone.ci95 is not None
    assert cluster_width == pytest.approx(alone.ci95[1] - alone.ci95[0], rel=0.25)


def test_one_turn_per_conversation_gives_the_unit_interval() -> None:
    table, _, _ = copied_conversations(60, 1)
    by_conversation = kappa_pairs_bootstrap_ci(table, n_resamples=500, seed=3, cluster_of=by_case)
    by_turn = kappa_pairs_bootstrap_ci(table, n_resamples=500, seed=3)
    assert by_conversation["ana|ben"].ci95 == by_turn["ana|ben"].ci95
    assert by_conversation["ana|ben"].ci95 is not None
    assert by_conversation["ana|ben"].method == UNIT_METHOD


def test_the_pair_interval_is_the_bootstrap_of_the_shared_units() -> None:
    # Oracle: the calibration kappa (its own composition of the same stats core) on the
    # pair's shared units, conversations as clusters, gives the same interval (every pair
    # here shares a unit in every conversation, so both draw the same conversations).
    table = app_table(seed=5, n_conversations=30, turns=5)
    pairs = kappa_pairs_bootstrap_ci(table, n_resamples=400, seed=9, cluster_of=by_case)
    records = [
        (table.units[u], table.raters[r], table.values[v])
        for u, r, v in zip(table.unit_idx, table.rater_idx, table.value_idx, strict=True)
    ]
    for a, b in itertools.combinations(table.raters, 2):
        mine = {unit: value for unit, rater, value in records if rater == a}
        theirs = {unit: value for unit, rater, value in records if rater == b}
        shared = sorted(set(mine) & set(theirs))
        expected = kappa_estimate(
            [mine[u] for u in shared],
            [theirs[u] for u in shared],
            n_resamples=400,
            seed=9,
            clusters=[u[0] for u in shared],
        )
        pair = pairs[f"{a}|{b}"]
        assert pair.value == pytest.approx(
            cohen_kappa_score([mine[u] for u in shared], [theirs[u] for u in shared]), abs=1e-12
        )
        assert pair.value == pytest.approx(expected.value, abs=1e-12)
        assert pair.ci95 == pytest.approx(expected.ci95, abs=1e-12)
        assert pair.method == expected.method == CLUSTER_METHOD
        assert pair.n_units == len(shared)


def test_every_pair_is_measured_on_the_resamples_of_the_whole_table() -> None:
    # Oracle, a plain loop: the conversations holding a pairable unit are drawn with
    # replacement (resample_weights, the definition of the weights); a pair's kappa in a
    # resample is sklearn's weighted kappa of its shared units. 'cy' rates only the first
    # half of the conversations, so the pairs with 'cy' cover half of what is drawn.
    rng = random.Random(3)
    codes = ["in_role", "scope_break", "tone_break"]
    records = []
    for conversation in range(40):
        for turn in range(1, 4):
            truth = rng.choice(codes)
            for reviewer in ("ana", "ben", "cy"):
                if reviewer == "cy" and conversation >= 20:
                    continue
                value = truth if rng.random() < 0.7 else rng.choice(codes)
                records.append(((f"case-{conversation:03d}", turn), reviewer, value))
    table = RatingTable.from_records(records)
    pairs = kappa_pairs_bootstrap_ci(table, n_resamples=200, seed=6, cluster_of=by_case)
    alpha, joint = intervals_of_alpha_and_pairs(table, n_resamples=200, seed=6, cluster_of=by_case)
    assert joint == pairs
    assert alpha == alpha_bootstrap_ci(table, n_resamples=200, seed=6, cluster_of=by_case)
    pairable = [table.units[i] for i in np.flatnonzero(table.ratings_per_unit >= 2)]
    conversations = sorted({unit[0] for unit in pairable})
    code_of = {name: i for i, name in enumerate(conversations)}
    weights = np.vstack(
        [
            w
            for _, w in resample_weights(
                len(conversations),
                n_resamples=200,
                seed=6,
                clusters=np.arange(len(conversations)),
            )
        ]
    )
    for a, b in itertools.combinations(table.raters, 2):
        mine = {unit: value for unit, rater, value in records if rater == a}
        theirs = {unit: value for unit, rater, value in records if rater == b}
        shared = sorted(set(mine) & set(theirs))
        resampled = [
            cohen_kappa_score(
                [mine[u] for u in shared],
                [theirs[u] for u in shared],
                sample_weight=[row[code_of[u[0]]] for u in shared],
            )
            for row in weights
        ]
        low, high = np.percentile(resampled, [2.5, 97.5])
        assert pairs[f"{a}|{b}"].ci95 == pytest.approx((low, high), abs=1e-12)


def test_a_pair_over_fewer_than_ten_conversations_gets_no_interval_and_says_why() -> None:
    nine, _, _ = copied_conversations(9, 5, seed=4)
    pair = kappa_pairs_bootstrap_ci(nine, n_resamples=200, cluster_of=by_case)["ana|ben"]
    assert pair.value is not None and pair.ci95 is None and pair.method is None
    assert pair.reason == "no interval: only 9 conversations behind this kappa (fewer than 10)"
    units = kappa_pairs_bootstrap_ci(nine, n_resamples=200)["ana|ben"]
    assert units.ci95 is not None  # 45 turns drawn one by one
    few_turns = RatingTable.from_records(
        [((f"c{u}", 1), rater, "x" if (u + (rater == "ben")) % 3 else "y")
         for u in range(4) for rater in ("ana", "ben")]
    )  # fmt: skip
    pair = kappa_pairs_bootstrap_ci(few_turns, n_resamples=50)["ana|ben"]
    assert pair.reason == "no interval: only 4 units behind this kappa (fewer than 10)"
    ten, _, _ = copied_conversations(10, 5, seed=4)
    assert kappa_pairs_bootstrap_ci(ten, n_resamples=200, cluster_of=by_case)["ana|ben"].ci95


PAIR_CODES = ["in_role", "scope_break", "tone_break"]


def _turns_of_two(rows: list[tuple[str, str, bool]]) -> dict[tuple[Any, str], str]:
    """Ratings of 'ana' (every turn) and 'ben' (the flagged turns), three turns a case."""
    ratings: dict[tuple[Any, str], str] = {}
    for i, (ana, ben, ben_rated) in enumerate(rows):
        unit = (f"case-{i // 3:02d}", i % 3 + 1)
        ratings[(unit, "ana")] = ana
        if ben_rated:
            ratings[(unit, "ben")] = ben
    return ratings


wide_ratings = st.lists(
    st.tuples(st.sampled_from(PAIR_CODES), st.sampled_from(PAIR_CODES), st.booleans()),
    min_size=27,
    max_size=48,
).map(_turns_of_two)


@settings(max_examples=40, deadline=None)
@given(wide_ratings, st.integers(0, 2**16))
def test_the_pair_interval_is_symmetric_in_the_two_raters(
    ratings: dict[tuple[Any, str], str], seed: int
) -> None:
    swap = {"ana": "ben", "ben": "ana"}
    records = records_of(ratings)
    table = RatingTable.from_records(records)
    swapped = RatingTable.from_records([(u, swap[r], v) for u, r, v in records])
    options: dict[str, Any] = {"n_resamples": 60, "seed": seed, "cluster_of": by_case}
    forward = kappa_pairs_bootstrap_ci(table, **options)
    backward = kappa_pairs_bootstrap_ci(swapped, **options)
    assert forward.keys() == backward.keys()
    for key, pair in forward.items():
        other = backward[key]
        assert (pair.value, pair.ci95, pair.method, pair.n_units) == (
            other.value, other.ci95, other.method, other.n_units,
        )  # fmt: skip
        if pair.value is not None:
            assert pair.reason == other.reason


@settings(max_examples=40, deadline=None)
@given(wide_ratings, st.permutations(PAIR_CODES))
def test_the_pair_kappa_does_not_depend_on_the_names_of_the_codes(
    ratings: dict[tuple[Any, str], str], permuted: list[str]
) -> None:
    rename = dict(zip(PAIR_CODES, permuted, strict=True))
    records = records_of(ratings)
    original = kappa_pairs_bootstrap_ci(
        RatingTable.from_records(records), n_resamples=60, cluster_of=by_case
    )
    renamed = kappa_pairs_bootstrap_ci(
        RatingTable.from_records([(u, r, rename[v]) for u, r, v in records]),
        n_resamples=60,
        cluster_of=by_case,
    )
    for key, pair in original.items():
        assert (pair.value is None) == (renamed[key].value is None)
        if pair.value is not None:
            assert renamed[key].value == pytest.approx(pair.value, abs=1e-12)
            assert (pair.ci95 is None) == (renamed[key].ci95 is None)
            if pair.ci95 is not None:
                assert renamed[key].ci95 == pytest.approx(pair.ci95, abs=1e-9)


def test_the_summary_gives_each_pair_an_interval_and_its_method() -> None:
    table = app_table(seed=1, n_conversations=30)
    summary = summarise(table, n_resamples=300, seed=2)
    json.dumps(summary, allow_nan=False)
    expected = kappa_pairs_bootstrap_ci(table, n_resamples=300, seed=2, cluster_of=by_case)
    assert set(summary["cohen_kappa"]) == set(expected)
    for key, pair in summary["cohen_kappa"].items():
        assert pair.keys() == COEFFICIENT_KEYS | {"method"}
        assert pair["ci95"] == list(expected[key].ci95 or [])
        assert pair["method"] == CLUSTER_METHOD
        assert pair["value"] == cohen_kappa_pairs(table)[key].value
    narrower = summarise(table, n_resamples=300, seed=2, confidence=0.5)
    assert narrower["bootstrap"]["confidence"] == 0.5
    for key, pair in narrower["cohen_kappa"].items():
        low, high = summary["cohen_kappa"][key]["ci95"]
        assert low <= pair["ci95"][0] <= pair["ci95"][1] <= high
    skipped = summarise(table, n_resamples=0)
    assert all(
        pair["ci95"] is None and pair["method"] is None and pair["reason"] is None
        for pair in skipped["cohen_kappa"].values()
    )
