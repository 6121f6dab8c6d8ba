"""The rubric versions the application offers, checked against what labels used.

Rubric files are loaded and validated at start. The database keeps each version's
content as first seen; a version that has labels is immutable: if its file changes
afterwards, the catalog refuses that version (with a message telling the owner to
add a new version) rather than letting old labels silently mean something new.
A labeled version whose file disappeared stays available from the stored copy.
"""

from __future__ import annotations

import json
import re
from collections.abc import Collection
from dataclasses import dataclass, field
from pathlib import Path

from sqlalchemy import Engine
from sqlmodel import Session

import storage.labels
from review_app.errors import InputError, NotFound
from review_app.rubrics import (
    Rubric,
    default_rubrics_dir,
    diff_rubrics,
    load_rubric_file,
    parse_rubric_ref,
    rubric_from_dict,
)
from review_app.services.team.people import Actor, authorize
from storage import audit, rubric_versions
from storage.engine import read_only


@dataclass
class RubricCatalog:
    usable: dict[str, Rubric] = field(default_factory=dict)
    """ref -> rubric, for every version that can be labeled against."""
    refused: dict[str, str] = field(default_factory=dict)
    """ref (or ``<folder>/<file>`` for a file not named as a version) -> why it is not
    offered; neither names a directory of the server."""
    refused_errors: dict[str, InputError] = field(default_factory=dict)
    """ref -> the file's own error (its path, line and field), for the command line:
    ``get`` raises it so a command names the file; pages list ``refused``."""
    stored: dict[str, Rubric] = field(default_factory=dict)
    """ref -> the content labels were recorded against (for reports on refused versions)."""
    labeled: set[str] = field(default_factory=set)

    @property
    def refs(self) -> list[str]:
        return sorted(self.usable, key=_ref_sort_key)

    def get(self, ref: str) -> Rubric:
        rubric_id, version = parse_rubric_ref(ref)
        canonical = f"{rubric_id}@{version}"
        if canonical in self.usable:
            return self.usable[canonical]
        if canonical in self.refused_errors:
            raise self.refused_errors[canonical]
        if canonical in self.refused:
            raise InputError(self.refused[canonical], field="rubric")
        raise NotFound(f"no rubric {canonical}; available: {', '.join(self.refs) or 'none'}")

    def for_reports(self, ref: str) -> Rubric:
        """The content labels of ``ref`` were recorded against, even when the file is refused."""
        rubric_id, version = parse_rubric_ref(ref)
        canonical = f"{rubric_id}@{version}"
        if canonical in self.stored:
            return self.stored[canonical]
        return self.get(canonical)

    def previous_of(self, rubric: Rubric) -> Rubric | None:
        """Version N-1 of ``rubric`` as labels knew it, or None (version 1, or unknown)."""
        if rubric.version == 1:
            return None
        try:
            return self.for_reports(f"{rubric.id}@{rubric.version - 1}")
        except (InputError, NotFound):
            return None

    def versions_of(self, rubric_id: str) -> list[Rubric]:
        return sorted(
            (r for r in self.usable.values() if r.id == rubric_id), key=lambda r: r.version
        )

    @property
    def rubric_ids(self) -> list[str]:
        return sorted({r.id for r in self.usable.values()})

    def default_ref(self) -> str | None:
        """The newest version of the first rubric id, a sensible preselection."""
        ids = self.rubric_ids
        if not ids:
            return None
        return self.versions_of(ids[0])[-1].ref


def _ref_sort_key(ref: str) -> tuple[str, int]:
    rubric_id, version = parse_rubric_ref(ref)
    return rubric_id, version


def _rubric_files(root: Path) -> list[Path]:
    if not root.is_dir():
        return []
    return sorted(
        path
        for directory in root.iterdir()
        if directory.is_dir() and not directory.name.startswith(".")
        for path in directory.iterdir()
        if path.is_file() and path.suffix in (".yaml", ".yml")
    )


