"""One policy for untrusted input, whatever the format, the path or the database.

Every reader (native cases, the format readers, label CSV, judge verdicts) and every
service taking typed text (rationales, gold notes, names) checks input here before
the database sees it, so SQLite and PostgreSQL accept and refuse the same things and
each refusal is an :class:`~review_app.errors.InputError` naming the place.

* **Text**: what people write here (rationales, gold and ambiguity notes, judge
  reasons) may hold tab, line feed and carriage return but no other C0 control
  character (U+0000 to U+001F) and no lone surrogate. Recorded conversations are
  evidence and keep their control characters, except U+0000 (PostgreSQL cannot store
  it) and lone surrogates (not text): ``recorded=True``.
* **Names and ids** (case ids, contract versions, reviewer names, judge names,
  models, prompt versions): NFC-normalised, surrounding space stripped, no control
  character (C0, DEL, C1), no bidirectional control (U+202A-U+202E, U+2066-U+2069,
  U+200E, U+200F, U+061C) and no zero-width character (U+200B-U+200D, U+2060,
  U+FEFF), which would let two different names display alike. A reviewer's
  identity is the case-folded name (:func:`identity_key`): ``Ana`` and ``ana`` are
  one person.

How large a file or a record may be, and what JSON and CSV are accepted, is the part
of the policy that reads files: :mod:`review_app.files`.

The module is pure (no storage, no Streamlit).
"""

from __future__ import annotations

import re
import unicodedata
from typing import Any

from review_app.errors import InputError

MAX_EVENTS_PER_CASE = 100_000
MAX_NOTE_CHARS = 4000
"""Rationale, gold note, rubric ambiguity note, judge reason."""
MAX_NAME_CHARS = 200
"""Case id, contract version, reviewer name, judge name, model."""
MAX_SHORT_NAME_CHARS = 100
"""Judge prompt version, label code, rubric id (database key columns of 100)."""
TURN_MIN, TURN_MAX = -(2**31), 2**31 - 1
"""Turns (and rubric versions) are 32-bit integer columns."""
MAX_RUBRIC_VERSION = 2**31 - 1


# --- text ---------------------------------------------------------------------------------

_BAD_IN_TEXT = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\ud800-\udfff]")
_BAD_IN_RECORDED = re.compile(r"[\x00\ud800-\udfff]")
_BIDI = "\u061c\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069"
_ZERO_WIDTH = "\u200b\u200c\u200d\u2060\ufeff"
_BAD_IN_NAME = re.compile(f"[\\x00-\\x1f\\x7f-\\x9f\\ud800-\\udfff{_BIDI}{_ZERO_WIDTH}]")
_SPACE = re.compile(r"\s")


def describe_character(ch: str) -> str:
    """``U+202E (RIGHT-TO-LEFT OVERRIDE)``: a character named so a reader can find it."""
    name = unicodedata.name(ch, "")
    if not name:
        name = {"\x00": "NUL"}.get(ch, "a control character" if ord(ch) < 0xA0 else "")
    return f"U+{ord(ch):04X}" + (f" ({name})" if name else "")


def text_problem(value: str, *, recorded: bool = False) -> str | None:
    """Why ``value`` cannot be stored as free text, or ``None`` when it can.

    ``recorded``: transcript text, where only U+0000 and lone surrogates are refused.
    """
    found = (_BAD_IN_RECORDED if recorded else _BAD_IN_TEXT).search(value)
    if found is None:
        return None
    ch = found.group()
    if 0xD800 <= ord(ch) <= 0xDFFF:
        return f"contains a lone surrogate {describe_character(ch)}, which is not text"
    return (
        f"contains the control character {describe_character(ch)} at position {found.start()}; "
        "only tab, line feed and carriage return are allowed in text"
    )


def check_text(
    value: str | None,
    *,
    field: str,
    max_chars: int | None = MAX_NOTE_CHARS,
    source: str | None = None,
    line: int | None = None,
    recorded: bool = False,
) -> str | None:
    """Free text as given (``None`` stays ``None``), or ``InputError`` naming the field."""
    if value is None:
        return None
    if type(value) is not str:
        raise InputError("expected text", source=source, line=line, field=field)
    problem = text_problem(value, recorded=recorded)
    if problem is not None:
        raise InputError(problem, source=source, line=line, field=field)
    if max_chars is not None and len(value) > max_chars:
        raise InputError(
            f"at most {max_chars} characters (this has {len(value)})",
            source=source,
            line=line,
            field=field,
        )
    return value


def name_problem(value: str, *, max_chars: int = MAX_NAME_CHARS, spaces: bool = True) -> str | None:
    """Why ``value`` (already NFC and stripped) is not a usable name, or ``None``."""
    if not value:
        return "empty"
    if len(value) > max_chars:
        return f"at most {max_chars} characters (this has {len(value)})"
    found = _BAD_IN_NAME.search(value)
    if found is not None:
        ch = found.group()
        kind = (
            "bidirectional control"
            if ch in _BIDI
            else "zero-width character"
            if ch in _ZERO_WIDTH
            else "lone surrogate"
            if 0xD800 <= ord(ch) <= 0xDFFF
            else "control character"
        )
        return f"contains the {kind} {describe_character(ch)}, which names may not hold"
    if not spaces and _SPACE.search(value):
        return "contains a space; this name may not"
    return None


