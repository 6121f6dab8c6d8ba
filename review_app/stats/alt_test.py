"""The alternative annotator test: may the judge replace a reviewer?

Calderon, N., Reichart, R., & Dror, R. (2025). The Alternative Annotator Test for
LLM-as-a-Judge: How to Statistically Justify Replacing Human Annotators with LLMs.
Proceedings of ACL 2025, 16051-16081.

Leave one reviewer ``j`` out at a time. On each unit ``i`` that ``j`` labeled (kept
units: judged, and labeled by at least ``min_reviewers_per_unit`` reviewers), score
the judge and ``j`` by their agreement with the remaining reviewers ``R_i \\ {j}``::

    S(x, i, j) = |{h in R_i \\ {j} : code_h(i) = x}| / |R_i \\ {j}|      (accuracy)
    W_ij^judge = 1[S(judge_i) >= S(code_j(i))],  W_ij^human = 1[S(code_j(i)) >= S(judge_i)]
    d_ij       = W_ij^human - W_ij^judge

and test H0: mean(d_j) >= epsilon against H1: mean(d_j) < epsilon with a one-sided
one-sample t-test (``scipy.stats.ttest_1samp(d_j, epsilon, alternative="less")``).
The reviewers' p-values go through the Benjamini-Yekutieli procedure at level ``q``;
the **winning rate** is the share of tested reviewers whose null is rejected, and the
test is passed when it is at least 0.5. The **advantage probability** of reviewer
``j`` is ``mean_i W_ij^judge``; the judge's is the mean over tested reviewers.
Reviewers with fewer than ``min_units_per_reviewer`` kept units are skipped (listed
with the reason). No gold is needed.
"""

from __future__ import annotations

import math
from collections.abc import Collection, Hashable, Mapping
from dataclasses import dataclass
from typing import Any, TypedDict, cast

import numpy as np

from review_app.stats.checks import check_int
from review_app.stats.core import MIN_MINORITY_UNITS, TOO_FEW_BREAKS
from review_app.stats.units import JsonKey

ALT_TEST_SENTENCE = (
    "alternative annotator test (Calderon, Reichart & Dror 2025): leaving out one reviewer "
    "at a time, does the judge agree with the remaining reviewers at least as well as the "
    "left-out reviewer, up to a margin epsilon? It passes when it wins for at least half "
    "of the reviewers."
)
"""What the alternative annotator test asks, in one sentence (page and command)."""

__all__ = [
    "DEFAULT_EPSILON",
    "DEFAULT_MIN_REVIEWERS_PER_UNIT",
    "DEFAULT_MIN_UNITS_PER_REVIEWER",
    "DEFAULT_Q",
    "AltTestJson",
    "AltTestResult",
    "BaselineJson",
    "ReviewerTest",
    "ReviewerTestJson",
    "SkippedReviewer",
    "SkippedReviewerJson",
    "alt_test",
    "benjamini_yekutieli",
]

DEFAULT_EPSILON = 0.2
DEFAULT_Q = 0.05
DEFAULT_MIN_REVIEWERS_PER_UNIT = 2
DEFAULT_MIN_UNITS_PER_REVIEWER = 30


class ReviewerTestJson(TypedDict):
    reviewer: str
    units: int
    p_value: float | None
    rejected: bool
    advantage_probability: float


class SkippedReviewerJson(TypedDict):
    reviewer: str
    units: int
    reason: str


class BaselineJson(TypedDict):
    """A judge that always gives the reviewers' most common code, tested the same way."""

    code: JsonKey
    """The code (a string in the app)."""
    winning_rate: float | None
    passed: bool


class AltTestJson(TypedDict):
    """:meth:`AltTestResult.to_dict` (docs/reference.md, "Judge report JSON")."""

    epsilon: float
    q: float
    winning_rate: float | None
    advantage_probability: float | None
    passed: bool
    verdict: str
    units: int
    break_units: int | None
    reviewers: list[ReviewerTestJson]
    skipped: list[SkippedReviewerJson]
    reason: str | None
    baseline: BaselineJson | None


