"""Disagreements, their adjudication by policy owners, and the resulting gold labels.

The disagreement queue holds units whose reviewers' current labels differ, and
units where a label contradicts a deterministic finding (a pass code on a turn
with a recorded action outside the role). A policy owner records the gold label
with a note, may mark the unit a calibration item for the LLM judge, and may note
a rubric ambiguity for the next version.

Gold label of a unit: the adjudicated label where there is one, else a unanimous
label from at least two reviewers. Units left in disagreement (or labeled by a
single reviewer) have none, and are counted as such.
"""

from __future__ import annotations

from bisect import bisect_left
from collections import defaultdict
from collections.abc import Collection
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import cast

import numpy as np
import numpy.typing as npt
from sqlalchemy import Engine
from sqlmodel import Session

import storage.gold
import storage.judging
import storage.labels
from review_app import input_policy
from review_app.calibration.first_break import first_break_turns
from review_app.errors import InputError, NotFound
from review_app.evaluator import EVALUATOR_VERSION
from review_app.rubrics.model import Rubric
from review_app.services.access.actors import Actor, authorize
from review_app.services.access.case_access import checked_case_id
from review_app.services.cases.case_views import TurnView, case_view
from review_app.services.labels.label_table import load_rating_table
from review_app.stats.table import RatingTable
from storage import audit, cases
from storage.engine import read_only
from storage.judging import UnitVerdict
from storage.labels import LabelRow
from storage.models import GoldLabel

IntArray = npt.NDArray[np.int64]
MAX_NOTE_CHARS = input_policy.MAX_NOTE_CHARS


@dataclass(frozen=True)
class DisagreementUnit:
    case_id: str
    turn: int
    kinds: tuple[str, ...]
    """``reviewers_differ`` and/or ``contradicts_finding``."""
    n_labels: int
    codes: tuple[str, ...]
    gold_code: str | None

    @property
    def adjudicated(self) -> bool:
        return self.gold_code is not None


def disagreement_queue(
    engine: Engine, actor: Actor, *, rubric: Rubric, include_adjudicated: bool = False
) -> list[DisagreementUnit]:
    """Units to adjudicate, ordered by case and turn.

    The codes of every unit come from one read of the current labels (the rating
    table), not one query per case: at 100,000 disagreements that is a second, not
    half a minute.
    """
    actor = authorize(engine, actor, "policy_owner")
    with Session(read_only(engine)) as session:
        table = load_rating_table(session, rubric_id=rubric.id, version=rubric.version)
        contradictions = storage.labels.pass_labels_on_violations(
            session,
            rubric_id=rubric.id,
            version=rubric.version,
            pass_codes=rubric.pass_codes,
            evaluator_version=EVALUATOR_VERSION,
        )
        gold = storage.gold.current_gold(session, rubric_id=rubric.id, version=rubric.version)
    counts = table.value_counts()
    units = cast(tuple[tuple[str, int], ...], table.units)
    kinds: dict[int, set[str]] = defaultdict(set)
    for position in np.flatnonzero(np.count_nonzero(counts, axis=1) > 1).tolist():
        kinds[position].add("reviewers_differ")
    for case_id, turn, _ in contradictions:
        position = bisect_left(units, (case_id, turn))
        if position < len(units) and units[position] == (case_id, turn):
            kinds[position].add("contradicts_finding")
    found = []
    for position in sorted(kinds):  # the table's units are sorted by case and turn
        gold_row = gold.get(units[position])
        if gold_row is not None and not include_adjudicated:
            continue
        row = counts[position]
        found.append(
            DisagreementUnit(
                case_id=units[position][0],
                turn=units[position][1],
                kinds=tuple(sorted(kinds[position])),
                n_labels=int(row.sum()),
                codes=tuple(str(table.values[v]) for v in np.flatnonzero(row).tolist()),
                gold_code=gold_row.code if gold_row else None,
            )
        )
    return found


