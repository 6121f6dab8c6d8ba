"""Is agreement getting better or worse: agreement per week (or batch), and late in a session.

*Periods.* Labels fall into ISO weeks (Monday 00:00 UTC) by the time they were given;
when they span fewer than :data:`MIN_WEEKS` weeks, into batches of ``batch`` labels in
the order they were given instead (a week holding most of the labels says nothing
about change). Per period and rubric version:

- Krippendorff's alpha over the units *completed* in the period: a unit belongs to the
  period of its latest label, and every current label of the unit counts (a unit
  labelled by two reviewers in two weeks is compared once, when it became comparable),
  with a percentile bootstrap interval (resampling conversations); alpha *rises* or
  *falls* from the first to the last period with 30 units or more only when their
  intervals do not overlap;
- each reviewer's agreement with gold: the share of their labels given in the period,
  on adjudicated units, that equal the adjudicated code, with a Wilson interval (none
  under 10 labels). Adjudicated gold is the hard units (the disagreements), so the
  level is lower than on all units; its course over time is what compares like with
  like.

*Sessions.* A reviewer's session is a run of labels with no gap longer than
:data:`SESSION_GAP`; a label's position is the time since its session began. A label
agrees when every other reviewer's label on the unit has its code. The share of agreeing
labels in the first hour of a session and after it are compared with Newcombe's hybrid
score interval for the difference of two proportions (Newcombe 1998, method 10); the
agreement *falls* when that interval lies below 0 with at least :data:`MIN_SESSION_LABELS`
labels on each side.

References
----------
Krippendorff, K. (2011). Computing Krippendorff's Alpha-Reliability. University of
    Pennsylvania.
Newcombe, R. G. (1998). Interval estimation for the difference between independent
    proportions: comparison of eleven methods. Statistics in Medicine, 17, 873-890.
Wilson, E. B. (1927). Probable inference, the law of succession, and statistical
    inference. JASA, 22(158), 209-212.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Callable, Hashable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any, TypedDict

import numpy as np

from review_app.agreement.bootstrap import alpha_bootstrap_ci
from review_app.agreement.coefficients import SMALL_SAMPLE_UNITS, krippendorff_alpha
from review_app.stats.checks import check_int
from review_app.stats.core import (
    Estimate,
    EstimateJson,
    proportion,
    wilson_interval,
)
from review_app.stats.table import RatingTable

__all__ = [
    "DEFAULT_BATCH",
    "FIRST_HOUR",
    "MIN_SESSION_LABELS",
    "MIN_WEEKS",
    "SESSION_GAP",
    "OverTime",
    "Period",
    "SessionAgreement",
    "agreement_over_time",
    "newcombe_interval",
    "session_agreement",
]

MIN_WEEKS = 4
"""Fewer weeks with labels than this: batches of labels instead of weeks."""
DEFAULT_BATCH = 200
SESSION_GAP = timedelta(minutes=30)
FIRST_HOUR = timedelta(hours=1)
MIN_SESSION_LABELS = 30


def newcombe_interval(
    first: tuple[int, int], second: tuple[int, int], *, confidence: float = 0.95
) -> tuple[float, float]:
    """Newcombe's hybrid score interval for ``p2 - p1`` (``(successes, n)`` each).

    With Wilson intervals ``(l_i, u_i)`` of ``p_i``: ``low = p2 - p1 - sqrt((p2 - l2)^2 +
    (u1 - p1)^2)``, ``high = p2 - p1 + sqrt((u2 - p2)^2 + (p1 - l1)^2)``.

    Examples
    --------
    Newcombe (1998), table II, example (a): 56/70 against 48/80, difference 0.2:

    >>> low, high = newcombe_interval((48, 80), (56, 70))
    >>> round(low, 4), round(high, 4)
    (0.0524, 0.3339)
    """
    (s1, n1), (s2, n2) = first, second
    p1, p2 = s1 / n1, s2 / n2
    l1, u1 = wilson_interval(s1, n1, confidence=confidence)
    l2, u2 = wilson_interval(s2, n2, confidence=confidence)
    delta = p2 - p1
    return (
        delta - math.sqrt((p2 - l2) ** 2 + (u1 - p1) ** 2),
        delta + math.sqrt((u2 - p2) ** 2 + (p1 - l1) ** 2),
    )


class VersionAlphaJson(TypedDict):
    """A version's alpha in a period: its ``rubric`` and the agreement form of alpha."""

    rubric: str
    value: float | None
    n_units: int
    reason: str | None
    ci95: list[float] | None
    warning: str | None


