"""Spreadsheet formula injection: neutralising CSV cells we write, restoring those we read.

A spreadsheet opening a CSV file runs a cell that begins with ``=``, ``+``, ``-`` or
``@`` as a formula (and tab or carriage return can smuggle one past filters), so a
transcript line such as ``=HYPERLINK("http://evil", "click")`` becomes live content
(OWASP, "CSV Injection"). Every cell we write goes through :func:`neutralise_cell`,
which prefixes such a cell with a single quote: spreadsheets show the quote-prefixed
cell as literal text and hide the quote.

So that a reader can undo this exactly, a cell that already begins with quotes
followed by one of those characters gets one more quote too; :func:`restore_cell`
removes one quote from any cell of that shape. The pair is a bijection on strings:
``restore_cell(neutralise_cell(s)) == s`` for every ``s``.
"""

from __future__ import annotations

import csv
import io
import re

FORMULA_TRIGGERS = (
    "=",
    "+",
    "-",
    "@",
    "\t",
    "\r",
    # full-width and small forms, which some spreadsheets (CJK locales) read as the same
    "\uff1d",  # ＝
    "\uff0b",  # ＋
    "\uff0d",  # －
    "\uff20",  # ＠
    "\ufe66",  # ﹦
    "\ufe62",  # ﹢
    "\ufe63",  # ﹣
    "\ufe6b",  # ﹫
)
_TRIGGER = "[" + re.escape("".join(FORMULA_TRIGGERS)) + "]"
# Spreadsheets skip leading blanks before a formula: spaces, no-break spaces, line
# breaks (any Unicode whitespace) in front of a trigger count as the trigger.
_NEEDS_QUOTE = re.compile(r"'*\s*" + _TRIGGER)
_NEUTRALISED = re.compile(r"'+\s*" + _TRIGGER)


def neutralise_cell(value: str) -> str:
    """``value`` made safe to open in a spreadsheet.

    A cell beginning with ``=``, ``+``, ``-``, ``@`` (or their full-width forms such
    as ``＝``), a tab or a carriage return, possibly after whitespace (spaces, no-break
    spaces, line breaks) and single quotes, is prefixed with a single quote; any other
    cell is returned unchanged.
    """
    if _NEEDS_QUOTE.match(value):
        return "'" + value
    return value


def restore_cell(value: str) -> str:
    """The original text of a cell written by :func:`neutralise_cell`."""
    if value[:1] == "'" and _NEUTRALISED.match(value):
        return value[1:]
    return value


def csv_text(header: list[str], rows: list[list[str]]) -> str:
    """CSV text (RFC 4180: ``\\r\\n`` line ends, minimal quoting), every cell neutralised.

    With ``\\r\\n`` as the terminator the ``csv`` module quotes any cell holding a
    ``\\r`` or a ``\\n``, so cell text survives exactly; write the text to a file
    opened with ``newline=""`` (or as bytes).
    """
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\r\n")
    writer.writerow([neutralise_cell(name) for name in header])
    for row in rows:
        writer.writerow([neutralise_cell(cell) for cell in row])
    return buffer.getvalue()
