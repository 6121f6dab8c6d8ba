"""What commands print: JSON, tables and reports, untrusted text made safe for a terminal."""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Sequence
from typing import Any

import typer

_C1_AND_DEL = re.compile("[\x7f-\x9f]")


def print_json(value: Any) -> None:
    text = json.dumps(value, indent=2, sort_keys=True, ensure_ascii=False, allow_nan=False)
    # JSON already escapes C0 controls; DEL and C1 (8-bit CSI) pass through raw otherwise.
    typer.echo(_C1_AND_DEL.sub(lambda m: f"\\u{ord(m.group()):04x}", text))


def _is_printable(ch: str) -> bool:
    code = ord(ch)
    return ch in "\n\t" or (code >= 32 and not 0x7F <= code <= 0x9F)


def terminal_safe(text: str) -> str:
    """Untrusted text for a terminal: control characters (escape sequences) made visible."""
    return "".join(ch if _is_printable(ch) else f"\\x{ord(ch):02x}" for ch in text)


def print_report(
    report: Any,
    *,
    as_json: bool,
    render: Callable[[Any], str],
    to_json: Callable[[Any], Any] | None = None,
) -> None:
    """A report as JSON (``to_json`` of it, if given), or as its rendered text."""
    if as_json:
        print_json(report if to_json is None else to_json(report))
    else:
        typer.echo(terminal_safe(render(report)))


def print_listing(
    items: Sequence[Any],
    *,
    as_json: bool,
    line: Callable[[Any], str],
    empty: str | None = None,
) -> None:
    """Items as a JSON list (of each item's ``to_dict()`` when it has one), or one
    ``line`` each (``empty`` when there are none)."""
    if as_json:
        print_json([item.to_dict() if hasattr(item, "to_dict") else item for item in items])
        return
    if not items and empty is not None:
        typer.echo(empty)
    for item in items:
        typer.echo(line(item))


def row_to_dict(row: Any) -> dict[str, Any]:
    return {name: getattr(row, name) for name in row.__slots__}


def format_table(headers: tuple[str, ...], rows: Sequence[tuple[str, ...]]) -> str:
    widths = [max(len(h), *(len(terminal_safe(r[i])) for r in rows)) for i, h in enumerate(headers)]
    widths[-1] = len(headers[-1])  # the last column is not padded
    lines = ["  ".join(h.ljust(w) for h, w in zip(headers, widths, strict=True)).rstrip()]
    for r in rows:
        lines.append(
            "  ".join(terminal_safe(c).ljust(w) for c, w in zip(r, widths, strict=True)).rstrip()
        )
    return "\n".join(lines)
