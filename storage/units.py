"""What the two append-only unit tables, ``labels`` and ``gold_labels``, share: the
current row of a unit, the token that changes with either, carrying current rows into
the next rubric version, and making them stale when ``import --replace`` changes their
turn.

A unit is one turn of one case under one rubric version. ``labels`` keeps one current
row per unit and reviewer, ``gold_labels`` one per unit (the partial unique indexes
``ux_labels_current_unit`` and ``ux_gold_current_unit``); a change adds a row and
supersedes the current one. The queries of one table alone are in
:mod:`storage.labels` and :mod:`storage.gold`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import Connection, bindparam, func, select, text, tuple_, update
from sqlmodel import Session, col

from storage.bulk import code_counts, code_mapping_case, in_chunks, timestamp_param
from storage.models import GoldLabel, Label


def current_of_unit(
    table: type[Label] | type[GoldLabel],
    *,
    rubric_id: str,
    version: int,
    case_id: str,
    turn: int,
) -> list[Any]:
    """Conditions selecting the unit's current row (in ``labels``, one per reviewer: add
    the reviewer's condition)."""
    return [
        col(table.case_id) == case_id,
        col(table.turn) == turn,
        col(table.rubric_id) == rubric_id,
        col(table.rubric_version) == version,
        col(table.current),
    ]


def current_code_counts(
    session: Session, *, table: str, rubric_id: str, version: int
) -> dict[str, int]:
    """Current, not stale rows of ``labels`` or ``gold_labels`` per code."""
    assert table in ("labels", "gold_labels")
    return code_counts(
        session,
        f"SELECT code, count(*) FROM {table} WHERE rubric_id = :rid AND rubric_version = :v "
        "AND current AND NOT stale GROUP BY code",
        rid=rubric_id,
        v=version,
    )


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
    code_case, params = code_mapping_case("o.code", mapping)
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
    return code_counts(
        session,
        f"SELECT o.code, count(*) FROM {table} n JOIN {table} o ON o.id = n.carried_from_id "
        "WHERE n.rubric_id = :rid AND n.rubric_version = :to_v AND n.carry_id = :carry "
        "GROUP BY o.code",
        rid=rubric_id,
        to_v=to_version,
        carry=carry_id,
    )


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


def mark_turns_stale(
    connection: Connection, *, units: Sequence[tuple[str, int]]
) -> tuple[int, int]:
    """Make the current labels and gold labels on ``units`` (``(case_id, turn)``, any
    rubric version) stale: no longer current, kept in the history (``import --replace``
    changed those turns). Returns how many labels and gold labels changed."""
    stale_labels = stale_gold = 0
    for chunk in in_chunks(units):
        for table in (Label, GoldLabel):
            result = connection.execute(
                update(table)
                .where(
                    col(table.current),
                    tuple_(col(table.case_id), col(table.turn)).in_(chunk),
                )
                .values(current=False, stale=True)
            )
            if table is Label:
                stale_labels += result.rowcount
            else:
                stale_gold += result.rowcount
    return stale_labels, stale_gold


def label_token(session: Session, *, rubric_id: str, version: int) -> tuple[int, int, int, int]:
    """Changes whenever labels or gold labels of the rubric version change (append-only ids)."""
    labels = session.execute(
        select(func.count(), func.coalesce(func.max(col(Label.id)), 0)).where(
            col(Label.rubric_id) == rubric_id, col(Label.rubric_version) == version
        )
    ).one()
    gold = session.execute(
        select(func.count(), func.coalesce(func.max(col(GoldLabel.id)), 0)).where(
            col(GoldLabel.rubric_id) == rubric_id, col(GoldLabel.rubric_version) == version
        )
    ).one()
    return int(labels[0]), int(labels[1]), int(gold[0]), int(gold[1])
