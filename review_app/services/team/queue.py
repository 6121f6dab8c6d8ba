"""Reviewers' queues and how policy owners fill them.

A policy owner assigns cases to reviewers for one rubric version in one of two modes:
"fill each case up to N reviewers" (everyone already assigned counts; the load is
spread evenly) or "add these reviewers to each chosen case" (whoever else has it). A
reviewer's queue pages in SQL, so it stays fast with 100,000 cases.
"""

from __future__ import annotations

import math
import threading
import time
from collections import Counter
from collections.abc import Collection
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import Engine
from sqlmodel import Session

import storage.cases
import storage.judging
import storage.labels
from review_app import input_policy
from review_app.errors import InputError
from review_app.evaluator import EVALUATOR_VERSION
from review_app.rubrics.model import Rubric
from review_app.services.access.actors import Actor, authorize
from review_app.services.cases.case_views import check_lane
from review_app.services.team.people import assignable_people
from storage import assignments, audit, audit_samples
from storage.assignments import QueueRow
from storage.cases import list_case_summaries
from storage.engine import read_only

DEFAULT_PAGE_SIZE = 25
PROGRESS_TTL_SECONDS = 10.0


class ProgressCounts:
    """``(completed, assigned)`` per reviewer and rubric version, kept while the data
    they are counted from stays as it was.

    Counting a queue reads every assignment row of the reviewer (about 20 ms for
    100,000 cases in SQLite, 11 ms on PostgreSQL), and the queue page needs the counts
    at every rerun (paging, filters). Each entry is stored with the token of the queues
    (:func:`storage.assignments.progress_token`, three index lookups: about 0.2 ms,
    ``benchmarks/bench_progress_token.py``) and used while
    the token is the same: a label, an import, an assignment, a carry or a replaced
    case changes it whichever process made the change (this server, the command line,
    a second server), so nothing has to clear this cache. An entry is also counted
    again after ``ttl`` seconds, for what the token cannot see (on PostgreSQL, two
    saves committing in the other order than their ids were drawn).
    """

    def __init__(self, *, ttl: float = PROGRESS_TTL_SECONDS) -> None:
        self._ttl = ttl
        self._lock = threading.Lock()
        self._entries: dict[
            tuple[str, int, str, int], tuple[tuple[Any, ...], float, tuple[int, int]]
        ] = {}

    def counts(
        self, session: Session, engine: Engine, *, reviewer_id: int, rubric: Rubric
    ) -> tuple[int, int]:
        """The reviewer's counts under ``rubric``, read through ``session``."""
        key = (
            engine.url.render_as_string(hide_password=True),
            reviewer_id,
            rubric.id,
            rubric.version,
        )
        # The token first: a change committed between the two reads is in the counts
        # and changes the token, so at worst it is counted once more.
        token = assignments.progress_token(session)
        now = time.monotonic()
        with self._lock:
            entry = self._entries.get(key)
        if entry is not None and entry[0] == token and now - entry[1] < self._ttl:
            return entry[2]
        counts = assignments.queue_progress(
            session, reviewer_id=reviewer_id, rubric_id=rubric.id, version=rubric.version
        )
        with self._lock:
            self._entries[key] = (token, now, counts)
        return counts


_progress_counts = ProgressCounts()


@dataclass(frozen=True)
class QueuePage:
    rows: list[QueueRow]
    page: int
    n_pages: int
    n_matching: int
    completed: int
    assigned: int

    @property
    def progress(self) -> float:
        return self.completed / self.assigned if self.assigned else 0.0


