"""Queries on carry-overs (``rubric_carries``, ``re_reviews``): the record of each
publication that carried rows into the next rubric version, and the labels it queued
for their reviewers to label again; the lock a publication takes.

The rows themselves are carried by their own families' modules
(:func:`storage.units.carry_labels` for labels and gold labels,
:func:`storage.judging.carry_judge_verdicts`, :func:`storage.assignments.carry_assignments`).
Every statement is one ``INSERT ... SELECT`` (or ``UPDATE``) over the older version's
rows, so a publication over a million labels is a few statements in one write
transaction, not a million round trips. Version N is only read. The unique indexes on
``carried_from_id`` / ``carried_from_run_id`` / ``re_reviews.old_label_id`` make a
second publication carry nothing twice; the ``NOT EXISTS`` clauses skip what is
already there instead of failing on it (docs/reference.md, "Rubric versions: mapping
and carry-over").
"""

from __future__ import annotations

import json
import random
import time
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime
from typing import Any, TypeVar

from sqlalchemy import Engine, bindparam, text
from sqlmodel import Session

from review_app.errors import DatabaseBusy
from storage.bulk import code_counts
from storage.models import ReReview, RubricCarry

T = TypeVar("T")


PUBLISH_WAIT_SECONDS = 120.0
"""How long a publication keeps trying to take its locks before it gives up (it stores
nothing then and says the database stayed busy)."""
_FIRST_LOCK_WAIT_AT_MOST = 5.0
"""Seconds one attempt waits for the ``assignments`` lock at most (PostgreSQL)."""


def lock_for_carry(session: Session, *, wait_seconds: float) -> None:
    """PostgreSQL: keep writers out of the tables a publication reads and writes until it
    commits (readers go on); SQLite's ``BEGIN IMMEDIATE`` already does that.

    ``assignments`` is waited for (at most ``wait_seconds``) while nothing else is held,
    the other tables are taken at once or not at all (``NOWAIT``): a publication never
    waits while holding a lock, so no writer ever waits for it in a cycle. A lock not
    had in time raises :class:`~review_app.errors.DatabaseBusy` (through the engine);
    :func:`run_publication` tries again.

    The publication's statements read rows written a moment before in the same
    transaction (the carried labels, the new queue entries), which the planner's
    statistics, gathered before, do not know of: a nested loop chosen for "one row"
    then scans tens of thousands of rows once per outer row (16 minutes over 156,808
    labels). Hash and merge joins are linear whatever the estimates, so nested loops
    are turned off for this transaction (``tests/test_carry_plans.py`` reads the plans).
    """
    if session.get_bind().dialect.name != "postgresql":
        return
    session.execute(text(f"SET LOCAL lock_timeout = {max(1, int(wait_seconds * 1000))}"))
    # A label save takes its assignment first (storage.assignments.lock_assignment) and
    # the labels after it: waiting for ``assignments`` while holding nothing, then taking
    # the rest without waiting, a publication is never one half of a deadlock with a save.
    session.execute(text("LOCK TABLE assignments IN SHARE ROW EXCLUSIVE MODE"))
    session.execute(
        text(
            "LOCK TABLE labels, gold_labels, judge_runs, judge_verdicts, re_reviews "
            "IN SHARE ROW EXCLUSIVE MODE NOWAIT"
        )
    )
    session.execute(text("SET LOCAL enable_nestloop = off"))
    session.execute(text("SET LOCAL work_mem = '64MB'"))


def run_publication(
    engine: Engine,
    work: Callable[[Session], T],
    *,
    wait_seconds: float = PUBLISH_WAIT_SECONDS,
    dry_run: bool = False,
) -> T:
    """``work(session)`` in one write transaction holding the publication's locks
    (:func:`lock_for_carry`), committed (rolled back if ``dry_run``: what it would do,
    with nothing stored); its result.

    A lock not had in time (reviewers saving, a judge run storing verdicts, an import),
    a deadlock or a busy SQLite file rolls the attempt back and tries again after a
    short pause, until ``wait_seconds`` have passed; then :class:`DatabaseBusy` says
    nothing was published. A save that meets a publication holding its locks waits for
    it (within the busy timeout) and is then stored; none is lost.
    """
    deadline = time.monotonic() + wait_seconds
    attempt = 0
    while True:
        wait = min(_FIRST_LOCK_WAIT_AT_MOST, 0.25 * 2**attempt)
        try:
            with Session(engine) as session:
                lock_for_carry(session, wait_seconds=wait)
                result = work(session)
                if dry_run:
                    session.rollback()
                else:
                    session.commit()
                return result
        except DatabaseBusy:
            left = deadline - time.monotonic()
            if left <= 0:
                raise DatabaseBusy(
                    f"the database stayed busy for {wait_seconds:g} s (other writers held "
                    "the tables a publication writes); nothing was published, try again"
                ) from None
            attempt += 1
            time.sleep(min(left, random.uniform(0.05, 0.25) * min(attempt, 4)))


