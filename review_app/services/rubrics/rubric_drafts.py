"""Rubric versions written in the app: a draft of version N+1 started from the published
version N, checked as a file would be, compared with N, previewed and published.

docs/reference.md, "Rubric drafts and publication". A draft lives in ``rubric_versions``
(state ``draft``, origin ``app``) with its YAML text; it acts nowhere until it is
published (:func:`~review_app.services.rubrics.rubric_carry.publish_rubric`, which the
preview runs and rolls back). Policy owners and admins write, preview and publish
drafts; reviewers are refused. ``rubrics export`` writes a version's YAML file.
"""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy import Engine
from sqlmodel import Session

from review_app.errors import InputError, NotFound
from review_app.rubrics.diff import RubricDiff, diff_rubrics
from review_app.rubrics.editing import next_version_text, rubric_yaml, with_code
from review_app.rubrics.model import Rubric
from review_app.rubrics.parsing import parse_rubric_text
from review_app.services.access.actors import Actor, authorize
from review_app.services.rubrics.rubric_carry import CarryReport, publish_rubric
from review_app.services.rubrics.rubric_catalog import (
    RubricCatalog,
    file_name,
    store_rubric_version,
)
from storage import audit, rubric_versions
from storage.engine import read_only

WHO_MAY_PUBLISH = (
    "Policy owners and admins may write, preview and publish rubric versions; reviewers "
    "label against published versions only."
)


@dataclass(frozen=True)
class DraftCheck:
    """A draft's text read as a rubric file would be: the version, or the one-line error
    (file, line, field) a file would give; and what changed since the current version."""

    ref: str
    rubric: Rubric | None
    error: str | None
    current: Rubric | None
    diff: RubricDiff | None

    @property
    def ok(self) -> bool:
        return self.rubric is not None and self.error is None


def draft_text(engine: Engine, actor: Actor, *, catalog: RubricCatalog, rubric_id: str) -> str:
    """The text to edit for ``rubric_id``'s next version: the draft of version N+1 if
    one exists (saved in the app, or a file), else version N's YAML with the version
    raised and the carry-over fields (``from:``/``change:``) cleared."""
    authorize(engine, actor, "policy_owner")
    current = _current(catalog, rubric_id)
    ref = f"{rubric_id}@{current.version + 1}"
    if ref in catalog.drafts:
        return catalog.yaml_texts.get(ref) or rubric_yaml(catalog.drafts[ref])
    return next_version_text(current, catalog.yaml_texts.get(current.ref))


def _current(catalog: RubricCatalog, rubric_id: str) -> Rubric:
    current = catalog.current(rubric_id)
    if current is None:
        raise NotFound(f"no published version of {rubric_id}")
    return current


def check_draft(
    engine: Engine, actor: Actor, *, catalog: RubricCatalog, rubric_id: str, text: str
) -> DraftCheck:
    """Read ``text`` as ``<rubric_id>/v<N+1>.yaml`` would be read (N: the current
    published version): the one-line error a file would give, or the version and its
    differences from N (the mapping included)."""
    authorize(engine, actor, "policy_owner")
    current = _current(catalog, rubric_id)
    ref = f"{rubric_id}@{current.version + 1}"
    try:
        rubric, diff = _read_draft(current, text)
    except InputError as error:
        return DraftCheck(ref=ref, rubric=None, error=str(error), current=current, diff=None)
    return DraftCheck(ref=ref, rubric=rubric, error=None, current=current, diff=diff)


def _read_draft(current: Rubric, text: str) -> tuple[Rubric, RubricDiff]:
    rubric_id, version = current.id, current.version + 1
    source = file_name(rubric_id, version)
    rubric = parse_rubric_text(text, source=source)
    if rubric.id != rubric_id:
        raise InputError(
            f'id "{rubric.id}" does not match the rubric being written "{rubric_id}"',
            source=source,
            line=_line_of(text, "id"),
            field="id",
        )
    if rubric.version != version:
        raise InputError(
            f"version {rubric.version}: the next version of {rubric_id} is {version} "
            f"({current.ref} is the current published version)",
            source=source,
            line=_line_of(text, "version"),
            field="version",
        )
    return rubric, diff_rubrics(current, rubric)