def queue_page(
    engine: Engine,
    actor: Actor,
    *,
    rubric: Rubric,
    lane: str | None = None,
    only_unlabeled: bool = False,
    page: int = 1,
    page_size: int = DEFAULT_PAGE_SIZE,
) -> QueuePage:
    actor = authorize(engine, actor, "reviewer")
    check_lane(lane)
    if actor.reviewer_id is None:
        return QueuePage([], 1, 1, 0, 0, 0)
    selection = assignments.QueueSelection(
        reviewer_id=actor.reviewer_id,
        rubric_id=rubric.id,
        version=rubric.version,
        evaluator_version=EVALUATOR_VERSION,
        lane=lane,
        only_unlabeled=only_unlabeled,
    )
    with Session(read_only(engine)) as session:
        completed, assigned = _progress_counts.counts(
            session, engine, reviewer_id=actor.reviewer_id, rubric=rubric
        )
        if lane is None:  # the progress already counts these (saves a pass over the queue)
            matching = assigned - completed if only_unlabeled else assigned
        else:
            matching = assignments.queue_count(session, selection=selection)
        n_pages = max(1, math.ceil(matching / page_size))
        page = min(max(1, page), n_pages)
        rows = assignments.queue_page(
            session, selection=selection, offset=(page - 1) * page_size, limit=page_size
        )
    return QueuePage(rows, page, n_pages, matching, completed, assigned)


def open_review_work(engine: Engine, actor: Actor, *, rubric: Rubric) -> int:
    """How many cases assigned to the actor under ``rubric`` they have not finished (0 for
    someone with no queue): pages that show everyone's labels warn about them."""
    actor = authorize(engine, actor, "reviewer")
    if actor.reviewer_id is None:
        return 0
    result = queue_page(engine, actor, rubric=rubric, page_size=1)
    return result.assigned - result.completed


def next_case(
    engine: Engine,
    actor: Actor,
    *,
    rubric: Rubric,
    after: str | None,
    order: str = "oldest",
) -> str | None:
    """The next unfinished case in the actor's queue after ``after`` (wrapping round), in
    the queue's ``order``: ``"oldest"`` (by case id) or ``"informative"`` (the order of
    :func:`informative_queue`)."""
    actor = authorize(engine, actor, "reviewer")
    if actor.reviewer_id is None:
        return None
    if order == "informative":
        # Unfinished cases only (as the queue lists them with "not yet labeled by me"):
        # a finished ``after`` is not among them, and the most informative one is next.
        with Session(read_only(engine)) as session:
            unfinished = assignments.unfinished_case_ids(
                session, reviewer_id=actor.reviewer_id, rubric_id=rubric.id, version=rubric.version
            )
        ids = _rank(
            engine,
            actor.reviewer_id,
            unfinished,
            rubric=rubric,
            lane=None,
            only_unlabeled=True,
            threshold=0.5,
            audit_units=None,
        ).ordered
        start = ids.index(after) + 1 if after in ids else 0
        return next((c for c in ids[start:] + ids[:start] if c != after), None)
    if order != "oldest":
        raise ValueError(f"unknown queue order {order!r}")
    with Session(read_only(engine)) as session:
        return assignments.next_queued_case(
            session,
            reviewer_id=actor.reviewer_id,
            rubric_id=rubric.id,
            version=rubric.version,
            after_case_id=after,
        )


ASSIGN_MODES = ("fill", "add")
"""``fill``: fill each chosen case up to N reviewers (everyone already assigned counts);
``add``: add the chosen reviewers to each chosen case, whoever else has it."""
MODE_WORDS = {
    "fill": "fill each case up to N reviewers",
    "add": "add these reviewers to each chosen case",
}


@dataclass(frozen=True)
class AssignmentReport:
    """What an assignment did, or (from :func:`plan_assignment`) would do."""

    cases: int
    new_assignments: int
    per_reviewer: dict[str, int]
    already_covered: int
    """Fill: cases that already had N reviewers or more. Add: chosen (case, reviewer)
    pairs that were already assigned."""
    mode: str = "fill"
    up_to: int | None = None
    """Fill: the N each case is filled up to."""
    pairs: tuple[tuple[str, str], ...] = ()
    """The new ``(case_id, reviewer)`` pairs, by case then reviewer."""
    applied: bool = True
    """False for a preview: nothing was written."""

    def line(self) -> str:
        spread = ", ".join(f"{name} +{n}" for name, n in sorted(self.per_reviewer.items()))
        spread = f" ({spread})" if spread else ""
        verb = "assigned" if self.applied else "would assign"
        plural = "s" if self.cases != 1 else ""
        if self.mode == "add":
            return (
                f"add the chosen reviewers to each of {self.cases} case{plural}: {verb} "
                f"{self.new_assignments} (case, reviewer) pairs{spread}; "
                f"{self.already_covered} pairs were assigned already"
            )
        return (
            f"fill each of {self.cases} case{plural} up to {self.up_to} reviewers: {verb} "
            f"{self.new_assignments} (case, reviewer) pairs{spread}; {self.already_covered} "
            f"cases already had {self.up_to} or more reviewers (everyone assigned counts)"
        )


