"""Galtea-style conversation rows: per-turn ``input`` and ``actual_output``.

Galtea evaluates a conversation from the user message (``input``) and the
chatbot's reply (``actual_output``) of every turn, judged against the product's
description (``product_description``), from which the expected persona is
inferred. Here each row is one such turn.

File: CSV (``.csv``; UTF-8 with or without a byte-order mark) or JSON rows
(``.jsonl``/``.ndjson`` one object per line, or a ``.json`` list).

Reading rules (for users: docs/reference.md, "Foreign formats", under ``galtea``):

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
* no contract unless one is given (the ``contract`` option).

Other non-empty columns of a row are kept under its last event's
``source_metadata``; the session id under the case's.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from itertools import chain
from pathlib import Path
from typing import Any

from review_app.case_records import CaseRecord
from review_app.errors import InputError
from review_app.files.csv_safety import csv_text
from review_app.files.tables import (
    ProgressCallback,
    Row,
    Table,
    missing_columns_error,
    optional_int,
    require_columns,
    require_id,
    require_keys,
    row_extras,
)
from review_app.formats._context import ReadContext
from review_app.formats._ids import fallback_case_id, slugify
from review_app.formats._sessions import Exchange, SessionColumns, exchange_rows
from review_app.formats.options import ImportOptions, column

FORMAT_NAME = "galtea"
OPTIONS = (
    "session_column",
    "input_column",
    "output_column",
    "product_description_column",
    "order_column",
    "product_description",
    "contract",
    "case_id_prefix",
    "max_record_bytes",
)
"""The fields of :class:`~review_app.formats.options.ImportOptions` this reader takes."""
ORDER_COLUMNS = ("turn", "index")
"""Columns tried, in this order, for the turn order when ``order_column`` is not given."""


@dataclass(slots=True)
class _Turn:
    exchange: Exchange
    order: int | None


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
    path: Path, options: ImportOptions | None = None, *, progress: ProgressCallback | None = None
) -> Iterator[CaseRecord]:
    """Cases from Galtea-style turn rows (CSV or JSON rows), one per conversation.

    Takes the options :data:`OPTIONS`; the columns default to ``session_id``,
    ``input``, ``actual_output`` and ``product_description``, and without an
    ``order_column`` one named ``turn`` then ``index`` is looked for (a named order
    column must exist). See the module documentation for every rule.
    """
    ctx = ReadContext.check(
        path, options, format_name=FORMAT_NAME, takes=OPTIONS, progress=progress
    )
    given = ctx.options
    columns = SessionColumns(
        session=column(given.session_column, "session_id"),
        input=column(given.input_column, "input"),
        output=column(given.output_column, "actual_output"),
        role=column(given.product_description_column, "product_description"),
        role_name="product description",
        role_option=given.product_description,
    )
    return _cases(ctx, columns, order_column=given.order_column)


def _cases(
    ctx: ReadContext, columns: SessionColumns, *, order_column: str | None
) -> Iterator[CaseRecord]:
    source = ctx.source
    table = ctx.table()
    required = [columns.input, columns.output]
    require_columns(table, required)
    rows = iter(table.rows)
    first_row = next(rows, None)
    if first_row is None:
        raise InputError("the file holds no rows", source=source)
    grouped, order_by = _layout(
        table, first_row, session_column=columns.session, order_column=order_column
    )
    consumed = {*required, columns.role, columns.session}
    if order_by is not None:
        consumed.add(order_by)

    conversations: dict[str | None, list[_Turn]] = {}
    for position, row in enumerate(chain([first_row], rows)):
        require_keys(table, row, required)
        session: str | None = None
        if grouped:
            session = require_id(row, columns.session, source=source)
        elif row.cells.get(columns.session) not in (None, ""):
            raise row.error(
                f"this row has a session id but the first row has none; either every row "
                f"or none carries {columns.session!r}",
                columns.session,
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
        exchange = columns.exchange(
            row, position=position, metadata=row_extras(row, consumed), source=source
        )
        conversations.setdefault(session, []).append(_Turn(exchange, order))

    for session, turns in conversations.items():
        first = turns[0].exchange.row
        if session is None:
            stem = slugify(ctx.path.stem)
            case_id = (
                (ctx.case_id_prefix or "") + stem
                if stem
                else fallback_case_id(ctx.path, 1, prefix=ctx.case_id_prefix)
            )
        else:
            case_id = columns.case_id(ctx, session, first)
        ordered = _in_turn_order(turns, order_by=order_by, source=source)
        yield columns.case(
            ctx,
            ordered,
            case_id=case_id,
            chatbot_role=columns.chatbot_role([turn.exchange for turn in turns], source=source),
            session=session,
            line=first.line,
        )


def _in_turn_order(turns: list[_Turn], *, order_by: str | None, source: str) -> list[Exchange]:
    if order_by is None:
        return [turn.exchange for turn in turns]
    seen: dict[int, _Turn] = {}
    for turn in turns:
        assert turn.order is not None
        earlier = seen.get(turn.order)
        if earlier is not None:
            raise turn.exchange.row.error(
                f"turn order {turn.order} is used twice in this conversation (also at "
                f"{earlier.exchange.row.place})",
                order_by,
                source=source,
            )
        seen[turn.order] = turn
    ordered = sorted(turns, key=lambda turn: (turn.order, turn.exchange.position))
    return [turn.exchange for turn in ordered]


def write_galtea_csv(cases: Iterable[Mapping[str, Any]]) -> str:
    """Cases as Galtea-style turn rows (CSV text), deterministic.

    Columns ``session_id,turn,input,actual_output,product_description``: one row per
    user/assistant exchange (see :func:`~review_app.formats._sessions.exchanges`),
    numbered 1..n per conversation, cases in the order given. System and tool
    events, observed actions, requests and the contract have no column and are not
    written. Every cell is neutralised against formula injection.
    """
    rows = [
        [case_id, str(index), user, assistant, description]
        for case_id, index, user, assistant, description in exchange_rows(cases)
    ]
    header = ["session_id", "turn", "input", "actual_output", "product_description"]
    return csv_text(header, rows)
