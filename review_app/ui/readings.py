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
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Literal

from review_app.agreement.coefficients import SMALL_SAMPLE_UNITS
from review_app.services.judging.estimate import NOT_RANDOM
from review_app.stats.core import Estimate, EstimateJson, UnitsEstimateJson
from review_app.stats.paired import McNemarResult

if TYPE_CHECKING:
    from review_app.calibration.like_for_like import LikeForLike
    from review_app.calibration.scores import ReliabilityJson
    from review_app.services.judging.drift import DriftReport, PositionRate
    from review_app.services.judging.estimate import BreakRateEstimate
    from review_app.services.judging.judge_compare import RunComparison
    from review_app.services.judging.selective import CoverageCurve
    from review_app.services.review.agreement_reports import AgreementReport
    from review_app.stats.alt_test import AltTestJson

MIN_UNITS = SMALL_SAMPLE_UNITS

CoefficientName = Literal[
    "percent_agreement",
    "krippendorff_alpha",
    "alpha_break",
    "alpha_verdict",
    "fleiss_kappa",
    "gwet_ac1",
]
"""The keys of an agreement report's headline coefficients."""

NAMES: dict[CoefficientName, str] = {
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


Figure = EstimateJson | UnitsEstimateJson
"""A figure of a report as stored: an estimate (``n``) or an agreement coefficient
(``n_units``)."""


def _estimate(coefficient: Figure | Estimate) -> Estimate:
    return coefficient if isinstance(coefficient, Estimate) else Estimate.from_dict(coefficient)


def enough(coefficient: Figure | Estimate | None) -> bool:
    """A value resting on at least :data:`MIN_UNITS` units: one to plot and to read."""
    if coefficient is None:
        return False
    estimate = _estimate(coefficient)
    return estimate.value is not None and estimate.n >= MIN_UNITS


def figure_text(coefficient: Figure | Estimate | None, *, percent: bool = False) -> str:
    """``0.39 [0.27, 0.46]``, ``0.39``, ``not enough data (4 units)`` or ``not defined``."""
    if coefficient is None:
        return "—"
    estimate = _estimate(coefficient)
    if estimate.value is None or estimate.n < MIN_UNITS:
        if estimate.value is None and estimate.n >= MIN_UNITS:
            return "not defined"
        return f"not enough data ({estimate.n:d} units)"

    def number(value: float) -> str:
        return f"{100 * value:.1f}%" if percent else f"{value:.2f}"

    text = number(estimate.value)
    if estimate.ci95 is not None:
        text += f" [{number(estimate.ci95[0])}, {number(estimate.ci95[1])}]"
    return text


def interval_text(coefficient: Figure | Estimate | None) -> str:
    """``[0.27, 0.46]`` or ``—`` (never ``None``)."""
    if coefficient is None or not enough(coefficient):
        return "—"
    ci = _estimate(coefficient).ci95
    return "—" if ci is None else f"[{ci[0]:.2f}, {ci[1]:.2f}]"


def alpha_sentence(report: AgreementReport) -> str:
    """The agreement page's headline: what alpha on codes says and what to do next."""
    alpha = Estimate.from_dict(report["krippendorff_alpha"])
    low_high = report["alpha_ci95"]
    if alpha.ci95 is None and low_high:
        alpha = replace(alpha, ci95=(low_high[0], low_high[1]))
    if alpha.value is None or not enough(alpha):
        return (
            f"alpha: {figure_text(alpha)}: too few turns have two reviewers to say whether "
            f"they agree; assign overlapping cases until at least {MIN_UNITS:d} turns have two."
        )
    value = alpha.value
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


def weakest_pair_sentence(cohen: Mapping[str, Figure]) -> str | None:
    """The pair of reviewers who agree least, in words (``None``: no pair with enough data).

    Among pairs resting on at least :data:`MIN_UNITS` shared turns, the lowest kappa;
    its word from :func:`band`.
    """
    shown = [
        (estimate.value, pair, estimate)
        for pair, c in cohen.items()
        if (estimate := _estimate(c)).value is not None and enough(estimate)
    ]
    if not shown:
        return None
    value, pair, coefficient = min(shown, key=lambda item: (item[0], item[1]))
    first, second = _pair_names(pair)
    return (
        f"{first} and {second} agree least: kappa {figure_text(coefficient)}, "
        f"{band(value).removeprefix('only ')}; choose them below to see the "
        "codes they label differently."
    )


def agreement_warnings(report: AgreementReport) -> list[str]:
    """The agreement report's cautions in words a person uses (no internal names)."""
    out = []
    for key, name in NAMES.items():
        estimate = Estimate.from_dict(report[key])
        n = estimate.n
        if estimate.value is not None and n < MIN_UNITS:
            out.append(
                f"{name[0].upper()}{name[1:]} rests on {n:d} turns with two reviewers, fewer "
                f"than {MIN_UNITS:d}: it is not shown."
            )
    for pair, coefficient in report["cohen_kappa"].items():
        first, second = _pair_names(pair)
        n = coefficient["n_units"]
        if n == 0:
            out.append(f"{first} and {second} share no labeled turn: no kappa for them.")
        elif n < MIN_UNITS:
            out.append(
                f"{first} and {second} share {n:d} turns, fewer than {MIN_UNITS:d}: their "
                "kappa is not shown."
            )
    conversation = report["conversation"]
    shared = conversation["any_break_alpha"]["n_units"]
    if shared < MIN_UNITS:
        out.append(
            f"{readers_text(shared, conversation['readers'])}, fewer than {MIN_UNITS:d}: "
            "agreement on whether and where a conversation breaks is not reported."
        )
    alpha = Estimate.from_dict(report["krippendorff_alpha"])
    resampled = report["bootstrap"]["n_resamples"]
    if enough(alpha) and resampled and not (report["alpha_ci95"] or alpha.ci95):
        out.append("alpha has no interval: the resamples did not give one.")
    return out


_NUMBER_WORDS = ("no", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine")


def _count_word(n: int) -> str:
    return _NUMBER_WORDS[n] if 0 <= n < len(_NUMBER_WORDS) else f"{n:d}"


def readers_text(shared: int, readers: Mapping[str, int] | None) -> str:
    """``17 conversations were read by three reviewers each`` (or ``by two or more
    reviewers (5 by two, 12 by three)``) from the report's ``conversation.readers``."""
    head = f"{shared:d} conversation{'' if shared == 1 else 's'} {'was' if shared == 1 else 'were'}"
    counts = sorted((int(k), int(n)) for k, n in (readers or {}).items() if int(n))
    if len(counts) == 1:
        each = " each" if shared != 1 else ""
        return f"{head} read by {_count_word(counts[0][0])} reviewers{each}"
    if not counts:
        return f"{head} read by two or more reviewers"
    parts = ", ".join(f"{n:d} by {_count_word(k)}" for k, n in counts)
    return f"{head} read by two or more reviewers ({parts})"


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


def _no_estimate(estimate: BreakRateEstimate) -> str:
    """Why PPI gives no break rate, and the step that fixes it."""
    n_gold, n_judged, level = estimate["n_gold"], estimate["n_judged"], estimate["level"]
    if n_gold >= 2 and n_judged <= n_gold:
        return (
            f"the judge has judged only the {n_gold:,d} {level}s with gold, so it adds "
            "nothing to what reviewers say; run it on every turn (below) and the rate uses "
            "its verdicts on the rest"
        )
    if n_gold < 2:
        return (
            f"{n_gold:d} of the judged {level}s {'has' if n_gold == 1 else 'have'} gold; "
            "adjudicate disagreements or draw an audit sample (below) first"
        )
    return estimate["budget"]["reason"] or "no estimate"


def estimate_sentence(estimate: BreakRateEstimate) -> str:
    """The judge page's headline: the break rate with the estimator it comes from, and what
    reviewers and the judge alone say. When PPI++ gives the judge weight 0 the rate is
    the reviewers' estimate and the sentence says so and why; without an estimate, why."""
    ppi, human, level = estimate["ppi"], estimate["human_only"], estimate["level"]
    judge_only, budget = estimate["judge_only"], estimate["budget"]
    alone = (
        f"reviewers alone say {percent(human['value'])}{_interval(human['ci95'])}, "
        f"the judge alone {percent(judge_only)}."
    )
    value, ci95, weight = ppi["value"], ppi["ci95"], ppi.get("lambda")
    if value is None:
        return (
            f"{level.capitalize()} break rate: no estimate yet: {_no_estimate(estimate)}; " + alone
        )
    interval = _interval(ci95)
    if ci95 is None:
        why = budget["reason"]
        interval = f" ({why})" if why else ""
    if weight == 0:
        why = ppi.get("lambda_reason") or "its verdicts do not go with gold"
        return (
            f"{level.capitalize()} break rate {percent(value)}{interval}: the "
            f"reviewers' estimate from {estimate['n_gold']:,d} gold {level}s, because the "
            f"judge adds nothing here ({why}), so PPI++ gives its verdicts no weight; the "
            f"judge alone would say {percent(judge_only)}."
        )
    corrected = (
        "judge corrected by gold"
        if weight is None
        else f"the judge's verdicts corrected by gold, weight {weight:.2f}"
    )
    return f"{level.capitalize()} break rate {percent(value)}{interval} ({corrected}); " + alone


def budget_sentence(estimate: BreakRateEstimate) -> str | None:
    """The budget line ``review-app judge estimate`` prints, as a sentence."""
    budget = estimate["budget"]
    more, reason = budget["more_audited_units_to_halve_width"], budget["reason"]
    if estimate["ppi"]["value"] is None:
        return None  # the break rate's sentence says why there is none
    if more is not None:
        return (
            f"Budget: about {more:,d} more audited {estimate['level']}s would halve the "
            "interval's width."
        )
    if reason:
        return f"Budget: {reason}."
    return None


WIDE_INTERVAL = 0.5
"""An interval wider than this spans two or more bands: too wide to put a word on."""


def kappa_sentence(coefficient: Figure | None, *, who: str) -> str:
    """``Judge kappa against gold 0.64 [0.51, 0.78]: agrees substantially; ...`` for a run.

    The word comes from :func:`band`; an interval wider than :data:`WIDE_INTERVAL` gets
    no word at all, only the advice to gather more gold.
    """
    more = "adjudicate more disagreements or an audit sample before reading it."
    if coefficient is None or not enough(coefficient):
        return f"{who} against gold: {figure_text(coefficient)}; {more}"
    estimate = _estimate(coefficient)
    ci, value = estimate.ci95, estimate.value
    assert value is not None
    if ci is not None and ci[1] - ci[0] > WIDE_INTERVAL:
        return (
            f"{who} against gold {figure_text(coefficient)}: the interval is too wide to "
            f"say how well the judge agrees; {more}"
        )
    head = f"{who} against gold {figure_text(coefficient)}: the judge agrees with gold"
    head += f" {band(value)}"
    if value <= 0.40:
        return head + "; do not let it decide alone: read its disagreements below."
    if value <= 0.60:
        return head + "; let it decide only where the selective judging below certifies it."
    return head + "; compare with how reviewers agree with each other below."


def _alt_test_reason(alt_test: AltTestJson) -> str:
    """What the test found, without a leading word, for a verdict other than passed or
    failed: inconclusive, too few breaks, or not tested (each with the step that fixes it)."""
    verdict = alt_test.get("verdict") or "not tested"
    if verdict.startswith("inconclusive"):
        baseline = alt_test.get("baseline")
        code = None if baseline is None else baseline["code"]
        constant = f" that always answers {code}" if code else " that answers one code"
        return (
            f"a judge{constant} would pass this test too, so it cannot tell. Read the "
            "like-for-like kappas below: on the same turns, does the judge agree with each "
            "reviewer as well as the other reviewer does?"
        )
    reason = alt_test.get("reason")
    if verdict.startswith("too few breaks"):
        return (
            f"too few breaks to judge ({reason or 'fewer than 10 in the rarer class'}); "
            "have reviewers label more turns where breaks are likely (the queue's most "
            "informative order puts them first)."
        )
    return (
        f"not tested ({reason or 'too few turns with several reviewers'}); assign cases "
        "to two or more reviewers each on the team page (or draw an audit sample with "
        "overlap 2), and the test runs once they are labeled."
    )


def alt_test_sentence(alt_test: AltTestJson) -> str:
    """What the alternative annotator test decided, and where to look or what to do when
    it decided nothing (each empty result says why and the step that fixes it)."""
    verdict = alt_test.get("verdict") or "not tested"
    if verdict == "passed":
        return (
            "Passed: the judge agrees with reviewers at least as well as they agree with "
            "each other."
        )
    if verdict == "failed":
        return "Failed: reviewers agree with each other better than the judge agrees with them."
    reason = _alt_test_reason(alt_test)
    if verdict.startswith("inconclusive"):
        return "Inconclusive: " + reason
    return reason[:1].upper() + reason[1:]


def alt_test_untested(alt_test: AltTestJson) -> bool:
    """Whether the test did not run for want of turns with several reviewers (its step,
    assigning overlapping cases, is on the team page)."""
    return (alt_test.get("verdict") or "not tested").startswith("not tested")


def like_for_like_rows(like: LikeForLike) -> list[dict[str, str | int]]:
    """Judge and reviewers on the same turns: one row per pair of reviewers."""
    rows: list[dict[str, str | int]] = []
    for pair in like["pairs"]:
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


def decision_card(*, alt_test: AltTestJson, estimate: BreakRateEstimate) -> DecisionCard:
    """May this judge replace a reviewer? In plain words, from the alternative annotator
    test (Calderon et al. 2025), with what the break-rate estimate rests on and the
    audit sample that would make it trustworthy (its size from the budget line)."""
    verdict = alt_test.get("verdict") or "not tested"
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
        answer = "Not yet: " + _alt_test_reason(alt_test)
        state = "open"
    random_gold = NOT_RANDOM not in estimate["warnings"]
    rests_on = (
        f"The break rate rests on {estimate['n_judged']:d} judged {estimate['level']}s and "
        f"{estimate['n_gold']:d} with gold from {estimate['gold_source']}"
        + ("." if random_gold else ": its interval is not valid yet.")
    )
    more = estimate["budget"]["more_audited_units_to_halve_width"]
    if not random_gold:
        audit_turns: int | None = FIRST_AUDIT_TURNS
        next_step = (
            f"Next: draw an audit sample of {FIRST_AUDIT_TURNS:d} turns at random and assign "
            "it to reviewers; once it is labeled and adjudicated, the interval is valid."
        )
    elif more is not None and more > 0:
        audit_turns = more
        next_step = (
            f"Next: draw {more:d} more audited turns and assign them, to halve the "
            "interval's width."
        )
    else:
        audit_turns, next_step = None, None
    return DecisionCard(state, answer, rests_on, next_step, audit_turns)


def _interval_text(figure: EstimateJson, *, signed: bool = False) -> str:
    estimate = Estimate.from_dict(figure)
    value, ci = estimate.value, estimate.ci95
    if value is None:
        return "not enough data"
    spec = "+.2f" if signed else ".2f"
    text = format(value + 0.0, spec)
    return f"{text} [{format(ci[0] + 0.0, spec)}, {format(ci[1] + 0.0, spec)}]" if ci else text


def comparison_rows(report: RunComparison) -> list[dict[str, str]]:
    """Two judge runs on the same gold units (``judge compare``): one row per run and
    one for the paired difference (second - first), as text for a narrow table (the
    McNemar counts are in the verdict sentence and :func:`mcnemar_sentence`)."""
    a, b = report["first"], report["second"]
    alt = report["alt_test"] or {}
    rows = [
        {
            "run": name,
            "kappa with gold": _interval_text(report["kappa"][name]),
            "accuracy": _interval_text(report["accuracy"][name]),
            "may replace a reviewer?": (
                (alt[name]["verdict"] if name in alt else "") or "not tested"
            ).split(":")[0],
        }
        for name in (a, b)
    ]
    rows.append(
        {
            "run": f"{b} - {a} (paired)",
            "kappa with gold": _interval_text(report["kappa_difference"], signed=True),
            "accuracy": _interval_text(report["accuracy_difference"], signed=True),
            "may replace a reviewer?": "",
        }
    )
    return rows


def mcnemar_sentence(report: RunComparison) -> str:
    """McNemar's test on break / no break, in words, with its table."""
    a, b = report["first"], report["second"]
    test = McNemarResult.from_dict(report["mcnemar"])
    (both, only_a), (only_b, neither) = test.table
    return (
        f"Exact McNemar test on break / no break, {test.n:d} units: both right on {both:d}, "
        f"only {a} right on {only_a:d}, only {b} right on {only_b:d}, both wrong on "
        f"{neither:d}; {format_p(test.p_value)}."
    )


def coverage_sentence(curve: CoverageCurve, alpha: float) -> tuple[str, int | None]:
    """What the selective-judging dial shows at ``alpha``, and, when it shows nothing,
    why and how many audited turns to draw to fix it (``None``: drawing does not help)."""
    point = next(p for p in curve["points"] if p["alpha"] == alpha)
    source = curve["gold_source"]
    if point["thresholds"][0] is not None:
        return (
            f"At alpha {alpha:g} the judge decides {point['decided_units']:,d} of "
            f"{curve['judged_units']:,d} turns ({100 * (point['coverage'] or 0):.1f}%), "
            f"confidence at least {point['thresholds'][0]:.3f}; the rest go to reviewers "
            f"(gold: {source}).",
            None,
        )
    empty = point.get("empty")
    if not empty:
        return f"At alpha {alpha:g} no threshold is certified (gold: {source}).", None
    have, need = empty["have"], empty["need"]
    if empty["kind"] == "too_few":
        if source == "audit sample":
            more = need - have
            return (
                f"At alpha {alpha:g} the judge decides nothing: {have:,d} of {need:,d} "
                f"audited gold turns, and a threshold needs {need:,d} even with no "
                f"disagreement: draw {more:,d} more and have them labeled.",
                more,
            )
        return (
            f"At alpha {alpha:g} the judge decides nothing: it is certified on "
            f"{have:,d} gold turns from adjudication (not a random sample), and a "
            f"threshold needs {need:,d} audited gold turns even with no disagreement: "
            f"draw an audit sample of {need:,d} and have it labeled.",
            need,
        )
    return (
        f"At alpha {alpha:g} the judge decides nothing: on its {empty['kept']:,d} most "
        f"confident gold turns it disagrees with gold on {empty['disagreements']:,d}, more "
        "than this alpha allows; allow more disagreement (a higher alpha), or improve the "
        "prompt in the workbench.",
        None,
    )


def reliability_sentence(reliability: ReliabilityJson, units: int) -> str:
    """The reliability diagram's figures with what they mean."""
    brier = reliability["brier_score"]
    ece = reliability["expected_calibration_error"]
    if brier is None or ece is None:
        return "No reliability figures: no scored verdict has break / no-break gold."
    return (
        f"Brier {brier:.3f}: the mean squared gap between the judge's score and gold (0 is "
        f"perfect, 0.25 a coin toss); ECE {ece:.3f}: its scores are off from the observed "
        f"break rate by {100 * ece:.1f} points on average; on {units:,d} units."
    )


def _ordinal(position: int) -> str:
    suffix = (
        "th" if 10 <= position % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(position % 10, "th")
    )
    return f"{position:d}{suffix}"


def position_text(row: PositionRate) -> str:
    """A position bin in words: ``1st answers``, ``answers 3-4``, ``answers 9 and later``."""
    if row["high"] is None:
        return f"answers {row['low']:d} and later"
    if row["low"] == row["high"]:
        return f"{_ordinal(row['low'])} answers"
    return f"answers {row['low']:d}-{row['high']:d}"


def drift_sentence(report: DriftReport) -> list[str]:
    """What the drift chart shows, in one sentence (from gold, else the first run), and
    one per bin without an interval saying why."""
    sources = [source for source in report["sources"] if source["by_position"]]
    if not sources:
        return ["No unit has break / no-break gold or a judge verdict yet: nothing to draw."]
    source = sources[0]
    rows = source["by_position"]
    first, last = rows[0], rows[-1]

    def rate(row: PositionRate) -> str:
        return f"{percent(row['rate'])}{_interval(row['ci95'])}"

    who = "By gold" if source["source"] == "gold" else f"By {source['name']}"
    head = f"{who}, {rate(first)} of {position_text(first)} break the role"
    if len(rows) > 1:
        head += f" and {rate(last)} of {position_text(last)}"
    slope = source["slope"]
    odds, ci95, why = slope["odds_ratio"], slope["ci95"], slope["reason"]
    if odds is not None and ci95:
        low, high = ci95
        head += f"; the odds of a break change x{odds:.2f} per later answer [{low:.2f}, {high:.2f}]"
    elif why:
        head += f"; no trend per later answer is fitted ({why})"
    sentences = [head + "."]
    for row in rows:
        reason = row["reason"]
        if reason and "no resamples" not in reason:
            sentences.append(f"{position_text(row).capitalize()}: {reason}.")
    return sentences