class ReviewerShareJson(TypedDict):
    """A reviewer's share of labels equal to the adjudicated code: ``name`` and the
    estimate."""

    name: str
    value: float | None
    n: int
    ci95: list[float] | None
    reason: str | None
    warning: str | None
    method: str | None


class PeriodJson(TypedDict):
    """:meth:`Period.to_dict`."""

    period: str
    start: str
    end: str
    labels: int
    versions: list[VersionAlphaJson]
    reviewers: list[ReviewerShareJson]


class DifferenceJson(TypedDict):
    value: float | None
    ci95: list[float] | None


class SessionAgreementJson(TypedDict):
    """:meth:`SessionAgreement.to_dict`."""

    first_hour: EstimateJson
    later: EstimateJson
    difference: DifferenceJson
    falls: bool


class PublicationJson(TypedDict):
    """When a version was published, and the period holding that moment (null when none
    does)."""

    rubric: str
    at: str
    period: str | None


@dataclass(frozen=True)
class Period:
    """One week or batch: the alpha of each version's units completed in it, and each
    reviewer's agreement with adjudicated gold on the labels given in it."""

    label: str
    start: datetime
    end: datetime
    labels: int
    alpha: dict[str, Estimate]
    """Rubric version -> alpha (``n``: pairable units)."""
    with_gold: dict[str, Estimate]
    """Reviewer -> share of their labels equal to the adjudicated code."""

    def to_dict(self) -> PeriodJson:
        return {
            "period": self.label,
            "start": self.start.isoformat(),
            "end": self.end.isoformat(),
            "labels": self.labels,
            "versions": [
                {"rubric": ref, **alpha.to_dict(count_key="n_units")}
                for ref, alpha in self.alpha.items()
            ],
            "reviewers": [
                {"name": name, **share.to_dict()} for name, share in self.with_gold.items()
            ],
        }


@dataclass(frozen=True)
class SessionAgreement:
    """Agreement with the other reviewers in a session's first hour and after it."""

    first_hour: Estimate
    later: Estimate
    difference: tuple[float, float] | None
    falls: bool

    def to_dict(self) -> SessionAgreementJson:
        value = (
            None
            if self.first_hour.value is None or self.later.value is None
            else self.later.value - self.first_hour.value
        )
        return {
            "first_hour": self.first_hour.to_dict(),
            "later": self.later.to_dict(),
            "difference": {
                "value": value,
                "ci95": None if self.difference is None else list(self.difference),
            },
            "falls": self.falls,
        }


@dataclass(frozen=True)
class OverTime:
    by: str
    """``week`` or ``batch``."""
    batch: int
    periods: list[Period]
    publications: list[PublicationJson]
    session: SessionAgreement
    session_by_reviewer: dict[str, SessionAgreement]
    sentences: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)


def _week_start(moment: datetime) -> datetime:
    day = moment.astimezone(UTC).replace(hour=0, minute=0, second=0, microsecond=0)
    return day - timedelta(days=day.weekday())


