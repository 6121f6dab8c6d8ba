"""CSV rows, strictly parsed, each with its line; an error names the line its row starts on."""

from __future__ import annotations

import csv
from collections.abc import Iterator
from typing import Any

from review_app.errors import InputError


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
