"""Queries on contracts, cases, events and deterministic findings."""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import orjson
from sqlalchemy import Connection, and_, bindparam, delete, func, select, text, update
from sqlmodel import Session, col

from storage.bulk import in_chunks, insert_rows, plain_rows
from storage.models import Case, Contract, Evaluation, Event, Finding

CASE_COLUMNS = (
    "case_id",
    "chatbot_role",
    "contract_version",
    "n_events",
    "n_assistant_turns",
    "content_sha256",
    "source",
    "source_format",
    "extra_json",
    "imported_at",
)
EVENT_COLUMNS = (
    "case_id",
    "seq",
    "turn",
    "actor",
    "text",
    "actions_json",
    "set_role",
    "request_json",
    "extra_json",
)
EVALUATION_COLUMNS = (
    "case_id",
    "evaluator_version",
    "status",
    "lane",
    "first_violation_turn",
    "diagnostic",
    "role_spans_json",
    "n_fixture_errors",
    "n_violations",
    "n_harness_findings",
    "evaluated_at",
)
FINDING_COLUMNS = ("case_id", "evaluator_version", "kind", "code", "turn", "detail_json")

# Positions in the rows of CASE_COLUMNS / EVENT_COLUMNS.
_CASE_ROLE, _CASE_CONTRACT = 1, 2
_EVENT_SEQ, _EVENT_TURN = 1, 2
_EVENT_CONTENT = slice(3, 9)  # actor, text, actions_json, set_role, request_json, extra_json


# --- writing (bulk, inside the caller's transaction) -----------------------

# Any constant works: it only has to be the same in every process that imports cases.
_PG_CASE_WRITE_LOCK = 725_310_443


def lock_case_writes(connection: Connection) -> None:
    """Make this transaction the only one writing cases and contracts until it ends.

    An import reads which contracts and case ids are stored, then inserts the rest;
    two imports interleaving those steps would both insert the same contract version
    and one would die on the primary key. SQLite already serialises writers with
    ``BEGIN IMMEDIATE``; PostgreSQL takes a transaction-scoped advisory lock, so a
    second import waits for the first to commit and then sees what it stored.
    """
    if connection.dialect.name == "postgresql":
        connection.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": _PG_CASE_WRITE_LOCK})


def stored_contract_hashes(connection: Connection) -> dict[str, str]:
    rows = connection.execute(select(Contract.version, Contract.sha256))  # type: ignore[call-overload]
    return {version: sha for version, sha in rows}


def insert_contracts(connection: Connection, *, rows: Sequence[tuple[str, str, str, Any]]) -> None:
    insert_rows(
        connection,
        table="contracts",
        columns=("version", "sha256", "body_json", "created_at"),
        rows=rows,
    )


def stored_case_hashes(connection: Connection, *, case_ids: Sequence[str]) -> dict[str, str]:
    """``case_id -> content_sha256`` for those of ``case_ids`` already stored."""
    found: dict[str, str] = {}
    for chunk in in_chunks(case_ids):
        rows = connection.execute(
            select(col(Case.case_id), col(Case.content_sha256)).where(col(Case.case_id).in_(chunk))
        )
        found.update({case_id: sha for case_id, sha in rows})
    return found


def delete_case_content(connection: Connection, *, case_ids: Sequence[str]) -> None:
    """Remove cases' events and findings before storing a replacement.

    The case rows stay (labels, assignments, gold labels and judge verdicts refer to
    them) and are updated in place by :func:`insert_case_rows`.
    """
    for chunk in in_chunks(case_ids):
        for table in (Finding, Evaluation, Event):
            connection.execute(delete(table).where(col(table.case_id).in_(list(chunk))))


@dataclass(slots=True)
class CaseRows:
    """Rows for a batch of cases, in the column order of the ``*_COLUMNS`` tuples."""

    cases: list[tuple[Any, ...]]
    events: list[tuple[Any, ...]]
    evaluations: list[tuple[Any, ...]]
    findings: list[tuple[Any, ...]]
    replaced: set[str] = field(default_factory=set)
    """Case ids whose row exists already: updated rather than inserted."""

    @classmethod
    def empty(cls) -> CaseRows:
        return cls([], [], [], [])

    def __len__(self) -> int:
        return len(self.cases)


