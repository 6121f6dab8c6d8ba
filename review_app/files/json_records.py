"""Strict JSON and JSONL: RFC 8259 (no NaN, no BOM), at most 1024 levels deep, and no
object with the same key twice (a duplicate would otherwise silently win). JSONL is
split on ``\\n`` only, so U+2028 inside a string is just a character."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import orjson

from review_app.errors import InputError
from review_app.files.limits import MAX_JSON_DEPTH

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


def jsonl_lines(data: bytes) -> Iterator[tuple[int, bytes]]:
    """``(line number, line)`` of JSONL bytes, split on ``\\n`` only.

    ``str.splitlines`` would also split on U+2028, U+2029, U+0085, U+001C-U+001E,
    all legal inside a JSON string; ``\\r`` before ``\\n`` is dropped.
    """
    for number, raw in enumerate(data.split(b"\n"), start=1):
        yield number, raw[:-1] if raw.endswith(b"\r") else raw