@dataclass(frozen=True)
class ReviewerTest:
    """One left-out reviewer: kept units, p-value, rejection, the judge's advantage."""

    reviewer: str
    units: int
    p_value: float | None
    rejected: bool
    advantage_probability: float

    @classmethod
    def from_dict(cls, data: ReviewerTestJson) -> ReviewerTest:
        return cls(
            data["reviewer"],
            data["units"],
            data["p_value"],
            data["rejected"],
            data["advantage_probability"],
        )

    def to_dict(self) -> ReviewerTestJson:
        return {
            "reviewer": self.reviewer,
            "units": self.units,
            "p_value": self.p_value,
            "rejected": self.rejected,
            "advantage_probability": self.advantage_probability,
        }


@dataclass(frozen=True)
class SkippedReviewer:
    reviewer: str
    units: int
    reason: str

    @classmethod
    def from_dict(cls, data: SkippedReviewerJson) -> SkippedReviewer:
        return cls(data["reviewer"], data["units"], data["reason"])

    def to_dict(self) -> SkippedReviewerJson:
        return {"reviewer": self.reviewer, "units": self.units, "reason": self.reason}


@dataclass(frozen=True)
class AltTestResult:
    """The test's outcome; ``verdict`` is one line a policy owner can read.

    ``winning_rate`` and ``advantage_probability`` are ``None`` when no reviewer could
    be tested (``reason`` says why). ``passed`` is ``winning_rate >= 0.5``, except that
    it is ``False`` with the verdict "too few breaks to judge" when ``break_units``
    (tested units where some reviewer found a break) or the units without one number
    fewer than 10.
    """

    epsilon: float
    q: float
    winning_rate: float | None
    advantage_probability: float | None
    passed: bool
    verdict: str
    reviewers: tuple[ReviewerTest, ...]
    skipped: tuple[SkippedReviewer, ...]
    units: int
    break_units: int | None
    reason: str | None
    baseline: BaselineJson | None = None

    @classmethod
    def from_dict(cls, data: AltTestJson) -> AltTestResult:
        """The result back from :meth:`to_dict` (e.g. read from a stored report)."""
        return cls(
            epsilon=data["epsilon"],
            q=data["q"],
            winning_rate=data["winning_rate"],
            advantage_probability=data["advantage_probability"],
            passed=data["passed"],
            verdict=data["verdict"],
            reviewers=tuple(ReviewerTest.from_dict(r) for r in data["reviewers"]),
            skipped=tuple(SkippedReviewer.from_dict(s) for s in data["skipped"]),
            units=data["units"],
            break_units=data["break_units"],
            reason=data["reason"],
            baseline=data["baseline"],
        )

    def to_dict(self) -> AltTestJson:
        return {
            "epsilon": self.epsilon,
            "q": self.q,
            "winning_rate": self.winning_rate,
            "advantage_probability": self.advantage_probability,
            "passed": self.passed,
            "verdict": self.verdict,
            "units": self.units,
            "break_units": self.break_units,
            "reviewers": [r.to_dict() for r in self.reviewers],
            "skipped": [s.to_dict() for s in self.skipped],
            "reason": self.reason,
            "baseline": self.baseline,
        }


def benjamini_yekutieli(p_values: Collection[float | None], *, q: float) -> list[bool]:
    """Which hypotheses the Benjamini-Yekutieli (2001) step-up procedure rejects.

    With m p-values sorted ascending p_(1) <= ... <= p_(m) and H_m = sum_{k<=m} 1/k,
    reject the hypotheses of p_(1) .. p_(k*) for the largest k* with
    p_(k*) <= k* q / (m H_m). It controls the false discovery rate at ``q`` under any
    dependence. ``None`` (an undefined p-value) is never rejected.
    """
    values = np.array([np.nan if p is None else float(p) for p in p_values], dtype=np.float64)
    m = len(values)
    if m == 0:
        return []
    order = np.argsort(values, kind="stable")
    harmonic = float(np.sum(1.0 / np.arange(1, m + 1)))
    thresholds = np.arange(1, m + 1) / m * (q / harmonic)
    below = np.flatnonzero(values[order] <= thresholds)
    rejected = np.zeros(m, dtype=bool)
    if len(below):
        rejected[order[: below[-1] + 1]] = True
    return rejected.tolist()