def insert_case_rows(connection: Connection, *, rows: CaseRows) -> None:
    new = [row for row in rows.cases if row[0] not in rows.replaced]
    insert_rows(connection, table="cases", columns=CASE_COLUMNS, rows=new)
    updates = [
        {
            f"v_{name}": value
            for name, value in zip(CASE_COLUMNS, row, strict=True)
            if name != "imported_at"
        }
        for row in rows.cases
        if row[0] in rows.replaced
    ]
    if updates:
        statement = (
            update(Case)
            .where(col(Case.case_id) == bindparam("v_case_id"))
            .values(
                {
                    **{
                        name: bindparam(f"v_{name}")
                        for name in CASE_COLUMNS
                        if name not in ("case_id", "imported_at")
                    },
                    "imported_at": func.now(),
                }
            )
        )
        connection.execute(statement, updates)
    insert_rows(connection, table="events", columns=EVENT_COLUMNS, rows=rows.events)
    insert_rows(connection, table="evaluations", columns=EVALUATION_COLUMNS, rows=rows.evaluations)
    insert_rows(connection, table="findings", columns=FINDING_COLUMNS, rows=rows.findings)


# --- reading -----------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class CaseSummaryRow:
    case_id: str
    contract_version: str | None
    n_events: int
    n_assistant_turns: int
    status: str | None
    lane: str | None
    first_violation_turn: int | None
    n_fixture_errors: int
    n_violations: int
    n_harness_findings: int
    diagnostic: str | None


def _summary_query(evaluator_version: str) -> Any:
    return select(  # type: ignore[call-overload]
        Case.case_id,
        Case.contract_version,
        Case.n_events,
        Case.n_assistant_turns,
        Evaluation.status,
        Evaluation.lane,
        Evaluation.first_violation_turn,
        func.coalesce(Evaluation.n_fixture_errors, 0),
        func.coalesce(Evaluation.n_violations, 0),
        func.coalesce(Evaluation.n_harness_findings, 0),
        Evaluation.diagnostic,
    ).outerjoin(
        Evaluation,
        and_(
            col(Evaluation.case_id) == col(Case.case_id),
            col(Evaluation.evaluator_version) == evaluator_version,
        ),
    )


def list_case_summaries(
    session: Session,
    *,
    evaluator_version: str,
    lanes: Iterable[str] | None = None,
    case_ids: Sequence[str] | None = None,
    offset: int = 0,
    limit: int | None = None,
) -> list[CaseSummaryRow]:
    query = _summary_query(evaluator_version)
    if lanes is not None:
        query = query.where(col(Evaluation.lane).in_(list(lanes)))
    if case_ids is not None:
        query = query.where(col(Case.case_id).in_(list(case_ids)))
    query = query.order_by(Case.case_id).offset(offset)
    if limit is not None:
        query = query.limit(limit)
    return [CaseSummaryRow(*row) for row in session.execute(query)]


def cases_token(session: Session) -> tuple[int, str, int]:
    """Changes whenever cases are imported or replaced: ``(cases, latest import time,
    highest finding id)`` (a replacement stamps the case's import time and writes its
    findings again)."""
    cases = session.execute(select(func.count(), func.max(col(Case.imported_at)))).one()
    findings = session.execute(select(func.coalesce(func.max(col(Finding.id)), 0))).scalar_one()
    return int(cases[0]), str(cases[1]), int(findings)


def get_case(session: Session, *, case_id: str) -> Case | None:
    return session.get(Case, case_id)


def get_contract(session: Session, *, version: str) -> Contract | None:
    return session.get(Contract, version)


def list_events(session: Session, *, case_id: str) -> list[Event]:
    query = select(Event).where(col(Event.case_id) == case_id).order_by(col(Event.seq))
    return list(session.scalars(query))


@dataclass(frozen=True)
class JudgedEvent:
    turn: int
    actor: str
    text: str | None
    actions_json: str | None
    set_role: str | None


def judge_transcripts(
    session: Session, *, case_ids: Sequence[str]
) -> dict[str, tuple[str | None, list[JudgedEvent]]]:
    """Per case: its chatbot role and its events in order, as a judge prompt shows them.

    Two queries per chunk of cases, not a case view per case: a judge run prepares
    thousands of prompts.
    """
    result: dict[str, tuple[str | None, list[JudgedEvent]]] = {}
    for chunk in in_chunks(list(case_ids)):
        roles = session.execute(
            select(col(Case.case_id), col(Case.chatbot_role)).where(col(Case.case_id).in_(chunk))
        ).all()
        for case_id, role in roles:
            result[case_id] = (role, [])
        rows = session.execute(
            select(
                col(Event.case_id),
                col(Event.turn),
                col(Event.actor),
                col(Event.text),
                col(Event.actions_json),
                col(Event.set_role),
            )
            .where(col(Event.case_id).in_(chunk))
            .order_by(col(Event.case_id), col(Event.seq))
        ).all()
        for case_id, turn, actor, text_, actions_json, set_role in rows:
            result[case_id][1].append(JudgedEvent(turn, actor, text_, actions_json, set_role))
    return result