def _periods(
    times: Sequence[datetime], *, batch: int, min_weeks: int
) -> tuple[str, np.ndarray, list[str]]:
    """``(by, period of each label, period labels)``."""
    weeks = [_week_start(t) for t in times]
    distinct = sorted(set(weeks))
    if len(distinct) >= min_weeks:
        index = {week: i for i, week in enumerate(distinct)}
        return (
            "week",
            np.fromiter((index[w] for w in weeks), dtype=np.int64, count=len(weeks)),
            [f"week of {w.date().isoformat()}" for w in distinct],
        )
    order = sorted(range(len(times)), key=times.__getitem__)
    period = np.empty(len(times), dtype=np.int64)
    for rank, i in enumerate(order):
        period[i] = rank // batch
    count = int(period.max()) + 1 if len(times) else 0
    labels = [f"labels {k * batch + 1}-{min((k + 1) * batch, len(times))}" for k in range(count)]
    return "batch", period, labels


def session_agreement(
    *,
    units: Sequence[Hashable],
    reviewers: Sequence[str],
    codes: Sequence[str],
    times: Sequence[datetime],
    in_sessions: Sequence[bool] | None = None,
) -> tuple[SessionAgreement, dict[str, SessionAgreement]]:
    """Agreement by position in a reviewer's session (module docstring), pooled and per
    reviewer. ``in_sessions`` (per label) leaves out labels whose time is not when they
    were given (imported or carried labels); every label still counts as a partner."""
    by_unit: dict[Hashable, list[int]] = defaultdict(list)
    for i, unit in enumerate(units):
        by_unit[unit].append(i)
    agrees: dict[int, bool] = {}
    for members in by_unit.values():
        if len(members) < 2:
            continue
        for i in members:
            agrees[i] = all(codes[j] == codes[i] for j in members if j != i)
    kept = [True] * len(units) if in_sessions is None else list(in_sessions)
    late: dict[int, bool] = {}
    per_reviewer: dict[str, list[int]] = defaultdict(list)
    for i, name in enumerate(reviewers):
        if kept[i]:
            per_reviewer[name].append(i)
    for members in per_reviewer.values():
        members.sort(key=times.__getitem__)
        start = times[members[0]]
        previous = start
        for i in members:
            if times[i] - previous > SESSION_GAP:
                start = times[i]
            previous = times[i]
            late[i] = times[i] - start > FIRST_HOUR

    def compare(members: Sequence[int]) -> SessionAgreement:
        counted = [i for i in members if i in agrees and i in late]
        first = [agrees[i] for i in counted if not late[i]]
        after = [agrees[i] for i in counted if late[i]]
        first_hour = proportion(
            sum(first), len(first), undefined_reason="no label with a partner in a first hour"
        )
        later = proportion(
            sum(after), len(after), undefined_reason="no label with a partner after a first hour"
        )
        difference = (
            newcombe_interval((sum(first), len(first)), (sum(after), len(after)))
            if first and after
            else None
        )
        falls = (
            difference is not None
            and difference[1] < 0
            and min(len(first), len(after)) >= MIN_SESSION_LABELS
        )
        return SessionAgreement(first_hour, later, difference, falls)

    pooled = compare(range(len(units)))
    return pooled, {name: compare(members) for name, members in sorted(per_reviewer.items())}


def _share(value: float | None) -> str:
    return "—" if value is None else f"{100 * value:.0f}%"


def session_sentence(pooled: SessionAgreement, by_reviewer: Mapping[str, SessionAgreement]) -> str:
    """One sentence on agreement late in sessions, and the next step when it falls."""
    first, later = pooled.first_hour, pooled.later
    if first.value is None or later.value is None:
        return (
            "No session has labels both in its first hour and after it with another "
            "reviewer's label on the same turn: nothing to compare yet."
        )
    text = (
        f"Labels given in a session's first hour agree with the other reviewers on "
        f"{_share(first.value)} of turns ({first.n} labels), later ones on "
        f"{_share(later.value)} ({later.n} labels)"
    )
    falling = [name for name, figures in by_reviewer.items() if figures.falls]
    if pooled.falls and pooled.difference is not None:
        low, high = pooled.difference
        text += (
            f": agreement falls after the first hour ({100 * low:+.0f} to {100 * high:+.0f} "
            "points); suggest shorter sessions or a break each hour"
        )
    else:
        text += ": no fall after the first hour that the data show"
    if falling:
        text += "; it falls for " + ", ".join(falling)
    return text + "."


