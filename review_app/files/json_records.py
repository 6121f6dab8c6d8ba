"""Strict JSON and JSONL: RFC 8259 (no NaN, no BOM), at most 1024 levels deep, and no
object with the same key twice (a duplicate would otherwise silently win). JSONL is
split on ``\\n`` only, so U+2028 inside a string is just a character.

A JSON or JSONL file is read record by record (:func:`iter_json_records`): a JSONL file
of any size one line at a time, and a single record larger than ``max_record_bytes``
is refused without being read whole.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, BinaryIO

import orjson

from review_app.errors import InputError
from review_app.files.limits import (
    MAX_JSON_DEPTH,
    MAX_RECORD_BYTES,
    MAX_WHOLE_FILE_BYTES,
    record_size_error,
)
from review_app.files.text import UTF8_BOM, read_whole

_NON_JSON_NUMBERS = (b"NaN", b"Infinity", b"-Infinity")
_ESCAPED_COLON_PREFIX = b"\\u003"  # \u003a or \u003A (and a few harmless others)


def _decode_error(error: orjson.JSONDecodeError, data: bytes | str) -> str:
    message = error.msg
    if "UTF-8" in message and "BOM" not in message:
        return "not valid UTF-8 text"
    if "depth limit" in message:
        return f"JSON nested too deeply (more than {MAX_JSON_DEPTH} levels)"
    if "empty document" in message:
        return "an empty record"
    head = data[error.pos : error.pos + 9]
    if (head.encode() if isinstance(head, str) else head).startswith(_NON_JSON_NUMBERS):
        return f"not valid JSON: NaN and Infinity are not JSON numbers (column {error.colno})"
    return f"not valid JSON ({message}, column {error.colno})"


def parse_json(data: bytes | str, *, source: str, line: int | None = None) -> Any:
    """Strict JSON (RFC 8259: UTF-8, no NaN, no BOM, no duplicate key) or ``InputError``.

    orjson parses; a duplicate key is detected without a second parse in the usual
    case: each key contributes exactly one ``:`` outside strings, so the colons of the
    input equal the colons of the parsed value written back (keys plus colons inside
    strings) unless a key was repeated (a dropped pair) or a string spelled a colon
    as ``\\u003a``. Only then is the text parsed again, slowly, to find and name it.
    """
    try:
        value = orjson.loads(data)
    except orjson.JSONDecodeError as error:
        where = line if line is not None else error.lineno
        raise InputError(_decode_error(error, data), source=source, line=where) from None
    raw = data.encode() if isinstance(data, str) else data
    colons = raw.count(b":")
    if colons and (
        colons != orjson.dumps(value).count(b":")
        or (b"\\" in raw and raw.find(_ESCAPED_COLON_PREFIX) >= 0)
    ):
        duplicate = find_duplicate_key(raw)
        if duplicate is not None:
            raise InputError(
                f"the key {duplicate[1]!r} appears twice in one object",
                source=source,
                line=line,
                field=duplicate[0],
            )
    return value


class _Duplicated(dict[str, Any]):
    duplicate: str


def _pairs(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    result: dict[str, Any] = {}
    for key, value in pairs:
        if key in result:
            marked = _Duplicated(result)
            marked.duplicate = key
            return marked
        result[key] = value
    return result


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def find_duplicate_key(data: bytes | str) -> tuple[str, str] | None:
    """``(field path, key)`` of the first object holding a key twice, or ``None``.

    The slow path (the standard library with ``object_pairs_hook``); the text must
    already be known to be valid JSON (so its nesting is within orjson's limit).
    """
    try:
        value = json.loads(data, object_pairs_hook=_pairs, parse_constant=_reject_constant)
    except (ValueError, RecursionError):
        return None
    stack: list[tuple[str, Any]] = [("", value)]
    while stack:
        path, item = stack.pop()
        if isinstance(item, dict):
            if isinstance(item, _Duplicated):
                return (f"{path}.{item.duplicate}" if path else item.duplicate), item.duplicate
            children = [(f"{path}.{key}" if path else key, child) for key, child in item.items()]
            stack.extend(reversed(children))
        elif isinstance(item, list):
            stack.extend(reversed([(f"{path}[{i}]", child) for i, child in enumerate(item)]))
    return None


def read_json_object(path: Path, *, what: str) -> dict[str, Any]:
    """The JSON object a small file holds (a contract, a tool map), read whole
    (:func:`~review_app.files.text.read_whole`); ``InputError`` names the file, and
    ``what`` the object should have been when it holds something else."""
    source = str(path)
    value = parse_json(read_whole(path), source=source)
    if not isinstance(value, dict):
        raise InputError(f"expected a JSON object ({what})", source=source)
    return value


def join_field(prefix: str | None, field: str) -> str:
    """``prefix.field`` (or ``field`` alone); ``[3]`` + ``turns`` gives ``[3].turns``."""
    if not prefix:
        return field
    if field.startswith("["):
        return f"{prefix}{field}"
    return f"{prefix}.{field}"


JSONL_SUFFIXES = (".jsonl", ".ndjson")
"""File names read as JSONL by :func:`iter_json_records` (any other name: one JSON value)."""
_BOM = "the file starts with a UTF-8 byte-order mark; save it as UTF-8 without BOM"


def _open(path: Path, source: str) -> tuple[BinaryIO, int]:
    """The file open for reading, and its size; ``InputError`` when it cannot be read."""
    try:
        size = path.stat().st_size
        stream = path.open("rb")
    except OSError as error:
        raise InputError(f"cannot be read ({error.strerror})", source=source) from None
    return stream, size


def iter_jsonl_records(
    path: Path,
    *,
    max_record_bytes: int = MAX_RECORD_BYTES,
    progress: Callable[[int], None] | None = None,
) -> Iterator[tuple[int, Any]]:
    """Yield ``(line, value)`` for every record of a JSONL file, whatever its name.

    One JSON value a line, blank lines skipped, read one line at a time: a line
    longer than ``max_record_bytes`` is refused without being read whole.
    """
    source = str(path)
    stream, size = _open(path, source)
    with stream:
        if size == 0:
            raise InputError("the file is empty", source=source)
        line_number = 0
        seen_any = False
        while True:
            raw = stream.readline(max_record_bytes + 1)
            if not raw:
                break
            line_number += 1
            if len(raw) > max_record_bytes and not raw.endswith(b"\n"):
                raise InputError(
                    record_size_error(None, limit=max_record_bytes),
                    source=source,
                    line=line_number,
                )
            if progress is not None:
                progress(len(raw))
            if line_number == 1 and raw.startswith(UTF8_BOM):
                raise InputError(_BOM, source=source, line=1)
            if not raw.strip():
                continue
            seen_any = True
            yield line_number, parse_json(raw.rstrip(b"\r\n"), source=source, line=line_number)
    if not seen_any:
        raise InputError("the file is empty: it holds no records, only blank lines", source=source)


def iter_json_records(
    path: Path,
    *,
    max_record_bytes: int = MAX_RECORD_BYTES,
    progress: Callable[[int], None] | None = None,
) -> Iterator[tuple[int | None, str | None, Any]]:
    """Yield ``(line, path_prefix, value)`` for every record of a JSON or JSONL file.

    A file named ``.jsonl`` or ``.ndjson`` is JSONL (:func:`iter_jsonl_records`) and
    the line is the file line; any other is one JSON value, read whole: one record, or
    a list of them, where the prefix is ``[i]`` and the line is ``None`` (the JSON path
    names the place).
    """
    source = str(path)
    if path.suffix.lower() in JSONL_SUFFIXES:
        for line, value in iter_jsonl_records(
            path, max_record_bytes=max_record_bytes, progress=progress
        ):
            yield line, None, value
        return
    stream, size = _open(path, source)
    with stream:
        if size == 0:
            raise InputError("the file is empty", source=source)
        if size > MAX_WHOLE_FILE_BYTES:
            raise InputError(
                f"a JSON file over {MAX_WHOLE_FILE_BYTES} bytes must be JSONL "
                "(one case per line) so it can be streamed",
                source=source,
            )
        data = stream.read()
    if progress is not None:
        progress(len(data))
    if data.startswith(UTF8_BOM):
        raise InputError(_BOM, source=source, line=1)
    value = parse_json(data, source=source)
    # One record is at most max_record_bytes, in a .json file as in a JSONL line: the
    # file's size bounds every item; only a larger file has its items measured.
    if isinstance(value, list):
        if not value:
            raise InputError("the file holds an empty list", source=source)
        for position, item in enumerate(value):
            if size > max_record_bytes:
                item_size = len(orjson.dumps(item))
                if item_size > max_record_bytes:
                    raise InputError(
                        record_size_error(item_size, limit=max_record_bytes),
                        source=source,
                        field=f"[{position}]",
                    )
            yield None, f"[{position}]", item
    else:
        if size > max_record_bytes:
            raise InputError(
                record_size_error(size, limit=max_record_bytes),
                source=source,
                line=1,
            )
        yield None, None, value