def _check_mode(mode: str, overlap: int | None) -> int | None:
    if mode not in ASSIGN_MODES:
        raise InputError(
            f"unknown mode {mode!r}; choose fill (each case up to N reviewers) or add (these "
            "reviewers to each case)",
            field="mode",
        )
    if mode == "add":
        if overlap is not None:
            raise InputError("add puts every chosen reviewer on each case; no N", field="overlap")
        return None
    if overlap is None or isinstance(overlap, bool) or overlap < 1:
        raise InputError(
            "fill needs N, the reviewers each case should have (at least 1)", field="overlap"
        )
    return overlap


def _plan(
    session: Session,
    *,
    rubric: Rubric,
    people: dict[str, Any],
    mode: str,
    up_to: int | None,
    lane: str | None,
    case_ids: list[str] | None,
) -> tuple[list[str], list[tuple[str, str]], int]:
    """``(case ids, new (case_id, name) pairs, already covered)``: the one plan both the
    preview and the assignment use, so a preview shows exactly what Apply writes."""
    if case_ids is None:
        summaries = list_case_summaries(
            session, evaluator_version=EVALUATOR_VERSION, lanes=[lane] if lane else None
        )
        case_ids = [row.case_id for row in summaries]
    else:
        known = {
            row.case_id
            for row in list_case_summaries(
                session, evaluator_version=EVALUATOR_VERSION, case_ids=case_ids
            )
        }
        missing = [case_id for case_id in case_ids if case_id not in known]
        if missing:
            raise InputError(f"no case {missing[0]!r} in the database", field="cases")
    holders: dict[str, set[str]] = {}
    load: Counter[str] = Counter()
    for name, person in people.items():
        assert person.id is not None
        owned = assignments.assigned_case_ids(
            session, reviewer_id=person.id, rubric_id=rubric.id, version=rubric.version
        )
        load[name] = len(owned)
        for case_id in owned:
            holders.setdefault(case_id, set()).add(name)
    pairs: list[tuple[str, str]] = []
    covered = 0
    if mode == "add":
        for case_id in case_ids:
            have = holders.get(case_id, set())
            for name in sorted(people):
                if name in have:
                    covered += 1
                else:
                    pairs.append((case_id, name))
        return case_ids, pairs, covered
    assert up_to is not None
    existing_counts = assignments.assignment_counts_by_case(
        session, rubric_id=rubric.id, version=rubric.version
    )
    for case_id in case_ids:
        # Reviewers outside the chosen ones count towards N too; the chosen ones can
        # only add themselves, so fewer chosen means all of them.
        need = up_to - existing_counts.get(case_id, 0)
        if need <= 0:
            covered += 1
            continue
        have = holders.get(case_id, set())
        candidates = sorted(
            (name for name in people if name not in have), key=lambda n: (load[n], n)
        )
        for name in sorted(candidates[:need]):
            pairs.append((case_id, name))
            load[name] += 1
    return case_ids, pairs, covered


def _report(
    case_ids: list[str],
    pairs: list[tuple[str, str]],
    covered: int,
    *,
    mode: str,
    up_to: int | None,
    applied: bool,
) -> AssignmentReport:
    added = Counter(name for _, name in pairs)
    return AssignmentReport(
        len(case_ids), len(pairs), dict(added), covered, mode, up_to, tuple(pairs), applied
    )


