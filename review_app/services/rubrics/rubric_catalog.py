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
from dataclasses import dataclass, field
from pathlib import Path

from sqlalchemy import Engine
from sqlmodel import Session

import storage.labels
from review_app.errors import InputError, NotFound
from review_app.rubrics.catalog import default_rubrics_dir
from review_app.rubrics.diff import diff_rubrics
from review_app.rubrics.model import Rubric, parse_rubric_ref
from review_app.rubrics.parsing import read_rubric_file, rubric_from_dict
from review_app.services.access.actors import Actor, authorize
from storage import audit, rubric_versions
from storage.engine import read_only


@dataclass(frozen=True)
class DraftInfo:
    """Where a draft came from and who saved it last."""

    origin: str
    """``file`` (a file in the rubrics folder not yet published) or ``app``."""
    saved_by: str | None
    saved_at: str


@dataclass
class RubricCatalog:
    usable: dict[str, Rubric] = field(default_factory=dict)
    """ref -> rubric, for every *published* version: the versions that can be labeled
    against, assigned, exported, judged, and chosen by default. Drafts are never here."""
    refused: dict[str, str] = field(default_factory=dict)
    """ref (or ``<folder>/<file>`` for a file not named as a version) -> why it is not
    offered; neither names a directory of the server."""
    refused_errors: dict[str, InputError] = field(default_factory=dict)
    """ref -> the file's own error (its path, line and field), for the command line:
    ``get`` raises it so a command names the file; pages list ``refused``."""
    stored: dict[str, Rubric] = field(default_factory=dict)
    """ref -> the content labels were recorded against (for reports on refused versions)."""
    labeled: set[str] = field(default_factory=set)
    drafts: dict[str, Rubric] = field(default_factory=dict)
    """ref -> a version not published yet (a file in the rubrics folder, or written in
    the app): shown on the rubrics page, previewed and published; it acts nowhere."""
    draft_info: dict[str, DraftInfo] = field(default_factory=dict)
    published_by: dict[str, tuple[str | None, str | None]] = field(default_factory=dict)
    """ref -> (who published it, when), for published versions the database records."""
    yaml_texts: dict[str, str] = field(default_factory=dict)
    """ref -> the YAML as written, where known (drafts and versions read or saved)."""

    @property
    def refs(self) -> list[str]:
        return sorted(self.usable, key=_ref_sort_key)

    @property
    def draft_refs(self) -> list[str]:
        return sorted(self.drafts, key=_ref_sort_key)

    def get(self, ref: str) -> Rubric:
        """A published version; a draft is refused (it acts nowhere until published)."""
        rubric_id, version = parse_rubric_ref(ref)
        canonical = f"{rubric_id}@{version}"
        if canonical in self.usable:
            return self.usable[canonical]
        if canonical in self.refused_errors:
            raise self.refused_errors[canonical]
        if canonical in self.refused:
            raise InputError(self.refused[canonical], field="rubric")
        if canonical in self.drafts:
            raise InputError(
                f"{canonical} is a draft: it is not published, so nothing can use it yet "
                f"(publish it first: review-app rubrics publish {canonical})",
                field="rubric",
            )
        raise NotFound(f"no rubric {canonical}; available: {', '.join(self.refs) or 'none'}")

    def draft(self, ref: str) -> Rubric:
        """A draft version (not published)."""
        rubric_id, version = parse_rubric_ref(ref)
        canonical = f"{rubric_id}@{version}"
        if canonical in self.drafts:
            return self.drafts[canonical]
        if canonical in self.usable:
            raise InputError(f"{canonical} is published, not a draft", field="rubric")
        if canonical in self.refused:
            raise InputError(self.refused[canonical], field="rubric")
        raise NotFound(f"no draft {canonical}; drafts: {', '.join(self.draft_refs) or 'none'}")

    def any_version(self, ref: str) -> Rubric:
        """A published version or a draft (to read, compare and preview; never to use)."""
        rubric_id, version = parse_rubric_ref(ref)
        canonical = f"{rubric_id}@{version}"
        if canonical in self.drafts:
            return self.drafts[canonical]
        return self.for_reports(canonical)

    def is_published(self, ref: str) -> bool:
        rubric_id, version = parse_rubric_ref(ref)
        return f"{rubric_id}@{version}" in self.usable

    def current(self, rubric_id: str) -> Rubric | None:
        """The newest published version of ``rubric_id``."""
        versions = self.versions_of(rubric_id)
        return versions[-1] if versions else None

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
        """The published versions of ``rubric_id``, oldest first."""
        return sorted(
            (r for r in self.usable.values() if r.id == rubric_id), key=lambda r: r.version
        )

    @property
    def rubric_ids(self) -> list[str]:
        return sorted({r.id for r in self.usable.values()})

    def default_ref(self) -> str | None:
        """The newest *published* version of the first rubric id, a sensible preselection
        for someone no assignment names a version for (a draft is never a default)."""
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


