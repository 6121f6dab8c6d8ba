"""The plain sentences beside each figure (services/readings.py): bands, cells, cautions."""

from __future__ import annotations

from typing import Any

import pytest

from review_app.services.judging.estimate import NOT_RANDOM
from review_app.ui import readings
from review_app.ui.readings import FIRST_AUDIT_TURNS, decision_card


def coefficient(value: float | None, n: int, ci: list[float] | None = None) -> dict[str, Any]:
    return {"value": value, "n_units": n, "ci95": ci, "reason": None, "warning": None}


@pytest.mark.parametrize(
    ("value", "word"),
    [
        (-0.01, "less than chance"),
        (0.0, "only slightly"),
        (0.20, "only slightly"),
        (0.2001, "only fairly"),
        (0.40, "only fairly"),
        (0.41, "moderately"),
        (0.60, "moderately"),
        (0.61, "substantially"),
        (0.80, "substantially"),
        (0.81, "almost perfectly"),
        (1.0, "almost perfectly"),
    ],
)
def test_the_landis_koch_bands_and_their_edges(value: float, word: str) -> None:
    assert readings.band(value) == word


def test_a_figure_on_too_few_units_is_not_enough_data_and_never_none() -> None:
    assert readings.figure_text(coefficient(-0.25, 1)) == "not enough data (1 units)"
    assert readings.figure_text(coefficient(0.5, 29)) == "not enough data (29 units)"
    assert readings.figure_text(coefficient(None, 0)) == "not enough data (0 units)"
    assert readings.figure_text(coefficient(None, 40)) == "not defined"
    assert readings.figure_text(coefficient(0.5, 30)) == "0.50"
    assert readings.figure_text(coefficient(0.5, 30, [0.41, 0.6])) == "0.50 [0.41, 0.60]"
    assert readings.interval_text(coefficient(0.5, 30)) == "—"
    assert readings.interval_text(coefficient(0.5, 3, [0.1, 0.9])) == "—"
    assert readings.interval_text(coefficient(0.5, 30, [0.41, 0.6])) == "[0.41, 0.60]"
    assert readings.enough({"value": 0.3, "n": 30})  # the judge report counts in "n"


def report(alpha: dict[str, Any], **more: Any) -> dict[str, Any]:
    figures = {key: coefficient(0.5, 100) for key in readings.NAMES}
    return {
        **figures,
        "krippendorff_alpha": alpha,
        "alpha_ci95": alpha.get("ci95"),
        "cohen_kappa": {},
        "conversation": {"any_break_alpha": coefficient(0.5, 40)},
        "bootstrap": {"n_resamples": 0},
        **more,
    }


@pytest.mark.parametrize(
    ("value", "ending"),
    [
        (
            0.35,
            "reviewers agree on codes only fairly; the confusion below shows which codes "
            "they mix up: sharpen those codes' definitions before trusting these labels as gold.",
        ),
        (
            0.05,
            "reviewers agree on codes only slightly; the confusion below shows which codes "
            "they mix up: sharpen those codes' definitions before trusting these labels as gold.",
        ),
        (
            0.5,
            "reviewers agree on codes moderately; the confusion below shows which codes they "
            "still mix up; adjudicate the disagreements before using the labels as gold.",
        ),
        (
            0.7,
            "reviewers agree on codes substantially; adjudicate the disagreements below and "
            "the labels can serve as gold.",
        ),
        (0.9, "reviewers agree on codes almost perfectly; the labels can serve as gold."),
    ],
)
def test_the_alpha_sentence_says_what_follows(value: float, ending: str) -> None:
    sentence = readings.alpha_sentence(report(coefficient(value, 111, [0.22, 0.44])))
    assert sentence == f"alpha {value:.2f} [0.22, 0.44]: {ending}"


def test_alpha_on_too_few_turns_asks_for_overlap() -> None:
    assert readings.alpha_sentence(report(coefficient(0.9, 4))) == (
        "alpha: not enough data (4 units): too few turns have two reviewers to say whether "
        "they agree; assign overlapping cases until at least 30 turns have two."
    )