def plan_assignment(
    engine: Engine,
    actor: Actor,
    *,
    rubric: Rubric,
    reviewers: list[str],
    overlap: int | None = None,
    mode: str = "fill",
    lane: str | None = None,
    case_ids: list[str] | None = None,
) -> AssignmentReport:
    """What :func:`assign_cases` with the same arguments would write, writing nothing:
    the (case, reviewer) pairs a page previews before Apply (policy owners)."""
    actor = authorize(engine, actor, "policy_owner")
    check_lane(lane)
    up_to = _check_mode(mode, overlap)
    if not reviewers:
        raise InputError("choose at least one reviewer", field="reviewers")
    names = [input_policy.identity_key(name) for name in reviewers]
    with Session(read_only(engine)) as session:
        people = assignable_people(session, names=names)
        chosen, pairs, covered = _plan(
            session,
            rubric=rubric,
            people=people,
            mode=mode,
            up_to=up_to,
            lane=lane,
            case_ids=case_ids,
        )
    return _report(chosen, pairs, covered, mode=mode, up_to=up_to, applied=False)


def assign_cases(
    engine: Engine,
    actor: Actor,
    *,
    rubric: Rubric,
    reviewers: list[str],
    overlap: int | None = None,
    mode: str = "fill",
    lane: str | None = None,
    case_ids: list[str] | None = None,
) -> AssignmentReport:
    """Put cases in reviewers' queues, in one of two modes:

    - ``fill`` (``overlap`` = N): each case gets up to N reviewers; everyone already
      assigned counts, and the chosen reviewers who do not have it yet and carry the
      least load get it (ties by name, so the result is reproducible);
    - ``add``: every chosen reviewer gets each case they do not have yet, however many
      others have it.

    Cases: ``case_ids`` when given, else every case (of ``lane`` when given).
    :func:`plan_assignment` previews the same pairs.
    """
    actor = authorize(engine, actor, "policy_owner")
    check_lane(lane)
    up_to = _check_mode(mode, overlap)
    if not reviewers:
        raise InputError("choose at least one reviewer", field="reviewers")
    reviewers = [input_policy.identity_key(name) for name in reviewers]  # "Ana" is ana
    now = datetime.now(UTC)
    with Session(engine) as session:
        people = assignable_people(session, names=reviewers)
        chosen, pairs, covered = _plan(
            session,
            rubric=rubric,
            people=people,
            mode=mode,
            up_to=up_to,
            lane=lane,
            case_ids=case_ids,
        )
        rows: list[tuple[str, int, str, int, int | None]] = []
        for case_id, name in pairs:
            reviewer_id = people[name].id
            assert reviewer_id is not None
            rows.append((case_id, reviewer_id, rubric.id, rubric.version, actor.reviewer_id))
        assignments.insert_assignments(session, rows=rows, now=now)
        report = _report(chosen, pairs, covered, mode=mode, up_to=up_to, applied=True)
        audit.add_entry(
            session,
            actor=actor.name,
            action="assign",
            object_type="rubric",
            object_key=rubric.ref,
            summary={
                "mode": mode,
                "overlap": up_to,
                "lane": lane,
                "cases": len(chosen),
                "new_assignments": dict(sorted(report.per_reviewer.items())),
            },
        )
        session.commit()
    return report


# --- "most informative first" ----------------------------------------------------------


@dataclass(frozen=True)
class CaseSignals:
    """What is known about one case's units before the actor labels them."""

    judge: dict[int, list[tuple[str | None, float | None]]]
    """Per turn: ``(label, score)`` of each judge run's verdict."""
    human: dict[int, dict[int, str]]
    """Per turn: ``{reviewer_id: code}`` of the current labels."""
    violations: frozenset[int]


@dataclass(frozen=True, slots=True)
class TurnSummary:
    """A case's signals summed up per turn: all that its score and reasons need.

    :func:`summarise` makes one from :class:`CaseSignals`; the queue makes them from
    the per-turn sums the database computes (``storage.judging.judge_turn_summaries``,
    ``storage.labels.label_turn_summaries``).
    """

    closest: dict[int, float]
    """Per turn with a judge score: the smallest ``|score - threshold|`` over the runs."""
    split: frozenset[int]
    """Turns whose judge runs gave different labels."""
    disputed: frozenset[int]
    """Turns (any turn) whose current labels by reviewers other than the actor differ."""
    contradicted: frozenset[int]
    """Violation turns some reviewer labeled with a pass code."""