@dataclass(frozen=True)
class GoldRecord:
    code: str
    note: str | None
    calibration_item: bool
    rubric_ambiguity: str | None
    adjudicator: str | None
    created_at: datetime
    current: bool = True
    stale: bool = False
    """No longer current because ``import --replace`` changed the turn."""


@dataclass(frozen=True)
class JudgeOnUnit:
    """The judge's column of the adjudicate page: which run, and its verdict on the unit."""

    run_id: int
    run: str
    """The run named by its identity (prompt version, model, endpoint, state)."""
    why: str
    """Why this run: ``the team's judge`` or ``the newest complete run (...)``."""
    verdict: UnitVerdict | None
    """Its verdict on the unit (``None``: it did not judge this unit)."""


@dataclass(frozen=True)
class UnitDetail:
    """Everything a policy owner needs to settle one unit (labels un-blinded)."""

    case_id: str
    turn: int
    chatbot_role: str | None
    diagnostic: str | None
    context: list[TurnView]
    """The transcript around the turn (a few events before, the turn, one after)."""
    focus: TurnView
    labels: list[LabelRow]
    """Every reviewer's current label and rationale."""
    history: list[LabelRow]
    """Earlier labels that were replaced."""
    gold_history: list[GoldRecord] = field(default_factory=list)
    judge: JudgeOnUnit | None = None
    """The judge's column: one complete run for every unit (the team's judge, else the
    newest complete run), with its verdict here if it has one; ``None``: no complete run."""

    @property
    def gold(self) -> GoldRecord | None:
        latest = self.gold_history[-1] if self.gold_history else None
        return latest if latest is not None and latest.current else None


def unit_detail(
    engine: Engine, actor: Actor, *, rubric: Rubric, case_id: str, turn: int, context: int = 4
) -> UnitDetail:
    actor = authorize(engine, actor, "policy_owner")
    case_id = checked_case_id(case_id)
    with Session(read_only(engine)) as session:
        view = case_view(session, case_id=case_id)
        positions = [i for i, t in enumerate(view.turns) if t.turn == turn]
        if not positions:
            raise NotFound(f"case {case_id} has no turn {turn}")
        at = positions[0]
        rows = storage.labels.labels_for_case(
            session,
            case_id=case_id,
            rubric_id=rubric.id,
            version=rubric.version,
            current_only=False,
        )
        gold_rows = storage.gold.gold_history(
            session, rubric_id=rubric.id, version=rubric.version, case_id=case_id, turn=turn
        )
    unit_rows = [row for row in rows if row.turn == turn]
    return UnitDetail(
        case_id=case_id,
        turn=turn,
        chatbot_role=view.chatbot_role,
        diagnostic=view.diagnostic,
        context=view.turns[max(0, at - context) : at + 2],
        focus=view.turns[at],
        labels=sorted((r for r in unit_rows if r.current), key=lambda r: r.reviewer),
        history=[r for r in unit_rows if not r.current],
        gold_history=[
            GoldRecord(
                g.code,
                g.note,
                g.calibration_item,
                g.rubric_ambiguity,
                name,
                g.created_at,
                g.current,
                g.stale,
            )
            for g, name in gold_rows
        ],
    )


@dataclass(frozen=True)
class QueuePlace:
    """Where a unit stands in the open disagreement queue."""

    position: int | None
    """1-based position among the open units (``None``: the unit is not open)."""
    open_units: int

    def sentence(self) -> str:
        if self.position is None:
            return f"This unit is settled · {self.open_units:d} open units left"
        return f"Unit {self.position:d} of {self.open_units:d} open"


def queue_place(units: list[DisagreementUnit], *, case_id: str, turn: int) -> QueuePlace:
    """The place of ``(case_id, turn)`` among the open units of a disagreement queue."""
    open_units = [(u.case_id, u.turn) for u in units if not u.adjudicated]
    try:
        position: int | None = open_units.index((case_id, turn)) + 1
    except ValueError:
        position = None
    return QueuePlace(position, len(open_units))


