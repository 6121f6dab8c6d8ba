"""Openlayer session tables: one row per exchange, grouped by session, ordered by time.

Openlayer's session-level tests (role adherence among them) read a table whose
rows carry a session id, a timestamp, the user's input and the assistant's output;
the session id groups rows into a conversation and the timestamp orders them. The
role to hold the assistant to is a plain-language ``role_definition``; here it may
be a column (one value per session) or the ``role_definition`` option.

File: CSV (``.csv``; UTF-8 with or without the byte-order mark spreadsheets write)
or JSON rows (``.jsonl``/``.ndjson`` one object per line, or a ``.json`` list).

Reading rules:

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
  (:func:`~review_app.formats._common.slugify`-ed, with the optional prefix);
* no contract unless one is given (``contract=``): the case is ``no_contract``.

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

from review_app.cases import DEFAULT_MAX_RECORD_BYTES, CaseRecord
from review_app.errors import InputError
from review_app.formats._common import (
    CaseIds,
    ProgressCallback,
    Row,
    case_from_session,
    case_id_from,
    check_unique_case_ids,
    exchanges,
    missing_columns_error,
    open_table,
    optional_int,
    require_id,
    require_text,
    row_extras,
    same_text_in_group,
    validate_contract,
    validate_prefix,
)
from review_app.formats.csv_safety import csv_text

FORMAT_NAME = "openlayer"
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
class _Exchange:
    position: int
    row: Row
    moment: Moment
    sequence: int | None
    user_text: str | None
    assistant_text: str | None
    role: str | None
    metadata: dict[str, Any]


def read_openlayer(
    path: Path,
    *,
    session_column: str = "session_id",
    timestamp_column: str = "timestamp",
    input_column: str = "input",
    output_column: str = "output",
    role_column: str = "role_definition",
    sequence_column: str = "sequence",
    role_definition: str | None = None,
    contract: dict[str, Any] | None = None,
    case_id_prefix: str | None = None,
    max_record_bytes: int = DEFAULT_MAX_RECORD_BYTES,
    progress: ProgressCallback | None = None,
) -> Iterator[CaseRecord]:
    """Cases from an Openlayer session table (CSV or JSON rows), one per session.

    The role and sequence columns are optional; the others are required. See the
    module documentation for every rule.
    """
    source = str(path)
    given_contract = validate_contract(contract)
    validate_prefix(case_id_prefix)

    def cases() -> Iterator[CaseRecord]:
        table = open_table(path, max_record_bytes=max_record_bytes, progress=progress)
        required = [session_column, timestamp_column, input_column, output_column]
        if table.columns is not None:
            missing = [name for name in required if name not in table.columns]
            if missing:
                raise missing_columns_error(table, missing)
        consumed = {*required, role_column, sequence_column}

        sessions: dict[str, list[_Exchange]] = {}
        has_sequence_column = table.columns is not None and sequence_column in table.columns
        for position, row in enumerate(table.rows):
            if table.columns is None:
                for name in required:
                    if name not in row.cells:
                        raise row.error(
                            f"the row has no {name!r} key (a required column)", name, source=source
                        )
                has_sequence_column = has_sequence_column or sequence_column in row.cells
            session = require_id(row, session_column, source=source)
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
            sessions.setdefault(session, []).append(
                _Exchange(
                    position=position,
                    row=row,
                    moment=moment,
                    sequence=sequence,
                    user_text=require_text(row, input_column, source=source),
                    assistant_text=require_text(row, output_column, source=source),
                    role=require_text(row, role_column, source=source),
                    metadata=metadata,
                )
            )
        if not sessions:
            raise InputError("the file holds no rows", source=source)

        ids = CaseIds(source)
        for session, rows in sessions.items():
            ordered = _in_time_order(
                rows,
                source=source,
                session=session,
                timestamp_column=timestamp_column,
                sequence_column=sequence_column,
                has_sequence_column=has_sequence_column,
            )
            first = rows[0].row
            case_id = case_id_from(
                session,
                prefix=case_id_prefix,
                source=source,
                line=first.line,
                field=first.field(session_column),
            )
            if case_id is None:
                raise first.error(
                    "this session id gives no usable case id (it has no letters or digits)",
                    session_column,
                    source=source,
                )
            ids.claim(case_id, line=first.line, field=first.field(session_column))
            role = same_text_in_group(
                [(exchange.row, exchange.role) for exchange in rows],
                column=role_column,
                what="role definition",
                source=source,
            )
            yield case_from_session(
                ordered,
                case_id=case_id,
                chatbot_role=role if role is not None else role_definition,
                contract=given_contract,
                session=session,
                input_column=input_column,
                source=source,
                line=first.line,
            )

    return cases()


def _in_time_order(
    rows: list[_Exchange],
    *,
    source: str,
    session: str,
    timestamp_column: str,
    sequence_column: str,
    has_sequence_column: bool,
) -> list[_Exchange]:
    """The session's rows by time; equal times only when a sequence orders them."""
    kinds = {exchange.moment.naive for exchange in rows}
    if len(kinds) > 1:
        odd = next(exchange for exchange in rows if exchange.moment.naive != rows[0].moment.naive)
        raise odd.row.error(
            f"session {session} mixes times without a UTC offset with times that have one "
            "(or epoch numbers); their order cannot be known, so give every time an offset",
            timestamp_column,
            source=source,
        )
    ordered = sorted(rows, key=lambda exchange: exchange.moment.seconds)
    result: list[_Exchange] = []
    start = 0
    while start < len(ordered):
        end = start + 1
        while end < len(ordered) and ordered[end].moment.seconds == ordered[start].moment.seconds:
            end += 1
        group = ordered[start:end]
        if len(group) > 1:
            group = _by_sequence(
                group,
                source=source,
                session=session,
                timestamp_column=timestamp_column,
                sequence_column=sequence_column,
                has_sequence_column=has_sequence_column,
            )
        result.extend(group)
        start = end
    return result


