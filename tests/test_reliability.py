"""Reviewer reliability: Dawid-Skene against crowd-kit, and simulated reviewers recovered."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from crowdkit.aggregation import DawidSkene

from review_app.agreement.reliability import reviewer_reliability
from review_app.stats.dawid_skene import dawid_skene

CODES = ["in_role", "tone_break", "scope_break", "authority_break", "persona_break", "borderline"]
PRIOR = [0.45, 0.15, 0.15, 0.1, 0.1, 0.05]
CARELESS = {"tone_break": ("in_role", 0.55), "scope_break": ("authority_break", 0.5)}


def true_confusions(names: list[str], careless: str | None) -> dict[str, np.ndarray]:
    """Each reviewer right 90% of the time, errors spread evenly; ``careless`` gives the
    wrong code of :data:`CARELESS` to about half of two codes' turns."""
    k = len(CODES)
    found = {}
    for name in names:
        matrix = np.full((k, k), 0.1 / (k - 1))
        np.fill_diagonal(matrix, 0.9)
        if name == careless:
            for true, (given, share) in CARELESS.items():
                c, g = CODES.index(true), CODES.index(given)
                matrix[c] = (1 - share) * matrix[c] / matrix[c].sum()
                matrix[c, g] += share
        found[name] = matrix
    return found


def simulate(
    *, n_units: int, names: list[str], careless: str | None, per_unit: int, seed: int
) -> tuple[list[tuple[int, str, str]], np.ndarray, dict[str, np.ndarray]]:
    rng = np.random.default_rng(seed)
    matrices = true_confusions(names, careless)
    truth = rng.choice(len(CODES), size=n_units, p=PRIOR)
    rows = []
    for unit in range(n_units):
        for name in rng.choice(names, size=per_unit, replace=False):
            given = rng.choice(len(CODES), p=matrices[str(name)][truth[unit]])
            rows.append((unit, str(name), CODES[given]))
    return rows, truth, matrices


def crowdkit_frame(rows: list[tuple[int, str, str]]) -> pd.DataFrame:
    return pd.DataFrame(rows, columns=["task", "worker", "label"])


def codes_of(rows: list[tuple[int, str, str]]) -> tuple[np.ndarray, np.ndarray, np.ndarray, list]:
    names = sorted({r[1] for r in rows})
    units = np.array([r[0] for r in rows])
    reviewers = np.array([names.index(r[1]) for r in rows])
    labels = np.array([CODES.index(r[2]) for r in rows])
    return units, reviewers, labels, names


@pytest.mark.parametrize("anchored_every", [None, 9])
def test_dawid_skene_equals_crowd_kit(anchored_every: int | None) -> None:
    """The fit, its iterations and its stopping point are crowd-kit's DawidSkene's, on the
    same labels without gold and with gold as crowd-kit's ``true_labels``."""
    rows, truth, _ = simulate(
        n_units=500, names=["ana", "bo", "cy", "dee", "eli"], careless="cy", per_unit=3, seed=4
    )
    units, reviewers, labels, names = codes_of(rows)
    gold = (
        None
        if anchored_every is None
        else pd.Series({u: CODES[truth[u]] for u in range(0, 500, anchored_every)})
    )
    reference = DawidSkene(n_iter=100).fit(crowdkit_frame(rows), gold)
    anchors = np.full(500, -1)
    if gold is not None:
        anchors[gold.index.to_numpy()] = [CODES.index(c) for c in gold]
    fit = dawid_skene(
        units, reviewers, labels, n_units=500, n_reviewers=len(names), n_codes=len(CODES),
        anchors=anchors,
    )  # fmt: skip
    assert fit.iterations == len(reference.loss_history_)
    assert fit.elbo == pytest.approx(reference.loss_history_[-1], abs=1e-12)
    posteriors = reference.probas_.reindex(columns=CODES).loc[range(500)].to_numpy()
    np.testing.assert_allclose(fit.posteriors, posteriors, atol=1e-8)
    np.testing.assert_allclose(fit.priors, reference.priors_.reindex(CODES).to_numpy(), atol=1e-12)
    errors = reference.errors_
    for w, name in enumerate(names):
        for c, true in enumerate(CODES):
            for g, given in enumerate(CODES):
                # crowd-kit keeps rows only for codes a reviewer used (the others are 0)
                want = errors.loc[(name, given), true] if (name, given) in errors.index else 0.0
                assert fit.confusion[w, c, g] == pytest.approx(want, abs=1e-12)


