"""Queries on LLM-judge runs and their verdicts."""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import (
    Connection,
    bindparam,
    case,
    delete,
    distinct,
    func,
    select,
    text,
    tuple_,
)
from sqlmodel import Session, col

from storage.bulk import (
    code_counts,
    code_mapping_case,
    in_chunks,
    insert_rows,
    plain_rows,
    timestamp_param,
)
from storage.models import JudgeRun, JudgeVerdict, utcnow


def find_run(
    session: Session,
    *,
    judge: str,
    prompt_version: str,
    model: str,
    endpoint: str,
    rubric_id: str,
    version: int,
) -> JudgeRun | None:
    query = select(JudgeRun).where(
        col(JudgeRun.judge) == judge,
        col(JudgeRun.prompt_version) == prompt_version,
        col(JudgeRun.model) == model,
        col(JudgeRun.endpoint) == endpoint,
        col(JudgeRun.rubric_id) == rubric_id,
        col(JudgeRun.rubric_version) == version,
    )
    return session.scalars(query).first()


def first_run_of_prompt(
    session: Session, *, judge: str, prompt_version: str, rubric_id: str
) -> JudgeRun | None:
    """The earliest run of a prompt version against any version of the rubric, carried
    twins (copies made by a publication) left out: it says which version the prompt
    was written for."""
    query = (
        select(JudgeRun)
        .where(
            col(JudgeRun.judge) == judge,
            col(JudgeRun.prompt_version) == prompt_version,
            col(JudgeRun.rubric_id) == rubric_id,
            col(JudgeRun.carried_from_run_id).is_(None),
        )
        .order_by(col(JudgeRun.id))
        .limit(1)
    )
    return session.scalars(query).first()


def create_run(session: Session, **fields: Any) -> JudgeRun:
    run = JudgeRun(**fields)
    session.add(run)
    session.flush()
    return run


def get_run(session: Session, *, run_id: int) -> JudgeRun | None:
    return session.get(JudgeRun, run_id)


def list_runs(
    session: Session, *, rubric_id: str | None = None, version: int | None = None
) -> list[JudgeRun]:
    query = select(JudgeRun).order_by(
        col(JudgeRun.judge), col(JudgeRun.prompt_version), col(JudgeRun.model), col(JudgeRun.id)
    )
    if rubric_id is not None:
        query = query.where(col(JudgeRun.rubric_id) == rubric_id)
    if version is not None:
        query = query.where(col(JudgeRun.rubric_version) == version)
    return list(session.scalars(query))


def touch_run(session: Session, run: JudgeRun, **fields: Any) -> None:
    for name, value in fields.items():
        setattr(run, name, value)
    run.updated_at = utcnow()
    session.add(run)
    session.flush()


VERDICT_COLUMNS = (
    "run_id",
    "case_id",
    "turn",
    "label",
    "score",
    "reason",
    "error",
    "error_kind",
    "latency_ms",
    "prompt_tokens",
    "completion_tokens",
    "created_at",
)


def replace_verdicts(
    session: Session, *, run_id: int, rows: Sequence[tuple[Any, ...]], now: datetime
) -> None:
    """Store verdicts (rows without run_id and created_at), replacing any for the same units."""
    connection = session.connection()
    units = sorted({(row[0], row[1]) for row in rows}, key=lambda u: (u[0], u[1] is None, u[1]))
    numbered = [unit for unit in units if unit[1] is not None]
    whole_cases = [case_id for case_id, turn in units if turn is None]
    # A statement per chunk of units, not per case: a judge run writes its answers a
    # few hundred at a time, and a DELETE per case was most of a batch's time.
    _delete_verdicts(connection, turns=numbered, whole_cases=whole_cases, run_id=run_id)
    stamp = timestamp_param(connection, now)
    insert_rows(
        connection,
        table="judge_verdicts",
        columns=VERDICT_COLUMNS,
        rows=[(run_id, *row, stamp) for row in rows],
    )


