"""Reading and validating case files (docs/reference.md, "Cases").

A case file is JSON (one case object, or a list of them) or JSONL (one case per
line; blank lines are skipped), read record by record
(:func:`review_app.files.json_records.iter_json_records`).

Two levels of trouble:

* the input cannot be stored (not JSON, not UTF-8, a field of the wrong type, a
  turn missing or repeated, a value no database column can hold, ...):
  :class:`~review_app.errors.InputError` naming the file, the line and the field;
  the caller stores nothing from that file;
* the input is a well-formed record of a broken fixture (an unknown action, an
  untrusted role change, turns out of order, ...): it is stored and shown in the
  ``invalid`` lane with the evaluator's fixture errors.

Turns must be unique within a case even then, because labels address an event by
its ``(case_id, turn)``.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

from review_app import input_policy
from review_app.errors import InputError
from review_app.evaluator import evaluate_case
from review_app.files.json_records import iter_json_records
from review_app.files.limits import MAX_RECORD_BYTES

EXPECTED_BLOCK = "expected"
"""The top-level key an exported fixture adds to its case: what the export found,
not what the conversation holds, so the content hash leaves it out (a fixture
imported where its case is stored is the same case)."""
CASE_ID_PATTERN = re.compile(r"[^\s\x00-\x1f\x7f]{1,200}")
# Turns are stored in 32-bit integer columns (PostgreSQL ``integer``).
TURN_MIN, TURN_MAX = input_policy.TURN_MIN, input_policy.TURN_MAX


@dataclass(frozen=True, slots=True)
class CaseRecord:
    """One validated case, where it came from, its findings and its content hash."""

    case: dict[str, Any]
    source: str
    line: int | None
    result: dict[str, Any]
    sha256: str


def canonical_json(value: Any) -> bytes:
    """Compact JSON with sorted keys: the same content always gives the same bytes."""
    return orjson.dumps(value, option=orjson.OPT_SORT_KEYS)


def content_sha256(value: Any) -> str:
    return _sha256_hex(canonical_json(value))


def _join(prefix: str | None, field: str) -> str:
    if not prefix:
        return field
    return prefix if field == "(case)" else f"{prefix}.{field}"


def validate_case(
    case: Any, *, source: str, line: int | None = None, prefix: str | None = None
) -> CaseRecord:
    """Check one parsed record can be stored; its findings and hash come along.

    Raises ``InputError`` (file, line, field) when it cannot be stored. A record
    that is a well-formed but broken fixture passes: its fixture errors are in
    ``record.result``.
    """
    if not isinstance(case, dict):
        raise InputError(
            "expected a JSON object (one case)", source=source, line=line, field=prefix
        )
    result = evaluate_case(case)
    for error in result["fixture_errors"]:
        code = error["code"]
        if code == "malformed_case" or (code == "invalid_event_order" and error["turn"] is None):
            raise InputError(
                error["message"], source=source, line=line, field=_join(prefix, error["field"])
            )
    result = _check_by_policy(case, result, source=source, line=line, prefix=prefix)
    content = (
        case
        if EXPECTED_BLOCK not in case
        else {key: value for key, value in case.items() if key != EXPECTED_BLOCK}
    )
    try:
        canonical: bytes | None = canonical_json(content)
    except orjson.JSONEncodeError:
        canonical = None  # the checks below name the field, or the error comes again
    transcript = case["transcript"]
    if (
        canonical is None
        or result["fixture_errors"]
        or _ESCAPED_NUL in canonical
        or not _plain_events(transcript)
    ):
        _check_events(transcript, source=source, line=line, prefix=prefix)
    if canonical is None:
        canonical = canonical_json(content)
    return CaseRecord(case, source, line, result, _sha256_hex(canonical))


_ESCAPED_NUL = b"\\u0000"
"""How a NUL in a string looks in :func:`canonical_json`'s output (orjson escapes it)."""
_TEXT_TYPES = frozenset({str, type(None)})


def _plain_events(transcript: list[dict[str, Any]]) -> bool:
    """Whether :func:`_check_events` would find nothing, for a case without fixture
    errors (its turns are integers in increasing order, so unique) whose canonical
    JSON holds no NUL: its first and last turns are in range and every text is text."""
    if not transcript:
        return True
    if not (transcript[0]["turn"] >= TURN_MIN and transcript[-1]["turn"] <= TURN_MAX):
        return False
    return set(map(type, [event.get("text") for event in transcript])) <= _TEXT_TYPES


