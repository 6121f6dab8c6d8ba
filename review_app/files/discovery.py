"""Which files an import or an inspection reads: the files given, and case files under
the directories given (a Role Review export's manifest left out)."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

import orjson

from review_app.errors import InputError

EXPORTER_NAME = "role-review"
"""First word of the ``exporter`` field that Role Review writes into its exports."""
EXPORT_MANIFEST_NAME = "manifest.json"
"""The manifest beside exported fixtures: counts, not a case."""
CASE_FILE_SUFFIXES = (".json", ".jsonl", ".ndjson")


def discover_case_files(
    paths: Iterable[str | Path], *, suffixes: Iterable[str] | None = None
) -> list[Path]:
    """The files to import: each file as given, and case files found under directories.

    Under a directory, files with one of ``suffixes`` (default: JSON and JSONL) are
    taken, in sorted order, so an import is repeatable; the manifest of a Role Review
    export is left out there, so an exported fixtures directory imports as it is.
    """
    wanted = tuple(s.lower() for s in (suffixes or CASE_FILE_SUFFIXES))
    found: list[Path] = []
    for raw in paths:
        path = Path(raw)
        if path.is_dir():
            found.extend(
                sorted(
                    p
                    for p in path.rglob("*")
                    if p.is_file() and p.suffix.lower() in wanted and not is_export_manifest(p)
                )
            )
        elif path.exists():
            found.append(path)
        else:
            raise InputError("no such file or directory", source=str(raw))
    return found


def is_export_manifest(path: Path) -> bool:
    """Whether ``path`` is the ``manifest.json`` of a Role Review export (not a case)."""
    if path.name != EXPORT_MANIFEST_NAME:
        return False
    try:
        value = orjson.loads(path.read_bytes())
    except (OSError, orjson.JSONDecodeError):
        return False
    exporter = value.get("exporter") if isinstance(value, dict) else None
    return isinstance(exporter, str) and exporter.startswith(f"{EXPORTER_NAME} ")