def file_name(rubric_id: str, version: int) -> str:
    """How a version's file is named in the rubrics folder and in messages."""
    return f"{rubric_id}/v{version}.yaml"


def sync_rubrics(
    engine: Engine,
    actor: Actor,
    *,
    directory: Path | None = None,
) -> RubricCatalog:
    """Load every rubric file, compare with the stored versions, store new content.

    Any signed-in person may ask (reviewers need the catalog to label). Version 1 of a
    rubric is published when first read (there is nothing to carry; audited as a
    ``rubric_publish`` under the actor); any later version read from a file is stored
    as a *draft* (audited as ``rubric_draft``) until ``rubrics publish`` or a policy
    owner in the app publishes it. Drafts written in the app are read from the database.
    A published version stays offered when its file is gone.
    """
    actor = authorize(engine, actor, "reviewer")
    root = directory or default_rubrics_dir()
    catalog = RubricCatalog()
    loaded: list[tuple[Rubric, str]] = []
    for path in _rubric_files(root):
        try:
            rubric, text = read_rubric_file(path)
        except InputError as error:
            # Named by the version it would be (or its folder and file), never by the
            # server's directories: the reason is shown on pages.
            name = refusal_name(path)
            catalog.refused_errors[name] = error
            catalog.refused[name] = InputError(
                error.message, source=name, line=error.line, field=error.field
            ).describe()
            continue
        loaded.append((rubric, text))
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
            if row.state == "published":
                catalog.stored[ref] = rubric_from_dict(
                    json.loads(row.body_json), source=row.source or ref
                )
                catalog.published_by[ref] = (
                    row.published_by,
                    None
                    if row.published_at is None
                    else row.published_at.isoformat(timespec="seconds"),
                )
        for rubric, text in loaded:
            ref = rubric.ref
            stored_row = stored_rows.get(ref)
            if stored_row is not None and stored_row.state == "published":
                if stored_row.sha256 != rubric.sha256 and (ref in labeled or rubric.version > 1):
                    stored = catalog.stored[ref]
                    changes = diff_rubrics(stored, rubric)
                    what = f" ({_summarise(changes.to_dict())})" if not changes.is_empty else ""
                    why = "has labels" if ref in labeled else "is published"
                    catalog.refused[ref] = (
                        f"{ref} {why} and its file ({source_name(rubric)}) has changed "
                        f"since{what}; a {'labeled' if ref in labeled else 'published'} rubric "
                        "version is immutable: restore the file and put the change in a new "
                        f"version (v{rubric.version + 1}.yaml)"
                    )
                    continue
                if stored_row.sha256 != rubric.sha256:
                    # version 1 without labels: its file is still the version's text
                    before = store_rubric_version(session, rubric, yaml_text=text)
                    _audit_stored(session, actor, rubric, before, "rubric_publish")
                    catalog.stored[ref] = rubric
                catalog.usable[ref] = rubric
                catalog.yaml_texts[ref] = text
                continue
            if (
                stored_row is not None
                and stored_row.origin == "app"
                and stored_row.sha256 != rubric.sha256
            ):
                catalog.refused[file_name(rubric.id, rubric.version)] = (
                    f"{source_name(rubric)} differs from the draft of {ref} saved in the app "
                    f"by {stored_row.saved_by or 'someone'}; the app's draft is the one "
                    f"offered for publication (write it to the file with: review-app rubrics "
                    f"export {ref}, or paste the file's YAML into the draft)"
                )
                continue
            if rubric.version == 1:
                # The first version of a rubric acts when first read: nothing to carry.
                before = store_rubric_version(
                    session, rubric, yaml_text=text, published_by=actor.name
                )
                _audit_stored(session, actor, rubric, before, "rubric_publish")
                catalog.stored[ref] = rubric
                catalog.usable[ref] = rubric
                catalog.published_by[ref] = (actor.name, None)
            else:
                if stored_row is None or stored_row.sha256 != rubric.sha256:
                    before = store_rubric_version(session, rubric, yaml_text=text)
                    _audit_stored(session, actor, rubric, before, "rubric_draft")
                    saved_by: str | None = None
                else:
                    saved_by = stored_row.saved_by
                catalog.drafts[ref] = rubric
                catalog.draft_info[ref] = DraftInfo(
                    origin="file" if stored_row is None else stored_row.origin,
                    saved_by=saved_by,
                    saved_at="",
                )
            catalog.yaml_texts[ref] = text
        for ref, row in stored_rows.items():
            if ref in catalog.usable or ref in catalog.refused or ref in catalog.drafts:
                continue
            if row.state == "published":
                # the file is gone (or the version was written in the app): it stays
                catalog.usable[ref] = catalog.stored[ref]
                if row.yaml_text:
                    catalog.yaml_texts[ref] = row.yaml_text
            elif row.origin == "app":
                catalog.drafts[ref] = rubric_from_dict(
                    json.loads(row.body_json), source=file_name(row.rubric_id, row.version)
                )
                catalog.draft_info[ref] = DraftInfo(
                    origin="app",
                    saved_by=row.saved_by,
                    saved_at=row.loaded_at.isoformat(timespec="seconds"),
                )
                if row.yaml_text:
                    catalog.yaml_texts[ref] = row.yaml_text
        session.commit()
    return catalog