def create_carry(
    session: Session,
    *,
    rubric_id: str,
    from_version: int,
    to_version: int,
    actor: str,
    at: datetime,
) -> int:
    row = RubricCarry(
        rubric_id=rubric_id,
        from_version=from_version,
        to_version=to_version,
        actor=actor,
        at=at,
        summary_json="{}",
    )
    session.add(row)
    session.flush()
    assert row.id is not None
    return row.id


def finish_carry(session: Session, *, carry_id: int, summary: Mapping[str, Any]) -> None:
    row = session.get(RubricCarry, carry_id)
    assert row is not None
    row.summary_json = json.dumps(summary, sort_keys=True, separators=(",", ":"))
    session.add(row)
    session.flush()


def queue_re_reviews(
    session: Session,
    *,
    carry_id: int,
    rubric_id: str,
    from_version: int,
    to_version: int,
    codes: Sequence[str],
) -> tuple[int, dict[str, int]]:
    """Queue every current label of ``codes`` for its reviewer to label again under
    ``to_version`` (unless they already have, or it was queued before); returns the
    number of units queued and the count per reviewer name."""
    if not codes:
        return 0, {}
    session.execute(
        text(
            "INSERT INTO re_reviews (carry_id, reviewer_id, rubric_id, rubric_version, case_id, "
            "turn, old_label_id, old_code) "
            "SELECT :carry, o.reviewer_id, o.rubric_id, :to_v, o.case_id, o.turn, o.id, o.code "
            "FROM labels o WHERE o.rubric_id = :rid AND o.rubric_version = :from_v "
            "AND o.current AND NOT o.stale AND o.code IN :codes "
            "AND NOT EXISTS (SELECT 1 FROM re_reviews q WHERE q.old_label_id = o.id) "
            "AND NOT EXISTS (SELECT 1 FROM labels n WHERE n.rubric_id = o.rubric_id "
            "AND n.rubric_version = :to_v AND n.case_id = o.case_id AND n.turn = o.turn "
            "AND n.reviewer_id = o.reviewer_id AND n.current)"
        ).bindparams(bindparam("codes", expanding=True)),
        {
            "carry": carry_id,
            "to_v": to_version,
            "from_v": from_version,
            "rid": rubric_id,
            "codes": list(codes),
        },
    )
    per_reviewer = code_counts(
        session,
        "SELECT p.name, count(*) FROM re_reviews q JOIN reviewers p ON p.id = q.reviewer_id "
        "WHERE q.carry_id = :carry GROUP BY p.name",
        carry=carry_id,
    )
    units = session.execute(
        text(
            "SELECT count(*) FROM (SELECT DISTINCT case_id, turn FROM re_reviews "
            "WHERE carry_id = :carry) AS queued"
        ),
        {"carry": carry_id},
    ).scalar_one()
    return int(units), per_reviewer


def re_reviews_of(
    session: Session,
    *,
    reviewer_id: int,
    rubric_id: str,
    version: int,
    case_id: str | None = None,
) -> list[tuple[ReReview, bool]]:
    """A reviewer's re-review units under ``version`` (of one case, if given), each with
    whether they have labeled it again since."""
    query = (
        "SELECT q.id, EXISTS (SELECT 1 FROM labels n WHERE n.rubric_id = q.rubric_id "
        "AND n.rubric_version = q.rubric_version AND n.case_id = q.case_id "
        "AND n.turn = q.turn AND n.reviewer_id = q.reviewer_id AND n.current) "
        "FROM re_reviews q WHERE q.reviewer_id = :reviewer AND q.rubric_id = :rid "
        "AND q.rubric_version = :v"
        + (" AND q.case_id = :case" if case_id is not None else "")
        + " ORDER BY q.case_id, q.turn"
    )
    params: dict[str, Any] = {"reviewer": reviewer_id, "rid": rubric_id, "v": version}
    if case_id is not None:
        params["case"] = case_id
    rows = list(session.execute(text(query), params))
    result = []
    for row_id, done in rows:
        item = session.get(ReReview, row_id)
        assert item is not None
        result.append((item, bool(done)))
    return result


def carries_of(session: Session, *, rubric_id: str) -> list[RubricCarry]:
    query = text("SELECT id FROM rubric_carries WHERE rubric_id = :rid ORDER BY id")
    result = []
    for (row_id,) in session.execute(query, {"rid": rubric_id}):
        row = session.get(RubricCarry, row_id)
        assert row is not None
        result.append(row)
    return result
