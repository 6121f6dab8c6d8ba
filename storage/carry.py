"""Carrying labels, gold labels and judge verdicts into the next rubric version, in bulk.

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
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import bindparam, text
from sqlmodel import Session

from storage.bulk import timestamp_param
from storage.models import ReReview, RubricCarry


def lock_for_carry(session: Session) -> None:
    """PostgreSQL: keep writers out of the tables a publication reads and writes until it
    commits (readers go on). SQLite's ``BEGIN IMMEDIATE`` already does that."""
    if session.get_bind().dialect.name == "postgresql":
        session.execute(
            text(
                "LOCK TABLE labels, gold_labels, judge_runs, judge_verdicts, re_reviews, "
                "assignments IN SHARE ROW EXCLUSIVE MODE"
            )
        )


def _code_case(column: str, mapping: Mapping[str, str]) -> tuple[str, dict[str, str]]:
    """``CASE column WHEN :o0 THEN :n0 ... END`` and its parameters."""
    params: dict[str, str] = {}
    whens = []
    for index, (old, new) in enumerate(sorted(mapping.items())):
        params[f"o{index}"], params[f"n{index}"] = old, new
        whens.append(f"WHEN :o{index} THEN :n{index}")
    return f"CASE {column} {' '.join(whens)} END", params


def _counts(session: Session, query: str, **params: Any) -> dict[str, int]:
    statement = text(query)
    if "codes" in params:
        statement = statement.bindparams(bindparam("codes", expanding=True))
    return {str(code): int(n) for code, n in session.execute(statement, params)}


def current_code_counts(
    session: Session, *, table: str, rubric_id: str, version: int
) -> dict[str, int]:
    """Current, not stale rows of ``labels`` or ``gold_labels`` per code."""
    assert table in ("labels", "gold_labels")
    return _counts(
        session,
        f"SELECT code, count(*) FROM {table} WHERE rubric_id = :rid AND rubric_version = :v "
        "AND current AND NOT stale GROUP BY code",
        rid=rubric_id,
        v=version,
    )


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


def carry_labels(
    session: Session,
    *,
    table: str,
    carry_id: int,
    rubric_id: str,
    from_version: int,
    to_version: int,
    mapping: Mapping[str, str],
    at: datetime,
) -> dict[str, int]:
    """Copy the current rows of ``labels`` or ``gold_labels`` whose code is in ``mapping``
    (old code -> new code) into ``to_version``; returns how many per old code.

    Skipped: rows carried before, and units that already have a current row under
    ``to_version`` (for ``labels``: from the same reviewer), whose newer label wins.
    """
    if not mapping:
        return {}
    code_case, params = _code_case("o.code", mapping)
    if table == "labels":
        columns = "reviewer_id, rationale, source"
        selected = "o.reviewer_id, o.rationale, o.source"
        same_owner = "AND n.reviewer_id = o.reviewer_id"
    elif table == "gold_labels":
        columns = "adjudicator_id, note, calibration_item, rubric_ambiguity"
        # an ambiguity note is about the old wording: it stays with the old version
        selected = "o.adjudicator_id, o.note, o.calibration_item, NULL"
        same_owner = ""
    else:
        raise ValueError(f"cannot carry rows of {table}")
    statement = text(
        f"INSERT INTO {table} (case_id, turn, rubric_id, rubric_version, code, {columns}, "
        "current, created_at, stale, carried_from_id, carry_id) "
        f"SELECT o.case_id, o.turn, o.rubric_id, :to_v, {code_case}, {selected}, "
        "TRUE, :at, FALSE, o.id, :carry "
        f"FROM {table} o WHERE o.rubric_id = :rid AND o.rubric_version = :from_v "
        "AND o.current AND NOT o.stale AND o.code IN :codes "
        f"AND NOT EXISTS (SELECT 1 FROM {table} c WHERE c.carried_from_id = o.id) "
        f"AND NOT EXISTS (SELECT 1 FROM {table} n WHERE n.rubric_id = o.rubric_id "
        "AND n.rubric_version = :to_v AND n.case_id = o.case_id AND n.turn = o.turn "
        f"{same_owner} AND n.current)"
    ).bindparams(bindparam("codes", expanding=True))
    session.execute(
        statement,
        {
            **params,
            "to_v": to_version,
            "from_v": from_version,
            "rid": rubric_id,
            "codes": sorted(mapping),
            "at": timestamp_param(session.connection(), at),
            "carry": carry_id,
        },
    )
    return _counts(
        session,
        f"SELECT o.code, count(*) FROM {table} n JOIN {table} o ON o.id = n.carried_from_id "
        "WHERE n.rubric_id = :rid AND n.rubric_version = :to_v AND n.carry_id = :carry "
        "GROUP BY o.code",
        rid=rubric_id,
        to_v=to_version,
        carry=carry_id,
    )


