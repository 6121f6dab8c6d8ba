"""Rubric codes collapsed to break / no break (no numpy: the rubric loader imports it)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = ["BREAK", "NO_BREAK", "BreakMapping", "break_mapping_from_verdicts"]

BREAK = "break"
NO_BREAK = "no_break"

BreakMapping = Mapping[str, str | None]
"""Code -> ``"break"``, ``"no_break"`` or ``None`` (not counted on the break task)."""


def break_mapping_from_verdicts(verdict_by_code: Mapping[Any, str]) -> dict[Any, str | None]:
    """The break mapping of a rubric: fail -> "break", pass -> "no_break", others -> None.

    ``verdict_by_code`` maps each rubric code to its verdict (pass, fail, borderline or
    abstain); borderline and abstain codes are not counted on the break task. Raises
    ``ValueError("verdict of code 'x' must be pass, fail, borderline or abstain, got
    'y'")`` for any other verdict.
    """
    mapping: dict[Any, str | None] = {}
    for code, verdict in verdict_by_code.items():
        if verdict == "fail":
            mapping[code] = BREAK
        elif verdict == "pass":
            mapping[code] = NO_BREAK
        elif verdict in ("borderline", "abstain"):
            mapping[code] = None
        else:
            raise ValueError(
                f"verdict of code {code!r} must be pass, fail, borderline or abstain, "
                f"got {verdict!r}"
            )
    return mapping
