"""What the "most informative first" queue order reads, for the cases of one reviewer's
queue: the judge's verdicts and the reviewers' current labels summed up per turn, the
deterministic violations and the turns a rubric applies to.

``cases`` is the queue as a subquery of case ids (:func:`storage.assignments.queue_cases`):
one query per kind of row however long the queue, not ``IN`` lists of ids. The database
sums verdicts and labels up per turn, so a queue of thousands of cases brings back one
row per turn, not one per verdict or label.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from typing import Any

from sqlalchemy import case, distinct, false, func, select
from sqlmodel import Session, col

from storage.models import Event, Finding, JudgeRun, JudgeVerdict, Label


def _rows(session: Session, query: Any) -> Sequence[Any]:
    """The rows of ``query`` as plain tuples, read through the session's connection a
    batch at a time: tens of thousands of result rows alive at once would each be
    tracked by the garbage collector and set off full collections; plain tuples of
    strings and numbers are not tracked."""
    result = session.connection().execute(query)
    return [tuple(row) for batch in result.partitions(2000) for row in batch]


def judge_turn_summaries(
    session: Session, *, cases: Any, rubric_id: str, version: int, threshold: float
) -> Sequence[Any]:
    """``(case_id, turn, closest, labels)`` of every turn with an answered verdict:
    the smallest ``|score - threshold|`` over the judge runs (``None`` when no verdict
    has a score) and how many different labels the runs gave."""
    score = col(JudgeVerdict.score)
    query = (
        select(
            col(JudgeVerdict.case_id),
            col(JudgeVerdict.turn),
            func.min(func.abs(score - threshold)),
            func.count(distinct(col(JudgeVerdict.label))),
        )
        .join(JudgeRun, col(JudgeRun.id) == col(JudgeVerdict.run_id))
        .where(
            col(JudgeRun.rubric_id) == rubric_id,
            col(JudgeRun.rubric_version) == version,
            col(JudgeVerdict.case_id).in_(cases),
            col(JudgeVerdict.turn).is_not(None),
            col(JudgeVerdict.error).is_(None),
        )
        .group_by(col(JudgeVerdict.case_id), col(JudgeVerdict.turn))
    )
    return _rows(session, query)


def label_turn_summaries(
    session: Session,
    *,
    cases: Any,
    rubric_id: str,
    version: int,
    me: int,
    pass_codes: Collection[str],
) -> Sequence[Any]:
    """``(case_id, turn, mine, other_codes, passed)`` of every turn with a current label:
    whether reviewer ``me`` labeled it (1 or 0), how many different codes the other
    reviewers gave, and whether some reviewer gave one of ``pass_codes`` (1 or 0)."""
    reviewer, code = col(Label.reviewer_id), col(Label.code)
    passing = code.in_(list(pass_codes)) if pass_codes else false()
    query = (
        select(
            col(Label.case_id),
            col(Label.turn),
            func.max(case((reviewer == me, 1), else_=0)),
            func.count(distinct(case((reviewer != me, code), else_=None))),
            func.max(case((passing, 1), else_=0)),
        )
        .where(
            col(Label.rubric_id) == rubric_id,
            col(Label.rubric_version) == version,
            col(Label.current),
            col(Label.case_id).in_(cases),
        )
        .group_by(col(Label.case_id), col(Label.turn))
    )
    return _rows(session, query)


def violation_turns(session: Session, *, cases: Any, evaluator_version: str) -> Sequence[Any]:
    """``(case_id, turn)`` of every deterministic violation."""
    query = select(col(Finding.case_id), col(Finding.turn)).where(
        col(Finding.kind) == "violation",
        col(Finding.evaluator_version) == evaluator_version,
        col(Finding.case_id).in_(cases),
        col(Finding.turn).is_not(None),
    )
    return _rows(session, query)


def turns_of_actor(session: Session, *, cases: Any, actor: str) -> Sequence[Any]:
    """``(case_id, turn)`` of every event of ``actor`` (the units a rubric applies to)."""
    query = select(col(Event.case_id), col(Event.turn)).where(
        col(Event.case_id).in_(cases), col(Event.actor) == actor
    )
    return _rows(session, query)
