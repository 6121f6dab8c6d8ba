"""Case ids: made from the names records carry, unique within a file."""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from review_app.case_records import CASE_ID_PATTERN
from review_app.errors import InputError

_SAFE_ID = re.compile(r"[\w.\-]{1,200}")
_UNSAFE_RUN = re.compile(r"[^\w.]+")


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


def check_unique_case_ids(cases: list[Mapping[str, Any]]) -> None:
    seen: set[str] = set()
    for case in cases:
        case_id = case["case_id"]
        if case_id in seen:
            raise ValueError(f"case id {case_id} appears twice among the cases to write")
        seen.add(case_id)
