"""Which format a case file is in, the registry of formats, and reading by format.

:func:`detect_format` (docs/reference.md, "Foreign formats") looks at a CSV file's
header or at the first record of a JSON/JSONL file and never guesses between two
candidates:

==============  ==============================================================
format          recognised by
==============  ==============================================================
``native``      a record with ``transcript``
``deepeval``    a record with ``test_cases``, or ``turns`` together with
                ``chatbot_role`` or turns shaped ``{role, content}``
``openai``      a record with ``messages``, a bare list of messages, or (in a
                ``.json`` list) a first item that is a message
``openlayer``   columns/keys ``input`` and ``output`` with ``session_id`` or
                ``timestamp``
``galtea``      columns/keys ``input`` and ``actual_output``
==============  ==============================================================

Several matches, or none, raise ``InputError`` asking for ``--format``. Detection
knows only the default column names; a table with other names needs ``--format``
and the column options.
"""

from __future__ import annotations

from collections.abc import Callable, Generator, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from review_app.case_records import CaseRecord, read_case_file
from review_app.errors import InputError
from review_app.files.json_records import iter_json_records
from review_app.files.limits import MAX_RECORD_BYTES
from review_app.files.tables import CSV_SUFFIXES, JSON_SUFFIXES, ProgressCallback, csv_header
from review_app.formats import deepeval, galtea, openai_chat, openlayer
from review_app.formats.options import ImportOptions

NATIVE = "native"


class CaseReader(Protocol):
    """A format's reader: the validated cases of one file, read with the import's options."""

    def __call__(
        self, path: Path, options: ImportOptions | None = None, *, progress: ProgressCallback | None
    ) -> Iterator[CaseRecord]: ...


@dataclass(frozen=True)
class CaseFormat:
    """One importable format: its reader, its writer (if any) and what it reads."""

    name: str
    description: str
    read: CaseReader
    write: Callable[..., str] | None
    suffixes: tuple[str, ...]
    options: tuple[str, ...]
    """The fields of :class:`~review_app.formats.options.ImportOptions` its reader takes."""


NATIVE_OPTIONS = ("max_record_bytes",)
"""The native reader takes the record limit only: a case carries its own contract and id."""


def read_native(
    path: Path, options: ImportOptions | None = None, *, progress: ProgressCallback | None = None
) -> Iterator[CaseRecord]:
    """Role Review cases (:func:`review_app.case_records.read_case_file`); a reader option the
    native format does not take is an ``InputError`` naming it."""
    options = options or ImportOptions()
    options.check_taken_by(NATIVE, NATIVE_OPTIONS)
    return read_case_file(path, max_record_bytes=options.max_record_bytes, progress=progress)


FORMATS: dict[str, CaseFormat] = {
    NATIVE: CaseFormat(
        NATIVE,
        'Role Review cases (docs/reference.md, "Cases"), JSON or JSONL',
        read_native,
        None,
        JSON_SUFFIXES,
        NATIVE_OPTIONS,
    ),
    deepeval.FORMAT_NAME: CaseFormat(
        deepeval.FORMAT_NAME,
        "deepeval conversational test cases (turns + chatbot_role), JSON or JSONL",
        deepeval.read_deepeval,
        deepeval.write_deepeval,
        JSON_SUFFIXES,
        deepeval.OPTIONS,
    ),
    openlayer.FORMAT_NAME: CaseFormat(
        openlayer.FORMAT_NAME,
        "Openlayer session rows (session_id, timestamp, input, output), CSV or JSONL",
        openlayer.read_openlayer,
        openlayer.write_openlayer_csv,
        CSV_SUFFIXES + JSON_SUFFIXES,
        openlayer.OPTIONS,
    ),
    galtea.FORMAT_NAME: CaseFormat(
        galtea.FORMAT_NAME,
        "Galtea-style turn rows (input, actual_output, session_id), CSV or JSONL",
        galtea.read_galtea,
        galtea.write_galtea_csv,
        CSV_SUFFIXES + JSON_SUFFIXES,
        galtea.OPTIONS,
    ),
    openai_chat.FORMAT_NAME: CaseFormat(
        openai_chat.FORMAT_NAME,
        "OpenAI chat-completions message lists, JSONL",
        openai_chat.read_openai,
        openai_chat.write_openai_jsonl,
        JSON_SUFFIXES,
        openai_chat.OPTIONS,
    ),
}
FORMAT_NAMES = tuple(sorted(FORMATS))


def _table_candidates(names: set[str]) -> set[str]:
    found: set[str] = set()
    if "input" in names and "actual_output" in names:
        found.add(galtea.FORMAT_NAME)
    if "input" in names and "output" in names and names & {"session_id", "timestamp"}:
        found.add(openlayer.FORMAT_NAME)
    return found


def _is_message(value: Any) -> bool:
    return (
        isinstance(value, dict)
        and "role" in value
        and ("content" in value or "tool_calls" in value)
    )


