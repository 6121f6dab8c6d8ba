"""Galtea-style conversation rows: per-turn ``input`` and ``actual_output``.

Galtea evaluates a conversation from the user message (``input``) and the
chatbot's reply (``actual_output``) of every turn, judged against the product's
description (``product_description``), from which the expected persona is
inferred. Here each row is one such turn.

File: CSV (``.csv``; UTF-8 with or without a byte-order mark) or JSON rows
(``.jsonl``/``.ndjson`` one object per line, or a ``.json`` list).

Reading rules:

* required columns: ``input`` and ``actual_output`` (names configurable); a missing
  one is an error naming the column (CSV header) or the line and key (JSON rows);
* conversations are grouped by a session column (default ``session_id``). When the
  file has no such column, the whole file is one conversation, whose case id is the
  file name's stem. In JSON rows the first row decides: either every row carries a
  session id or none does;
* turn order: an integer ``turn`` column, else an ``index`` column (or the column
  named by ``order_column``); without either, the order of the rows. Two rows of a
  conversation with the same order value are an error naming the later line;
* each row becomes a user event (input) then an assistant event (output), turns
  numbered 1..n; an empty cell gives only the other event; a row with neither is an
  error;
* the ``product_description`` column (one value per conversation; differing values
  are an error), else the ``product_description`` option, becomes ``chatbot_role``;
* no contract unless one is given (``contract=``).

Other non-empty columns of a row are kept under its last event's
``source_metadata``; the session id under the case's.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from review_app.cases import DEFAULT_MAX_RECORD_BYTES, CaseRecord
from review_app.errors import InputError
from review_app.formats._common import (
    CaseIds,
    ProgressCallback,
    Row,
    Table,
    case_from_session,
    case_id_from,
    check_unique_case_ids,
    exchanges,
    fallback_case_id,
    missing_columns_error,
    open_table,
    optional_int,
    require_id,
    require_text,
    row_extras,
    same_text_in_group,
    slugify,
    validate_contract,
    validate_prefix,
)
from review_app.formats.csv_safety import csv_text

FORMAT_NAME = "galtea"
ORDER_COLUMNS = ("turn", "index")
"""Columns tried, in this order, for the turn order when ``order_column`` is not given."""


@dataclass(slots=True)
class _Turn:
    position: int
    row: Row
    order: int | None
    user_text: str | None
    assistant_text: str | None
    description: str | None
    metadata: dict[str, Any]


def _layout(
    table: Table,
    first: Row | None,
    *,
    session_column: str,
    order_column: str | None,
) -> tuple[bool, str | None]:
    """Whether rows are grouped by session, and which column orders turns (if any)."""
    names: set[str]
    if table.columns is not None:
        names = set(table.columns)
    else:
        names = set(first.cells) if first is not None else set()
    grouped = session_column in names
    if order_column is not None:
        if table.columns is not None and order_column not in names:
            raise missing_columns_error(table, [order_column], what="turn order column")
        return grouped, order_column
    found = next((name for name in ORDER_COLUMNS if name in names), None)
    return grouped, found


def read_galtea(
    path: Path,
    *,
    session_column: str = "session_id",
    input_column: str = "input",
    output_column: str = "actual_output",
    product_description_column: str = "product_description",
    order_column: str | None = None,
    product_description: str | None = None,
    contract: dict[str, Any] | None = None,
    case_id_prefix: str | None = None,
    max_record_bytes: int = DEFAULT_MAX_RECORD_BYTES,
    progress: ProgressCallback | None = None,
) -> Iterator[CaseRecord]:
    """Cases from Galtea-style turn rows (CSV or JSON rows), one per conversation.

    ``order_column=None`` looks for ``turn`` then ``index``; a named order column
    must exist. See the module documentation for every rule.
    """
    source = str(path)
    given_contract = validate_contract(contract)
    validate_prefix(case_id_prefix)

    def cases() -> Iterator[CaseRecord]:
        table = open_table(path, max_record_bytes=max_record_bytes, progress=progress)
        required = [input_column, output_column]
        if table.columns is not None:
            missing = [name for name in required if name not in table.columns]
            if missing:
                raise missing_columns_error(table, missing)

        rows = iter(table.rows)
        first_row = next(rows, None)
        if first_row is None:
            raise InputError("the file holds no rows", source=source)
        grouped, order_by = _layout(
            table, first_row, session_column=session_column, order_column=order_column
        )
        consumed = {*required, product_description_column, session_column}
        if order_by is not None:
            consumed.add(order_by)

        conversations: dict[str | None, list[_Turn]] = {}
        for position, row in enumerate(_chain(first_row, rows)):
            if table.columns is None:
                for name in required:
                    if name not in row.cells:
                        raise row.error(
                            f"the row has no {name!r} key (a required column)", name, source=source
                        )
            session: str | None = None
            if grouped:
                session = require_id(row, session_column, source=source)
            elif row.cells.get(session_column) not in (None, ""):
                raise row.error(
                    f"this row has a session id but the first row has none; either every row "
                    f"or none carries {session_column!r}",
                    session_column,
                    source=source,
                )
            order: int | None = None
            if order_by is not None:
                order = optional_int(row, order_by, source=source)
                if order is None:
                    raise row.error(
                        "this cell is empty; every row needs its turn order here",
                        order_by,
                        source=source,
                    )
            conversations.setdefault(session, []).append(
                _Turn(
                    position=position,
                    row=row,
                    order=order,
                    user_text=require_text(row, input_column, source=source),
                    assistant_text=require_text(row, output_column, source=source),
                    description=require_text(row, product_description_column, source=source),
                    metadata=row_extras(row, consumed),
                )
            )

        ids = CaseIds(source)
        for session, turns in conversations.items():
            first = turns[0].row
            if session is None:
                stem = slugify(path.stem)
                case_id = (
                    (case_id_prefix or "") + stem
                    if stem
                    else fallback_case_id(path, 1, prefix=case_id_prefix)
                )
            else:
                made = case_id_from(
                    session,
                    prefix=case_id_prefix,
                    source=source,
                    line=first.line,
                    field=first.field(session_column),
                )
                if made is None:
                    raise first.error(
                        "this session id gives no usable case id (it has no letters or digits)",
                        session_column,
                        source=source,
                    )
                case_id = made
                ids.claim(case_id, line=first.line, field=first.field(session_column))
            ordered = _in_turn_order(turns, order_by=order_by, source=source)
            description = same_text_in_group(
                [(turn.row, turn.description) for turn in turns],
                column=product_description_column,
                what="product description",
                source=source,
            )
            yield case_from_session(
                ordered,
                case_id=case_id,
                chatbot_role=description if description is not None else product_description,
                contract=given_contract,
                session=session,
                input_column=input_column,
                source=source,
                line=first.line,
            )

    return cases()


def _chain(first: Row, rest: Iterator[Row]) -> Iterator[Row]:
    yield first
    yield from rest


def _in_turn_order(turns: list[_Turn], *, order_by: str | None, source: str) -> list[_Turn]:
    if order_by is None:
        return turns
    seen: dict[int, _Turn] = {}
    for turn in turns:
        assert turn.order is not None
        earlier = seen.get(turn.order)
        if earlier is not None:
            raise turn.row.error(
                f"turn order {turn.order} is used twice in this conversation (also at "
                f"{earlier.row.place})",
                order_by,
                source=source,
            )
        seen[turn.order] = turn
    return sorted(turns, key=lambda turn: (turn.order, turn.position))


def write_galtea_csv(cases: Iterable[Mapping[str, Any]]) -> str:
    """Cases as Galtea-style turn rows (CSV text), deterministic.

    Columns ``session_id,turn,input,actual_output,product_description``: one row per
    user/assistant exchange (see :func:`~review_app.formats._common.exchanges`),
    numbered 1..n per conversation, cases in the order given. System and tool
    events, observed actions, requests and the contract have no column and are not
    written. Every cell is neutralised against formula injection.
    """
    items = list(cases)
    check_unique_case_ids(items)
    rows: list[list[str]] = []
    for case in items:
        description = case.get("chatbot_role") or ""
        for index, (user, assistant) in enumerate(exchanges(case["transcript"]), start=1):
            rows.append([case["case_id"], str(index), user or "", assistant or "", description])
    header = ["session_id", "turn", "input", "actual_output", "product_description"]
    return csv_text(header, rows)