@dataclass(frozen=True, slots=True)
class VerdictRow:
    case_id: str
    turn: int | None
    label: str | None
    score: float | None
    reason: str | None
    error: str | None
    error_kind: str | None
    latency_ms: int | None
    prompt_tokens: int | None
    completion_tokens: int | None


def verdicts(session: Session, *, run_id: int) -> list[VerdictRow]:
    query = (
        select(
            col(JudgeVerdict.case_id),
            col(JudgeVerdict.turn),
            col(JudgeVerdict.label),
            col(JudgeVerdict.score),
            col(JudgeVerdict.reason),
            col(JudgeVerdict.error),
            col(JudgeVerdict.error_kind),
            col(JudgeVerdict.latency_ms),
            col(JudgeVerdict.prompt_tokens),
            col(JudgeVerdict.completion_tokens),
        )
        .where(col(JudgeVerdict.run_id) == run_id)
        .order_by(col(JudgeVerdict.case_id), col(JudgeVerdict.turn))
    )
    return [VerdictRow(*row) for row in session.execute(query)]


@dataclass(frozen=True, slots=True)
class VerdictColumns:
    """A run's verdicts column by column, in ``(case_id, turn)`` order: position i is one
    verdict. Plain lists, no object per verdict: a run can hold hundreds of thousands."""

    ids: list[int]
    case_ids: list[str]
    turns: list[int | None]
    labels: list[str | None]
    scores: list[float | None]
    errors: list[str | None]


def verdict_columns(session: Session, *, run_id: int, chunk_size: int = 10_000) -> VerdictColumns:
    """The columns the reports need (reasons: :func:`verdict_reasons`), fetched in chunks."""
    query = (
        select(
            col(JudgeVerdict.id),
            col(JudgeVerdict.case_id),
            col(JudgeVerdict.turn),
            col(JudgeVerdict.label),
            col(JudgeVerdict.score),
            col(JudgeVerdict.error),
        )
        .where(col(JudgeVerdict.run_id) == run_id)
        .order_by(col(JudgeVerdict.case_id), col(JudgeVerdict.turn))
    )
    columns = VerdictColumns([], [], [], [], [], [])
    # One string per distinct case id and code, not one per verdict.
    cases: dict[str, str] = {}
    codes: dict[str | None, str | None] = {}
    result = session.connection().execute(query)
    try:
        # The driver's own row tuples, not a SQLAlchemy Row per verdict.
        while chunk := result.cursor.fetchmany(chunk_size):
            ids, case_ids, turns, labels, scores, errors = zip(*chunk, strict=True)
            columns.ids.extend(ids)
            columns.case_ids.extend(map(cases.setdefault, case_ids, case_ids))
            columns.turns.extend(turns)
            columns.labels.extend(map(codes.setdefault, labels, labels))
            columns.scores.extend(scores)
            columns.errors.extend(errors)
    finally:
        result.close()
    return columns


def labels_on_cases(
    session: Session, *, run_id: int, case_ids: Sequence[str]
) -> dict[tuple[str, int], str]:
    """The run's turn verdicts' codes on the turns of ``case_ids``: ``(case_id, turn) ->
    code`` (verdicts without a code left out). Reads those cases' rows only, through the
    ``(run_id, case_id, turn)`` index, not the whole run."""
    found: dict[tuple[str, int], str] = {}
    for chunk in in_chunks(sorted(set(case_ids))):
        query = select(
            col(JudgeVerdict.case_id), col(JudgeVerdict.turn), col(JudgeVerdict.label)
        ).where(
            col(JudgeVerdict.run_id) == run_id,
            col(JudgeVerdict.case_id).in_(chunk),
            col(JudgeVerdict.turn).is_not(None),
            col(JudgeVerdict.label).is_not(None),
        )
        found.update(((row[0], row[1]), row[2]) for row in session.execute(query))
    return found


