"""Bulk label queries: importing a label CSV and exporting labels."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import func, select, update
from sqlmodel import Session, col

from storage.bulk import insert_rows, timestamp_param
from storage.models import Assignment, Event, Label, Reviewer

_CHUNK = 500


def _chunks(values: Sequence[Any]) -> list[Sequence[Any]]:
    return [values[i : i + _CHUNK] for i in range(0, len(values), _CHUNK)]


def event_actors(session: Session, *, case_ids: Sequence[str]) -> dict[str, dict[int, str]]:
    """case_id -> turn -> actor, for the stored ones of ``case_ids``."""
    found: dict[str, dict[int, str]] = {}
    for chunk in _chunks(case_ids):
        query = select(col(Event.case_id), col(Event.turn), col(Event.actor)).where(
            col(Event.case_id).in_(chunk)
        )
        for case_id, turn, actor in session.execute(query):
            found.setdefault(case_id, {})[turn] = actor
    return found


def current_labels(
    session: Session, *, rubric_id: str, version: int, case_ids: Sequence[str]
) -> dict[tuple[str, int, int], tuple[int, str, str | None]]:
    """(case_id, turn, reviewer_id) -> (label id, code, rationale) of current labels."""
    found: dict[tuple[str, int, int], tuple[int, str, str | None]] = {}
    for chunk in _chunks(case_ids):
        query = select(
            col(Label.case_id),
            col(Label.turn),
            col(Label.reviewer_id),
            col(Label.id),
            col(Label.code),
            col(Label.rationale),
        ).where(
            col(Label.rubric_id) == rubric_id,
            col(Label.rubric_version) == version,
            col(Label.current),
            col(Label.case_id).in_(chunk),
        )
        for case_id, turn, reviewer_id, label_id, code, rationale in session.execute(query):
            found[(case_id, turn, reviewer_id)] = (label_id, code, rationale)
    return found


def supersede(session: Session, *, label_ids: Sequence[int]) -> None:
    for chunk in _chunks(label_ids):
        session.execute(update(Label).where(col(Label.id).in_(chunk)).values(current=False))


LABEL_COLUMNS = (
    "case_id",
    "turn",
    "reviewer_id",
    "rubric_id",
    "rubric_version",
    "code",
    "rationale",
    "current",
    "source",
    "created_at",
)


def insert_labels(session: Session, *, rows: Sequence[tuple[Any, ...]]) -> None:
    """Rows in :data:`LABEL_COLUMNS` order; ``created_at`` may be a datetime."""
    connection = session.connection()
    prepared = [
        (
            *row[:-1],
            timestamp_param(connection, row[-1]) if isinstance(row[-1], datetime) else row[-1],
        )
        for row in rows
    ]
    insert_rows(connection, table="labels", columns=LABEL_COLUMNS, rows=prepared)


def refresh_progress(
    session: Session,
    *,
    rubric_id: str,
    version: int,
    pairs: Sequence[tuple[str, int]],
    applies_to: str,
    now: datetime,
) -> None:
    """Recount (case, reviewer) progress after a bulk change; create missing assignments."""
    if not pairs:
        return
    case_ids = sorted({case_id for case_id, _ in pairs})
    reviewer_ids = sorted({reviewer_id for _, reviewer_id in pairs})
    wanted = set(pairs)
    labeled: dict[tuple[str, int], int] = {}
    totals: dict[str, int] = {}
    existing: dict[tuple[str, int], Assignment] = {}
    for chunk in _chunks(case_ids):
        counts = (
            select(col(Label.case_id), col(Label.reviewer_id), func.count())
            .where(
                col(Label.rubric_id) == rubric_id,
                col(Label.rubric_version) == version,
                col(Label.current),
                col(Label.case_id).in_(chunk),
                col(Label.reviewer_id).in_(reviewer_ids),
            )
            .group_by(col(Label.case_id), col(Label.reviewer_id))
        )
        for case_id, reviewer_id, count in session.execute(counts):
            labeled[(case_id, reviewer_id)] = count
        turns = (
            select(col(Event.case_id), func.count())
            .where(col(Event.case_id).in_(chunk), col(Event.actor) == applies_to)
            .group_by(col(Event.case_id))
        )
        totals.update({case_id: count for case_id, count in session.execute(turns)})
        rows = select(Assignment).where(
            col(Assignment.rubric_id) == rubric_id,
            col(Assignment.rubric_version) == version,
            col(Assignment.case_id).in_(chunk),
            col(Assignment.reviewer_id).in_(reviewer_ids),
        )
        for found in session.scalars(rows):
            existing[(found.case_id, found.reviewer_id)] = found
    connection = session.connection()
    stamp = timestamp_param(connection, now)
    new_rows: list[tuple[Any, ...]] = []
    for case_id, reviewer_id in sorted(wanted):
        count = labeled.get((case_id, reviewer_id), 0)
        complete = count >= totals.get(case_id, 0) > 0
        assignment = existing.get((case_id, reviewer_id))
        if assignment is None:
            new_rows.append(
                (
                    case_id,
                    reviewer_id,
                    rubric_id,
                    version,
                    reviewer_id,
                    stamp,
                    count,
                    stamp if complete else None,
                )
            )
            continue
        assignment.labeled_turns = count
        if complete and assignment.completed_at is None:
            assignment.completed_at = now
        elif not complete:
            assignment.completed_at = None
        session.add(assignment)
    session.flush()
    insert_rows(
        connection,
        table="assignments",
        columns=(
            "case_id",
            "reviewer_id",
            "rubric_id",
            "rubric_version",
            "assigned_by",
            "created_at",
            "labeled_turns",
            "completed_at",
        ),
        rows=new_rows,
    )


def export_rows(
    session: Session, *, rubric_id: str, version: int, history: bool = False
) -> list[tuple[str, int, str, str, str | None]]:
    query = (
        select(
            col(Label.case_id),
            col(Label.turn),
            col(Reviewer.name),
            col(Label.code),
            col(Label.rationale),
        )
        .join(Reviewer, col(Reviewer.id) == col(Label.reviewer_id))
        .where(col(Label.rubric_id) == rubric_id, col(Label.rubric_version) == version)
        .order_by(col(Label.case_id), col(Label.turn), col(Reviewer.name), col(Label.id))
    )
    if not history:
        query = query.where(col(Label.current))
    return [(row[0], row[1], row[2], row[3], row[4]) for row in session.execute(query)]