def test_cautions_are_in_words_a_person_uses() -> None:
    cautions = readings.agreement_warnings(
        report(
            coefficient(0.4, 111),
            fleiss_kappa=coefficient(-0.25, 1),
            cohen_kappa={
                "ana|rita": coefficient(0.1, 7),
                "ana|ben": coefficient(0.5, 111),
                "ben|zoe": coefficient(None, 0),
            },
            conversation={"any_break_alpha": coefficient(0.5, 12), "readers": {"3": 12}},
        )
    )
    assert cautions == [
        "Fleiss' kappa rests on 1 turns with two reviewers, fewer than 30: it is not shown.",
        "ana and rita share 7 turns, fewer than 30: their kappa is not shown.",
        "ben and zoe share no labeled turn: no kappa for them.",
        "12 conversations were read by three reviewers each, fewer than 30: agreement on "
        "whether and where a conversation breaks is not reported.",
    ]
    assert readings.readers_text(17, {"2": 5, "3": 12}) == (
        "17 conversations were read by two or more reviewers (5 by two, 12 by three)"
    )
    assert not [c for c in cautions if "|" in c or "_" in c]


@pytest.mark.parametrize(
    ("p", "text"),
    [
        (6e-15, "p < 0.001"),
        (0.000999, "p < 0.001"),
        (0.001, "p = 0.001"),
        (0.0123456, "p = 0.0123"),
        (0.5, "p = 0.5"),
        (None, "—"),
    ],
)
def test_p_values_round_for_reading(p: float | None, text: str) -> None:
    assert readings.format_p(p) == text


def estimate(**more: Any) -> dict[str, Any]:
    return {
        "level": "turn",
        "ppi": {"value": 0.022, "ci95": [0.0, 0.045]},
        "human_only": {"value": 0.012, "ci95": [0.002, 0.064]},
        "judge_only": 0.11,
        "budget": {"more_audited_units_to_halve_width": 315, "reason": None},
        "warnings": [],
        **more,
    }


def test_the_break_rate_sentence_and_the_budget() -> None:
    assert readings.estimate_sentence(estimate()) == (
        "Turn break rate 2.2% [0.0%, 4.5%] (judge corrected by gold); reviewers alone say "
        "1.2% [0.2%, 6.4%], the judge alone 11.0%."
    )
    assert readings.budget_sentence(estimate()) == (
        "Budget: about 315 more audited turns would halve the interval's width."
    )
    many = {"more_audited_units_to_halve_width": 49232, "reason": None}
    assert readings.budget_sentence(estimate(budget=many)) == (
        "Budget: about 49,232 more audited turns would halve the interval's width."
    )
    none = {"more_audited_units_to_halve_width": None, "reason": None}
    assert readings.budget_sentence(estimate(budget=none)) is None


@pytest.mark.parametrize(
    ("value", "ci", "ending"),
    [
        (
            0.3,
            [0.2, 0.4],
            "agrees with gold only fairly; do not let it decide alone: read its "
            "disagreements below.",
        ),
        (
            0.5,
            [0.4, 0.6],
            "agrees with gold moderately; let it decide only where the selective "
            "judging below certifies it.",
        ),
        (
            0.7,
            [0.6, 0.8],
            "agrees with gold substantially; compare with how reviewers agree "
            "with each other below.",
        ),
        (
            0.66,
            [0.0, 1.0],
            "the interval is too wide to say how well the judge agrees; "
            "adjudicate more disagreements or an audit sample before reading it.",
        ),
    ],
)
def test_the_judge_kappa_sentence(value: float, ci: list[float], ending: str) -> None:
    sentence = readings.kappa_sentence({"value": value, "n": 84, "ci95": ci}, who="Judge kappa")
    assert sentence.startswith(f"Judge kappa against gold {value:.2f} [")
    assert sentence.endswith(ending)


