"""Judge prompt versions, stored in the database like rubric versions.

docs/reference.md, "Judge prompt versions". A version is ``<judge>@v<N>`` for a rubric
id: its full text, sha256, the rubric version it was written for, who made it, when,
and the version it was derived from. Files ``rubrics/<rubric-id>/judges/<judge>/v<N>.txt``
are still read and stored the same way (when their version has no runs, a changed file
updates the stored text; once a run used it, a changed file is refused, as a changed
rubric file with labels is). New versions are created from a text (the command line's
``judge prompts create``, the page's workbench) and numbered after the newest one.
Once a run used a version, the database itself refuses changing it.

Listing, showing and creating are for policy owners and admins.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from sqlalchemy import Engine
from sqlalchemy.exc import IntegrityError
from sqlmodel import Session

from review_app.errors import InputError, NotFound
from review_app.judging import (
    JUDGE_NAME,
    PLACEHOLDERS,
    PROMPT_FILE,
    ChatMessage,
    JudgePrompt,
    check_prompt_text,
    find_judge_prompt,
    load_judge_prompt,
)
from review_app.rubrics.catalog import default_rubrics_dir
from review_app.rubrics.model import Rubric
from review_app.services.access.actors import Actor, authorize
from review_app.services.judging.unit_prompts import unit_messages
from storage import audit, judging
from storage import judge_prompts as prompts_storage
from storage.engine import read_only
from storage.models import JudgePromptVersion

_REF_PATTERN = "JUDGE@vN (e.g. role-judge@v2)"


@dataclass(frozen=True)
class StoredPrompt:
    """One stored prompt version as callers see it."""

    id: int
    rubric_id: str
    rubric_version: int | None
    judge: str
    version: int
    text: str
    sha256: str
    source: str | None
    created_by: str
    created_at: datetime
    derived_from: str | None
    """The ref (``judge@vN``) of the version it was derived from."""
    runs: int
    """Judge runs of this version (any model, any rubric version)."""

    @property
    def ref(self) -> str:
        return f"{self.judge}@v{self.version}"

    @property
    def used(self) -> bool:
        return self.runs > 0

    @property
    def file(self) -> str | None:
        """The prompt file it was read from, relative to the rubrics folder
        (``rubrics/<rubric-id>/judges/<judge>/v<N>.txt``); ``None`` when it was created in
        the app or with ``judge prompts create`` (never a server path)."""
        if self.source is None:
            return None
        return f"rubrics/{self.rubric_id}/judges/{self.judge}/v{self.version}.txt"

    @property
    def credit(self) -> str:
        """Who or what it comes from: ``file rubrics/.../v2.txt, synced 2026-12-01`` for a
        version read from a file (whoever opened the list first is not its author),
        ``by priya, 2026-12-01`` for one created in the app or the command line."""
        day = self.created_at.strftime("%Y-%m-%d")
        if self.file is not None:
            return f"file {self.file}, synced {day}"
        return f"by {self.created_by}, {day}"

    def as_prompt(self) -> JudgePrompt:
        """The template to run (``source`` names where its text came from)."""
        return JudgePrompt(
            judge=self.judge,
            version=f"v{self.version}",
            text=self.text,
            source=self.source or f"{self.rubric_id}/{self.ref} (stored)",
        )

    def to_dict(self, *, with_text: bool = True) -> dict[str, Any]:
        data: dict[str, Any] = {
            "ref": self.ref,
            "rubric_id": self.rubric_id,
            "rubric_version": self.rubric_version,
            "judge": self.judge,
            "version": self.version,
            "sha256": self.sha256,
            "source": self.source,
            "created_by": self.created_by,
            "created_at": self.created_at.isoformat(timespec="seconds"),
            "derived_from": self.derived_from,
            "runs": self.runs,
            "credit": self.credit,
        }
        if with_text:
            data["text"] = self.text
        return data


@dataclass
class PromptCatalog:
    """A rubric id's stored prompt versions, after reading its prompt files."""

    rubric_id: str
    prompts: list[StoredPrompt] = field(default_factory=list)
    refused: dict[str, str] = field(default_factory=dict)
    """ref (or ``<judge>/<file>`` for a file not named as a version) -> why it is not
    offered; neither names a directory of the server."""

    def get(self, ref: str) -> StoredPrompt:
        judge, version = parse_prompt_ref(ref)
        canonical = f"{judge}@v{version}"
        if canonical in self.refused:
            raise InputError(self.refused[canonical], field="--prompt")
        for prompt in self.prompts:
            if prompt.ref == canonical:
                return prompt
        known = ", ".join(p.ref for p in self.prompts) or "none"
        raise NotFound(f"no judge prompt {canonical} for {self.rubric_id} (known: {known})")

    def latest(self, judge: str) -> StoredPrompt | None:
        mine = [p for p in self.prompts if p.judge == judge]
        return mine[-1] if mine else None


