"""What the format readers share: table rows from CSV or JSON files, case ids,
contracts given as options or embedded in records, tool-to-action mapping, and the
final validation of a converted case.

Line numbers always refer to the file as the user has it: the line where a CSV row
starts (a quoted cell may span lines), the line of a JSONL record. In a ``.json``
file holding a list the JSON path (``[3].timestamp``) names the place instead.
"""

from __future__ import annotations

import csv
import hashlib
import io
import re
import unicodedata
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from review_app import input_policy
from review_app.cases import (
    CASE_ID_PATTERN,
    DEFAULT_MAX_RECORD_BYTES,
    CaseRecord,
    iter_json_records,
    validate_case,
)
from review_app.errors import InputError
from review_app.evaluator import evaluate_case, type_name
from review_app.formats.csv_safety import restore_cell

ProgressCallback = Callable[[int], None]

CONTRACT_OPTION_SOURCE = "the contract option"
CSV_SUFFIXES = (".csv",)
JSON_SUFFIXES = (".json", ".jsonl", ".ndjson")
_CSV_FIELD_LIMIT = DEFAULT_MAX_RECORD_BYTES  # one cell: the input policy's record limit
_SAFE_ID = re.compile(r"[\w.\-]{1,200}")
_UNSAFE_RUN = re.compile(r"[^\w.]+")


def join_field(prefix: str | None, field: str) -> str:
    """``prefix.field`` (or ``field`` alone); ``[3]`` + ``turns`` gives ``[3].turns``."""
    if not prefix:
        return field
    if field.startswith("["):
        return f"{prefix}{field}"
    return f"{prefix}.{field}"