def _line_of(text: str, key: str) -> int | None:
    for number, line in enumerate(text.splitlines(), start=1):
        if line.startswith(f"{key}:"):
            return number
    return None


def edit_code(
    engine: Engine,
    actor: Actor,
    *,
    catalog: RubricCatalog,
    rubric_id: str,
    text: str,
    code: str,
    title: str,
    definition: str,
    verdict: str,
    from_codes: list[str] | None,
    change: str | None,
    example: dict[str, str] | None = None,
) -> str:
    """The draft's text with one code's fields (and possibly a new example) set: the
    per-code form writes the same YAML a policy owner could type."""
    authorize(engine, actor, "policy_owner")
    current = _current(catalog, rubric_id)
    return with_code(
        text,
        source=file_name(rubric_id, current.version + 1),
        code=code,
        title=title,
        definition=definition,
        verdict=verdict,
        from_codes=from_codes,
        change=change,
        example=example,
    )


def save_draft(
    engine: Engine, actor: Actor, *, catalog: RubricCatalog, rubric_id: str, text: str
) -> Rubric:
    """Store ``text`` as the draft of ``rubric_id``'s next version (checked first:
    nothing is stored when it has an error); audited as ``rubric_draft``."""
    actor = authorize(engine, actor, "policy_owner")
    rubric, _ = _read_draft(_current(catalog, rubric_id), text)
    with Session(engine) as session:
        row = rubric_versions.get_rubric_version(
            session, rubric_id=rubric.id, version=rubric.version
        )
        if row is not None and row.state == "published":
            raise InputError(f"{rubric.ref} is published: a published version is not changed")
        before = store_rubric_version(
            session, rubric, yaml_text=text, origin="app", saved_by=actor.name
        )
        stored = rubric_versions.get_rubric_version(
            session, rubric_id=rubric.id, version=rubric.version
        )
        assert stored is not None
        stored.origin = "app"
        stored.yaml_text = text
        stored.saved_by = actor.name
        session.add(stored)
        audit.add_entry(
            session,
            actor=actor.name,
            action="rubric_draft",
            object_type="rubric",
            object_key=rubric.ref,
            summary={"before": before, "after": rubric.sha256, "source": "app"},
        )
        session.commit()
    return rubric


def preview_publish(
    engine: Engine, actor: Actor, *, catalog: RubricCatalog, ref: str
) -> CarryReport:
    """What publishing ``ref`` now would do: carried, not carried, re-review per
    reviewer; the publication run and rolled back (``rubrics publish --dry-run``)."""
    return publish_rubric(engine, actor, catalog=catalog, ref=ref, dry_run=True)


def export_text(engine: Engine, actor: Actor, *, catalog: RubricCatalog, ref: str) -> str:
    """A version's YAML (published or draft) to write as ``<id>/v<N>.yaml``: the text as
    written when the database has it, else the stored content; it reads back as the
    same version (same sha256)."""
    authorize(engine, actor, "reviewer")
    rubric = catalog.any_version(ref)
    text = catalog.yaml_texts.get(rubric.ref)
    if text is None:
        with Session(read_only(engine)) as session:
            row = rubric_versions.get_rubric_version(
                session, rubric_id=rubric.id, version=rubric.version
            )
        if row is not None and row.yaml_text:
            text = row.yaml_text
    if text is None or parse_rubric_text(text).sha256 != rubric.sha256:
        text = rubric_yaml(rubric)
    return text


__all__ = [
    "WHO_MAY_PUBLISH",
    "DraftCheck",
    "check_draft",
    "draft_text",
    "edit_code",
    "export_text",
    "preview_publish",
    "save_draft",
]
