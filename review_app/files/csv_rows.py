"""CSV rows, strictly parsed, each with its line; an error names the line its row starts on.

One rule for every CSV file read (foreign tables, label files, verdict files): the
``csv`` module in strict mode, a cell of up to :data:`CSV_FIELD_LIMIT` characters,
and an error naming the line the failing row starts on.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Iterator
from typing import Any, Protocol

from review_app.errors import InputError
from review_app.files.limits import MAX_RECORD_BYTES

CSV_FIELD_LIMIT = MAX_RECORD_BYTES
"""One cell: the record limit."""


class _LineCounting(Protocol):
    """A ``csv.reader`` or ``csv.DictReader``: rows, and the line the last one ended on."""

    @property
    def line_num(self) -> int: ...

    def __next__(self) -> Any: ...


def _allow_large_cells() -> None:
    if csv.field_size_limit() < CSV_FIELD_LIMIT:
        csv.field_size_limit(CSV_FIELD_LIMIT)


def _located_rows(reader: _LineCounting, *, source: str) -> Iterator[tuple[int, int, Any]]:
    """``(first line, last line, row)`` of every row ``reader`` gives from here on.

    A CSV error names the line its row starts on: the ``csv`` module notices an
    unclosed quote only at the end of the file, when its line counter is past the
    fault; the failing row starts on the line after the last good row, and that is
    the line to look at.
    """
    _allow_large_cells()
    previous_end = reader.line_num
    while True:
        try:
            row = next(reader)
        except StopIteration:
            return
        except csv.Error as error:
            message = str(error)
            if "unexpected end of data" in message:
                message += ": a quoted cell is never closed"
            raise InputError(
                f"not valid CSV ({message})", source=source, line=previous_end + 1
            ) from None
        yield previous_end + 1, reader.line_num, row
        previous_end = reader.line_num


def csv_dict_rows(
    reader: csv.DictReader[str], *, source: str
) -> Iterator[tuple[int, dict[str | Any, str | Any]]]:
    """``(line, row)`` of a ``csv.DictReader`` after its header, the line being the one
    the row ends on (a quoted cell may span lines); errors as
    :func:`_located_rows`."""
    for _, last, row in _located_rows(reader, source=source):
        yield last, row


def csv_rows(text: str, source: str) -> Iterator[tuple[int, list[str]]]:
    """``(first line, cells)`` of every non-blank CSV row, strictly parsed."""
    reader = csv.reader(io.StringIO(text, newline=""), strict=True)
    for first, _, cells in _located_rows(reader, source=source):
        if any(cells):
            yield first, cells
