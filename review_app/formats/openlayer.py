"""Openlayer session tables: one row per exchange, grouped by session, ordered by time.

Openlayer's session-level tests (role adherence among them) read a table whose
rows carry a session id, a timestamp, the user's input and the assistant's output;
the session id groups rows into a conversation and the timestamp orders them. The
role to hold the assistant to is a plain-language ``role_definition``; here it may
be a column (one value per session) or the ``role_definition`` option.

File: CSV (``.csv``; UTF-8 with or without the byte-order mark spreadsheets write)
or JSON rows (``.jsonl``/``.ndjson`` one object per line, or a ``.json`` list).

Reading rules (for users: docs/reference.md, "Foreign formats", under ``openlayer``):

* required columns: session id, timestamp, input, output (names configurable); a
  CSV header without one of them is an error naming the column; a JSON row without
  one of those keys is an error naming the line and the key;
* a timestamp is ISO-8601 (``2024-05-01T10:00:03Z``, ``2024-05-01 10:00:03``, with
  or without fractions or an offset) or a number of seconds since 1970 (``1714557603``
  or ``1714557603.25``, a JSON number or a CSV cell of digits). Anything else is an
  error. Times without an offset are compared as UTC; one session may not mix them
  with offset-carrying times or epoch numbers, since their order would be a guess;
* rows of a session are ordered by timestamp. Two rows of one session at the SAME
  time are refused, naming the later row's line and the timestamp column, unless
  the table has a sequence column (default ``sequence``): then integers in it order
  rows that share a time (they must be present and distinct for those rows);
* each row becomes a user event (its input) then an assistant event (its output),
  turns numbered 1..n in that order; an empty input or output gives only the other
  event, and a row with neither is an error;
* the role definition becomes the case's ``chatbot_role``; two different non-empty
  values in one session are an error; empty cells fall back to the option;
* sessions become cases in order of first appearance; the case id is the session id
  (:func:`~review_app.formats._ids.slugify`-ed, with the optional prefix);
* no contract unless one is given (the ``contract`` option): the case is ``no_contract``.

What the table has beyond that is kept: the session id under the case's
``source_metadata``, and each row's timestamp and other non-empty columns under its
last event's ``source_metadata``.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from pathlib import Path
from typing import Any

from review_app.case_records import CaseRecord
from review_app.errors import InputError
from review_app.files.csv_safety import csv_text
from review_app.files.tables import (
    ProgressCallback,
    optional_int,
    require_columns,
    require_id,
    require_keys,
    row_extras,
)
from review_app.formats._context import ReadContext
from review_app.formats._sessions import Exchange, SessionColumns, exchange_rows
from review_app.formats.options import ImportOptions, column

FORMAT_NAME = "openlayer"
OPTIONS = (
    "session_column",
    "timestamp_column",
    "input_column",
    "output_column",
    "role_column",
    "sequence_column",
    "role_definition",
    "contract",
    "case_id_prefix",
    "max_record_bytes",
)
"""The fields of :class:`~review_app.formats.options.ImportOptions` this reader takes."""
EXPORT_START = datetime(2000, 1, 1, tzinfo=UTC)
"""Synthetic time of the first row of every session written by :func:`write_openlayer_csv`."""

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_EPOCH_NUMBER = re.compile(r"[+-]?\d+(?:\.\d+)?")
_MICROSECOND = timedelta(microseconds=1)


@dataclass(frozen=True, slots=True)
class Moment:
    """A parsed timestamp: seconds since 1970 (exact), and whether it had no offset."""

    seconds: Decimal
    naive: bool


def parse_timestamp(value: Any) -> Moment:
    """A strict timestamp: ISO-8601 text, or seconds since 1970 as a number or digits.

    Raises ``ValueError`` with the reason. Times without an offset are read as UTC
    (``naive`` tells the caller, which refuses to order them against others).
    """
    if type(value) is int:
        return Moment(Decimal(value), naive=False)
    if type(value) is float:
        if not math.isfinite(value):
            raise ValueError("a timestamp must be a finite number")
        return Moment(Decimal(repr(value)), naive=False)
    if type(value) is not str:
        raise ValueError(f"expected ISO-8601 text or seconds since 1970, got {value!r}")
    if _EPOCH_NUMBER.fullmatch(value):
        return Moment(Decimal(value), naive=False)
    try:
        moment = datetime.fromisoformat(value)
    except ValueError:
        raise ValueError(
            f"{value!r} is neither an ISO-8601 time (like 2024-05-01T10:00:03Z) nor "
            "seconds since 1970"
        ) from None
    naive = moment.tzinfo is None
    if naive:
        moment = moment.replace(tzinfo=UTC)
    micros = (moment - _EPOCH) // _MICROSECOND
    return Moment(Decimal(micros).scaleb(-6), naive=naive)


@dataclass(slots=True)
class _Timed:
    exchange: Exchange
    moment: Moment
    sequence: int | None


def read_openlayer(
    path: Path, options: ImportOptions | None = None, *, progress: ProgressCallback | None = None
) -> Iterator[CaseRecord]:
    """Cases from an Openlayer session table (CSV or JSON rows), one per session.

    Takes the options :data:`OPTIONS`; the columns default to ``session_id``,
    ``timestamp``, ``input``, ``output``, ``role_definition`` and ``sequence``. The
    role and sequence columns are optional; the others are required. See the module
    documentation for every rule.
    """
    ctx = ReadContext.check(
        path, options, format_name=FORMAT_NAME, takes=OPTIONS, progress=progress
    )
    given = ctx.options
    columns = SessionColumns(
        session=column(given.session_column, "session_id"),
        input=column(given.input_column, "input"),
        output=column(given.output_column, "output"),
        role=column(given.role_column, "role_definition"),
        role_name="role definition",
        role_option=given.role_definition,
    )
    return _cases(
        ctx,
        columns,
        timestamp_column=column(given.timestamp_column, "timestamp"),
        sequence_column=column(given.sequence_column, "sequence"),
    )


def _cases(
    ctx: ReadContext, columns: SessionColumns, *, timestamp_column: str, sequence_column: str
) -> Iterator[CaseRecord]:
    source = ctx.source
    table = ctx.table()
    required = [columns.session, timestamp_column, columns.input, columns.output]
    require_columns(table, required)
    consumed = {*required, columns.role, sequence_column}

    sessions: dict[str, list[_Timed]] = {}
    has_sequence_column = table.columns is not None and sequence_column in table.columns
    for position, row in enumerate(table.rows):
        require_keys(table, row, required)
        if table.columns is None:
            has_sequence_column = has_sequence_column or sequence_column in row.cells
        session = require_id(row, columns.session, source=source)
        raw_time = row.cells.get(timestamp_column)
        if raw_time is None or raw_time == "":
            raise row.error(
                "this cell is empty; every row needs a timestamp",
                timestamp_column,
                source=source,
            )
        try:
            moment = parse_timestamp(raw_time)
        except ValueError as error:
            raise row.error(str(error), timestamp_column, source=source) from None
        metadata = {"timestamp": raw_time, **row_extras(row, consumed)}
        sequence = optional_int(row, sequence_column, source=source)
        if sequence is not None:
            metadata["sequence"] = sequence
        exchange = columns.exchange(row, position=position, metadata=metadata, source=source)
        sessions.setdefault(session, []).append(_Timed(exchange, moment, sequence))
    if not sessions:
        raise InputError("the file holds no rows", source=source)

    order = _TimeOrder(source, timestamp_column, sequence_column, has_sequence_column)
    for session, rows in sessions.items():
        ordered = order.sort(rows, session=session)
        first = rows[0].exchange.row
        case_id = columns.case_id(ctx, session, first)
        yield columns.case(
            ctx,
            ordered,
            case_id=case_id,
            chatbot_role=columns.chatbot_role([timed.exchange for timed in rows], source=source),
            session=session,
            line=first.line,
        )


@dataclass(frozen=True, slots=True)
class _TimeOrder:
    """Puts a session's rows in order: by time, and by sequence where times are equal."""

    source: str
    timestamp_column: str
    sequence_column: str
    has_sequence_column: bool

    def sort(self, rows: list[_Timed], *, session: str) -> list[Exchange]:
        """The session's rows by time; equal times only when a sequence orders them."""
        kinds = {timed.moment.naive for timed in rows}
        if len(kinds) > 1:
            odd = next(timed for timed in rows if timed.moment.naive != rows[0].moment.naive)
            raise odd.exchange.row.error(
                f"session {session} mixes times without a UTC offset with times that have one "
                "(or epoch numbers); their order cannot be known, so give every time an offset",
                self.timestamp_column,
                source=self.source,
            )
        ordered = sorted(rows, key=lambda timed: timed.moment.seconds)
        result: list[Exchange] = []
        start = 0
        while start < len(ordered):
            end = start + 1
            while (
                end < len(ordered) and ordered[end].moment.seconds == ordered[start].moment.seconds
            ):
                end += 1
            group = ordered[start:end]
            if len(group) > 1:
                group = self._by_sequence(group, session=session)
            result.extend(timed.exchange for timed in group)
            start = end
        return result

    def _by_sequence(self, group: list[_Timed], *, session: str) -> list[_Timed]:
        in_file_order = sorted(group, key=lambda timed: timed.exchange.position)
        first, second = in_file_order[0], in_file_order[1]
        if not self.has_sequence_column:
            raise second.exchange.row.error(
                f"session {session} has another row at this same time "
                f"({first.exchange.row.place}); their order is unknown: add a "
                f"{self.sequence_column!r} column of integers to order rows that share a time",
                self.timestamp_column,
                source=self.source,
            )
        seen: dict[int, _Timed] = {}
        for timed in in_file_order:
            if timed.sequence is None:
                raise timed.exchange.row.error(
                    f"session {session} has several rows at this time; each needs a sequence "
                    "value to order them",
                    self.sequence_column,
                    source=self.source,
                )
            earlier = seen.get(timed.sequence)
            if earlier is not None:
                raise timed.exchange.row.error(
                    f"session {session} has another row at this time with the same sequence "
                    f"value ({earlier.exchange.row.place})",
                    self.sequence_column,
                    source=self.source,
                )
            seen[timed.sequence] = timed
        return sorted(group, key=lambda timed: timed.sequence or 0)


def write_openlayer_csv(cases: Iterable[Mapping[str, Any]]) -> str:
    """Cases as an Openlayer session table (CSV text), deterministic.

    Columns ``session_id,timestamp,sequence,input,output,role_definition``; one row
    per user/assistant exchange (see :func:`~review_app.formats._sessions.exchanges`),
    cases and exchanges in the order given. Native cases carry no times, so the
    timestamps are synthetic: a session's rows are one second apart from
    :data:`EXPORT_START`; only their order means anything, and ``sequence`` numbers
    the rows 1..n as well. A table has no place for system and tool events, observed
    actions, requests or the contract: they are not written. Every cell is
    neutralised against formula injection.
    """
    rows = [
        [
            case_id,
            (EXPORT_START + timedelta(seconds=index - 1)).isoformat().replace("+00:00", "Z"),
            str(index),
            user,
            assistant,
            role,
        ]
        for case_id, index, user, assistant, role in exchange_rows(cases)
    ]
    header = ["session_id", "timestamp", "sequence", "input", "output", "role_definition"]
    return csv_text(header, rows)