def _check_options(epsilon: float, q: float, min_reviewers: int, min_units: int) -> None:
    if isinstance(epsilon, bool) or not isinstance(epsilon, int | float) or not 0 <= epsilon < 1:
        raise ValueError(f"epsilon must be a number in [0, 1), got {epsilon!r}")
    if isinstance(q, bool) or not isinstance(q, int | float) or not 0 < q < 1:
        raise ValueError(f"q must be a number strictly between 0 and 1, got {q!r}")
    check_int(min_reviewers, "min_reviewers_per_unit", 2)
    check_int(min_units, "min_units_per_reviewer", 2)


def alt_test(
    labels_by_reviewer: Mapping[Any, Mapping[Any, Any]],
    judged: Mapping[Any, Any],
    *,
    epsilon: float = DEFAULT_EPSILON,
    q: float = DEFAULT_Q,
    min_reviewers_per_unit: int = DEFAULT_MIN_REVIEWERS_PER_UNIT,
    min_units_per_reviewer: int = DEFAULT_MIN_UNITS_PER_REVIEWER,
    break_codes: Collection[Hashable] | None = None,
    baseline: bool = False,
) -> AltTestResult:
    """Run the alternative annotator test (module docstring) with accuracy scoring.

    ``labels_by_reviewer`` maps reviewer -> unit -> code; ``judged`` maps unit -> the
    judge's code. ``break_codes``, when given, enables the minority-class guard: with
    fewer than 10 tested units where a reviewer found a break (or fewer than 10
    without), ``passed`` is ``False`` and ``verdict`` is "too few breaks to judge".

    ``baseline=True`` also runs the test for a judge that always gives the reviewers'
    most common code (``baseline``: ``{"code", "winning_rate", "passed"}``). When that
    trivial judge passes too, accuracy cannot tell judges apart on these data (one class
    dominates) and ``verdict`` says "inconclusive" (``passed`` keeps its definition).

    Raises ``ValueError`` with these messages:

    - ``"epsilon must be a number in [0, 1), got <value>"``
    - ``"q must be a number strictly between 0 and 1, got <value>"``
    - ``"min_reviewers_per_unit must be an integer >= 2, got <value>"``
    - ``"min_units_per_reviewer must be an integer >= 2, got <value>"``
    """
    _check_options(epsilon, q, min_reviewers_per_unit, min_units_per_reviewer)
    reviewers = sorted(labels_by_reviewer, key=str)
    count: dict[Hashable, int] = {}
    for reviewer in reviewers:
        for unit in labels_by_reviewer[reviewer]:
            count[unit] = count.get(unit, 0) + 1
    kept = [u for u, c in count.items() if c >= min_reviewers_per_unit and u in judged]
    position = {unit: i for i, unit in enumerate(kept)}
    codes_seen: dict[Hashable, int] = {}
    n_units, n_reviewers = len(kept), len(reviewers)
    matrix = np.full((n_units, n_reviewers), -1, dtype=np.int64)
    for k, reviewer in enumerate(reviewers):
        for unit, code in labels_by_reviewer[reviewer].items():
            i = position.get(unit)
            if i is not None:
                matrix[i, k] = codes_seen.setdefault(code, len(codes_seen))
    judge_codes = np.array(
        [codes_seen.get(judged[u], -2) for u in kept], dtype=np.int64
    )  # -2: a code no reviewer used, never equal to a reviewer's code
    present = matrix >= 0
    n_present = present.sum(axis=1)
    judge_matches = (matrix == judge_codes[:, np.newaxis]) & present

    tested: list[tuple[str, int, float | None, float]] = []
    skipped: list[SkippedReviewer] = []
    tested_units = np.zeros(n_units, dtype=bool)
    for k, reviewer in enumerate(reviewers):
        rows = present[:, k]
        n_rows = int(rows.sum())
        if n_rows < min_units_per_reviewer:
            skipped.append(
                SkippedReviewer(
                    str(reviewer),
                    n_rows,
                    f"only {n_rows} units judged and labeled by {min_reviewers_per_unit} or "
                    f"more reviewers (fewer than {min_units_per_reviewer})",
                )
            )
            continue
        tested_units |= rows
        own = matrix[rows, k]
        others = n_present[rows] - 1
        human_hits = ((matrix[rows] == own[:, np.newaxis]) & present[rows]).sum(axis=1) - 1
        judge_hits = judge_matches[rows].sum(axis=1) - judge_matches[rows, k]
        human_score = human_hits / others
        judge_score = judge_hits / others
        judge_wins = (judge_score >= human_score).astype(np.float64)
        human_wins = (human_score >= judge_score).astype(np.float64)
        from scipy import stats  # the test statistic is the only use of scipy here

        with np.errstate(all="ignore"):
            p = float(
                stats.ttest_1samp(human_wins - judge_wins, epsilon, alternative="less").pvalue
            )
        tested.append((str(reviewer), n_rows, p if math.isfinite(p) else None, judge_wins.mean()))

    rejected = benjamini_yekutieli([t[2] for t in tested], q=q)
    results = tuple(
        ReviewerTest(name, units, p, bool(r), float(adv))
        for (name, units, p, adv), r in zip(tested, rejected, strict=True)
    )
    break_units: int | None = None
    if break_codes is not None:
        wanted = {codes_seen[c] for c in break_codes if c in codes_seen}
        has_break = np.isin(matrix, list(wanted)).any(axis=1) if wanted else np.zeros(n_units, bool)
        break_units = int((has_break & tested_units).sum())
    n_tested_units = int(tested_units.sum())
    reason: str | None
    if not results:
        reason = (
            f"no reviewer has {min_units_per_reviewer} or more judged units labeled by "
            f"{min_reviewers_per_unit} or more reviewers"
        )
        return AltTestResult(
            float(epsilon), float(q), None, None, False, "not tested: " + reason, (),
            tuple(skipped), n_tested_units, break_units, reason,
        )  # fmt: skip
    winning_rate = sum(r.rejected for r in results) / len(results)
    advantage = float(np.mean([r.advantage_probability for r in results]))
    passed = winning_rate >= 0.5
    verdict = "passed" if passed else "failed"
    reason = None
    if break_units is not None and min(break_units, n_tested_units - break_units) < (
        MIN_MINORITY_UNITS
    ):
        passed = False
        verdict = TOO_FEW_BREAKS
        reason = (
            f"{break_units} of the {n_tested_units} tested units have a break: fewer than "
            f"{MIN_MINORITY_UNITS} in the rarer class, so no verdict is drawn"
        )
    trivial: BaselineJson | None = None
    if baseline:
        counts = np.bincount(matrix[present], minlength=len(codes_seen))
        code = next(c for c, i in codes_seen.items() if i == int(np.argmax(counts)))
        constant = alt_test(
            labels_by_reviewer,
            dict.fromkeys(kept, code),
            epsilon=epsilon,
            q=q,
            min_reviewers_per_unit=min_reviewers_per_unit,
            min_units_per_reviewer=min_units_per_reviewer,
        )
        trivial = {
            "code": cast(JsonKey, code),
            "winning_rate": constant.winning_rate,
            "passed": constant.passed,
        }
        if constant.passed and verdict == "passed":
            verdict = f"inconclusive: a judge that always answers {code!r} passes too"
            reason = (
                "with accuracy as the score and one code this common, the test cannot tell "
                "a useful judge from a constant one; read the like-for-like kappas"
            )
    return AltTestResult(
        float(epsilon), float(q), winning_rate, advantage, passed, verdict, results,
        tuple(skipped), n_tested_units, break_units, reason, trivial,
    )  # fmt: skip