def check_name(
    value: Any,
    *,
    field: str,
    max_chars: int = MAX_NAME_CHARS,
    spaces: bool = True,
    source: str | None = None,
    line: int | None = None,
    what: str = "a name",
) -> str:
    """A name or id in NFC with surrounding space stripped, or ``InputError``."""
    if type(value) is not str:
        raise InputError(f"{what} must be text", source=source, line=line, field=field)
    cleaned = normalise(value).strip()
    problem = name_problem(cleaned, max_chars=max_chars, spaces=spaces)
    if problem is not None:
        raise InputError(f"{what}: {problem}", source=source, line=line, field=field)
    return cleaned


def normalise(value: str) -> str:
    """NFC (cheap when already NFC, the usual case)."""
    if value.isascii() or unicodedata.is_normalized("NFC", value):
        return value
    return unicodedata.normalize("NFC", value)


def clean_display_name(value: str | None) -> str | None:
    """A display name from an identity provider, with the characters names may not
    hold removed (not refused: the person did not type it) and cut to 200 characters."""
    if value is None:
        return None
    cleaned = _BAD_IN_NAME.sub("", normalise(value)).strip()[:MAX_NAME_CHARS]
    return cleaned or None


def identity_key(name: str) -> str:
    """A person's identity: the NFC, case-folded name (``Ana`` and ``ana`` are one)."""
    folded = normalise(name).strip().casefold()
    return normalise(folded)


RESERVED_IDENTITIES = ("operator",)
"""Names no person may have: the command line's actor is recorded as ``operator``."""

# Letters of other scripts (Cyrillic, Greek) and digits drawn like Latin letters: a
# name spelled with them looks like the reserved one on a page and in the audit log.
_LOOK_ALIKE = str.maketrans(
    {
        "а": "a", "е": "e", "о": "o", "р": "p", "с": "c", "у": "y", "х": "x",
        "і": "i", "ј": "j", "ѕ": "s", "ԁ": "d", "ԛ": "q", "ԝ": "w", "һ": "h", "к": "k",
        "м": "m", "т": "t", "в": "b", "н": "h", "г": "r",
        "α": "a", "ο": "o", "ρ": "p", "τ": "t", "ι": "i", "κ": "k", "ν": "v", "υ": "u",
        "ε": "e", "χ": "x", "ϲ": "c", "ɑ": "a", "ɡ": "g", "ı": "i",
        "0": "o", "1": "l", "3": "e", "4": "a", "5": "s", "7": "t", "8": "b",
    }
)  # fmt: skip


def identity_skeleton(name: str) -> str:
    """What a name looks like, for telling look-alikes apart: compatibility forms folded
    (NFKC), accents dropped, case folded, letters drawn alike mapped to Latin ones,
    separators (spaces, ``.``, ``-``, ``_``) left out."""
    decomposed = unicodedata.normalize("NFKD", unicodedata.normalize("NFKC", name))
    bare = "".join(ch for ch in decomposed if not unicodedata.combining(ch)).casefold()
    return "".join(ch for ch in bare.translate(_LOOK_ALIKE) if ch.isalnum())


def reserved_identity(name: str) -> str | None:
    """The reserved name ``name`` is or looks like (``Operator``, ``0perator``,
    ``оperator`` with a Cyrillic о), or ``None``."""
    skeleton = identity_skeleton(name)
    return next((r for r in RESERVED_IDENTITIES if identity_skeleton(r) == skeleton), None)


def check_identity(
    value: Any, *, field: str = "reviewer", source: str | None = None, line: int | None = None
) -> str:
    """A reviewer name checked (:func:`check_name`) and reduced to its identity key."""
    return identity_key(
        check_name(value, field=field, source=source, line=line, what="a reviewer name")
    )


def check_case_id(
    value: Any, *, field: str = "case_id", source: str | None = None, line: int | None = None
) -> str:
    """A case id: 1 to 200 characters, NFC, no space, control, bidi or zero-width."""
    if is_plain_id(value):
        return str(value)  # the usual case, without the Unicode work
    return check_name(value, field=field, spaces=False, source=source, line=line, what="a case id")


_SAFE_ASCII_ID = re.compile(r"[\x21-\x7e]{1,200}")


def is_plain_id(value: Any) -> bool:
    """Printable ASCII without space, 1 to 200 characters: an id needing no other check."""
    return type(value) is str and _SAFE_ASCII_ID.fullmatch(value) is not None


# --- numbers ------------------------------------------------------------------------------

_VERSION_TEXT = re.compile(r"[1-9][0-9]{0,9}")


def parse_rubric_version(text: str) -> int:
    """A rubric version ``1`` .. 2**31-1 from its digits; ``InputError`` otherwise."""
    if _VERSION_TEXT.fullmatch(text) is None or int(text) > MAX_RUBRIC_VERSION:
        shown = text if len(text) <= 20 else f"{text[:12]}... ({len(text)} characters)"
        raise InputError(
            f"the version must be a positive whole number (at most {MAX_RUBRIC_VERSION}) "
            f'without leading zeros, got "{shown}"'
        )
    return int(text)


def parse_turn_text(text: str) -> int | None:
    """A turn from its text (``"12"``, ``"-3"``); ``None`` when it is not a storable turn."""
    stripped = text.strip()
    if not re.fullmatch(r"[+-]?[0-9]{1,12}", stripped):
        return None
    turn = int(stripped)
    return turn if TURN_MIN <= turn <= TURN_MAX else None