_NOTHING_KNOWN = TurnSummary({}, frozenset(), frozenset(), frozenset())


@dataclass(frozen=True)
class Informativeness:
    score: float
    reasons: tuple[str, ...]
    audit_turns: tuple[int, ...] = ()

    @property
    def why(self) -> str:
        parts = list(self.reasons)
        if self.audit_turns:
            parts.append("audit sample (keeps its place)")
        return "; ".join(parts)


def _turn_list(turns: Collection[int]) -> str:
    return ", ".join(str(t) for t in sorted(turns))


def _check_threshold(threshold: float) -> None:
    if not 0 < threshold < 1:
        raise ValueError("threshold must be strictly between 0 and 1")


def summarise(
    signals: CaseSignals, *, pass_codes: Collection[str], threshold: float, me: int | None
) -> TurnSummary:
    """``signals`` summed up per turn (what :func:`score_case` scores)."""
    closest: dict[int, float] = {}
    split: set[int] = set()
    for turn, verdicts in signals.judge.items():
        distances = [abs(s - threshold) for _, s in verdicts if s is not None]
        if distances:
            closest[turn] = min(distances)
        if len({label for label, _ in verdicts if label is not None}) > 1:
            split.add(turn)
    disputed = {
        turn
        for turn, by in signals.human.items()
        if len({code for reviewer, code in by.items() if reviewer != me}) > 1
    }
    contradicted = {
        turn
        for turn in signals.violations
        if any(code in pass_codes for code in signals.human.get(turn, {}).values())
    }
    return TurnSummary(closest, frozenset(split), frozenset(disputed), frozenset(contradicted))


def score_case(
    signals: CaseSignals,
    *,
    open_turns: Collection[int],
    pass_codes: Collection[str],
    threshold: float = 0.5,
    me: int | None = None,
) -> Informativeness:
    """How much labeling this case would teach, and why.

    For each turn in ``open_turns`` (the actor's unlabeled units):

    * judge uncertainty: ``1 - |s - t| / max(t, 1 - t)`` for a judge score ``s`` and the
      threshold ``t`` (1 at the threshold, 0 at the far end); the largest over the runs;
    * judge runs that disagree on the turn's label: 1;
    * a deterministic violation on a turn some reviewer labeled with a pass code: 1.

    Over the whole case: 0.5 for each turn (any turn) where the other reviewers'
    current labels differ, at most 1. The case's score is its best turn's score plus
    the disagreement term; ties keep the queue's own order.
    """
    _check_threshold(threshold)
    summary = summarise(signals, pass_codes=pass_codes, threshold=threshold, me=me)
    return score_summary(summary, open_turns=open_turns, threshold=threshold)


def score_summary(
    summary: TurnSummary, *, open_turns: Collection[int], threshold: float, explain: bool = True
) -> Informativeness:
    """:func:`score_case` from the signals summed up per turn; ``explain=False`` leaves
    the reasons out (the score is the same)."""
    span = max(threshold, 1 - threshold)
    closest, split, contradicted = summary.closest, summary.split, summary.contradicted
    best = 0.0
    for turn in open_turns:
        distance = closest.get(turn)
        # 1 - min|s - t| / span is the largest 1 - |s - t| / span: the same float.
        value = 0.0 if distance is None else 1 - distance / span
        if turn in split:
            value += 1.0
        if turn in contradicted:
            value += 1.0
        if value > best:
            best = value
    total = round(best + min(1.0, 0.5 * len(summary.disputed)), 6)
    if not explain:
        return Informativeness(total, ())
    unsure = {turn for turn in open_turns if turn in closest and 1 - closest[turn] / span >= 0.8}
    reasons = []
    if unsure:
        reasons.append(f"judge unsure on turn{'s' if len(unsure) > 1 else ''} {_turn_list(unsure)}")
    if split_open := split.intersection(open_turns):
        reasons.append(f"judge runs disagree on {_turn_list(split_open)}")
    if summary.disputed:
        reasons.append(f"reviewers disagree on {_turn_list(summary.disputed)}")
    if contradicted_open := contradicted.intersection(open_turns):
        reasons.append(f"finding contradicts a pass label on {_turn_list(contradicted_open)}")
    return Informativeness(total, tuple(reasons))