def verdict_reasons(session: Session, *, ids: Sequence[int]) -> dict[int, str | None]:
    """The reason of each verdict in ``ids`` (by verdict id)."""
    reasons: dict[int, str | None] = {}
    for chunk in in_chunks(ids):
        query = select(col(JudgeVerdict.id), col(JudgeVerdict.reason)).where(
            col(JudgeVerdict.id).in_(chunk)
        )
        reasons.update((row[0], row[1]) for row in session.execute(query))
    return reasons


def kept_units_among(
    session: Session, *, run_id: int, units: Sequence[tuple[str, int]]
) -> set[tuple[str, int]]:
    """Those of ``units`` on which a run holds a kept verdict (answered, or an unparseable
    answer; not an endpoint failure, which a later pass asks again): a chunk of units a
    query, through the ``(run_id, case_id, turn)`` index."""
    found: set[tuple[str, int]] = set()
    for chunk in in_chunks(sorted(set(units))):
        query = select(col(JudgeVerdict.case_id), col(JudgeVerdict.turn)).where(
            col(JudgeVerdict.run_id) == run_id,
            tuple_(col(JudgeVerdict.case_id), col(JudgeVerdict.turn)).in_(chunk),
            func.coalesce(col(JudgeVerdict.error_kind), "") != "endpoint",
        )
        found.update((case_id, int(turn)) for case_id, turn in session.execute(query))
    return found


def judge_token(session: Session, *, rubric_id: str, version: int) -> tuple[int, str, int, int]:
    """Changes whenever a judge run of the rubric version or one of its verdicts changes.

    ``(runs, latest run update, verdicts, highest verdict id)``: every write touches the
    run, except verdicts stored during a run, which add rows.
    """
    runs = session.execute(
        select(func.count(), func.max(col(JudgeRun.updated_at))).where(
            col(JudgeRun.rubric_id) == rubric_id, col(JudgeRun.rubric_version) == version
        )
    ).one()
    verdict_rows = session.execute(
        select(func.count(), func.coalesce(func.max(col(JudgeVerdict.id)), 0))
        .select_from(JudgeVerdict)
        .join(JudgeRun, col(JudgeRun.id) == col(JudgeVerdict.run_id))
        .where(col(JudgeRun.rubric_id) == rubric_id, col(JudgeRun.rubric_version) == version)
    ).one()
    return int(runs[0]), str(runs[1]), int(verdict_rows[0]), int(verdict_rows[1])


def verdicts_token(session: Session, *, rubric_id: str, version: int) -> list[tuple[int, str, int]]:
    """Per judge run of the rubric version, ``(id, latest update, highest verdict id)``:
    changes whenever a run changes or gets verdicts (verdicts are added, or replaced by
    new rows; those deleted with a replaced case change the cases' import stamp). One
    index search per run: milliseconds at 700,000 verdicts, where counting them
    (:func:`judge_token`) takes a third of a second."""
    highest = (
        select(func.max(col(JudgeVerdict.id)))
        .where(col(JudgeVerdict.run_id) == col(JudgeRun.id))
        .correlate(JudgeRun)
        .scalar_subquery()
    )
    rows = session.execute(
        select(col(JudgeRun.id), col(JudgeRun.updated_at), func.coalesce(highest, 0))
        .where(col(JudgeRun.rubric_id) == rubric_id, col(JudgeRun.rubric_version) == version)
        .order_by(col(JudgeRun.id))
    )
    return [(int(run_id), str(updated), int(top)) for run_id, updated, top in rows]


@dataclass(frozen=True, slots=True)
class UnitVerdict:
    """A run's verdict on one unit: its code (``None`` with an error), score, reason, error."""

    label: str | None
    score: float | None
    reason: str | None
    error: str | None