def first_open_unit(units: list[DisagreementUnit]) -> DisagreementUnit | None:
    """The first unit of the queue without a gold label."""
    return next((u for u in units if not u.adjudicated), None)


def next_open_unit(
    units: list[DisagreementUnit], *, case_id: str, turn: int
) -> DisagreementUnit | None:
    """The open unit after ``(case_id, turn)`` in queue order, else the first open one
    (``None``: no other unit is open)."""
    others = [u for u in units if not u.adjudicated and (u.case_id, u.turn) != (case_id, turn)]
    later = [u for u in others if (u.case_id, u.turn) > (case_id, turn)]
    chosen = later or others
    return chosen[0] if chosen else None


def _clean(text: str | None, field_name: str) -> str | None:
    if text is None:
        return None
    cleaned = text.strip()
    if len(cleaned) > MAX_NOTE_CHARS:
        raise InputError(f"at most {MAX_NOTE_CHARS} characters", field=field_name)
    input_policy.check_text(cleaned, field=field_name)
    return cleaned or None


def record_gold(
    engine: Engine,
    actor: Actor,
    *,
    rubric: Rubric,
    case_id: str,
    turn: int,
    code: str,
    note: str | None = None,
    calibration_item: bool = False,
    rubric_ambiguity: str | None = None,
) -> None:
    """Record (or replace) the gold label of one unit; policy owners only."""
    actor = authorize(engine, actor, "policy_owner")
    if code not in rubric.codes:
        raise InputError(f"{code!r} is not a code of {rubric.ref}", field="label")
    note = _clean(note, "note")
    ambiguity = _clean(rubric_ambiguity, "rubric_ambiguity")
    with Session(engine) as session:
        actors = cases.event_actors_by_turn(session, case_id=case_id)
        if not actors:
            raise NotFound(f"no case {case_id!r} in the database")
        if actors.get(turn) != rubric.applies_to:
            raise InputError(
                f"turn {turn} of {case_id} is not a {rubric.applies_to} turn", field="turn"
            )
        before = storage.gold.current_gold_code(
            session, rubric_id=rubric.id, version=rubric.version, case_id=case_id, turn=turn
        )
        storage.gold.add_gold(
            session,
            case_id=case_id,
            turn=turn,
            rubric_id=rubric.id,
            version=rubric.version,
            code=code,
            note=note,
            calibration_item=calibration_item,
            rubric_ambiguity=ambiguity,
            adjudicator_id=actor.reviewer_id,
            now=datetime.now(UTC),
        )
        audit.add_entry(
            session,
            actor=actor.name,
            action="gold",
            object_type="unit",
            object_key=f"{rubric.ref}:{case_id}:{turn}",
            summary={
                "before": before,
                "after": code,
                "calibration_item": calibration_item,
                "rubric_ambiguity": ambiguity is not None,
            },
        )
        session.commit()


@dataclass(frozen=True)
class Gold:
    code: str
    source: str
    """``adjudicated`` or ``unanimous``."""
    calibration_item: bool = False
    note: str | None = None


@dataclass
class GoldSet:
    """Gold labels of a rubric version, with honest counts of the units without one."""

    labels: dict[tuple[str, int], Gold]
    in_disagreement: set[tuple[str, int]]
    single_rater: set[tuple[str, int]]

    def counts(self) -> dict[str, int]:
        adjudicated = sum(1 for g in self.labels.values() if g.source == "adjudicated")
        return {
            "with_gold": len(self.labels),
            "adjudicated": adjudicated,
            "unanimous": len(self.labels) - adjudicated,
            "in_disagreement": len(self.in_disagreement),
            "single_rater": len(self.single_rater),
        }

    def first_break_turns(self, break_codes: set[str]) -> dict[str, int | None]:
        """Per case with gold labels: the first turn whose gold label is a break."""
        return first_break_turns(
            {unit: gold.code for unit, gold in self.labels.items()}, break_codes
        )


