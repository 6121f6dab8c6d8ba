"""What a figure means for the decision, in one plain sentence (pure functions, no data access).

The agreement and judge pages show a number and, beside it, what it says and what to do
next. The words for agreement coefficients (alpha, kappa) follow the bands of Landis &
Koch (1977), "The measurement of observer agreement for categorical data", Biometrics
33(1):159-174, table on p. 165: below 0 poor, 0.00-0.20 slight, 0.21-0.40 fair,
0.41-0.60 moderate, 0.61-0.80 substantial, 0.81-1.00 almost perfect. A figure resting on
fewer than :data:`MIN_UNITS` units (``SMALL_SAMPLE_UNITS`` of the agreement core) is
"not enough data" and neither plotted nor read.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from review_app.agreement.coefficients import SMALL_SAMPLE_UNITS
from review_app.services.judging.estimate import NOT_RANDOM

if TYPE_CHECKING:
    from review_app.services.judging.judge_compare import RunComparison

MIN_UNITS = SMALL_SAMPLE_UNITS

NAMES = {
    "percent_agreement": "percent agreement",
    "krippendorff_alpha": "alpha (codes)",
    "alpha_break": "alpha (break / no break)",
    "alpha_verdict": "alpha (verdict)",
    "fleiss_kappa": "Fleiss' kappa",
    "gwet_ac1": "Gwet's AC1",
}

# (upper bound inclusive, word) — Landis & Koch (1977), p. 165.
BANDS = (
    (0.0, "less than chance"),
    (0.20, "only slightly"),
    (0.40, "only fairly"),
    (0.60, "moderately"),
    (0.80, "substantially"),
    (1.0, "almost perfectly"),
)


def band(value: float) -> str:
    """The Landis & Koch (1977) word for an agreement coefficient: ``0.35`` -> ``only fairly``.

    Bands (upper bounds inclusive): < 0 "less than chance", <= 0.20 "only slightly",
    <= 0.40 "only fairly", <= 0.60 "moderately", <= 0.80 "substantially", above
    "almost perfectly".
    """
    if value < 0:
        return BANDS[0][1]
    for upper, word in BANDS[1:]:
        if value <= upper:
            return word
    return BANDS[-1][1]


def _units(coefficient: dict[str, Any]) -> int:
    n = coefficient.get("n_units", coefficient.get("n"))
    return int(n or 0)


def enough(coefficient: dict[str, Any] | None) -> bool:
    """A value resting on at least :data:`MIN_UNITS` units: one to plot and to read."""
    return (
        coefficient is not None
        and coefficient.get("value") is not None
        and _units(coefficient) >= MIN_UNITS
    )


def figure_text(coefficient: dict[str, Any] | None, *, percent: bool = False) -> str:
    """``0.39 [0.27, 0.46]``, ``0.39``, ``not enough data (4 units)`` or ``not defined``."""
    if coefficient is None:
        return "—"
    if not enough(coefficient):
        if coefficient.get("value") is None and _units(coefficient) >= MIN_UNITS:
            return "not defined"
        return f"not enough data ({_units(coefficient):d} units)"

    def number(value: float) -> str:
        return f"{100 * value:.1f}%" if percent else f"{value:.2f}"

    text = number(coefficient["value"])
    ci = coefficient.get("ci95")
    if ci and ci[0] is not None and ci[1] is not None:
        text += f" [{number(ci[0])}, {number(ci[1])}]"
    return text


def interval_text(coefficient: dict[str, Any] | None) -> str:
    """``[0.27, 0.46]`` or ``—`` (never ``None``)."""
    ci = (coefficient or {}).get("ci95")
    if not enough(coefficient) or not ci or ci[0] is None or ci[1] is None:
        return "—"
    return f"[{ci[0]:.2f}, {ci[1]:.2f}]"


def alpha_sentence(report: Mapping[str, Any]) -> str:
    """The agreement page's headline: what alpha on codes says and what to do next."""
    alpha = dict(report["krippendorff_alpha"])
    if alpha.get("ci95") is None and report.get("alpha_ci95"):
        alpha["ci95"] = report["alpha_ci95"]
    if not enough(alpha):
        return (
            f"alpha: {figure_text(alpha)}: too few turns have two reviewers to say whether "
            f"they agree; assign overlapping cases until at least {MIN_UNITS:d} turns have two."
        )
    value = alpha["value"]
    words = band(value)
    head = f"alpha {figure_text(alpha)}: reviewers agree on codes {words}"
    if value <= 0.40:
        return head + (
            "; the confusion below shows which codes they mix up: sharpen those codes' "
            "definitions before trusting these labels as gold."
        )
    if value <= 0.60:
        return head + (
            "; the confusion below shows which codes they still mix up; adjudicate the "
            "disagreements before using the labels as gold."
        )
    if value <= 0.80:
        return head + "; adjudicate the disagreements below and the labels can serve as gold."
    return head + "; the labels can serve as gold."