def test_weights_count_a_unit_as_often_as_it_is_drawn() -> None:
    rows, _, _ = simulate(n_units=120, names=["ana", "bo", "cy"], careless=None, per_unit=2,
                          seed=2)  # fmt: skip
    units, reviewers, labels, _ = codes_of(rows)
    weights = np.random.default_rng(1).integers(0, 3, size=120)
    weights[0] = 1  # at least one unit stays in
    weighted = dawid_skene(units, reviewers, labels, n_units=120, n_reviewers=3, n_codes=6,
                           weights=weights, tol=1e-12, max_iter=500)  # fmt: skip
    # The same data with each unit copied as often as its weight, each copy a unit.
    copied: list[tuple[int, int, int]] = []
    copies = 0
    for unit in range(120):
        for _ in range(int(weights[unit])):
            copied += [(copies, r, c) for u, r, c in zip(units, reviewers, labels, strict=True)
                       if u == unit]  # fmt: skip
            copies += 1
    plain = dawid_skene(
        [c[0] for c in copied], [c[1] for c in copied], [c[2] for c in copied],
        n_units=copies, n_reviewers=3, n_codes=6, tol=1e-12, max_iter=500,
    )  # fmt: skip
    np.testing.assert_allclose(weighted.confusion, plain.confusion, atol=1e-6)
    np.testing.assert_allclose(weighted.priors, plain.priors, atol=1e-6)


