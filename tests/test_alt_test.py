"""The alternative annotator test against the authors' own definition.

``reference_alt_test`` below is a literal transcription of ``alt_test`` from the
authors' published notebook (github.com/nitaytech/AltTest, alt_test_example.ipynb,
Calderon, Reichart & Dror 2025), with ``print`` calls removed and the p-values kept
so that each reviewer's can be compared.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from scipy.stats import ttest_1samp

from review_app.stats.alt_test import alt_test, benjamini_yekutieli

# --------------------------------------------------------------------------- transcription


def by_procedure(p_values: list[float], q: float) -> list[int]:
    p_values = np.array(p_values, dtype=float)  # type: ignore[assignment]
    m = len(p_values)
    sorted_indices = np.argsort(p_values)
    sorted_pvals = p_values[sorted_indices]  # type: ignore[call-overload]
    H_m = np.sum(1.0 / np.arange(1, m + 1))
    by_thresholds = (np.arange(1, m + 1) / m) * (q / H_m)
    max_i = -1
    for i in range(m):
        if sorted_pvals[i] <= by_thresholds[i]:
            max_i = i
    if max_i == -1:
        return []
    rejected_sorted_indices = sorted_indices[: max_i + 1]
    return list(rejected_sorted_indices)


def accuracy(pred: Any, annotations: list[Any]) -> float:
    return float(np.mean([pred == ann for ann in annotations]))


def ttest(indicators: list[int], epsilon: float) -> float:
    return ttest_1samp(indicators, epsilon, alternative="less").pvalue


def reference_alt_test(
    llm_annotations: dict[Any, Any],
    humans_annotations: dict[Any, dict[Any, Any]],
    epsilon: float = 0.2,
    q_fdr: float = 0.05,
    min_humans_per_instance: int = 2,
    min_instances_per_human: int = 30,
) -> tuple[float, float, dict[Any, float], list[Any]]:
    scoring_function = accuracy
    i_set: dict[Any, list[Any]] = {}
    h_set: dict[Any, list[Any]] = {}
    for h, anns in humans_annotations.items():
        i_set[h] = list(anns.keys())
        for i, _ann in anns.items():
            if i not in h_set:
                h_set[i] = []
            h_set[i].append(h)
    instances_to_keep = {
        i for i in h_set if len(h_set[i]) >= min_humans_per_instance and i in llm_annotations
    }
    i_set = {h: [i for i in i_set[h] if i in instances_to_keep] for h in i_set}
    h_set = {i: h_set[i] for i in h_set if i in instances_to_keep}
    p_values, advantage_probs, humans = [], [], []
    for excluded_h in humans_annotations:
        llm_indicators = []
        excluded_indicators = []
        instances = [i for i in i_set[excluded_h] if i in llm_annotations]
        if len(instances) < min_instances_per_human:
            continue
        for i in instances:
            human_ann = humans_annotations[excluded_h][i]
            llm_ann = llm_annotations[i]
            remaining_anns = [humans_annotations[h][i] for h in h_set[i] if h != excluded_h]
            human_score = scoring_function(human_ann, remaining_anns)
            llm_score = scoring_function(llm_ann, remaining_anns)
            llm_indicators.append(1 if llm_score >= human_score else 0)
            excluded_indicators.append(1 if human_score >= llm_score else 0)
        diff_indicators = [
            exc_ind - llm_ind
            for exc_ind, llm_ind in zip(excluded_indicators, llm_indicators, strict=True)
        ]
        p_values.append(ttest(diff_indicators, epsilon))
        advantage_probs.append(float(np.mean(llm_indicators)))
        humans.append(excluded_h)
    rejected_indices = by_procedure(p_values, q_fdr)
    advantage_prob = float(np.mean(advantage_probs))
    winning_rate = len(rejected_indices) / len(humans)
    return winning_rate, advantage_prob, dict(zip(humans, p_values, strict=True)), humans


# --------------------------------------------------------------------------- data


CODES = ["in_role", "scope_break", "tone_break", "persona_break"]


def generated(
    seed: int, *, n_units: int = 120, n_reviewers: int = 4, noise: float = 0.3, missing: float = 0.2
) -> tuple[dict[str, dict[tuple[str, int], str]], list[str]]:
    """Reviewers who see a true code and, with probability ``noise``, answer at random."""
    rng = np.random.default_rng(seed)
    truth = rng.choice(CODES, size=n_units, p=[0.55, 0.15, 0.15, 0.15]).tolist()
    labels: dict[str, dict[tuple[str, int], str]] = {}
    for r in range(n_reviewers):
        labels[f"rev{r}"] = {
            (f"case-{u // 5}", u % 5): (str(rng.choice(CODES)) if rng.random() < noise else t)
            for u, t in enumerate(truth)
            if rng.random() >= missing
        }
    return labels, truth


def majority_judge(labels: dict[str, dict[Any, str]]) -> dict[Any, str]:
    units = {u for by_unit in labels.values() for u in by_unit}
    result = {}
    for unit in units:
        votes = [by_unit[unit] for by_unit in labels.values() if unit in by_unit]
        result[unit] = max(sorted(set(votes)), key=votes.count)
    return result


def random_judge(labels: dict[str, dict[Any, str]], seed: int) -> dict[Any, str]:
    rng = np.random.default_rng(seed)
    units = sorted({u for by_unit in labels.values() for u in by_unit})
    return {unit: str(rng.choice(CODES)) for unit in units}


# --------------------------------------------------------------------------- tests


@pytest.mark.parametrize("seed", range(8))
@pytest.mark.parametrize("epsilon", [0.0, 0.1, 0.2, 0.3])
def test_matches_the_authors_definition(seed: int, epsilon: float) -> None:
    labels, _ = generated(seed, n_reviewers=3 + seed % 3, noise=0.2 + 0.05 * (seed % 4))
    judge = majority_judge(labels) if seed % 2 else random_judge(labels, seed)
    if seed % 3 == 0:  # a judge that is right most of the time
        rng = np.random.default_rng(seed + 100)
        judge = {u: (str(rng.choice(CODES)) if rng.random() < 0.3 else c) for u, c in judge.items()}
    ours = alt_test(labels, judge, epsilon=epsilon)
    winning_rate, advantage, p_values, tested = reference_alt_test(judge, labels, epsilon=epsilon)
    assert ours.winning_rate == pytest.approx(winning_rate, abs=1e-9)
    assert ours.advantage_probability == pytest.approx(advantage, abs=1e-9)
    assert [r.reviewer for r in ours.reviewers] == sorted(tested)
    for result in ours.reviewers:
        expected = p_values[result.reviewer]
        if np.isnan(expected):
            assert result.p_value is None and not result.rejected
        else:
            assert result.p_value == pytest.approx(expected, abs=1e-9)
    assert ours.passed == (winning_rate >= 0.5)


def test_a_judge_that_copies_the_majority_passes() -> None:
    labels, _ = generated(1, n_units=150, n_reviewers=5, noise=0.3, missing=0.0)
    result = alt_test(labels, majority_judge(labels))
    assert result.passed and result.verdict == "passed"
    assert result.winning_rate == 1.0
    assert result.advantage_probability is not None and result.advantage_probability > 0.9
    assert reference_alt_test(majority_judge(labels), labels)[0] == 1.0


def test_a_judge_that_answers_at_random_fails() -> None:
    labels, _ = generated(2, n_units=150, n_reviewers=5, noise=0.2, missing=0.0)
    judge = random_judge(labels, 7)
    result = alt_test(labels, judge)
    assert not result.passed and result.verdict == "failed"
    assert result.winning_rate == 0.0
    assert reference_alt_test(judge, labels)[0] == 0.0


def test_reviewers_with_few_units_are_skipped_with_the_reason() -> None:
    labels, _ = generated(3, n_units=100, n_reviewers=3, missing=0.0)
    labels["newcomer"] = dict(list(labels["rev0"].items())[:12])
    result = alt_test(labels, majority_judge(labels))
    assert [s.to_dict() for s in result.skipped] == [
        {
            "reviewer": "newcomer",
            "units": 12,
            "reason": "only 12 units judged and labeled by 2 or more reviewers (fewer than 30)",
        }
    ]
    assert "newcomer" not in {r.reviewer for r in result.reviewers}


def test_nobody_testable_gives_no_rate_and_a_reason() -> None:
    labels, _ = generated(4, n_units=20, n_reviewers=3, missing=0.0)
    result = alt_test(labels, majority_judge(labels))
    assert result.winning_rate is None and result.advantage_probability is None
    assert not result.passed
    assert result.reason == (
        "no reviewer has 30 or more judged units labeled by 2 or more reviewers"
    )
    assert len(result.skipped) == 3


def test_too_few_breaks_gives_no_verdict() -> None:
    # Every reviewer and the judge agree on everything, but only 3 units have a break.
    units = [(f"c{i}", 1) for i in range(60)]
    codes = {u: ("scope_break" if i < 3 else "in_role") for i, u in enumerate(units)}
    labels = {name: dict(codes) for name in ("ana", "ben", "cy")}
    result = alt_test(labels, dict(codes), break_codes={"scope_break"})
    assert result.winning_rate is not None
    assert result.break_units == 3
    assert not result.passed and result.verdict == "too few breaks to judge"


def test_benjamini_yekutieli_matches_the_transcription_and_statsmodels() -> None:
    from statsmodels.stats.multitest import multipletests

    rng = np.random.default_rng(5)
    for _ in range(50):
        p = (rng.random(int(rng.integers(1, 12))) ** 3).tolist()
        ours = benjamini_yekutieli(p, q=0.05)
        expected = sorted(int(i) for i in by_procedure(p, 0.05))
        assert sorted(np.flatnonzero(ours).tolist()) == expected
        assert ours == multipletests(p, alpha=0.05, method="fdr_by")[0].tolist()


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"epsilon": 1.5}, "epsilon must be a number in [0, 1), got 1.5"),
        ({"q": 0}, "q must be a number strictly between 0 and 1, got 0"),
        ({"min_reviewers_per_unit": 1}, "min_reviewers_per_unit must be an integer >= 2, got 1"),
        ({"min_units_per_reviewer": 1}, "min_units_per_reviewer must be an integer >= 2, got 1"),
    ],
)
def test_invalid_options_raise_exact_messages(options: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError) as error:
        alt_test({}, {}, **options)
    assert str(error.value) == message


def test_a_constant_judge_passing_too_makes_the_verdict_inconclusive() -> None:
    # 95% of units are in_role: a judge that always says in_role wins on accuracy.
    units = [(f"c{i}", 1) for i in range(200)]
    rng = np.random.default_rng(9)
    truth = {u: ("scope_break" if i % 20 == 0 else "in_role") for i, u in enumerate(units)}
    labels = {
        name: {u: (str(rng.choice(CODES)) if rng.random() < 0.15 else c) for u, c in truth.items()}
        for name in ("ana", "ben", "cy")
    }
    result = alt_test(labels, dict(truth), baseline=True)
    assert result.passed  # the definition's verdict ...
    assert result.baseline == {"code": "in_role", "winning_rate": 1.0, "passed": True}
    assert result.verdict == "inconclusive: a judge that always answers 'in_role' passes too"
    balanced, _ = generated(1, n_units=150, n_reviewers=5, noise=0.3, missing=0.0)
    fair = alt_test(balanced, majority_judge(balanced), baseline=True)
    assert fair.verdict == "passed" and fair.baseline is not None
    assert not fair.baseline["passed"]
