"""CSV rows, strictly parsed, each with its line; an error names the line its row starts on."""

from __future__ import annotations

import csv
import io
from collections.abc import Iterator
from typing import Any

from review_app.errors import InputError
from review_app.files.limits import MAX_RECORD_BYTES

CSV_FIELD_LIMIT = MAX_RECORD_BYTES
"""One cell: the record limit."""


def csv_dict_rows(
    reader: csv.DictReader[str], *, source: str
) -> Iterator[tuple[int, dict[str | Any, str | Any]]]:
    """``(line, row)`` of a ``csv.DictReader``; a CSV error names the line its row starts on.

    The ``csv`` module notices an unclosed quote only at the end of the file, when its
    line counter is past the fault; the failing row starts on the line after the last
    good row, and that is the line to look at.
    """
    last_end = reader.line_num
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
                f"not valid CSV ({message})", source=source, line=last_end + 1
            ) from None
        yield reader.line_num, row
        last_end = reader.line_num


def csv_rows(text: str, source: str) -> Iterator[tuple[int, list[str]]]:
    """``(first line, cells)`` of every non-blank CSV row, strictly parsed."""
    if csv.field_size_limit() < CSV_FIELD_LIMIT:
        csv.field_size_limit(CSV_FIELD_LIMIT)
    reader = csv.reader(io.StringIO(text, newline=""), strict=True)
    previous_end = 0
    while True:
        try:
            cells = next(reader)
        except StopIteration:
            return
        except csv.Error as error:
            # The failing row starts after the last good one: an unclosed quote is
            # only noticed at the end of the file (see csv_dict_rows).
            raise InputError(
                f"not valid CSV ({error})", source=source, line=previous_end + 1
            ) from None
        start = previous_end + 1
        previous_end = reader.line_num
        if not any(cells):
            continue
        yield start, cells