def test_simulated_reviewers_are_recovered_and_the_careless_one_named() -> None:
    names = ["ana", "bo", "cy", "dee", "eli"]
    rows, truth, matrices = simulate(n_units=900, names=names, careless="cy", per_unit=3, seed=7)
    clusters = [unit // 4 for unit, _, _ in rows]  # four turns per conversation
    result = reviewer_reliability(
        units=[r[0] for r in rows], reviewers=[r[1] for r in rows], codes=[r[2] for r in rows],
        clusters=clusters, code_order=CODES, n_resamples=60, seed=0,
    )  # fmt: skip
    assert result.codes == tuple(CODES)
    by_name = {r.name: r for r in result.reviewers}
    for name in names:
        estimated = np.array([[by_name[name].confusion[t][g] for g in CODES] for t in CODES])
        # rows backed by at least 60 expected turns are within 0.1 of the truth
        support = np.array([by_name[name].units_by_code[t] for t in CODES])
        close = np.abs(estimated - matrices[name])[support >= 60]
        assert close.max() < 0.1, (name, close.max())
    assert [r.name for r in result.below_others] == ["cy"]
    careless = by_name["cy"]
    assert set(careless.responsible_codes) == set(CARELESS)
    assert "`tone_break` turns they give `in_role`" in careless.sentence
    assert "`scope_break` turns they give `authority_break`" in careless.sentence
    mixed = {(m.true, m.given) for m in careless.mix_ups}
    assert mixed == {(t, g) for t, (g, _) in CARELESS.items()}
    assert by_name["ana"].mix_ups == [] and "mixes up no codes" in by_name["ana"].sentence
    low, high = careless.accuracy.ci95
    assert low < careless.accuracy.value < high
    truth_share = np.mean([CODES[truth[u]] == code for u, name, code in rows if name == "cy"])
    assert low - 0.03 < truth_share < high + 0.03


def test_equally_good_reviewers_are_seldom_named() -> None:
    """With every reviewer right 90% of the time, a reviewer is named about as often as
    a 2.5% one-sided test errs (24 reviewers here: at most 2); two labels per unit with
    no adjudication names nobody."""
    named = 0
    unanchored = 0
    for seed in range(6):
        rows, truth, _ = simulate(
            n_units=400, names=["ana", "bo", "cy", "dee"], careless=None, per_unit=2, seed=seed
        )
        codes_of_unit: dict[int, set[str]] = {}
        for unit, _, code in rows:
            codes_of_unit.setdefault(unit, set()).add(code)
        adjudicated = {u: CODES[truth[u]] for u, seen in codes_of_unit.items() if len(seen) > 1}
        for anchors in (adjudicated, {}):
            result = reviewer_reliability(
                units=[r[0] for r in rows], reviewers=[r[1] for r in rows],
                codes=[r[2] for r in rows], anchors=anchors, n_resamples=60, seed=seed,
            )  # fmt: skip
            if anchors:
                named += len(result.below_others)
            else:
                unanchored += len(result.below_others)
                assert "no reviewer is named below the others" in result.warnings[0]
    assert named <= 2 and unanchored == 0


def test_adjudicated_gold_fixes_the_true_code() -> None:
    rows = [(0, "ana", "in_role"), (0, "bo", "tone_break"), (1, "ana", "in_role"),
            (1, "bo", "in_role")]  # fmt: skip
    result = reviewer_reliability(
        units=[r[0] for r in rows], reviewers=[r[1] for r in rows], codes=[r[2] for r in rows],
        anchors={0: "tone_break"}, n_resamples=0,
    )  # fmt: skip
    assert result.n_anchored == 1
    by_name = {r.name: r for r in result.reviewers}
    assert by_name["bo"].accuracy.value == pytest.approx(1.0, abs=1e-6)
    assert by_name["ana"].accuracy.value == pytest.approx(0.5, abs=1e-6)
    assert by_name["ana"].accuracy.reason == "no interval: no bootstrap resamples asked for"
    assert "adjudicate some disagreements" not in " ".join(result.warnings)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"units": [0], "reviewers": ["a", "b"], "codes": ["x"]},
         "units, reviewers and codes must have the same length"),
        ({"units": [0, 0], "reviewers": ["a", "a"], "codes": ["x", "y"]},
         "reviewer a labels unit 0 twice"),
        ({"units": [0], "reviewers": ["a"], "codes": ["x"], "clusters": []},
         "clusters must hold one conversation per label"),
        ({"units": [0], "reviewers": ["a"], "codes": ["x"], "n_resamples": -1},
         "n_resamples must be an integer >= 0, got -1"),
    ],
)  # fmt: skip
def test_reliability_refuses_bad_input(kwargs: dict, message: str) -> None:
    with pytest.raises(ValueError) as caught:
        reviewer_reliability(**kwargs)
    assert str(caught.value) == message


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"units": [0, 1], "reviewers": [0], "labels": [0, 0]},
         "units, reviewers and labels must have the same length, got 2, 1 and 2"),
        ({"units": [0, 2], "reviewers": [0, 0], "labels": [0, 0]},
         "units must be codes from 0 to 1"),
        ({"units": [0, 0], "reviewers": [0, 0], "labels": [0, 0]},
         "every unit needs at least one label"),
        ({"units": [0.5, 1], "reviewers": [0, 0], "labels": [0, 0]},
         "units must be a one-dimensional array of integer codes"),
        ({"units": [0, 1], "reviewers": [0, 0], "labels": [0, 0], "anchors": [3, -1]},
         "anchors must hold one code or -1 per unit"),
        ({"units": [0, 1], "reviewers": [0, 0], "labels": [0, 0], "weights": [-1, 1]},
         "weights must hold one non-negative weight per unit"),
        ({"units": [0, 1], "reviewers": [0, 0], "labels": [0, 0], "max_iter": 0},
         "max_iter must be an integer >= 1, got 0"),
    ],
)  # fmt: skip
def test_dawid_skene_refuses_bad_input(kwargs: dict, message: str) -> None:
    with pytest.raises(ValueError) as caught:
        dawid_skene(**kwargs, n_units=2, n_reviewers=1, n_codes=2)
    assert str(caught.value) == message