def _pair_names(pair: str) -> tuple[str, str]:
    first, _, second = pair.partition("|")
    return first, second


def weakest_pair_sentence(cohen: dict[str, dict[str, Any]]) -> str | None:
    """The pair of reviewers who agree least, in words (``None``: no pair with enough data).

    Among pairs resting on at least :data:`MIN_UNITS` shared turns, the lowest kappa;
    its word from :func:`band`.
    """
    shown = [(pair, c) for pair, c in cohen.items() if enough(c)]
    if not shown:
        return None
    pair, coefficient = min(shown, key=lambda item: (item[1]["value"], item[0]))
    first, second = _pair_names(pair)
    return (
        f"{first} and {second} agree least: kappa {figure_text(coefficient)}, "
        f"{band(coefficient['value']).removeprefix('only ')}; choose them below to see the "
        "codes they label differently."
    )


def agreement_warnings(report: Mapping[str, Any]) -> list[str]:
    """The agreement report's cautions in words a person uses (no internal names)."""
    out = []
    for key, name in NAMES.items():
        coefficient = report.get(key) or {}
        n = _units(coefficient)
        if coefficient.get("value") is not None and n < MIN_UNITS:
            out.append(
                f"{name[0].upper()}{name[1:]} rests on {n:d} turns with two reviewers, fewer "
                f"than {MIN_UNITS:d}: it is not shown."
            )
    for pair, coefficient in (report.get("cohen_kappa") or {}).items():
        first, second = _pair_names(pair)
        n = _units(coefficient)
        if n == 0:
            out.append(f"{first} and {second} share no labeled turn: no kappa for them.")
        elif n < MIN_UNITS:
            out.append(
                f"{first} and {second} share {n:d} turns, fewer than {MIN_UNITS:d}: their "
                "kappa is not shown."
            )
    conversation = report.get("conversation") or {}
    shared = _units(conversation.get("any_break_alpha") or {})
    if conversation and shared < MIN_UNITS:
        out.append(
            f"{shared:d} conversations were read by two reviewers, fewer than {MIN_UNITS:d}: "
            "agreement on whether and where a conversation breaks is not reported."
        )
    alpha = report.get("krippendorff_alpha") or {}
    resampled = (report.get("bootstrap") or {}).get("n_resamples")
    if enough(alpha) and resampled and not (report.get("alpha_ci95") or alpha.get("ci95")):
        out.append("alpha has no interval: the resamples did not give one.")
    return out


def format_p(p: float | None) -> str:
    """A p-value for reading: ``p < 0.001``, else 3 significant digits; ``—`` when none."""
    if p is None:
        return "—"
    if p < 0.001:
        return "p < 0.001"
    return f"p = {p:.3g}"


def percent(value: float | None) -> str:
    return "—" if value is None else f"{100 * value:.1f}%"


def _interval(ci: list[float] | None) -> str:
    return f" [{percent(ci[0])}, {percent(ci[1])}]" if ci else ""


