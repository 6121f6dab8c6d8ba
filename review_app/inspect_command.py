"""``review-app inspect``: deterministic findings for case files, no database.

This module is the whole command and loads fast: it needs only the standard
library, orjson, the case reader and the evaluator. ``review-app inspect ...``
(``review_app.__main__``) runs it before Typer, SQLAlchemy or pydantic are
imported, so a CI job that calls it once per fixture pays Python's start-up and
little more.

Inputs are files (a JSON case, a JSON list of cases, or JSONL with one case per
line) and directories (every ``.json``/``.jsonl``/``.ndjson`` file under them, in
sorted path order). Output:

* one file argument holding one case (the classic form): the diagnostic line,
  then the result as indented JSON (``--json``: only the JSON); errors go to
  stderr;
* anything else: one line per case, in input order: the diagnostic line followed
  by ``file=``, ``line=`` (JSONL) or ``record=`` (JSON list) and, for a malformed
  case, ``field=``; an input that cannot be read gets one ``error: FILE, line N,
  field F: ...`` line in its place and the other inputs are still read. With
  ``--json``: one compact JSON object per line instead (the result with ``file``,
  ``line`` and ``record`` added, or ``{"status": "error", "file", "line",
  "field", "message"}``).

``--summary`` adds one closing line with counts per outcome. The exit code is the
worst over all cases: 2 (invalid fixture, no contract, unreadable input) over 1
(a violation) over 0 (pass).
"""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any, TextIO

from review_app.errors import InputError
from review_app.evaluator import diagnostic, escaped_char, evaluate_case, log_token
from review_app.files.discovery import case_files_under
from review_app.files.json_records import iter_json_records

EXIT_PASS, EXIT_VIOLATION, EXIT_BAD_INPUT = 0, 1, 2
OUTCOMES = ("pass", "fail", "invalid", "no_contract", "unreadable")
"""What a case (or an unreadable input) comes to, in the order the summary counts them."""
_EXIT_BY_OUTCOME = {"pass": 0, "fail": 1, "invalid": 2, "no_contract": 2, "unreadable": 2}
_C1_AND_DEL = re.compile("[\x7f-\x9f]")
USAGE = "Usage: review-app inspect [OPTIONS] PATH..."


class Item:
    """One case of the input with its result, or one input that could not be read.

    (A plain class rather than a dataclass: building a dataclass costs a few
    milliseconds at import, which every ``inspect`` call would pay.)
    """

    __slots__ = ("error", "file", "line", "record", "result")

    def __init__(
        self,
        file: str,
        line: int | None = None,
        record: int | None = None,
        result: dict[str, Any] | None = None,
        error: InputError | None = None,
    ) -> None:
        self.file = file
        self.line = line
        self.record = record
        self.result = result
        self.error = error

    def __repr__(self) -> str:
        return (
            f"Item(file={self.file!r}, line={self.line!r}, record={self.record!r}, "
            f"result={self.result!r}, error={self.error!r})"
        )

    def __eq__(self, other: object) -> bool:
        if type(other) is not Item:
            return NotImplemented
        return (self.file, self.line, self.record, self.result, self.error) == (
            other.file,
            other.line,
            other.record,
            other.result,
            other.error,
        )

    __hash__ = None  # type: ignore[assignment]  # mutable, like the dataclass it was

    @property
    def outcome(self) -> str:
        return "unreadable" if self.result is None else str(self.result["status"])


def iter_items(paths: Iterable[str | Path]) -> Iterator[Item]:
    """Every case of ``paths`` evaluated, in input order, streamed (one record in memory)."""
    for raw in paths:
        path = Path(raw)
        if path.is_dir():
            files = case_files_under(path)
            if not files:
                yield Item(
                    str(path),
                    error=InputError(
                        "no case files (.json, .jsonl, .ndjson) in this directory",
                        source=str(path),
                    ),
                )
            for file in files:
                yield from _file_items(file)
        else:
            yield from _file_items(path)


def _file_items(path: Path) -> Iterator[Item]:
    source = str(path)
    try:
        for line, prefix, value in iter_json_records(path):
            record = int(prefix[1:-1]) if prefix else None
            yield Item(source, line, record, evaluate_case(value))
    except InputError as error:
        yield Item(source, error.line, error=error.located(source=source))


def _one_line(text: str) -> str:
    """An error message on one line, with no raw control characters."""
    return "".join(ch if ch.isprintable() else escaped_char(ord(ch)) for ch in text)


def _json_text(value: Any, *, indent: int | None = None) -> str:
    separators = None if indent else (",", ":")
    text = json.dumps(
        value,
        indent=indent,
        sort_keys=True,
        ensure_ascii=False,
        allow_nan=False,
        separators=separators,
    )
    # JSON already escapes C0 controls; DEL and C1 (8-bit CSI) pass through raw otherwise.
    return _C1_AND_DEL.sub(lambda m: f"\\u{ord(m.group()):04x}", text)


def _malformed_field(result: dict[str, Any]) -> str | None:
    if result["status"] != "invalid":
        return None
    first = result["fixture_errors"][0]
    return str(first["field"]) if first["code"] == "malformed_case" else None