def order_informative_first(
    case_ids: list[str],
    scores: dict[str, Informativeness],
) -> list[str]:
    """``case_ids`` (in queue order) with the highest scores first; cases holding an
    audit-sample unit stay exactly where they were (a random draw keeps estimates
    valid only if it is labeled like any other case, not pushed back or forward)."""
    fixed = {i for i, case_id in enumerate(case_ids) if scores[case_id].audit_turns}
    movable = [c for i, c in enumerate(case_ids) if i not in fixed]
    movable.sort(key=lambda c: -scores[c].score)  # stable: ties keep the queue order
    ordered: list[str] = []
    rest = iter(movable)
    for index, case_id in enumerate(case_ids):
        ordered.append(case_id if index in fixed else next(rest))
    return ordered


def informative_queue(
    engine: Engine,
    actor: Actor,
    *,
    rubric: Rubric,
    lane: str | None = None,
    only_unlabeled: bool = False,
    page: int = 1,
    page_size: int = DEFAULT_PAGE_SIZE,
    threshold: float = 0.5,
    audit_units: Collection[tuple[str, int]] | None = None,
) -> tuple[QueuePage, dict[str, Informativeness]]:
    """The actor's queue "most informative first" (see :func:`score_case`), a page of
    it, and each listed case's score and reasons. ``audit_units`` are ``(case_id,
    turn)`` audit-sample units (default: every unit the rubric version's audit
    samples drew): their cases are marked and keep their queue place, so the random
    draws that make estimates valid are never reordered away.

    Blind means blind: every score and reason is built from other reviewers' labels
    or the judge, so a reviewer gets the order only; each case's score is 0 and its
    reasons are empty, and only the audit-sample mark is kept. Policy owners and
    admins get the scores and the reasons.

    Reads the whole filtered queue (the score needs every case), each kind of signal
    summed up per turn by the database; the queue order ("oldest first") pages in SQL
    instead.
    """
    actor = authorize(engine, actor, "reviewer")
    check_lane(lane)
    _check_threshold(threshold)
    whole = queue_page(
        engine, actor, rubric=rubric, lane=lane, only_unlabeled=only_unlabeled, page_size=10**9
    )
    if not whole.rows or actor.reviewer_id is None:
        return whole, {}
    ranking = _rank(
        engine,
        actor.reviewer_id,
        [row.case_id for row in whole.rows],
        rubric=rubric,
        lane=lane,
        only_unlabeled=only_unlabeled,
        threshold=threshold,
        audit_units=audit_units,
    )
    ordered = ranking.ordered
    n_pages = max(1, math.ceil(len(ordered) / page_size))
    page = min(max(1, page), n_pages)
    listed = ordered[(page - 1) * page_size : page * page_size]
    by_id = {row.case_id: row for row in whole.rows}
    result = QueuePage(
        [by_id[c] for c in listed], page, n_pages, whole.n_matching, whole.completed, whole.assigned
    )
    if not actor.has_role("policy_owner"):
        return result, {c: Informativeness(0.0, (), ranking.audit_turns(c)) for c in listed}
    return result, {c: ranking.explain(c) for c in listed}