def estimate_sentence(estimate: Mapping[str, Any]) -> str:
    """The judge page's headline: the break rate, and what reviewers and the judge alone say."""
    ppi = estimate["ppi"]
    human = estimate.get("human_only") or {}
    return (
        f"{estimate['level'].capitalize()} break rate {percent(ppi['value'])}"
        f"{_interval(ppi['ci95'])} (judge corrected by gold); reviewers alone say "
        f"{percent(human.get('value'))}{_interval(human.get('ci95'))}, the judge alone "
        f"{percent(estimate['judge_only'])}."
    )


def budget_sentence(estimate: Mapping[str, Any]) -> str | None:
    """The budget line ``review-app judge estimate`` prints, as a sentence."""
    budget = estimate.get("budget") or {}
    more = budget.get("more_audited_units_to_halve_width")
    if more is not None:
        return (
            f"Budget: about {more:,d} more audited {estimate['level']}s would halve the "
            "interval's width."
        )
    if budget.get("reason"):
        return f"Budget: {budget['reason']}."
    return None


WIDE_INTERVAL = 0.5
"""An interval wider than this spans two or more bands: too wide to put a word on."""


def kappa_sentence(coefficient: dict[str, Any] | None, *, who: str) -> str:
    """``Judge kappa against gold 0.64 [0.51, 0.78]: agrees substantially; ...`` for a run.

    The word comes from :func:`band`; an interval wider than :data:`WIDE_INTERVAL` gets
    no word at all, only the advice to gather more gold.
    """
    more = "adjudicate more disagreements or an audit sample before reading it."
    if not enough(coefficient):
        return f"{who} against gold: {figure_text(coefficient)}; {more}"
    assert coefficient is not None
    ci = coefficient.get("ci95")
    if ci and ci[0] is not None and ci[1] is not None and ci[1] - ci[0] > WIDE_INTERVAL:
        return (
            f"{who} against gold {figure_text(coefficient)}: the interval is too wide to "
            f"say how well the judge agrees; {more}"
        )
    value = coefficient["value"]
    head = f"{who} against gold {figure_text(coefficient)}: the judge agrees with gold"
    head += f" {band(value)}"
    if value <= 0.40:
        return head + "; do not let it decide alone: read its disagreements below."
    if value <= 0.60:
        return head + "; let it decide only where the selective judging below certifies it."
    return head + "; compare with how reviewers agree with each other below."


def alt_test_sentence(alt_test: Mapping[str, Any]) -> str:
    """What the alternative annotator test decided, and where to look when inconclusive."""
    verdict = str(alt_test.get("verdict") or "not tested")
    if verdict.startswith("inconclusive"):
        baseline = (alt_test.get("baseline") or {}).get("code")
        constant = f" that always answers {baseline}" if baseline else " that answers one code"
        return (
            f"Inconclusive: a judge{constant} would pass this test too, so it cannot tell. "
            "Read the like-for-like kappas below: on the same turns, does the judge agree "
            "with each reviewer as well as the other reviewer does?"
        )
    if verdict == "passed":
        return (
            "Passed: the judge agrees with reviewers at least as well as they agree with "
            "each other."
        )
    if verdict == "failed":
        return "Failed: reviewers agree with each other better than the judge agrees with them."
    return "Not tested: too few turns with several reviewers."


def like_for_like_rows(like: Mapping[str, Any]) -> list[dict[str, str | int]]:
    """Judge and reviewers on the same turns: one row per pair of reviewers."""
    rows = []
    for pair in like.get("pairs", []):
        a, b = pair["reviewers"]
        judge = pair["judge_kappa"]
        rows.append(
            {
                "reviewers": f"{a} and {b}",
                "turns": pair["units"],
                "kappa between them": figure_text(pair["reviewer_kappa"]),
                "judge with the first": figure_text(judge.get(a)),
                "judge with the second": figure_text(judge.get(b)),
            }
        )
    return rows


FIRST_AUDIT_TURNS = 100
"""A first audit sample's size: a proportion from 100 random turns is within about 10
points of the truth at worst (1.96 * sqrt(0.25 / 100) = 0.098)."""


