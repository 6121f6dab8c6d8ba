"""Queries on LLM-judge runs and their verdicts."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import delete, func, select
from sqlmodel import Session, col

from storage.bulk import in_chunks, insert_rows, timestamp_param
from storage.models import Event, JudgeRun, JudgeVerdict, utcnow


def find_run(
    session: Session, *, judge: str, prompt_version: str, model: str, rubric_id: str, version: int
) -> JudgeRun | None:
    query = select(JudgeRun).where(
        col(JudgeRun.judge) == judge,
        col(JudgeRun.prompt_version) == prompt_version,
        col(JudgeRun.model) == model,
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
    by_case: dict[str, list[int | None]] = {}
    for case_id, turn in units:
        by_case.setdefault(case_id, []).append(turn)
    for case_id, turns in by_case.items():
        numbered = [t for t in turns if t is not None]
        base = delete(JudgeVerdict).where(
            col(JudgeVerdict.run_id) == run_id, col(JudgeVerdict.case_id) == case_id
        )
        if numbered:
            session.execute(base.where(col(JudgeVerdict.turn).in_(numbered)))
        if None in turns:
            session.execute(base.where(col(JudgeVerdict.turn).is_(None)))
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
    for start in range(0, len(ids), 500):
        query = select(col(JudgeVerdict.id), col(JudgeVerdict.reason)).where(
            col(JudgeVerdict.id).in_(ids[start : start + 500])
        )
        reasons.update((row[0], row[1]) for row in session.execute(query))
    return reasons


def verdict_counts(session: Session, *, run_id: int) -> tuple[int, int]:
    """``(verdicts, errors)`` of a run."""
    query = select(func.count(), func.count(col(JudgeVerdict.error))).where(
        col(JudgeVerdict.run_id) == run_id
    )
    total, errors = session.execute(query).one()
    return int(total), int(errors)


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


def count_errors(session: Session, *, run_id: int, kind: str) -> int:
    """How many verdicts of a run hold an error of ``kind`` (``endpoint`` or ``answer``)."""
    query = select(func.count()).where(
        col(JudgeVerdict.run_id) == run_id, col(JudgeVerdict.error_kind) == kind
    )
    return int(session.execute(query).scalar_one())


def assistant_units(
    session: Session, *, case_ids: Sequence[str], actor: str = "assistant"
) -> list[tuple[str, int]]:
    units: list[tuple[str, int]] = []
    for start in range(0, len(case_ids), 500):
        chunk = list(case_ids[start : start + 500])
        query = (
            select(col(Event.case_id), col(Event.turn))
            .where(col(Event.case_id).in_(chunk), col(Event.actor) == actor)
            .order_by(col(Event.case_id), col(Event.seq))
        )
        units.extend((row[0], row[1]) for row in session.execute(query))
    return units


@dataclass(frozen=True, slots=True)
class UnitVerdict:
    """The judge's verdict on one unit, with the run it came from."""

    run_id: int
    judge: str
    prompt_version: str
    model: str
    label: str
    score: float | None
    reason: str | None


def newest_unit_verdict(
    session: Session, *, rubric_id: str, version: int, case_id: str, turn: int
) -> UnitVerdict | None:
    """The verdict on ``(case_id, turn)`` of the newest run of the rubric version that
    has one (a label, not an error); newest by creation time, then id."""
    query = (
        select(
            col(JudgeRun.id),
            col(JudgeRun.judge),
            col(JudgeRun.prompt_version),
            col(JudgeRun.model),
            col(JudgeVerdict.label),
            col(JudgeVerdict.score),
            col(JudgeVerdict.reason),
        )
        .join(JudgeRun, col(JudgeRun.id) == col(JudgeVerdict.run_id))
        .where(
            col(JudgeRun.rubric_id) == rubric_id,
            col(JudgeRun.rubric_version) == version,
            col(JudgeVerdict.case_id) == case_id,
            col(JudgeVerdict.turn) == turn,
            col(JudgeVerdict.label).is_not(None),
        )
        .order_by(col(JudgeRun.created_at).desc(), col(JudgeRun.id).desc())
        .limit(1)
    )
    row = session.execute(query).first()
    return UnitVerdict(*row) if row is not None else None