@dataclass
class _Ranking:
    """A queue in the informative order, and what explains each case's place."""

    threshold: float
    ordered: list[str] = field(default_factory=list)
    summaries: dict[str, TurnSummary] = field(default_factory=dict)
    open_turns: dict[str, set[int]] = field(default_factory=dict)
    audit: dict[str, set[int]] = field(default_factory=dict)

    def audit_turns(self, case_id: str) -> tuple[int, ...]:
        return tuple(sorted(self.audit.get(case_id, ())))

    def score(self, case_id: str, *, explain: bool) -> Informativeness:
        found = score_summary(
            self.summaries.get(case_id, _NOTHING_KNOWN),
            open_turns=self.open_turns.get(case_id, ()),
            threshold=self.threshold,
            explain=explain,
        )
        return Informativeness(found.score, found.reasons, self.audit_turns(case_id))

    def explain(self, case_id: str) -> Informativeness:
        return self.score(case_id, explain=True)


def _rank(
    engine: Engine,
    me: int,
    case_ids: list[str],
    *,
    rubric: Rubric,
    lane: str | None,
    only_unlabeled: bool,
    threshold: float,
    audit_units: Collection[tuple[str, int]] | None,
) -> _Ranking:
    """``case_ids`` (reviewer ``me``'s queue so selected, in queue order) in the
    informative order: one read of each kind of signal for the whole queue, summed up
    per turn by the database, and every case scored without its reasons."""
    cases = assignments.queue_cases(
        assignments.QueueSelection(
            reviewer_id=me,
            rubric_id=rubric.id,
            version=rubric.version,
            evaluator_version=EVALUATOR_VERSION,
            lane=lane,
            only_unlabeled=only_unlabeled,
        )
    )
    pass_codes = {label.code for label in rubric.labels if label.verdict == "pass"}
    with Session(read_only(engine)) as session:
        verdicts = storage.judging.judge_turn_summaries(
            session, cases=cases, rubric_id=rubric.id, version=rubric.version, threshold=threshold
        )
        labels = storage.labels.label_turn_summaries(
            session,
            cases=cases,
            rubric_id=rubric.id,
            version=rubric.version,
            me=me,
            pass_codes=pass_codes,
        )
        violations = storage.cases.violation_turns(
            session, cases=cases, evaluator_version=EVALUATOR_VERSION
        )
        units = storage.cases.actor_units_in(session, cases=cases, actor=rubric.applies_to)
        if audit_units is None:
            # Every drawn turn, uniform or by uncertainty, keeps its place.
            audit_units = audit_samples.audited_units(
                session, rubric_id=rubric.id, version=rubric.version, design=None
            )
    ranking = _Ranking(threshold)
    closest: dict[str, dict[int, float]] = {}
    split: dict[str, set[int]] = {}
    for case_id, turn, distance, n_labels in verdicts:
        if distance is not None:
            found = closest.get(case_id)
            if found is None:
                closest[case_id] = {turn: distance}
            else:
                found[turn] = distance
        if n_labels > 1:
            split.setdefault(case_id, set()).add(turn)
    violated = {(case_id, turn) for case_id, turn in violations}
    mine: dict[str, set[int]] = {}
    disputed: dict[str, set[int]] = {}
    contradicted: dict[str, set[int]] = {}
    for case_id, turn, by_me, other_codes, passed in labels:
        if by_me:
            mine.setdefault(case_id, set()).add(turn)
        if other_codes > 1:
            disputed.setdefault(case_id, set()).add(turn)
        if passed and (case_id, turn) in violated:
            contradicted.setdefault(case_id, set()).add(turn)
    for case_id in closest.keys() | split.keys() | disputed.keys() | contradicted.keys():
        ranking.summaries[case_id] = TurnSummary(
            closest.get(case_id, {}),
            frozenset(split.get(case_id, ())),
            frozenset(disputed.get(case_id, ())),
            frozenset(contradicted.get(case_id, ())),
        )
    open_turns = ranking.open_turns
    for case_id, turn in units:
        turns = open_turns.get(case_id)
        if turns is None:
            open_turns[case_id] = {turn}
        else:
            turns.add(turn)
    for case_id, done in mine.items():
        if case_id in open_turns:
            open_turns[case_id] -= done
    for case_id, turn in audit_units:
        ranking.audit.setdefault(case_id, set()).add(turn)
    scores = {case_id: ranking.score(case_id, explain=False) for case_id in case_ids}
    ranking.ordered = order_informative_first(case_ids, scores)
    return ranking