def carry_judge_verdicts(
    session: Session,
    *,
    carry_id: int,
    rubric_id: str,
    from_version: int,
    to_version: int,
    mapping: Mapping[str, str],
    at: datetime,
) -> dict[str, int]:
    """Each judge run of ``from_version`` gets a carried twin under ``to_version`` (same
    judge, prompt version and model) holding its verdicts whose label is in ``mapping``;
    returns verdicts carried per old code. Error verdicts and unmapped labels stay behind.
    A twin is not made where that identity already has a run under ``to_version``."""
    stamp = timestamp_param(session.connection(), at)
    session.execute(
        text(
            "INSERT INTO judge_runs (judge, prompt_version, model, rubric_id, rubric_version, "
            "prompt_sha256, source, status, params_json, summary_json, calibration_json, "
            "created_at, updated_at, carried_from_run_id, carry_id) "
            "SELECT r.judge, r.prompt_version, r.model, r.rubric_id, :to_v, r.prompt_sha256, "
            "r.source, r.status, r.params_json, NULL, NULL, :at, :at, r.id, :carry "
            "FROM judge_runs r WHERE r.rubric_id = :rid AND r.rubric_version = :from_v "
            "AND NOT EXISTS (SELECT 1 FROM judge_runs c WHERE c.carried_from_run_id = r.id) "
            "AND NOT EXISTS (SELECT 1 FROM judge_runs n WHERE n.judge = r.judge "
            "AND n.prompt_version = r.prompt_version AND n.model = r.model "
            "AND n.rubric_id = r.rubric_id AND n.rubric_version = :to_v)"
        ),
        {
            "to_v": to_version,
            "from_v": from_version,
            "rid": rubric_id,
            "at": stamp,
            "carry": carry_id,
        },
    )
    if not mapping:
        return {}
    code_case, params = _code_case("o.label", mapping)
    where = (
        "FROM judge_verdicts o JOIN judge_runs nr ON nr.carried_from_run_id = o.run_id "
        "JOIN judge_runs r ON r.id = o.run_id "
        "WHERE r.rubric_id = :rid AND r.rubric_version = :from_v "
        "AND o.error IS NULL AND o.label IN :codes "
        "AND NOT EXISTS (SELECT 1 FROM judge_verdicts c WHERE c.carried_from_id = o.id) "
        "AND NOT EXISTS (SELECT 1 FROM judge_verdicts x WHERE x.run_id = nr.id "
        "AND x.case_id = o.case_id AND (x.turn = o.turn OR (x.turn IS NULL AND o.turn IS NULL)))"
    )
    values = {**params, "from_v": from_version, "rid": rubric_id, "codes": sorted(mapping)}
    counts = _counts(session, f"SELECT o.label, count(*) {where} GROUP BY o.label", **values)
    session.execute(
        text(
            "INSERT INTO judge_verdicts (run_id, case_id, turn, label, score, reason, error, "
            "error_kind, latency_ms, prompt_tokens, completion_tokens, created_at, "
            "carried_from_id) "
            f"SELECT nr.id, o.case_id, o.turn, {code_case}, o.score, o.reason, NULL, NULL, "
            f"o.latency_ms, o.prompt_tokens, o.completion_tokens, :at, o.id {where}"
        ).bindparams(bindparam("codes", expanding=True)),
        {**values, "at": stamp},
    )
    return counts


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
    per_reviewer = _counts(
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


def carry_assignments(
    session: Session,
    *,
    rubric_id: str,
    from_version: int,
    to_version: int,
    at: datetime,
    count_assistant_turns: bool,
) -> None:
    """Every queue entry of ``from_version`` also under ``to_version``, with progress
    recounted from the labels now there (carried ones included)."""
    stamp = timestamp_param(session.connection(), at)
    session.execute(
        text(
            "INSERT INTO assignments (case_id, reviewer_id, rubric_id, rubric_version, "
            "assigned_by, created_at, labeled_turns, completed_at) "
            "SELECT a.case_id, a.reviewer_id, a.rubric_id, :to_v, a.assigned_by, :at, 0, NULL "
            "FROM assignments a WHERE a.rubric_id = :rid AND a.rubric_version = :from_v "
            "AND NOT EXISTS (SELECT 1 FROM assignments b WHERE b.reviewer_id = a.reviewer_id "
            "AND b.rubric_id = a.rubric_id AND b.rubric_version = :to_v "
            "AND b.case_id = a.case_id)"
        ),
        {"to_v": to_version, "from_v": from_version, "rid": rubric_id, "at": stamp},
    )
    labeled = (
        "(SELECT count(*) FROM labels l WHERE l.rubric_id = assignments.rubric_id "
        "AND l.rubric_version = assignments.rubric_version "
        "AND l.case_id = assignments.case_id AND l.reviewer_id = assignments.reviewer_id "
        "AND l.current)"
    )
    completed = (
        f"CASE WHEN {labeled} >= (SELECT c.n_assistant_turns FROM cases c "
        "WHERE c.case_id = assignments.case_id) THEN :at ELSE NULL END"
        if count_assistant_turns
        else "NULL"
    )
    session.execute(
        text(
            f"UPDATE assignments SET labeled_turns = {labeled}, completed_at = {completed} "
            "WHERE rubric_id = :rid AND rubric_version = :to_v AND completed_at IS NULL"
        ),
        {"rid": rubric_id, "to_v": to_version, "at": stamp},
    )


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


def carried_units(session: Session, *, table: str, rubric_id: str, version: int) -> int:
    """How many units (case, turn) of ``version`` have a current carried row."""
    assert table in ("labels", "gold_labels")
    return int(
        session.execute(
            text(
                f"SELECT count(*) FROM (SELECT DISTINCT case_id, turn FROM {table} "
                "WHERE rubric_id = :rid AND rubric_version = :v AND current "
                "AND carried_from_id IS NOT NULL) AS carried"
            ),
            {"rid": rubric_id, "v": version},
        ).scalar_one()
    )


def carried_verdicts(session: Session, *, run_id: int) -> int:
    """How many verdicts of a judge run were carried from the previous rubric version."""
    return int(
        session.execute(
            text(
                "SELECT count(*) FROM judge_verdicts WHERE run_id = :run "
                "AND carried_from_id IS NOT NULL"
            ),
            {"run": run_id},
        ).scalar_one()
    )