def agreement_over_time(
    *,
    units: Sequence[Hashable],
    reviewers: Sequence[str],
    codes: Sequence[str],
    times: Sequence[datetime],
    versions: Sequence[str],
    gold: Mapping[tuple[str, Hashable], str],
    publications: Sequence[tuple[str, datetime]] = (),
    in_sessions: Sequence[bool] | None = None,
    batch: int = DEFAULT_BATCH,
    min_weeks: int = MIN_WEEKS,
    n_resamples: int = 200,
    conversation_of: Callable[[Any], Hashable] | None = None,
) -> OverTime:
    """Agreement per period, and by position in a session (module docstring).

    Parameters
    ----------
    units, reviewers, codes, times, versions : sequences of one entry per label
        A current label: its unit, reviewer, code, when it was given (aware datetimes)
        and its rubric version (``"<id>@<N>"``).
    gold : mapping of (version, unit) to code
        Adjudicated gold.
    publications : sequence of (version, datetime)
        When each version was published.
    in_sessions : sequence of bool, optional
        Per label: whether its time is when it was given (see :func:`session_agreement`).
    batch : int, default 200
        Labels per batch when the labels span fewer than ``min_weeks`` weeks.
    n_resamples : int, default 200
        Bootstrap resamples for each alpha's interval (0: none).
    conversation_of : callable, optional
        A unit's conversation: the bootstrap resamples conversations.

    Raises
    ------
    ValueError
        ``"units, reviewers, codes, times and versions must have the same length"`` and
        ``"batch must be an integer >= 1, got <value>"``.

    Examples
    --------
    >>> t0 = datetime(2026, 11, 2, 9, tzinfo=UTC)
    >>> labels = [(u, name, "ok", t0 + timedelta(minutes=u)) for u in range(40)
    ...           for name in ("ana", "bo")]
    >>> result = agreement_over_time(units=[x[0] for x in labels],
    ...     reviewers=[x[1] for x in labels], codes=[x[2] for x in labels],
    ...     times=[x[3] for x in labels], versions=["r@1"] * 80, gold={}, batch=40)
    >>> result.by, [p.label for p in result.periods]
    ('batch', ['labels 1-40', 'labels 41-80'])
    """
    n = len(units)
    if not n == len(reviewers) == len(codes) == len(times) == len(versions):
        raise ValueError("units, reviewers, codes, times and versions must have the same length")
    batch = check_int(batch, "batch", 1)
    n_resamples = check_int(n_resamples, "n_resamples", 0)
    warnings: list[str] = []
    if n == 0:
        nothing = proportion(0, 0, undefined_reason="no labels")
        empty = SessionAgreement(nothing, nothing, None, False)
        return OverTime("week", batch, [], [], empty, {}, [], ["there are no labels"])
    by, period_of, period_labels = _periods(times, batch=batch, min_weeks=min_weeks)
    if by == "batch":
        warnings.append(
            f"the labels span fewer than {min_weeks} weeks: periods are batches of {batch} "
            "labels in the order they were given"
        )
    # A unit (of a version) belongs to the period of its latest label.
    latest: dict[tuple[str, Hashable], int] = {}
    for i in range(n):
        key = (versions[i], units[i])
        j = latest.get(key)
        if j is None or times[i] > times[j]:
            latest[key] = i
    completed = {key: int(period_of[i]) for key, i in latest.items()}
    rows_of: dict[int, dict[str, list[int]]] = defaultdict(lambda: defaultdict(list))
    for i in range(n):
        rows_of[completed[(versions[i], units[i])]][versions[i]].append(i)
    members_of: dict[int, list[int]] = defaultdict(list)
    for i, k in enumerate(period_of.tolist()):
        members_of[k].append(i)
    periods: list[Period] = []
    for k, label in enumerate(period_labels):
        members = members_of[k]
        alpha: dict[str, Estimate] = {}
        for version, rows in sorted(rows_of[k].items()):
            table = RatingTable.from_arrays(
                units=np.fromiter((units[i] for i in rows), dtype=object, count=len(rows)),
                raters=np.array([reviewers[i] for i in rows], dtype=object),
                values=np.array([codes[i] for i in rows], dtype=object),
            )
            alpha[version] = (
                alpha_bootstrap_ci(
                    table, n_resamples=n_resamples, seed=0, cluster_of=conversation_of
                )
                if n_resamples
                else krippendorff_alpha(table)
            )
        hits: dict[str, list[bool]] = defaultdict(list)
        for i in members:
            truth = gold.get((versions[i], units[i]))
            if truth is not None:
                hits[reviewers[i]].append(codes[i] == truth)
        with_gold = {
            name: proportion(
                sum(found), len(found), undefined_reason="no label on an adjudicated unit"
            )
            for name, found in sorted(hits.items())
        }
        stamps = [times[i] for i in members]
        periods.append(Period(label, min(stamps), max(stamps), len(members), alpha, with_gold))
    marks: list[PublicationJson] = []
    for ref, moment in sorted(publications, key=lambda p: p[1]):
        holding = next((p.label for p in periods if p.start <= moment <= p.end), None)
        if holding is None and by == "week":
            week = f"week of {_week_start(moment).date().isoformat()}"
            holding = week if week in period_labels else None
        marks.append({"rubric": ref, "at": moment.isoformat(), "period": holding})
    pooled, by_reviewer = session_agreement(
        units=units, reviewers=reviewers, codes=codes, times=times, in_sessions=in_sessions
    )
    sentences = [alpha_trend_sentence(periods, by), session_sentence(pooled, by_reviewer)]
    return OverTime(by, batch, periods, marks, pooled, by_reviewer, sentences, warnings)