def parse_prompt_ref(ref: str, *, field: str = "--prompt") -> tuple[str, int]:
    """``judge@vN`` -> ``(judge, N)``; InputError (naming ``field``) on anything else."""
    judge, at, version = ref.strip().partition("@")
    match = PROMPT_FILE.fullmatch(f"{version}.txt") if at else None
    if not JUDGE_NAME.fullmatch(judge) or match is None:
        raise InputError(f"{ref!r} is not a prompt version {_REF_PATTERN}", field=field)
    return judge, int(match["version"])


def _rows_to_prompts(
    session: Session, rows: list[JudgePromptVersion], *, rubric_id: str
) -> list[StoredPrompt]:
    counts = judging.run_counts(session, rubric_id=rubric_id)
    by_id = {row.id: row for row in rows}
    prompts = []
    for row in rows:
        assert row.id is not None
        parent = by_id.get(row.derived_from_id) if row.derived_from_id is not None else None
        if parent is None and row.derived_from_id is not None:
            parent = prompts_storage.get_prompt_by_id(session, prompt_id=row.derived_from_id)
        prompts.append(
            StoredPrompt(
                id=row.id,
                rubric_id=row.rubric_id,
                rubric_version=row.rubric_version,
                judge=row.judge,
                version=row.version,
                text=row.text,
                sha256=row.sha256,
                source=row.source,
                created_by=row.created_by,
                created_at=row.created_at,
                derived_from=f"{parent.judge}@v{parent.version}" if parent is not None else None,
                runs=counts.get((row.judge, f"v{row.version}"), 0),
            )
        )
    return prompts


def _prompt_files(directory: Path, rubric_id: str) -> list[Path]:
    root = directory / rubric_id / "judges"
    if not root.is_dir():
        return []
    files = [
        path
        for judge_dir in sorted(p for p in root.iterdir() if p.is_dir())
        for path in judge_dir.glob("v*.txt")
        if path.is_file()
    ]

    def order(path: Path) -> tuple[str, int]:
        match = PROMPT_FILE.fullmatch(path.name)
        return path.parent.name, int(match["version"]) if match else 0

    return sorted(files, key=order)


def _refusal_name(path: Path) -> str:
    """How a prompt file that is refused is named: ``<judge>@v<N>`` for
    ``<judge>/v<N>.txt``, else ``<judge>/<file>``."""
    match = PROMPT_FILE.fullmatch(path.name)
    judge = path.parent.name
    return f"{judge}@v{match['version']}" if match else f"{judge}/{path.name}"


