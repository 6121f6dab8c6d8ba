"""Table files (CSV, or JSON/JSONL rows): their rows and cells, read strictly.

Line numbers always refer to the file as the user has it: the line where a CSV row
starts (a quoted cell may span lines), the line of a JSONL record. In a ``.json``
file holding a list the JSON path (``[3].timestamp``) names the place instead.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from review_app.errors import InputError
from review_app.evaluator import type_name
from review_app.files.csv_rows import csv_rows
from review_app.files.csv_safety import restore_cell
from review_app.files.json_records import iter_json_records, join_field
from review_app.files.limits import MAX_RECORD_BYTES
from review_app.files.text import decode_utf8, read_whole

ProgressCallback = Callable[[int], None]

CSV_SUFFIXES = (".csv",)
JSON_SUFFIXES = (".json", ".jsonl", ".ndjson")


@dataclass(frozen=True, slots=True)
class Row:
    """One row of a table file: where it is and its cells.

    CSV cells are strings (an empty cell is ``None``); JSON rows keep their JSON
    values (a missing key is simply absent).
    """

    line: int | None
    prefix: str | None
    cells: dict[str, Any]

    def field(self, column: str) -> str:
        return join_field(self.prefix, column)

    def error(self, message: str, column: str | None, *, source: str) -> InputError:
        field = self.field(column) if column is not None else self.prefix
        return InputError(message, source=source, line=self.line, field=field)

    @property
    def place(self) -> str:
        return f"line {self.line}" if self.line is not None else f"record {self.prefix}"


@dataclass(slots=True)
class Table:
    """The rows of a CSV or JSON/JSONL file.

    ``columns`` is the CSV header (``None`` for JSON rows, which name their own
    keys); ``header_line`` is where that header is.
    """

    source: str
    columns: list[str] | None
    header_line: int | None
    rows: Iterator[Row]


def _csv_table(path: Path, source: str, progress: ProgressCallback | None) -> Table:
    data = read_whole(path)
    if progress is not None:
        progress(len(data))
    rows = csv_rows(decode_utf8(data, source=source), source)
    first = next(rows, None)
    if first is None:
        raise InputError("the file is empty (no header row)", source=source)
    header_line, raw_header = first
    columns = [restore_cell(name).strip() for name in raw_header]
    seen: set[str] = set()
    for name in columns:
        if name and name in seen:
            raise InputError(
                "this column name appears twice in the header",
                source=source,
                line=header_line,
                field=name,
            )
        seen.add(name)

    def iterate() -> Iterator[Row]:
        for line, cells in rows:
            if len(cells) != len(columns):
                raise InputError(
                    f"the row has {len(cells)} cells but the header names {len(columns)} columns",
                    source=source,
                    line=line,
                )
            yield Row(
                line,
                None,
                {
                    name: (restore_cell(cell) if cell != "" else None)
                    for name, cell in zip(columns, cells, strict=True)
                    if name
                },
            )

    return Table(source, columns, header_line, iterate())


def _json_table(
    path: Path, source: str, max_record_bytes: int, progress: ProgressCallback | None
) -> Table:
    def iterate() -> Iterator[Row]:
        for line, prefix, value in iter_json_records(
            path, max_record_bytes=max_record_bytes, progress=progress
        ):
            if not isinstance(value, dict):
                raise InputError(
                    f"expected a JSON object (one row), got {type_name(value)}",
                    source=source,
                    line=line,
                    field=prefix,
                )
            yield Row(line, prefix, value)

    return Table(source, None, None, iterate())


def open_table(
    path: Path,
    *,
    max_record_bytes: int = MAX_RECORD_BYTES,
    progress: ProgressCallback | None = None,
) -> Table:
    """The rows of ``path``: CSV by the ``.csv`` suffix, else JSON/JSONL rows.

    CSV is read whole (:func:`~review_app.files.text.read_whole`) as UTF-8, with or
    without a byte-order mark (spreadsheets write one); cells are unquoted by the
    standard ``csv`` module in strict mode, and cells neutralised against formula
    injection are restored
    (:func:`~review_app.files.csv_safety.restore_cell`). Blank rows are skipped.
    """
    source = str(path)
    suffix = path.suffix.lower()
    if suffix in CSV_SUFFIXES:
        return _csv_table(path, source, progress)
    if suffix in JSON_SUFFIXES:
        return _json_table(path, source, max_record_bytes, progress)
    raise InputError("unknown file type; expected .csv, .json, .jsonl or .ndjson", source=source)


def csv_header(path: Path) -> list[str]:
    """The column names of a CSV file, reading no further than its header."""
    source = str(path)
    try:
        with path.open("rb") as stream:
            head = stream.read(1 << 16)
    except OSError as error:
        raise InputError(f"cannot be read ({error.strerror})", source=source) from None
    # The header is in the first 64 KiB; cut at the last complete line.
    if len(head) == 1 << 16 and b"\n" in head:
        head = head[: head.rindex(b"\n") + 1]
    first = next(csv_rows(decode_utf8(head, source=source), source), None)
    if first is None:
        raise InputError("the file is empty (no header row)", source=source)
    return [restore_cell(name).strip() for name in first[1]]


def require_text(row: Row, column: str, *, source: str) -> str | None:
    """A text cell: ``None`` when empty or absent (empty string counts as empty)."""
    value = row.cells.get(column)
    if value is None or value == "":
        return None
    if type(value) is not str:
        raise row.error(f"expected text, got {type_name(value)}", column, source=source)
    return value


def require_id(row: Row, column: str, *, source: str) -> str:
    """A non-empty identifier cell (JSON integers are accepted and turned to text)."""
    value = row.cells.get(column)
    if value is None or value == "":
        raise row.error("this cell is empty; every row needs a value here", column, source=source)
    if type(value) is int:
        return str(value)
    if type(value) is not str:
        raise row.error(
            f"expected text or an integer, got {type_name(value)}", column, source=source
        )
    return value


_INTEGER = re.compile(r"[+-]?\d{1,18}")


def optional_int(row: Row, column: str, *, source: str) -> int | None:
    """An integer cell (``"12"`` in CSV, ``12`` in JSON); ``None`` when empty."""
    value = row.cells.get(column)
    if value is None or value == "":
        return None
    if type(value) is int:
        return value
    if type(value) is str and _INTEGER.fullmatch(value):
        return int(value)
    shown = value if type(value) is str else type_name(value)
    raise row.error(f"expected an integer, got {shown!r}", column, source=source)


def missing_columns_error(
    table: Table, missing: list[str], *, what: str = "required column"
) -> InputError:
    names = ", ".join(f'"{name}"' for name in missing)
    have = ", ".join(name for name in (table.columns or []) if name) or "none"
    plural = "s" if len(missing) > 1 else ""
    return InputError(
        f"missing {what}{plural} {names} (the header has: {have})",
        source=table.source,
        line=table.header_line,
        field=missing[0],
    )


def row_extras(row: Row, consumed: set[str]) -> dict[str, Any]:
    """The row's other non-empty cells, kept with the events as source metadata."""
    return {
        key: value
        for key, value in row.cells.items()
        if key not in consumed and value is not None and value != ""
    }


def require_columns(table: Table, required: list[str]) -> None:
    """``InputError`` naming the required columns a CSV header lacks."""
    if table.columns is not None:
        missing = [name for name in required if name not in table.columns]
        if missing:
            raise missing_columns_error(table, missing)


def require_keys(table: Table, row: Row, required: list[str]) -> None:
    """``InputError`` naming a required key a JSON row lacks (JSON rows have no header)."""
    if table.columns is None:
        for name in required:
            if name not in row.cells:
                raise row.error(
                    f"the row has no {name!r} key (a required column)", name, source=table.source
                )