def get_evaluation(session: Session, *, case_id: str, evaluator_version: str) -> Evaluation | None:
    return session.get(Evaluation, (case_id, evaluator_version))


def list_findings(session: Session, *, case_id: str, evaluator_version: str) -> list[Finding]:
    query = (
        select(Finding)
        .where(col(Finding.case_id) == case_id, col(Finding.evaluator_version) == evaluator_version)
        .order_by(col(Finding.id))
    )
    return list(session.scalars(query))


def event_actors(session: Session, *, case_ids: Sequence[str]) -> dict[str, dict[int, str]]:
    """Which actor spoke each turn: case_id -> turn -> actor, for stored ``case_ids``."""
    found: dict[str, dict[int, str]] = {}
    for chunk in in_chunks(case_ids):
        query = select(col(Event.case_id), col(Event.turn), col(Event.actor)).where(
            col(Event.case_id).in_(chunk)
        )
        for case_id, turn, actor in session.execute(query):
            found.setdefault(case_id, {})[turn] = actor
    return found


def event_actors_by_turn(session: Session, *, case_id: str) -> dict[int, str]:
    """Which actor spoke each turn of one case: turn -> actor."""
    return event_actors(session, case_ids=[case_id]).get(case_id, {})


def violation_turns(session: Session, *, cases: Any, evaluator_version: str) -> Sequence[Any]:
    """``(case_id, turn)`` of every deterministic violation on ``cases``, a subquery of
    case ids (:func:`storage.assignments.queue_cases`)."""
    query = select(col(Finding.case_id), col(Finding.turn)).where(
        col(Finding.kind) == "violation",
        col(Finding.evaluator_version) == evaluator_version,
        col(Finding.case_id).in_(cases),
        col(Finding.turn).is_not(None),
    )
    return plain_rows(session, query)


def actor_units_in(session: Session, *, cases: Any, actor: str) -> Sequence[Any]:
    """``(case_id, turn)`` of every event of ``actor`` (the units a rubric applies to) on
    ``cases``, a subquery of case ids (:func:`storage.assignments.queue_cases`)."""
    query = select(col(Event.case_id), col(Event.turn)).where(
        col(Event.case_id).in_(cases), col(Event.actor) == actor
    )
    return plain_rows(session, query)


def role_spans(session: Session, *, evaluator_version: str) -> dict[str, str]:
    """``{case_id: role_spans_json}`` of the evaluator version's results."""
    query = select(col(Evaluation.case_id), col(Evaluation.role_spans_json)).where(
        col(Evaluation.evaluator_version) == evaluator_version
    )
    return {case_id: spans for case_id, spans in session.execute(query)}


def case_lanes(session: Session, *, evaluator_version: str) -> dict[str, str]:
    """``{case_id: lane}`` of the evaluator version's results."""
    query = select(col(Evaluation.case_id), col(Evaluation.lane)).where(
        col(Evaluation.evaluator_version) == evaluator_version
    )
    return {case_id: lane for case_id, lane in session.execute(query)}


def turn_findings(
    session: Session, *, evaluator_version: str
) -> dict[tuple[str, int], list[tuple[str, str]]]:
    """``{(case_id, turn): [(kind, code), ...]}`` of the findings on a turn."""
    query = (
        select(col(Finding.case_id), col(Finding.turn), col(Finding.kind), col(Finding.code))
        .where(col(Finding.evaluator_version) == evaluator_version, col(Finding.turn).is_not(None))
        .order_by(col(Finding.id))
    )
    found: dict[tuple[str, int], list[tuple[str, str]]] = {}
    for case_id, turn, kind, code in session.execute(query):
        found.setdefault((case_id, int(turn)), []).append((kind, code))
    return found


def assistant_units(session: Session) -> list[tuple[str, int]]:
    """Every ``(case_id, turn)`` with an assistant event, sorted.

    A plain scan of the events, sorted here: turns are unique within a case (the
    import refuses a case using one twice), so ``DISTINCT`` would find nothing to
    drop, and with it and ``ORDER BY`` SQLite walked the events in key order and sorted
    them again in a temporary B-tree (about twice the time on 100,000 cases; measured
    in ``benchmarks/bench_events_index.py``, which also weighs an index for it).
    """
    query = select(col(Event.case_id), col(Event.turn)).where(col(Event.actor) == "assistant")
    units = [(case_id, turn) for case_id, turn in session.connection().execute(query)]
    units.sort()
    return units