def sync_rubrics(
    engine: Engine,
    actor: Actor,
    *,
    directory: Path | None = None,
    leave_unstored: Collection[str] = (),
) -> RubricCatalog:
    """Load every rubric file, compare with the stored versions, store new content.

    Any signed-in person may ask (reviewers need the catalog to label); storing new
    content is a rubric publication, recorded in the audit log under the actor. The
    versions named in ``leave_unstored`` are offered as read but not stored: the caller
    stores them with its own act (``rubrics publish`` stores the version it publishes,
    in one transaction with one audit entry).
    """
    actor = authorize(engine, actor, "reviewer")
    root = directory or default_rubrics_dir()
    catalog = RubricCatalog()
    loaded: list[Rubric] = []
    for path in _rubric_files(root):
        try:
            loaded.append(load_rubric_file(path))
        except InputError as error:
            # Named by the version it would be (or its folder and file), never by the
            # server's directories: the reason is shown on pages.
            name = refusal_name(path)
            catalog.refused_errors[name] = error
            catalog.refused[name] = InputError(
                error.message, source=name, line=error.line, field=error.field
            ).describe()
    with Session(engine) as session:
        labeled = {
            f"{rubric_id}@{version}"
            for rubric_id, version in storage.labels.rubric_versions_with_labels(session)
        }
        catalog.labeled = labeled
        stored_rows = {
            f"{row.rubric_id}@{row.version}": row
            for row in rubric_versions.list_rubric_versions(session)
        }
        for ref, row in stored_rows.items():
            catalog.stored[ref] = rubric_from_dict(
                json.loads(row.body_json), source=row.source or ref
            )
        for rubric in loaded:
            stored_row = stored_rows.get(rubric.ref)
            if (
                stored_row is not None
                and stored_row.sha256 != rubric.sha256
                and rubric.ref in labeled
            ):
                stored = catalog.stored[rubric.ref]
                changes = diff_rubrics(stored, rubric)
                what = f" ({_summarise(changes.to_dict())})" if not changes.is_empty else ""
                catalog.refused[rubric.ref] = (
                    f"{rubric.ref} has labels and its file ({source_name(rubric)}) has changed "
                    f"since{what}; a labeled rubric version is immutable: restore the file and put "
                    f"the change in a new version (v{rubric.version + 1}.yaml)"
                )
                continue
            if rubric.ref not in leave_unstored and (
                stored_row is None or stored_row.sha256 != rubric.sha256
            ):
                before = store_rubric_version(session, rubric)
                audit.add_entry(
                    session,
                    actor=actor.name,
                    action="rubric_publish",
                    object_type="rubric",
                    object_key=rubric.ref,
                    summary={
                        "before": before,
                        "after": rubric.sha256,
                        "source": source_name(rubric),
                    },
                )
                catalog.stored[rubric.ref] = rubric
            catalog.usable[rubric.ref] = rubric
        for ref, stored in catalog.stored.items():
            if ref not in catalog.usable and ref not in catalog.refused and ref in labeled:
                catalog.usable[ref] = stored  # the file is gone; the labeled content remains
        session.commit()
    return catalog


def refusal_name(path: Path) -> str:
    """How a rubric file that could not be read is named: the version it would be
    (``<id>@<N>`` for ``<id>/v<N>.yaml``), else ``<folder>/<file>``."""
    found = re.fullmatch(r"v([1-9][0-9]*)\.yaml", path.name)
    return f"{path.parent.name}@{found[1]}" if found else f"{path.parent.name}/{path.name}"


def source_name(rubric: Rubric) -> str:
    """Where a version's content came from, as pages and the audit log name it: the
    rubric file as ``<id>/v<N>.yaml`` (no directory of the server), else its ref."""
    if rubric.source and Path(rubric.source).suffix in (".yaml", ".yml"):
        return f"{rubric.id}/{Path(rubric.source).name}"
    return rubric.ref


def store_rubric_version(session: Session, rubric: Rubric) -> str | None:
    """Store ``rubric``'s content as its version when it is new or changed; the sha256
    stored before (``None`` if none was)."""
    stored = rubric_versions.get_rubric_version(
        session, rubric_id=rubric.id, version=rubric.version
    )
    before = None if stored is None else stored.sha256
    if before != rubric.sha256:
        rubric_versions.save_rubric_version(
            session,
            rubric_id=rubric.id,
            version=rubric.version,
            sha256=rubric.sha256,
            title=rubric.title,
            body_json=json.dumps(rubric.to_dict(), sort_keys=True),
            source=rubric.source,
        )
    return before


def has_labels(engine: Engine, actor: Actor, rubric: Rubric) -> bool:
    """Whether labels use this version now (a catalog's ``labeled`` is as of its sync)."""
    authorize(engine, actor, "reviewer")
    with Session(read_only(engine)) as session:
        return storage.labels.rubric_version_has_labels(
            session, rubric_id=rubric.id, version=rubric.version
        )


def _summarise(diff: dict[str, object]) -> str:
    parts = []
    for key, value in diff.items():
        if value and key not in ("old", "new", "is_empty"):
            parts.append(key.replace("_", " "))
    return ", ".join(parts[:4]) or "content changed"