def item_line(item: Item) -> str:
    """The one line that reports an item when several are inspected."""
    if item.error is not None:
        return f"error: {_one_line(str(item.error))}"
    result = item.result
    assert result is not None
    text = f"{diagnostic(result)} file={log_token(item.file)}"
    if item.line is not None:
        text += f" line={item.line}"
    if item.record is not None:
        text += f" record={item.record}"
    field = _malformed_field(result)
    if field is not None:
        text += f" field={log_token(field)}"
    return text


def item_json(item: Item) -> str:
    """The JSON object (one line) that reports an item when several are inspected."""
    if item.error is not None:
        value: dict[str, Any] = {
            "status": "error",
            "file": item.file,
            "line": item.error.line,
            "field": item.error.field,
            "message": item.error.message,
        }
    else:
        value = {**(item.result or {}), "file": item.file, "line": item.line}
        value["record"] = item.record
    return _json_text(value)


class Tally:
    """Counts per outcome, files seen and the worst exit code."""

    def __init__(self) -> None:
        self.files = 0
        self.exit_code = EXIT_PASS
        self.counts = dict.fromkeys(OUTCOMES, 0)
        self._last_file: str | None = None

    def add(self, item: Item) -> None:
        if item.file != self._last_file:
            self.files += 1
            self._last_file = item.file
        outcome = item.outcome
        self.counts[outcome] += 1
        self.exit_code = max(self.exit_code, _EXIT_BY_OUTCOME[outcome])

    def line(self) -> str:
        cases = sum(self.counts.values()) - self.counts["unreadable"]
        parts = [f"files={self.files}", f"cases={cases}"]
        parts += [f"{name.replace('_', '-')}={n}" for name, n in self.counts.items()]
        return f"role-eval summary {' '.join(parts)} exit={self.exit_code}"

    def json(self) -> str:
        cases = sum(self.counts.values()) - self.counts["unreadable"]
        return _json_text(
            {
                "summary": {
                    "files": self.files,
                    "cases": cases,
                    **self.counts,
                    "exit_code": self.exit_code,
                }
            }
        )


def run(
    paths: Sequence[str | Path],
    *,
    as_json: bool = False,
    summary: bool = False,
    out: TextIO | None = None,
    err: TextIO | None = None,
) -> int:
    """Inspect ``paths``, print the report, return the exit code."""
    out = out or sys.stdout
    err = err or sys.stderr
    tally = Tally()
    items = iter_items(paths)
    if len(paths) == 1 and not Path(paths[0]).is_dir():
        first = next(items, None)
        second = next(items, None)
        if first is not None and second is None:
            code = _classic(first, as_json=as_json, out=out, err=err)
            tally.add(first)
            if summary:
                out.write((tally.json() if as_json else tally.line()) + "\n")
            return code
        items = _chain(first, second, items)
    write = out.write
    for item in items:
        tally.add(item)
        write((item_json(item) if as_json else item_line(item)) + "\n")
    if summary:
        write((tally.json() if as_json else tally.line()) + "\n")
    return tally.exit_code


def _chain(first: Item | None, second: Item | None, rest: Iterator[Item]) -> Iterator[Item]:
    for item in (first, second):
        if item is not None:
            yield item
    yield from rest


def _classic(item: Item, *, as_json: bool, out: TextIO, err: TextIO) -> int:
    """One file holding one case: the diagnostic line, then the result as indented JSON."""
    if item.error is not None:
        err.write(f"error: {item.error}\n")
        return EXIT_BAD_INPUT
    result = item.result
    assert result is not None
    if not as_json:
        out.write(diagnostic(result) + "\n")
    out.write(_json_text(result, indent=2) + "\n")
    status = result["status"]
    if status == "invalid":
        first = result["fixture_errors"][0]
        if first["code"] == "malformed_case":
            err.write(f"error: {item.file}, field {first['field']}: {first['message']}\n")
        return EXIT_BAD_INPUT
    if status == "no_contract":
        err.write(
            f"error: {item.file}, field contract: the case has no role contract; "
            "it can only be reviewed semantically\n"
        )
        return EXIT_BAD_INPUT
    return EXIT_VIOLATION if status == "fail" else EXIT_PASS


def _usage_error(message: str) -> int:
    sys.stderr.write(f"{USAGE}\nTry 'review-app inspect --help' for help.\n\nError: {message}\n")
    return EXIT_BAD_INPUT


def main(argv: Sequence[str]) -> int:
    """``review-app inspect`` without Typer: parse ``argv`` (after ``inspect``), run."""
    paths: list[str] = []
    as_json = summary = False
    options_done = False
    for arg in argv:
        if options_done or not arg.startswith("-") or arg == "-":
            paths.append(arg)
        elif arg == "--":
            options_done = True
        elif arg == "--json":
            as_json = True
        elif arg == "--summary":
            summary = True
        else:
            return _usage_error(f"No such option: {arg}")
    if not paths:
        return _usage_error("Missing argument 'PATH...'.")
    return run(paths, as_json=as_json, summary=summary)