def _json_candidates(value: Any, *, in_json_list: bool) -> set[str]:
    if isinstance(value, list):
        return {openai_chat.FORMAT_NAME} if value and _is_message(value[0]) else set()
    if not isinstance(value, dict):
        return set()
    keys = set(value)
    found: set[str] = set()
    if "transcript" in keys:
        found.add(NATIVE)
    if "test_cases" in keys:
        found.add(deepeval.FORMAT_NAME)
    if "turns" in keys:
        turns = value["turns"]
        shaped = isinstance(turns, list) and bool(turns) and isinstance(turns[0], dict)
        if "chatbot_role" in keys or (shaped and {"role", "content"} <= set(turns[0])):
            found.add(deepeval.FORMAT_NAME)
    if "messages" in keys:
        found.add(openai_chat.FORMAT_NAME)
    if in_json_list and _is_message(value) and "messages" not in keys:
        found.add(openai_chat.FORMAT_NAME)
    return found | _table_candidates(keys)


def _choose(found: set[str], *, source: str, line: int | None, seen: list[str]) -> str:
    if len(found) == 1:
        return next(iter(found))
    shown = ", ".join(seen[:12]) + (", ..." if len(seen) > 12 else "") if seen else "none"
    names = ", ".join(FORMAT_NAMES)
    if found:
        options = " or ".join(sorted(found))
        raise InputError(
            f"this file could be {options} (it has {shown}); pass --format to choose",
            source=source,
            line=line,
        )
    raise InputError(
        f"cannot tell which format this file is in (it has {shown}); pass --format with one "
        f"of {names}",
        source=source,
        line=line,
    )


def detect_format(path: Path, *, max_record_bytes: int = MAX_RECORD_BYTES) -> str:
    """The format of ``path``: one of ``native``, ``deepeval``, ``openlayer``,
    ``galtea``, ``openai``; ``InputError`` when it is unknown or ambiguous."""
    source = str(path)
    suffix = path.suffix.lower()
    if suffix in CSV_SUFFIXES:
        columns = csv_header(path)
        return _choose(
            _table_candidates(set(columns)),
            source=source,
            line=None,
            seen=[f"columns {', '.join(c for c in columns if c)}"] if columns else [],
        )
    if suffix not in JSON_SUFFIXES:
        raise InputError(
            "cannot tell which format this file is in from its name (expected .json, .jsonl, "
            f".ndjson or .csv); pass --format with one of {', '.join(FORMAT_NAMES)}",
            source=source,
        )
    records = iter_json_records(path, max_record_bytes=max_record_bytes)
    try:
        line, prefix, value = next(records)
    finally:
        if isinstance(records, Generator):
            records.close()
    if isinstance(value, dict):
        seen = [f"keys {', '.join(sorted(value))}"] if value else ["an empty object"]
    elif isinstance(value, list):
        seen = ["a list"]
    else:
        seen = ["a JSON value that is not an object"]
    found = _json_candidates(value, in_json_list=prefix is not None)
    if not found and _looks_native(value):
        # A broken native case: the native reader names the missing or wrong field.
        return NATIVE
    return _choose(found, source=source, line=line, seen=seen)


_NATIVE_KEYS = frozenset({"case_id", "contract", "transcript"})


def _looks_native(value: Any) -> bool:
    """A record with one of the native case's own keys, or not a record at all."""
    if isinstance(value, dict):
        return bool(_NATIVE_KEYS & set(value)) or not value
    return not isinstance(value, list)


def read_cases(
    path: Path, options: ImportOptions | None = None, *, progress: ProgressCallback | None = None
) -> Iterator[CaseRecord]:
    """Validated cases of one file in the format ``options.format`` (detected when it is
    ``None``), read with ``options``.

    A reader option the format does not take is an ``InputError`` naming it. Detection
    errors and bad options (an unknown format or option, a malformed contract or tool
    map) are raised by this call; errors in the file's content while iterating.
    """
    options = options or ImportOptions()
    name = options.format or detect_format(path, max_record_bytes=options.max_record_bytes)
    return _format(name).read(path, options, progress=progress)


def open_cases(
    path: Path, options: ImportOptions | None = None, *, progress: ProgressCallback | None = None
) -> tuple[str, Iterator[CaseRecord]]:
    """The format of one file of an import, and its cases (as :func:`read_cases` reads
    them), with one difference: a native file takes no reader option and ignores those
    given, which are meant for the other tools' files of the same import (a directory
    may hold both)."""
    options = options or ImportOptions()
    name = options.format or detect_format(path, max_record_bytes=options.max_record_bytes)
    if name == NATIVE:
        records = read_case_file(path, max_record_bytes=options.max_record_bytes, progress=progress)
        return name, records
    return name, _format(name).read(path, options, progress=progress)


def _format(name: str) -> CaseFormat:
    spec = FORMATS.get(name)
    if spec is None:
        raise InputError(
            f"unknown format {name!r}; the formats are {', '.join(FORMAT_NAMES)}", field="format"
        )
    return spec