def _check_events(
    transcript: list[dict[str, Any]], *, source: str, line: int | None, prefix: str | None
) -> None:
    """Refuse the first event that cannot be stored: a turn out of range or used twice,
    a text that is not text, a NUL in a text, a set_role the input policy refuses."""
    seen: dict[int, int] = {}
    for index, event in enumerate(transcript):
        turn = event["turn"]
        if not TURN_MIN <= turn <= TURN_MAX:
            raise InputError(
                f"turn {turn} is outside the storable range {TURN_MIN} to {TURN_MAX}",
                source=source,
                line=line,
                field=_join(prefix, f"transcript[{index}].turn"),
            )
        if turn in seen:
            raise InputError(
                f"turn {turn} is used twice (also by transcript[{seen[turn]}]); labels "
                "address events by turn, so turns must be unique within a case",
                source=source,
                line=line,
                field=_join(prefix, f"transcript[{index}].turn"),
            )
        seen[turn] = index
        text = event.get("text")
        if text is not None and type(text) is not str:
            raise InputError(
                "expected a string",
                source=source,
                line=line,
                field=_join(prefix, f"transcript[{index}].text"),
            )
        # Parsed JSON and strictly decoded CSV hold no lone surrogate, so NUL is the one
        # character of recorded text the policy refuses that can get here.
        if text is not None and "\x00" in text:
            _refuse_text(
                text, source=source, line=line, field=_join(prefix, f"transcript[{index}].text")
            )
        set_role = event.get("set_role")
        if set_role is not None:
            _refuse_text(
                set_role,
                source=source,
                line=line,
                field=_join(prefix, f"transcript[{index}].set_role"),
            )


def _sha256_hex(data: bytes) -> str:
    import hashlib  # here, not at the top: `inspect` never hashes, and _hashlib loads slowly

    return hashlib.sha256(data).hexdigest()


def _refuse_text(value: Any, *, source: str, line: int | None, field: str) -> None:
    """Recorded text the input policy refuses (a NUL, a lone surrogate)."""
    if type(value) is str:
        input_policy.check_text(
            value, field=field, max_chars=None, source=source, line=line, recorded=True
        )


def _check_by_policy(
    case: dict[str, Any],
    result: dict[str, Any],
    *,
    source: str,
    line: int | None,
    prefix: str | None,
) -> dict[str, Any]:
    """The input policy's rules for a well-formed case: ids, event count, free text.

    A case id or contract version that is not in NFC is stored in NFC (the findings
    are then computed again, for the id they carry).
    """
    case_id = case["case_id"]
    checked = input_policy.check_case_id(
        case_id, source=source, line=line, field=_join(prefix, "case_id")
    )
    contract = case.get("contract")
    version = contract["version"] if contract is not None else None
    checked_version = (
        input_policy.check_name(
            version,
            field=_join(prefix, "contract.version"),
            spaces=False,
            source=source,
            line=line,
            what="a contract version",
        )
        if version is not None and not input_policy.is_plain_id(version)
        else version
    )
    transcript = case["transcript"]
    if len(transcript) > input_policy.MAX_EVENTS_PER_CASE:
        raise InputError(
            f"a case has at most {input_policy.MAX_EVENTS_PER_CASE} events "
            f"(this one: {len(transcript)})",
            source=source,
            line=line,
            field=_join(prefix, "transcript"),
        )
    _refuse_text(
        case.get("chatbot_role"), source=source, line=line, field=_join(prefix, "chatbot_role")
    )
    if checked != case_id or checked_version != version:
        case["case_id"] = checked
        if contract is not None:
            contract["version"] = checked_version
        result = evaluate_case(case)
    return result


def read_case_file(
    path: Path,
    *,
    max_record_bytes: int = MAX_RECORD_BYTES,
    progress: Callable[[int], None] | None = None,
) -> Iterator[CaseRecord]:
    """Validated cases of one file, streamed; a case id used twice in it is an error."""
    source = str(path)
    lines_by_case: dict[str, int | str | None] = {}
    for line, prefix, value in iter_json_records(
        path, max_record_bytes=max_record_bytes, progress=progress
    ):
        record = validate_case(value, source=source, line=line, prefix=prefix)
        case_id = record.case["case_id"]
        if case_id in lines_by_case:
            earlier = lines_by_case[case_id]
            where = f"line {earlier}" if isinstance(earlier, int) else f"record {earlier}"
            raise InputError(
                f"case id {case_id} appears twice in this file (first at {where})",
                source=source,
                line=line,
                field=_join(prefix, "case_id"),
            )
        lines_by_case[case_id] = line if line is not None else prefix
        yield record