def gold_labels(engine: Engine, actor: Actor, *, rubric: Rubric) -> GoldSet:
    """The gold label of every unit that has one (adjudicated, else unanimous from >= 2)."""
    authorize(engine, actor, "policy_owner")
    with Session(read_only(engine)) as session:
        table = load_rating_table(session, rubric_id=rubric.id, version=rubric.version)
        adjudicated = storage.gold.current_gold(
            session, rubric_id=rubric.id, version=rubric.version
        )
    return gold_set_from_table(table, adjudicated)


def _unit_status(
    table: RatingTable, adjudicated: Collection[tuple[str, int]]
) -> tuple[npt.NDArray[np.bool_], npt.NDArray[np.bool_], npt.NDArray[np.bool_], IntArray]:
    """Per unit of ``table`` that has no adjudicated label: unanimous (two or more
    labels, one code), in disagreement, single rater; and its most given code."""
    counts = table.value_counts()
    n_labels = counts.sum(axis=1)
    n_codes = np.count_nonzero(counts, axis=1)
    settled = np.zeros(table.n_units, dtype=bool)
    for unit in adjudicated:
        position = bisect_left(table.units, unit)  # type: ignore[type-var]
        if position < table.n_units and table.units[position] == unit:
            settled[position] = True
    open_units = ~settled
    unanimous = open_units & (n_codes == 1) & (n_labels >= 2)
    in_disagreement = open_units & (n_codes > 1)
    single = open_units & (n_labels == 1)
    return unanimous, in_disagreement, single, counts.argmax(axis=1)


def gold_counts(table: RatingTable, adjudicated: Collection[tuple[str, int]]) -> dict[str, int]:
    """:meth:`GoldSet.counts` of the gold set of ``table``, without building it."""
    unanimous, in_disagreement, single, _ = _unit_status(table, adjudicated)
    n_unanimous = int(np.count_nonzero(unanimous))
    return {
        "with_gold": len(adjudicated) + n_unanimous,
        "adjudicated": len(adjudicated),
        "unanimous": n_unanimous,
        "in_disagreement": int(np.count_nonzero(in_disagreement)),
        "single_rater": int(np.count_nonzero(single)),
    }


def gold_set_from_table(
    table: RatingTable, adjudicated: dict[tuple[str, int], GoldLabel]
) -> GoldSet:
    """Sort every labeled unit of the table into gold (adjudicated / unanimous) or no
    gold (why not)."""
    labels: dict[tuple[str, int], Gold] = {
        unit: Gold(g.code, "adjudicated", g.calibration_item, g.note)
        for unit, g in adjudicated.items()
    }
    unanimous, in_disagreement, single, top_code = _unit_status(table, adjudicated)
    units = cast(tuple[tuple[str, int], ...], table.units)
    for position in np.flatnonzero(unanimous).tolist():
        labels[units[position]] = Gold(str(table.values[int(top_code[position])]), "unanimous")
    return GoldSet(
        labels,
        {units[i] for i in np.flatnonzero(in_disagreement).tolist()},
        {units[i] for i in np.flatnonzero(single).tolist()},
    )


@dataclass(frozen=True)
class AmbiguityNote:
    """A rubric ambiguity a policy owner noted with a gold label, for the next version."""

    case_id: str
    turn: int
    gold: str
    """The gold code it was noted with."""
    note: str


def ambiguity_notes(engine: Engine, actor: Actor, *, rubric: Rubric) -> list[AmbiguityNote]:
    actor = authorize(engine, actor, "policy_owner")
    with Session(read_only(engine)) as session:
        rows = storage.gold.rubric_ambiguities(session, rubric_id=rubric.id, version=rubric.version)
        return [
            AmbiguityNote(
                case_id=g.case_id, turn=g.turn, gold=g.code, note=g.rubric_ambiguity or ""
            )
            for g in rows
        ]