def unit_verdict(session: Session, *, run_id: int, case_id: str, turn: int) -> UnitVerdict | None:
    """Run ``run_id``'s verdict on ``(case_id, turn)``, or ``None`` when it has none."""
    query = select(
        col(JudgeVerdict.label),
        col(JudgeVerdict.score),
        col(JudgeVerdict.reason),
        col(JudgeVerdict.error),
    ).where(
        col(JudgeVerdict.run_id) == run_id,
        col(JudgeVerdict.case_id) == case_id,
        col(JudgeVerdict.turn) == turn,
    )
    row = session.execute(query).first()
    return UnitVerdict(*row) if row is not None else None


@dataclass(frozen=True, slots=True)
class RunCounts:
    """How much of a run is stored: verdicts, errors, endpoint failures, answered turns."""

    verdicts: int
    errors: int
    endpoint_errors: int
    answered_turns: int
    """Turn verdicts kept: answered, or an answer that could not be parsed (not an
    endpoint failure, which a later run asks again)."""
    first_endpoint_error: str | None


def run_counts_of(session: Session, *, run_id: int) -> RunCounts:
    """:class:`RunCounts` of one run."""
    return runs_counts(session, run_ids=[run_id]).get(run_id, RunCounts(0, 0, 0, 0, None))


def runs_counts(session: Session, *, run_ids: Sequence[int]) -> dict[int, RunCounts]:
    """:class:`RunCounts` of each run of ``run_ids`` that has verdicts: one aggregate query
    grouped by run, and one more only when some run has endpoint failures."""
    if not run_ids:
        return {}
    endpoint = case((col(JudgeVerdict.error_kind) == "endpoint", 1), else_=0)
    kept = func.coalesce(col(JudgeVerdict.error_kind), "") != "endpoint"
    answered = case((col(JudgeVerdict.turn).is_not(None) & kept, 1), else_=0)
    rows = session.execute(
        select(
            col(JudgeVerdict.run_id),
            func.count(),
            func.count(col(JudgeVerdict.error)),
            func.coalesce(func.sum(endpoint), 0),
            func.coalesce(func.sum(answered), 0),
        )
        .where(col(JudgeVerdict.run_id).in_(list(run_ids)))
        .group_by(col(JudgeVerdict.run_id))
    ).all()
    failing = [run_id for run_id, _, _, failed, _ in rows if failed]
    first: dict[int, str] = {}
    if failing:
        firsts = (
            select(func.min(col(JudgeVerdict.id)))
            .where(
                col(JudgeVerdict.run_id).in_(failing), col(JudgeVerdict.error_kind) == "endpoint"
            )
            .group_by(col(JudgeVerdict.run_id))
        )
        first = {
            int(run_id): error
            for run_id, error in session.execute(
                select(col(JudgeVerdict.run_id), col(JudgeVerdict.error)).where(
                    col(JudgeVerdict.id).in_(firsts)
                )
            )
        }
    return {
        int(run_id): RunCounts(int(total), int(errors), int(failed), int(turns), first.get(run_id))
        for run_id, total, errors, failed, turns in rows
    }


def judge_turn_summaries(
    session: Session, *, cases: Any, rubric_id: str, version: int, threshold: float
) -> Sequence[Any]:
    """``(case_id, turn, closest, labels)`` of every turn of ``cases`` with an answered
    verdict: the smallest ``|score - threshold|`` over the judge runs (``None`` when no
    verdict has a score) and how many different labels the runs gave.

    For the "most informative first" queue order. ``cases`` is a subquery of case ids
    (:func:`storage.assignments.queue_cases`): one query however long the queue, not
    ``IN`` lists of ids; the database sums the verdicts up, one row per turn."""
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
    return plain_rows(session, query)