def _sha256(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def _refusal_for_run(session: Session, prompt: JudgePrompt, rubric_id: str) -> str | None:
    """Why a file's text may not be stored under its name: runs used another text."""
    shas = judging.run_sha256s(
        session, rubric_id=rubric_id, judge=prompt.judge, prompt_version=prompt.version
    )
    if any(sha is not None and sha != prompt.sha256 for sha in shas):
        following = prompts_storage.next_version(session, rubric_id=rubric_id, judge=prompt.judge)
        return (
            f"{prompt.ref} has runs and its text has changed since they ran; "
            "a judge prompt version is immutable once a run used it: restore the file and put "
            f"the change in a new version (v{following}.txt, or `review-app judge prompts "
            "create`)"
        )
    return None


def _sync(
    session: Session, actor: Actor, *, rubric_id: str, directory: Path, store: bool = True
) -> tuple[dict[str, str], int]:
    """Store new or changed prompt files of ``rubric_id``; the refused ones, with why.

    Returns the refusals and how many files are (with ``store=False``: would be) stored.
    ``store=False`` writes nothing, so it can run in a read-only transaction.
    """
    refused: dict[str, str] = {}
    stored = 0
    runs = judging.run_counts(session, rubric_id=rubric_id)
    for path in _prompt_files(directory, rubric_id):
        try:
            prompt = load_judge_prompt(path)
            if not JUDGE_NAME.fullmatch(prompt.judge):
                raise InputError(
                    f"the folder {prompt.judge!r} is not a judge name (letters, digits, - and _)",
                    source=str(path),
                )
        except InputError as error:
            # Named by the version it would be, never by the server's directories: the
            # reason is shown on pages.
            name = _refusal_name(path)
            refused[name] = InputError(
                error.message, source=name, line=error.line, field=error.field
            ).describe()
            continue
        number = int(prompt.version[1:])
        row = prompts_storage.get_prompt(
            session, rubric_id=rubric_id, judge=prompt.judge, version=number
        )
        if row is not None and row.sha256 == prompt.sha256:
            continue
        following = prompts_storage.next_version(session, rubric_id=rubric_id, judge=prompt.judge)
        if row is not None and row.source is None:
            # a file clashing with a version created in the app is refused as a file:
            # the stored version stays offered
            refused[f"{prompt.judge}/{path.name}"] = (
                f"{prompt.ref} was created in the app or with `judge prompts "
                f"create` (by {row.created_by}) with another text; name the file "
                f"v{following}.txt"
            )
            continue
        if row is None:
            why = _refusal_for_run(session, prompt, rubric_id)
        elif runs.get((prompt.judge, prompt.version)):
            why = (
                f"{prompt.ref} has runs and its file has changed since; a "
                "judge prompt version is immutable once a run used it: restore the file and "
                f"put the change in a new version (v{following}.txt)"
            )
        else:
            why = None
        if why is not None:
            refused[prompt.ref] = why
            continue
        stored += 1
        if not store:
            continue
        audit.add_entry(
            session,
            actor=actor.name,
            action="judge_prompt",
            object_type="judge_prompt",
            object_key=f"{rubric_id}/{prompt.ref}",
            summary={
                "before": row.sha256 if row is not None else None,
                "after": prompt.sha256,
                "source": f"{prompt.judge}/{Path(prompt.source).name}",
            },
        )
        if row is None:
            first = judging.first_run_of_prompt(
                session, judge=prompt.judge, prompt_version=prompt.version, rubric_id=rubric_id
            )
            prompts_storage.add_prompt(
                session,
                rubric_id=rubric_id,
                rubric_version=first.rubric_version if first is not None else None,
                judge=prompt.judge,
                version=number,
                text=prompt.text,
                sha256=prompt.sha256,
                source=prompt.source,
                created_by=actor.name,
            )
        else:
            prompts_storage.update_prompt(
                session, row, text=prompt.text, sha256=prompt.sha256, source=prompt.source
            )
    return refused, stored


def list_judge_prompts(
    engine: Engine,
    actor: Actor,
    *,
    rubric_id: str,
    judge: str | None = None,
    directory: Path | None = None,
) -> PromptCatalog:
    """The rubric id's prompt versions (its prompt files read and stored first).

    Policy owners and admins. Storing a new or changed file is recorded in the audit
    log (``judge_prompt``) under the actor.
    """
    actor = authorize(engine, actor, "policy_owner")
    directory = directory or default_rubrics_dir()
    # Pages call this on every rerun: a read-only pass first, and a write transaction
    # (which queues behind every other writer) only when a file is new or changed.
    with Session(read_only(engine)) as session:
        refused, pending = _sync(
            session, actor, rubric_id=rubric_id, directory=directory, store=False
        )
        if not pending:
            rows = prompts_storage.list_prompts(session, rubric_id=rubric_id, judge=judge)
            prompts = _rows_to_prompts(session, rows, rubric_id=rubric_id)
    for attempt in range(3 if pending else 0):
        with Session(engine) as session:
            try:
                refused, _ = _sync(session, actor, rubric_id=rubric_id, directory=directory)
                session.commit()
            except IntegrityError:
                # another process stored the same file at the same moment: read again
                session.rollback()
                if attempt == 2:
                    raise
                continue
            rows = prompts_storage.list_prompts(session, rubric_id=rubric_id, judge=judge)
            prompts = _rows_to_prompts(session, rows, rubric_id=rubric_id)
            break
    if judge is not None:
        refused = {
            key: why
            for key, why in refused.items()
            if key.startswith(f"{judge}@") or Path(key).parent.name == judge
        }
    return PromptCatalog(rubric_id=rubric_id, prompts=prompts, refused=refused)


def prompt_refs_for(engine: Engine, actor: Actor, *, rubric: Rubric) -> list[str]:
    """The stored prompt versions (``judge@vN``) a run against ``rubric`` may use: written
    for its version, or for none yet (policy owners and admins)."""
    catalog = list_judge_prompts(engine, actor, rubric_id=rubric.id)
    return [p.ref for p in catalog.prompts if p.rubric_version in (None, rubric.version)]


def show_judge_prompt(
    engine: Engine, actor: Actor, *, rubric_id: str, ref: str, directory: Path | None = None
) -> StoredPrompt:
    """One stored version, ``judge@vN``, with its full text (policy owners and admins)."""
    judge, _ = parse_prompt_ref(ref)
    return list_judge_prompts(
        engine, actor, rubric_id=rubric_id, judge=judge, directory=directory
    ).get(ref)


def create_judge_prompt(
    engine: Engine,
    actor: Actor,
    *,
    rubric: Rubric,
    judge: str,
    text: str,
    derived_from: str | None = None,
    source: str = "<text>",
    directory: Path | None = None,
) -> StoredPrompt:
    """Store ``text`` as the next version of ``judge`` for ``rubric`` (written for it).

    The text is checked as a template file is (known placeholders only, ``$codes``
    and some of the conversation used; an error names ``source`` and the line).
    ``derived_from`` (``judge@vN``, possibly another judge's) must be stored for the
    same rubric id. Policy owners and admins; recorded in the audit log.
    """
    actor = authorize(engine, actor, "policy_owner")
    if not isinstance(judge, str) or not JUDGE_NAME.fullmatch(judge):
        raise InputError(
            f"{judge!r} is not a judge name (letters, digits, - and _)", field="--judge"
        )
    check_prompt_text(text, source=source, field="text")
    for attempt in range(3):
        try:
            with Session(engine) as session:
                _sync(
                    session,
                    actor,
                    rubric_id=rubric.id,
                    directory=directory or default_rubrics_dir(),
                )
                parent_id = None
                if derived_from is not None:
                    parent_judge, parent_version = parse_prompt_ref(derived_from, field="--from")
                    parent = prompts_storage.get_prompt(
                        session, rubric_id=rubric.id, judge=parent_judge, version=parent_version
                    )
                    if parent is None:
                        raise InputError(
                            f"no stored judge prompt {parent_judge}@v{parent_version} for "
                            f"{rubric.id} to derive from",
                            field="--from",
                        )
                    parent_id = parent.id
                number = prompts_storage.next_version(session, rubric_id=rubric.id, judge=judge)
                row = prompts_storage.add_prompt(
                    session,
                    rubric_id=rubric.id,
                    rubric_version=rubric.version,
                    judge=judge,
                    version=number,
                    text=text,
                    sha256=_sha256(text),
                    source=None,
                    created_by=actor.name,
                    derived_from_id=parent_id,
                )
                audit.add_entry(
                    session,
                    actor=actor.name,
                    action="judge_prompt",
                    object_type="judge_prompt",
                    object_key=f"{rubric.id}/{judge}@v{number}",
                    summary={
                        "before": None,
                        "after": row.sha256,
                        "source": source,
                        "rubric": rubric.ref,
                        "derived_from": derived_from,
                    },
                )
                session.commit()
                [stored] = _rows_to_prompts(session, [row], rubric_id=rubric.id)
        except IntegrityError:
            # another version of the judge was saved at the same moment: number again
            if attempt == 2:
                raise
            continue
        return stored
    raise AssertionError("unreachable")


def prompt_for_run(
    engine: Engine,
    actor: Actor,
    *,
    rubric: Rubric,
    ref: str,
    judge: str | None = None,
    directory: Path | None = None,
) -> JudgePrompt:
    """The template a run uses: a stored ``judge@vN``, or a template file's path.

    A path is named ``<judge>@v<N>`` (``judge`` when given, else its folder when that
    is a judge's folder; any other folder is refused until ``judge`` names it: see
    :func:`review_app.judging.find_judge_prompt`). The run stores it under that name
    (:func:`store_for_run`), and refuses it if that name is stored with another text.
    """
    authorize(engine, actor, "policy_owner")
    root = directory or default_rubrics_dir()
    candidate = Path(ref)
    if candidate.suffix == ".txt" and ("/" in ref or candidate.exists()):
        if not candidate.exists():
            raise InputError(f"no template file {ref}", field="--prompt")
        return find_judge_prompt(root, rubric.id, ref, judge=judge)
    catalog = list_judge_prompts(engine, actor, rubric_id=rubric.id, directory=root)
    try:
        return catalog.get(ref).as_prompt()
    except NotFound as error:
        raise InputError(str(error), field="--prompt") from None


def store_for_run(
    session: Session, *, prompt: JudgePrompt, rubric: Rubric, actor_name: str
) -> JudgePromptVersion:
    """The stored version a run of ``prompt`` uses, stored now when it is new.

    A building block of :func:`review_app.services.judging.judge_runner.run_judge` (which
    authorizes): refuses a prompt whose name is stored with another text once a run
    used it (or that was not read from the same file), and one written for another
    rubric version.
    """
    match = PROMPT_FILE.fullmatch(f"{prompt.version}.txt")
    if match is None or not JUDGE_NAME.fullmatch(prompt.judge):
        raise InputError(f"{prompt.ref} is not a prompt version {_REF_PATTERN}", field="--prompt")
    number = int(match["version"])
    row = prompts_storage.get_prompt(
        session, rubric_id=rubric.id, judge=prompt.judge, version=number
    )
    if row is None:
        why = _refusal_for_run(session, prompt, rubric.id)
        if why is not None:
            raise InputError(why, field="--prompt")
        return prompts_storage.add_prompt(
            session,
            rubric_id=rubric.id,
            rubric_version=rubric.version,
            judge=prompt.judge,
            version=number,
            text=prompt.text,
            sha256=prompt.sha256,
            source=prompt.source,
            created_by=actor_name,
        )
    if row.sha256 != prompt.sha256:
        runs = judging.run_counts(session, rubric_id=rubric.id)
        if runs.get((prompt.judge, prompt.version)) or row.source != prompt.source:
            raise InputError(
                f"{prompt.ref} is stored with another text"
                f"{' and has runs' if runs.get((prompt.judge, prompt.version)) else ''}; a "
                "judge prompt version is immutable once a run used it: save the change as a "
                "new version",
                field="--prompt",
            )
        prompts_storage.update_prompt(session, row, text=prompt.text, sha256=prompt.sha256)
    if row.rubric_version is None:
        prompts_storage.update_prompt(session, row, rubric_version=rubric.version)
    elif row.rubric_version != rubric.version:
        raise InputError(
            f"{prompt.ref} was written for {rubric.id}@{row.rubric_version}; it is not reused "
            f"for {rubric.ref}: save it as a new prompt version (it may copy the text) and run "
            "that",
            field="--prompt",
        )
    return row


def preview_messages(
    engine: Engine,
    actor: Actor,
    *,
    rubric: Rubric,
    text: str,
    case_id: str,
    turn: int,
    judge: str = "draft",
) -> list[ChatMessage]:
    """The chat messages ``text`` would send the judge for one unit (nothing stored).

    The text is checked as a template is (InputError naming the line, field ``text``);
    the transcript is shown up to and including ``turn``. Policy owners and admins.
    """
    authorize(engine, actor, "policy_owner")
    check_prompt_text(text, source="the prompt", field="text")
    prompt = JudgePrompt(judge=judge, version="v0", text=text, source="the prompt")
    return unit_messages(engine, prompt=prompt, rubric=rubric, case_id=case_id, turn=turn)


PLACEHOLDER_NAMES = tuple(sorted(PLACEHOLDERS))
"""The placeholders a template may use (for the workbench's list beside the text)."""
