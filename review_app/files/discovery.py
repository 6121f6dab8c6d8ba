"""Which files an import or an inspection reads: the files given, and case files under
the directories given (a Role Review export's manifest left out)."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any

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
    """The files to import: each file as given, and the case files under directories
    (:func:`case_files_under`, with ``suffixes`` when given); a path that does not
    exist is an ``InputError``."""
    found: list[Path] = []
    for raw in paths:
        path = Path(raw)
        if path.is_dir():
            found.extend(case_files_under(path, suffixes=suffixes or CASE_FILE_SUFFIXES))
        elif path.exists():
            found.append(path)
        else:
            raise InputError("no such file or directory", source=str(raw))
    return found


def case_files_under(
    directory: Path, *, suffixes: Iterable[str] = CASE_FILE_SUFFIXES
) -> list[Path]:
    """The files under ``directory`` (at any depth) with one of ``suffixes`` (default:
    JSON and JSONL), in sorted path order, so an import or an inspection is repeatable;
    the manifest of a Role Review export is left out, so an exported fixtures directory
    reads as it is."""
    wanted = tuple(s.lower() for s in suffixes)
    return sorted(
        p
        for p in directory.rglob("*")
        if p.suffix.lower() in wanted and p.is_file() and not is_export_manifest(p)
    )


def is_export_manifest(path: Path) -> bool:
    """Whether ``path`` is the ``manifest.json`` of a Role Review export (not a case)."""
    return path.name == EXPORT_MANIFEST_NAME and export_manifest(path) is not None


def export_manifest(path: Path) -> dict[str, Any] | None:
    """The content of ``path`` when it is a manifest Role Review wrote (its ``exporter``
    starts with :data:`EXPORTER_NAME`); ``None`` for anything else, readable or not."""
    try:
        value = orjson.loads(path.read_bytes())
    except (OSError, orjson.JSONDecodeError):
        return None
    if not isinstance(value, dict):
        return None
    exporter = value.get("exporter")
    return value if isinstance(exporter, str) and exporter.startswith(f"{EXPORTER_NAME} ") else None