def alpha_trend_sentence(periods: Sequence[Period], by: str) -> str:
    """Alpha in the first and the last period with enough units, and the next step."""
    enough = [
        (p, ref, a)
        for p in periods
        for ref, a in p.alpha.items()
        if a.value is not None and a.n >= SMALL_SAMPLE_UNITS
    ]
    if len(enough) < 2:
        return (
            f"Too few {'weeks' if by == 'week' else 'batches'} with {SMALL_SAMPLE_UNITS} or more "
            "turns labeled twice to say how agreement moves: assign overlapping cases "
            "(overlap 2 or more) on the team page."
        )
    (first, first_ref, a), (last, last_ref, b) = enough[0], enough[-1]
    versions = "" if first_ref == last_ref else f" ({first_ref} then {last_ref})"
    assert a.value is not None and b.value is not None
    apart = (
        a.ci95 is not None
        and b.ci95 is not None
        and (b.ci95[0] > a.ci95[1] or b.ci95[1] < a.ci95[0])
    )
    if not apart:
        trend = "holds steady within its uncertainty"
        step = (
            "nothing to do"
            if a.ci95 is not None and b.ci95 is not None
            else "no intervals to tell a change from noise"
        )
    elif b.value > a.value:
        trend = "rises"
        step = "the rubric and the reviewers are settling"
    else:
        trend = "falls"
        step = (
            "read the reviewers' reliability for the codes they mix up and sharpen those "
            "definitions in the next rubric version"
        )

    def figure(alpha: Estimate) -> str:
        interval = "" if alpha.ci95 is None else f" [{alpha.ci95[0]:.2f}, {alpha.ci95[1]:.2f}]"
        return f"{alpha.value:.2f}{interval}"

    where = "in the" if by == "week" else "over"
    return (
        f"Reviewers' alpha {trend}{versions}: {figure(a)} {where} {first.label} ({a.n} units), "
        f"{figure(b)} {where} {last.label} ({b.n} units); {step}."
    )