def actor_units(
    session: Session, *, case_ids: Sequence[str], actor: str = "assistant"
) -> list[tuple[str, int]]:
    units: list[tuple[str, int]] = []
    for chunk in in_chunks(case_ids):
        query = (
            select(col(Event.case_id), col(Event.turn))
            .where(col(Event.case_id).in_(list(chunk)), col(Event.actor) == actor)
            .order_by(col(Event.case_id), col(Event.seq))
        )
        units.extend((row[0], row[1]) for row in session.execute(query))
    return units


def actor_turn_counts(session: Session, *, case_ids: Sequence[str], actor: str) -> dict[str, int]:
    """``case_id -> n``: how many events of ``actor`` each of ``case_ids`` holds (the turns
    a rubric applying to ``actor`` labels; cases with none left out)."""
    found: dict[str, int] = {}
    for chunk in in_chunks(case_ids):
        query = (
            select(col(Event.case_id), func.count())
            .where(col(Event.case_id).in_(list(chunk)), col(Event.actor) == actor)
            .group_by(col(Event.case_id))
        )
        found.update({case_id: count for case_id, count in session.execute(query)})
    return found


def actor_event_count(session: Session, *, actor: str) -> int:
    """How many events of ``actor`` all cases hold (the turns a rubric applying to it
    labels): for assistants, the cases' own count (a row per case, not per event)."""
    if actor == "assistant":
        query = select(func.coalesce(func.sum(col(Case.n_assistant_turns)), 0))
    else:
        query = select(func.count()).where(col(Event.actor) == actor)
    return int(session.execute(query).scalar_one())


def case_count(session: Session) -> int:
    return int(session.execute(select(func.count()).select_from(Case)).scalar_one())


def _prefix_digests(seed: tuple[Any, ...], events: Sequence[tuple[Any, ...]]) -> dict[int, bytes]:
    """``turn -> digest`` of the role and every event up to and including the turn."""
    digest = hashlib.sha256(orjson.dumps(list(seed)))
    found: dict[int, bytes] = {}
    for event in sorted(events, key=lambda row: row[_EVENT_SEQ]):
        digest.update(orjson.dumps(list(event[_EVENT_CONTENT])))
        found[event[_EVENT_TURN]] = digest.copy().digest()
    return found


def changed_turns(
    connection: Connection,
    *,
    case_ids: Sequence[str],
    new_cases: Sequence[tuple[Any, ...]],
    new_events: Sequence[tuple[Any, ...]],
) -> dict[str, list[int]]:
    """Per stored case of ``case_ids``: the stored turns whose conversation so far differs
    in the replacement (``new_*``: rows in the column order of :data:`CASE_COLUMNS` and
    :data:`EVENT_COLUMNS`). What ``import --replace`` makes stale (:mod:`storage.replacing`)."""
    wanted = set(case_ids)
    new_seed = {
        row[0]: (row[_CASE_ROLE], row[_CASE_CONTRACT]) for row in new_cases if row[0] in wanted
    }
    new_by_case: dict[str, list[tuple[Any, ...]]] = {}
    for row in new_events:
        if row[0] in wanted:
            new_by_case.setdefault(row[0], []).append(row)
    changed: dict[str, list[int]] = {}
    ordered = sorted(wanted)
    for chunk in in_chunks(ordered):
        seeds = {
            case_id: (role, contract)
            for case_id, role, contract in connection.execute(
                select(col(Case.case_id), col(Case.chatbot_role), col(Case.contract_version)).where(
                    col(Case.case_id).in_(chunk)
                )
            )
        }
        old_by_case: dict[str, list[tuple[Any, ...]]] = {}
        query = select(
            col(Event.case_id),
            col(Event.seq),
            col(Event.turn),
            col(Event.actor),
            col(Event.text),
            col(Event.actions_json),
            col(Event.set_role),
            col(Event.request_json),
            col(Event.extra_json),
        ).where(col(Event.case_id).in_(chunk))
        for row in connection.execute(query):
            old_by_case.setdefault(row[0], []).append(tuple(row))
        for case_id in chunk:
            old = _prefix_digests(seeds.get(case_id, (None, None)), old_by_case.get(case_id, []))
            new = _prefix_digests(new_seed.get(case_id, (None, None)), new_by_case.get(case_id, []))
            turns = sorted(turn for turn, digest in old.items() if new.get(turn) != digest)
            if turns:
                changed[case_id] = turns
    return changed