def test_inconclusive_points_to_the_like_for_like_kappas() -> None:
    sentence = readings.alt_test_sentence(
        {
            "verdict": "inconclusive: a judge that always answers 'in_role' passes too",
            "baseline": {"code": "in_role"},
        }
    )
    assert sentence.startswith("Inconclusive: a judge that always answers in_role would pass")
    assert "Read the like-for-like kappas below" in sentence
    rows = readings.like_for_like_rows(
        {
            "pairs": [
                {
                    "reviewers": ["ana", "ben"],
                    "units": 111,
                    "reviewer_kappa": {"value": 0.53, "n": 111, "ci95": [0.35, 0.75]},
                    "judge_kappa": {
                        "ana": {"value": 0.64, "n": 111, "ci95": None},
                        "ben": {"value": 0.1, "n": 3, "ci95": None},
                    },
                }
            ]
        }
    )
    assert rows == [
        {
            "reviewers": "ana and ben",
            "turns": 111,
            "kappa between them": "0.53 [0.35, 0.75]",
            "judge with the first": "0.64",
            "judge with the second": "not enough data (3 units)",
        }
    ]


def test_the_weakest_pair_is_named_in_words() -> None:
    assert readings.weakest_pair_sentence({"ana|rita": coefficient(0.1, 3)}) is None
    sentence = readings.weakest_pair_sentence(
        {
            "ana|ben": coefficient(0.53, 111, [0.35, 0.75]),
            "ben|chloe": coefficient(0.23, 111, [0.15, 0.31]),
            "ana|rita": coefficient(-0.4, 3),  # too few turns: never the weakest
        }
    )
    assert sentence == (
        "ben and chloe agree least: kappa 0.23 [0.15, 0.31], fairly; choose them below to "
        "see the codes they label differently."
    )


def _estimate(*, random_gold: bool, more: int | None = None) -> dict[str, Any]:
    return {
        "level": "turn",
        "n_judged": 500,
        "n_gold": 84,
        "gold_source": "an audit sample" if random_gold else "adjudicated and unanimous gold",
        "budget": {"more_audited_units_to_halve_width": more, "reason": None},
        "warnings": [] if random_gold else [NOT_RANDOM],
    }


def test_the_decision_card_answers_in_plain_words() -> None:
    passed = decision_card(
        alt_test={"verdict": "passed", "units": 84}, estimate=_estimate(random_gold=True)
    )
    assert passed.verdict == "passed"
    assert passed.answer.startswith("Yes: the judge agrees with reviewers on 84 turns")
    assert passed.rests_on == (
        "The break rate rests on 500 judged turns and 84 with gold from an audit sample."
    )
    assert passed.next_step is None and passed.audit_turns is None
    failed = decision_card(
        alt_test={"verdict": "failed"}, estimate=_estimate(random_gold=True, more=120)
    )
    assert failed.verdict == "failed" and failed.answer.startswith("No: ")
    assert failed.audit_turns == 120
    assert failed.next_step == (
        "Next: draw 120 more audited turns and assign them, to halve the interval's width."
    )
    untested = decision_card(alt_test={}, estimate=_estimate(random_gold=False, more=40))
    assert untested.verdict == "open"
    assert untested.answer == (
        "Not yet: not tested (too few turns with several reviewers); assign cases to two or "
        "more reviewers each on the team page (or draw an audit sample with overlap 2), and "
        "the test runs once they are labeled."
    )
    inconclusive = decision_card(
        alt_test={"verdict": "inconclusive: a judge that always answers 'in_role' passes too",
                  "baseline": {"code": "in_role"}},
        estimate=_estimate(random_gold=True),
    )  # fmt: skip
    assert inconclusive.answer.startswith(
        "Not yet: a judge that always answers in_role would pass this test too"
    )
    assert "Inconclusive" not in inconclusive.answer
    assert untested.rests_on.endswith(": its interval is not valid yet.")
    # Gold that is no random sample asks for a first audit sample, whatever the budget says.
    assert untested.audit_turns == FIRST_AUDIT_TURNS == 100