def _by_sequence(
    group: list[_Exchange],
    *,
    source: str,
    session: str,
    timestamp_column: str,
    sequence_column: str,
    has_sequence_column: bool,
) -> list[_Exchange]:
    in_file_order = sorted(group, key=lambda exchange: exchange.position)
    first, second = in_file_order[0], in_file_order[1]
    if not has_sequence_column:
        raise second.row.error(
            f"session {session} has another row at this same time ({first.row.place}); "
            f"their order is unknown: add a {sequence_column!r} column of integers to order "
            "rows that share a time",
            timestamp_column,
            source=source,
        )
    seen: dict[int, _Exchange] = {}
    for exchange in in_file_order:
        if exchange.sequence is None:
            raise exchange.row.error(
                f"session {session} has several rows at this time; each needs a sequence "
                "value to order them",
                sequence_column,
                source=source,
            )
        earlier = seen.get(exchange.sequence)
        if earlier is not None:
            raise exchange.row.error(
                f"session {session} has another row at this time with the same sequence "
                f"value ({earlier.row.place})",
                sequence_column,
                source=source,
            )
        seen[exchange.sequence] = exchange
    return sorted(group, key=lambda exchange: exchange.sequence or 0)


def write_openlayer_csv(cases: Iterable[Mapping[str, Any]]) -> str:
    """Cases as an Openlayer session table (CSV text), deterministic.

    Columns ``session_id,timestamp,sequence,input,output,role_definition``; one row
    per user/assistant exchange (see :func:`~review_app.formats._common.exchanges`),
    cases and exchanges in the order given. Native cases carry no times, so the
    timestamps are synthetic: a session's rows are one second apart from
    :data:`EXPORT_START`; only their order means anything, and ``sequence`` numbers
    the rows 1..n as well. A table has no place for system and tool events, observed
    actions, requests or the contract: they are not written. Every cell is
    neutralised against formula injection.
    """
    items = list(cases)
    check_unique_case_ids(items)
    rows: list[list[str]] = []
    for case in items:
        role = case.get("chatbot_role") or ""
        for index, (user, assistant) in enumerate(exchanges(case["transcript"]), start=1):
            moment = EXPORT_START + timedelta(seconds=index - 1)
            rows.append(
                [
                    case["case_id"],
                    moment.isoformat().replace("+00:00", "Z"),
                    str(index),
                    user or "",
                    assistant or "",
                    role,
                ]
            )
    header = ["session_id", "timestamp", "sequence", "input", "output", "role_definition"]
    return csv_text(header, rows)