@dataclass(frozen=True)
class DecisionCard:
    """The judge page's heading card: the answer, what it rests on, and the next step."""

    verdict: str  # "passed", "failed" or "open"
    answer: str
    rests_on: str
    next_step: str | None
    audit_turns: int | None  # the audit sample to draw next, or None when none is asked for


def decision_card(*, alt_test: Mapping[str, Any], estimate: Mapping[str, Any]) -> DecisionCard:
    """May this judge replace a reviewer? In plain words, from the alternative annotator
    test (Calderon et al. 2025), with what the break-rate estimate rests on and the
    audit sample that would make it trustworthy (its size from the budget line)."""
    verdict = str(alt_test.get("verdict") or "not tested")
    tested = alt_test.get("units")
    on_turns = f" on {tested:d} turns" if isinstance(tested, int) else ""
    if verdict == "passed":
        answer = (
            f"Yes: the judge agrees with reviewers{on_turns} at least as well as they agree "
            "with each other, so it may label in their place."
        )
        state = "passed"
    elif verdict == "failed":
        answer = (
            f"No: reviewers agree with each other better than the judge agrees with "
            f"them{on_turns}; keep reviewers labeling, and try another prompt version."
        )
        state = "failed"
    else:
        answer = "Not yet: " + alt_test_sentence(alt_test)
        state = "open"
    n_gold, n_judged = int(estimate.get("n_gold") or 0), int(estimate.get("n_judged") or 0)
    random_gold = NOT_RANDOM not in estimate.get("warnings", [])
    rests_on = (
        f"The break rate rests on {n_judged:d} judged {estimate.get('level', 'turn')}s and "
        f"{n_gold:d} with gold from {estimate.get('gold_source', 'no gold')}"
        + ("." if random_gold else ": its interval is not valid yet.")
    )
    more = (estimate.get("budget") or {}).get("more_audited_units_to_halve_width")
    if not random_gold:
        audit_turns: int | None = FIRST_AUDIT_TURNS
        next_step = (
            f"Next: draw an audit sample of {FIRST_AUDIT_TURNS:d} turns at random and assign "
            "it to reviewers; once it is labeled and adjudicated, the interval is valid."
        )
    elif isinstance(more, int) and more > 0:
        audit_turns = more
        next_step = (
            f"Next: draw {more:d} more audited turns and assign them, to halve the "
            "interval's width."
        )
    else:
        audit_turns, next_step = None, None
    return DecisionCard(state, answer, rests_on, next_step, audit_turns)


def _interval_text(estimate: dict[str, Any], *, signed: bool = False) -> str:
    value, ci = estimate.get("value"), estimate.get("ci95")
    if value is None:
        return "not enough data"
    spec = "+.2f" if signed else ".2f"
    text = format(value + 0.0, spec)
    return f"{text} [{format(ci[0] + 0.0, spec)}, {format(ci[1] + 0.0, spec)}]" if ci else text


def comparison_rows(report: RunComparison) -> list[dict[str, str]]:
    """Two judge runs on the same gold units (``judge compare``): one row per run and
    one for the paired difference (second - first), as text for a table."""
    a, b = report["first"], report["second"]
    alt = report.get("alt_test") or {}
    rows = [
        {
            "run": f"{name}: {run['name']}",
            "kappa with gold": _interval_text(report["kappa"][name]),
            "accuracy": _interval_text(report["accuracy"][name]),
            "may replace a reviewer?": str(
                (alt.get(name) or {}).get("verdict") or "not tested"
            ).split(":")[0],
        }
        for name, run in zip((a, b), report["runs"], strict=True)
    ]
    mcnemar = report["mcnemar"]
    rows.append(
        {
            "run": f"{b} - {a} (paired)",
            "kappa with gold": _interval_text(report["kappa_difference"], signed=True),
            "accuracy": _interval_text(report["accuracy_difference"], signed=True),
            "may replace a reviewer?": (
                f"McNemar {format_p(mcnemar['p_value'])} (only {a} right on "
                f"{mcnemar['only_first_right']:d}, only {b} on {mcnemar['only_second_right']:d})"
            ),
        }
    )
    return rows