def _audit_stored(
    session: Session, actor: Actor, rubric: Rubric, before: str | None, action: str
) -> None:
    if before == rubric.sha256:
        return
    audit.add_entry(
        session,
        actor=actor.name,
        action=action,
        object_type="rubric",
        object_key=rubric.ref,
        summary={"before": before, "after": rubric.sha256, "source": source_name(rubric)},
    )


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


def store_rubric_version(
    session: Session,
    rubric: Rubric,
    *,
    yaml_text: str | None = None,
    origin: str = "file",
    saved_by: str | None = None,
    published_by: str | None = None,
) -> str | None:
    """Store ``rubric``'s content as its version when it is new or changed (a new row is
    a draft; ``published_by`` publishes it); the sha256 stored before (``None`` if none)."""
    stored = rubric_versions.get_rubric_version(
        session, rubric_id=rubric.id, version=rubric.version
    )
    before = None if stored is None else stored.sha256
    if before != rubric.sha256 or (
        published_by is not None and stored is not None and stored.state != "published"
    ):
        rubric_versions.save_rubric_version(
            session,
            rubric_id=rubric.id,
            version=rubric.version,
            sha256=rubric.sha256,
            title=rubric.title,
            body_json=json.dumps(rubric.to_dict(), sort_keys=True),
            source=rubric.source,
            yaml_text=yaml_text,
            origin=origin if stored is None or before != rubric.sha256 else stored.origin,
            saved_by=saved_by,
            published_by=published_by,
        )
    return before


def catalog_token(engine: Engine, actor: Actor) -> tuple[int, int, str, str]:
    """A token of the stored versions' states: a catalog cached by a server is read again
    when another server (or the command line) stores, drafts or publishes a version."""
    authorize(engine, actor, "reviewer")
    with Session(read_only(engine)) as session:
        return rubric_versions.versions_token(session)


def default_ref_for(engine: Engine, actor: Actor, catalog: RubricCatalog) -> str | None:
    """The rubric version preselected for ``actor`` (the sidebar): for a reviewer the
    published version their assignments name (the newest one with unfinished cases,
    else the newest assigned), otherwise the newest published version of the first
    rubric. A draft is never a default."""
    actor = authorize(engine, actor, "reviewer")
    if actor.reviewer_id is not None:
        with Session(read_only(engine)) as session:
            assigned = rubric_versions.newest_assigned_versions(
                session, reviewer_id=actor.reviewer_id
            )
        offered = [(f"{r}@{v}", left) for r, v, left in assigned if f"{r}@{v}" in catalog.usable]
        for ref, left in offered:
            if left:
                return ref
        if offered:
            return offered[0][0]
    return catalog.default_ref()


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
