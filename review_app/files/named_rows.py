"""Files of named rows that Role Review itself defines: label files and judge verdict
files (docs/reference.md, "Label CSV" and "Judge verdicts").

Either CSV with a header row (UTF-8, a byte-order mark accepted; strictly parsed by
:mod:`review_app.files.csv_rows`) or JSONL, one object per line
(:func:`~review_app.files.json_records.iter_jsonl_records`). A column or key the file
may not have, a required column the header lacks, a row with more cells than the
header names and a line that is not an object are refused here, naming the line and
the column; what each value means is the caller's to check.

Unlike the foreign tables of :mod:`review_app.files.tables`, a CSV row keeps its cells
as written (an empty cell is ``""``, a short row lacks its last columns) and carries
the line it ends on; a JSONL row keeps its JSON values.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from review_app.errors import InputError
from review_app.files.csv_rows import csv_dict_rows
from review_app.files.json_records import iter_jsonl_records
from review_app.files.text import read_text_file


def named_rows(
    path: Path,
    *,
    as_csv: bool,
    columns: Sequence[str],
    required: Sequence[str] = (),
    also_accepted: Sequence[str] = (),
) -> Iterator[tuple[int, dict[str, Any]]]:
    """``(line, row)`` of a CSV (``as_csv``) or JSONL file whose columns are among ``columns``.

    ``required``: columns a CSV header must name (JSONL rows name their own keys).
    ``also_accepted``: JSONL keys that are allowed but are not columns (the context keys
    of an export), left in the row for the caller to ignore.
    """
    if as_csv:
        yield from _csv_named_rows(path, columns=columns, required=required)
    else:
        yield from _jsonl_named_rows(path, columns=columns, also_accepted=also_accepted)


def _expected(columns: Sequence[str]) -> str:
    return f"expected {','.join(columns)}"


def _csv_named_rows(
    path: Path, *, columns: Sequence[str], required: Sequence[str]
) -> Iterator[tuple[int, dict[str, Any]]]:
    source = str(path)
    text = read_text_file(path, allow_bom=True)
    reader = csv.DictReader(io.StringIO(text, newline=""), strict=True)
    header = reader.fieldnames or []
    missing = [name for name in required if name not in header]
    if missing:
        raise InputError(
            f"missing column{'s' if len(missing) > 1 else ''} {', '.join(missing)} "
            f"({_expected(columns)})",
            source=source,
            line=1,
            field=missing[0],
        )
    unknown = [name for name in header if name not in columns]
    if unknown:
        raise InputError(
            f"unknown column {unknown[0]!r} ({_expected(columns)})",
            source=source,
            line=1,
            field=unknown[0],
        )
    for line, row in csv_dict_rows(reader, source=source):
        if None in row:  # e.g. an unquoted comma in a text: never drop text silently
            raise InputError(
                "more cells than columns (quote a text that contains a comma)",
                source=source,
                line=line,
                field=header[-1],
            )
        yield line, row


def _jsonl_named_rows(
    path: Path, *, columns: Sequence[str], also_accepted: Sequence[str]
) -> Iterator[tuple[int, dict[str, Any]]]:
    source = str(path)
    for line, value in iter_jsonl_records(path):
        if not isinstance(value, dict):
            raise InputError("expected a JSON object per line", source=source, line=line)
        unknown = [key for key in value if key not in columns and key not in also_accepted]
        if unknown:
            raise InputError(
                f"unknown field {unknown[0]!r} ({_expected(columns)})",
                source=source,
                line=line,
                field=unknown[0],
            )
        yield line, value