def sha256_hex(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


# --- case ids -----------------------------------------------------------------------


def slugify(text: str) -> str:
    """A case id made from a name: letters, digits, ``_``, ``.`` and ``-`` only.

    A name already made of those characters is kept exactly (so ids survive a round
    trip through another tool). Otherwise it is NFKC-normalised, every run of other
    characters becomes one ``-``, leading and trailing ``-``/``.`` are dropped, and
    the result is cut to 200 characters. Letters keep their case; non-Latin letters
    and digits are kept. The result may be empty (a name of punctuation only).
    """
    if _SAFE_ID.fullmatch(text):
        return text
    slug = _UNSAFE_RUN.sub("-", unicodedata.normalize("NFKC", text)).strip("-.")
    return slug[:200].rstrip("-.")


def validate_prefix(prefix: str | None) -> str | None:
    if prefix is not None and prefix and not CASE_ID_PATTERN.fullmatch(prefix):
        raise InputError(
            "a case id prefix is at most 200 characters without spaces or control characters",
            field="case_id_prefix",
        )
    return prefix


def case_id_from(
    raw: str, *, prefix: str | None, source: str, line: int | None, field: str
) -> str | None:
    """The case id for a record named ``raw``; ``None`` when the name gives no id."""
    slug = slugify(raw)
    if not slug:
        return None
    case_id = (prefix or "") + slug
    if len(case_id) > 200:
        raise InputError(
            f"the case id made from this value and the prefix is {len(case_id)} characters "
            "long; case ids have at most 200",
            source=source,
            line=line,
            field=field,
        )
    return case_id


def fallback_case_id(path: Path, index: int, *, prefix: str | None) -> str:
    """``<prefix><index>`` for an unnamed record; the prefix defaults to ``<file stem>-``."""
    if prefix is None:
        stem = slugify(path.stem) or "case"
        prefix = f"{stem[:180]}-"
    return f"{prefix}{index}"


class CaseIds:
    """Refuses a case id made twice from one file (two names can slugify alike)."""

    def __init__(self, source: str) -> None:
        self.source = source
        self._first: dict[str, str] = {}

    def claim(self, case_id: str, *, line: int | None, field: str | None) -> None:
        where = f"line {line}" if line is not None else (field or "an earlier record")
        first = self._first.get(case_id)
        if first is not None:
            raise InputError(
                f"case id {case_id} is made twice from this file (first at {first}); "
                "rename one of the records",
                source=self.source,
                line=line,
                field=field,
            )
        self._first[case_id] = where


# --- contracts and tools --------------------------------------------------------------


def validate_contract(
    contract: Any,
    *,
    source: str | None = CONTRACT_OPTION_SOURCE,
    line: int | None = None,
    field: str = "contract",
) -> dict[str, Any] | None:
    """``contract`` if usable (docs/reference.md, "Cases"), else ``InputError`` naming the field.

    ``None`` passes (no contract). A contract that is well formed but inconsistent
    (an initial role it does not define, an allowed action missing from the
    vocabulary) passes too: the evaluator reports that as a fixture error and the
    case lands in the ``invalid`` lane.
    """
    if contract is None:
        return None
    if not isinstance(contract, dict):
        raise InputError(
            f"expected a contract object, got {type_name(contract)}",
            source=source,
            line=line,
            field=field,
        )
    result = evaluate_case({"case_id": "contract-check", "contract": contract, "transcript": []})
    for error in result["fixture_errors"]:
        if error["code"] == "malformed_case":
            rest = str(error["field"]).removeprefix("contract")
            raise InputError(error["message"], source=source, line=line, field=field + rest)
    return contract


def choose_contract(
    given: dict[str, Any] | None,
    embedded: dict[str, Any] | None,
    *,
    source: str,
    line: int | None,
    field: str,
) -> dict[str, Any] | None:
    """The contract of one record: its own, else the one given as an option.

    A record carrying a contract that differs from the option is refused rather than
    silently overridden in either direction.
    """
    if embedded is None:
        return given
    if given is not None and given != embedded:
        raise InputError(
            f"this record carries its own contract (version {embedded.get('version')}), "
            f"which differs from the contract given as an option (version "
            f"{given.get('version')}); drop one of them",
            source=source,
            line=line,
            field=field,
        )
    return embedded


def validate_tool_action_map(
    tool_action_map: Mapping[str, str | None] | None,
) -> Mapping[str, str | None]:
    if tool_action_map is None:
        return {}
    if not isinstance(tool_action_map, Mapping):
        raise InputError(
            "expected a mapping of tool name to contract action", field="tool_action_map"
        )
    for tool, action in tool_action_map.items():
        if type(tool) is not str or not (action is None or type(action) is str):
            raise InputError(
                f"entry {tool!r}: expected a tool name mapped to an action name (or to null "
                "to ignore that tool)",
                field="tool_action_map",
            )
    return tool_action_map


def map_tools(names: list[str], tool_action_map: Mapping[str, str | None]) -> list[str]:
    """Contract actions for tool calls, in call order.

    A mapped tool gives its action; a tool mapped to ``None`` is not an action and is
    left out; an unmapped tool keeps its own name, so a contract's vocabulary check
    reports it (``unknown_action``) instead of the evidence quietly disappearing.
    """
    actions: list[str] = []
    for name in names:
        if name in tool_action_map:
            action = tool_action_map[name]
            if action is not None:
                actions.append(action)
        else:
            actions.append(name)
    return actions


def finish_case(
    case: dict[str, Any], *, source: str, line: int | None, prefix: str | None = None
) -> CaseRecord:
    """Validate a converted case (findings and content hash come along)."""
    return validate_case(case, source=source, line=line, prefix=prefix)


# --- tables: CSV or JSON rows -----------------------------------------------------------


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


def _decode_csv(data: bytes, source: str) -> str:
    return input_policy.decode_utf8(data, source=source)


def _csv_rows(text: str, source: str) -> Iterator[tuple[int, list[str]]]:
    """``(first line, cells)`` of every non-blank CSV row, strictly parsed."""
    if csv.field_size_limit() < _CSV_FIELD_LIMIT:
        csv.field_size_limit(_CSV_FIELD_LIMIT)
    reader = csv.reader(io.StringIO(text, newline=""), strict=True)
    previous_end = 0
    while True:
        try:
            cells = next(reader)
        except StopIteration:
            return
        except csv.Error as error:
            # The failing row starts after the last good one: an unclosed quote is
            # only noticed at the end of the file (see input_policy.csv_dict_rows).
            raise InputError(
                f"not valid CSV ({error})", source=source, line=previous_end + 1
            ) from None
        start = previous_end + 1
        previous_end = reader.line_num
        if not any(cells):
            continue
        yield start, cells


def _csv_table(path: Path, source: str, progress: ProgressCallback | None) -> Table:
    try:
        data = path.read_bytes()
    except OSError as error:
        raise InputError(f"cannot be read ({error.strerror})", source=source) from None
    if progress is not None:
        progress(len(data))
    rows = _csv_rows(_decode_csv(data, source), source)
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
    max_record_bytes: int = DEFAULT_MAX_RECORD_BYTES,
    progress: ProgressCallback | None = None,
) -> Table:
    """The rows of ``path``: CSV by the ``.csv`` suffix, else JSON/JSONL rows.

    CSV is read as UTF-8, with or without a byte-order mark (spreadsheets write
    one); cells are unquoted by the standard ``csv`` module in strict mode, and
    cells neutralised against formula injection are restored
    (:func:`~review_app.formats.csv_safety.restore_cell`). Blank rows are skipped.
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
    first = next(_csv_rows(input_policy.decode_utf8(head, source=source), source), None)
    if first is None:
        raise InputError("the file is empty (no header row)", source=source)
    return [restore_cell(name).strip() for name in first[1]]


def require_text(row: Row, column: str, *, source: str, allow_empty: bool = True) -> str | None:
    """A text cell: ``None`` when empty or absent (empty string counts as empty)."""
    value = row.cells.get(column)
    if value is None or value == "":
        if allow_empty:
            return None
        raise row.error("this cell is empty", column, source=source)
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


def exchange_events(
    row: Row,
    *,
    first_turn: int,
    user_text: str | None,
    assistant_text: str | None,
    metadata: dict[str, Any],
    input_column: str,
    source: str,
) -> list[dict[str, Any]]:
    """A row's user event (its input) then assistant event (its output).

    An empty input (a conversation the assistant opens) or an empty output (a
    message left unanswered) gives just the other event. The row's metadata goes
    with its last event, so it is stored once.
    """
    if user_text is None and assistant_text is None:
        raise row.error("the row has neither an input nor an output", input_column, source=source)
    events: list[dict[str, Any]] = []
    turn = first_turn
    if user_text is not None:
        events.append({"turn": turn, "actor": "user", "text": user_text})
        turn += 1
    if assistant_text is not None:
        events.append({"turn": turn, "actor": "assistant", "text": assistant_text})
    if metadata:
        events[-1]["source_metadata"] = metadata
    return events


class SessionExchange(Protocol):
    """One row of a session-rows table (Galtea, Openlayer): an input and its output."""

    @property
    def row(self) -> Row: ...
    @property
    def user_text(self) -> str | None: ...
    @property
    def assistant_text(self) -> str | None: ...
    @property
    def metadata(self) -> dict[str, Any]: ...


def case_from_session(
    exchanges: Iterable[SessionExchange],
    *,
    case_id: str,
    chatbot_role: str | None,
    contract: Any,
    session: str | None,
    input_column: str,
    source: str,
    line: int | None,
) -> CaseRecord:
    """A case from one session's rows, in turn order: each row's input then its output."""
    transcript: list[dict[str, Any]] = []
    for exchange in exchanges:
        transcript.extend(
            exchange_events(
                exchange.row,
                first_turn=len(transcript) + 1,
                user_text=exchange.user_text,
                assistant_text=exchange.assistant_text,
                metadata=exchange.metadata,
                input_column=input_column,
                source=source,
            )
        )
    case: dict[str, Any] = {"case_id": case_id}
    if chatbot_role is not None:
        case["chatbot_role"] = chatbot_role
    case["contract"] = contract
    case["transcript"] = transcript
    if session is not None:
        case["source_metadata"] = {"session_id": session}
    return finish_case(case, source=source, line=line)


def same_text_in_group(
    rows: list[tuple[Row, str | None]], *, column: str, what: str, source: str
) -> str | None:
    """The one non-empty value a group of rows gives for ``column``, else ``InputError``."""
    chosen: tuple[Row, str] | None = None
    for row, value in rows:
        if value is None:
            continue
        if chosen is None:
            chosen = (row, value)
        elif value != chosen[1]:
            raise row.error(
                f"this {what} differs from the one at {chosen[0].place}; one conversation "
                f"has one {what}",
                column,
                source=source,
            )
    return chosen[1] if chosen else None


# --- writing ----------------------------------------------------------------------------


def exchanges(transcript: list[Mapping[str, Any]]) -> list[tuple[str | None, str | None]]:
    """User/assistant texts of a transcript paired as (input, output) rows.

    A user text opens a row; an assistant text completes it. Two user texts in a
    row give a row without output; an assistant text with no user text before it
    gives a row without input. Events of other actors, and events without text, are
    left out (table formats have no place for them).
    """
    pairs: list[tuple[str | None, str | None]] = []
    user: str | None = None
    for event in transcript:
        text = event.get("text")
        if text is None or text == "":
            continue
        actor = event.get("actor")
        if actor == "user":
            if user is not None:
                pairs.append((user, None))
            user = text
        elif actor == "assistant":
            pairs.append((user, text))
            user = None
    if user is not None:
        pairs.append((user, None))
    return pairs


def check_unique_case_ids(cases: list[Mapping[str, Any]]) -> None:
    seen: set[str] = set()
    for case in cases:
        case_id = case["case_id"]
        if case_id in seen:
            raise ValueError(f"case id {case_id} appears twice among the cases to write")
        seen.add(case_id)