def run_counts(session: Session, *, rubric_id: str) -> Counter[tuple[str, str]]:
    """Judge runs per ``(judge, prompt_version)`` of a rubric id (any rubric version)."""
    query = (
        select(col(JudgeRun.judge), col(JudgeRun.prompt_version), func.count())
        .where(col(JudgeRun.rubric_id) == rubric_id)
        .group_by(col(JudgeRun.judge), col(JudgeRun.prompt_version))
    )
    return Counter({(judge, version): int(n) for judge, version, n in session.execute(query)})


def run_sha256s(
    session: Session, *, rubric_id: str, judge: str, prompt_version: str
) -> set[str | None]:
    """The prompt sha256 each run of ``judge@prompt_version`` recorded."""
    query = (
        select(col(JudgeRun.prompt_sha256))
        .where(
            col(JudgeRun.rubric_id) == rubric_id,
            col(JudgeRun.judge) == judge,
            col(JudgeRun.prompt_version) == prompt_version,
        )
        .distinct()
    )
    return set(session.scalars(query))


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
    judge, prompt version, model and endpoint) holding its verdicts whose label is in ``mapping``;
    returns verdicts carried per old code. Error verdicts and unmapped labels stay behind.
    A twin is not made where that identity already has a run under ``to_version``."""
    stamp = timestamp_param(session.connection(), at)
    session.execute(
        text(
            "INSERT INTO judge_runs (judge, prompt_version, model, endpoint, rubric_id, "
            "rubric_version, prompt_sha256, source, status, params_json, summary_json, "
            "calibration_json, created_at, updated_at, carried_from_run_id, carry_id) "
            "SELECT r.judge, r.prompt_version, r.model, r.endpoint, r.rubric_id, :to_v, "
            "r.prompt_sha256, r.source, r.status, r.params_json, NULL, NULL, :at, :at, r.id, "
            ":carry FROM judge_runs r WHERE r.rubric_id = :rid AND r.rubric_version = :from_v "
            "AND NOT EXISTS (SELECT 1 FROM judge_runs c WHERE c.carried_from_run_id = r.id) "
            "AND NOT EXISTS (SELECT 1 FROM judge_runs n WHERE n.judge = r.judge "
            "AND n.prompt_version = r.prompt_version AND n.model = r.model "
            "AND n.endpoint = r.endpoint "
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
    code_case, params = code_mapping_case("o.label", mapping)
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
    counts = code_counts(session, f"SELECT o.label, count(*) {where} GROUP BY o.label", **values)
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


def delete_verdicts_on_changed_turns(
    connection: Connection, *, case_ids: Sequence[str], changed: dict[str, list[int]]
) -> int:
    """Delete judge verdicts on the changed turns of replaced cases, and the
    conversation-level verdicts (no turn) of every replaced case ``case_ids`` (its
    conversation differs, if only by growing). Returns how many were deleted."""
    units = [(case_id, turn) for case_id, turns in sorted(changed.items()) for turn in turns]
    return _delete_verdicts(connection, turns=units, whole_cases=sorted(set(case_ids)))


def _delete_verdicts(
    connection: Connection,
    *,
    turns: Sequence[tuple[str, int]],
    whole_cases: Sequence[str],
    run_id: int | None = None,
) -> int:
    """Delete the verdicts on ``turns`` (``(case_id, turn)`` units) and the
    conversation-level verdicts (no turn) of ``whole_cases``, of one run or of every
    run, a statement per chunk; returns how many were deleted."""
    in_run = () if run_id is None else (col(JudgeVerdict.run_id) == run_id,)
    deleted = 0
    for chunk in in_chunks(turns):
        deleted += connection.execute(
            delete(JudgeVerdict).where(
                *in_run, tuple_(col(JudgeVerdict.case_id), col(JudgeVerdict.turn)).in_(chunk)
            )
        ).rowcount
    for chunk in in_chunks(whole_cases):
        deleted += connection.execute(
            delete(JudgeVerdict).where(
                *in_run, col(JudgeVerdict.case_id).in_(chunk), col(JudgeVerdict.turn).is_(None)
            )
        ).rowcount
    return deleted
