"""Human labels in bulk: the CSV of docs/reference.md, "Label CSV" (case_id,turn,...).

Import checks every row before storing any: an unknown case, turn, rubric or label
code is an error naming the line, and nothing from that file is stored. A row that
repeats the reviewer's current label (same code and rationale) changes nothing, so
importing a file twice is harmless; a different label supersedes the current one
(labels are append-only). Reviewers named in the file who do not exist yet are
created as reviewers, which only an admin may do when sign-in is on. A reviewer
importing their own labels may name only cases in their queue or labeled by them
(policy owners and admins importing for others are not limited by queues). A ``.jsonl``
file (one object per line, the same keys) is read too, including the label data of
``review-app export --format jsonl`` (its context keys are ignored).

Export prefixes ``'`` to cells a spreadsheet would run as a formula (OWASP CSV
injection); import takes that prefix off again, so exporting and re-importing
gives back exactly the stored case ids, reviewer names and rationales.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from sqlalchemy import Engine
from sqlmodel import Session

from review_app import input_policy
from review_app.errors import InputError, PermissionDenied
from review_app.files.csv_safety import csv_text, neutralise_cell, restore_cell
from review_app.files.named_rows import named_rows
from review_app.rubrics.model import Rubric, parse_rubric_ref
from review_app.services.access.actors import Actor, authorize, check_new_person_name, display_of
from review_app.services.access.case_access import not_in_queue
from review_app.services.cases.file_import import file_sha256, record_error, with_stored_turns
from review_app.services.exchange.export import LABEL_EXPORT_COLUMNS
from review_app.services.labels.labeling import MAX_RATIONALE_CHARS
from review_app.services.rubrics.rubric_catalog import RubricCatalog
from storage import assignments, audit, labels, reviewers

LABEL_COLUMNS = ("case_id", "turn", "reviewer", "label", "rubric", "rationale")
REQUIRED_COLUMNS = ("case_id", "turn", "reviewer", "label", "rubric")
_NEUTRALISED_COLUMNS = ("case_id", "reviewer", "rationale")
_EXPORT_CONTEXT_KEYS = tuple(k for k in LABEL_EXPORT_COLUMNS if k not in LABEL_COLUMNS)


@dataclass(frozen=True, slots=True)
class LabelRecord:
    line: int
    case_id: str
    turn: int
    reviewer: str
    code: str
    rubric_id: str
    rubric_version: int
    rationale: str | None
    display: str | None = None
    """The reviewer as the file spells them, when that differs from the identity."""


@dataclass
class LabelImportSummary:
    rows: int = 0
    stored: int = 0
    unchanged: int = 0
    reviewers_created: int = 0

    def line(self) -> str:
        return (
            f"read {self.rows} labels: stored {self.stored}, unchanged {self.unchanged}, "
            f"new reviewers {self.reviewers_created}"
        )


def _read_rows(path: Path) -> Iterator[tuple[int, dict[str, str]]]:
    """Rows of a label file: CSV, or JSONL (``.jsonl``, ``.ndjson``) with the CSV's keys.

    The context keys of ``review-app export --format jsonl`` are accepted and
    ignored, so that export imports back. JSONL cells are not neutralised, so the
    text columns are neutralised here for :func:`parse_label_file` to restore.
    """
    source = str(path)
    jsonl = path.suffix.lower() in (".jsonl", ".ndjson")
    for line, value in named_rows(
        path,
        as_csv=not jsonl,
        columns=LABEL_COLUMNS,
        required=REQUIRED_COLUMNS,
        also_accepted=_EXPORT_CONTEXT_KEYS,
    ):
        if not jsonl:
            yield line, value
            continue
        row: dict[str, str] = {}
        for name in LABEL_COLUMNS:
            cell = value.get(name)
            if cell is None:
                continue
            if name == "turn" and type(cell) is int:
                cell = str(cell)
            if type(cell) is not str:
                raise InputError(
                    f"expected text, got {type(cell).__name__}",
                    source=source,
                    line=line,
                    field=name,
                )
            row[name] = neutralise_cell(cell) if name in _NEUTRALISED_COLUMNS else cell
        yield line, row


def parse_label_file(path: Path, *, catalog: RubricCatalog) -> list[LabelRecord]:
    """Every row of a label CSV, checked for shape, rubric and code (not yet the cases)."""
    source = str(path)
    records: list[LabelRecord] = []
    rubrics: dict[str, Rubric] = {}
    seen: dict[tuple[str, int, str, str, int], int] = {}
    for line, row in _read_rows(path):

        def fail(message: str, column: str, line: int = line) -> InputError:
            return InputError(message, source=source, line=line, field=column)

        values = {name: (row.get(name) or "").strip() for name in LABEL_COLUMNS}
        for name in _NEUTRALISED_COLUMNS:
            values[name] = restore_cell(values[name])
        for name in REQUIRED_COLUMNS:
            if not values[name]:
                raise fail("empty cell", name)
        parsed_turn = input_policy.parse_turn_text(values["turn"])
        if parsed_turn is None:
            raise fail(f"expected an integer turn, got {values['turn'][:20]!r}", "turn")
        turn = parsed_turn
        values["case_id"] = input_policy.check_case_id(values["case_id"], source=source, line=line)
        ref = values["rubric"]
        if ref not in rubrics:
            try:
                rubric_id, version = parse_rubric_ref(ref)
                rubrics[ref] = catalog.get(f"{rubric_id}@{version}")
            except InputError as error:
                raise fail(error.message, "rubric") from None
            except Exception as error:
                raise fail(str(error), "rubric") from None
        rubric = rubrics[ref]
        if values["label"] not in rubric.codes:
            raise fail(
                f"{values['label']!r} is not a code of {rubric.ref} "
                f"(codes: {', '.join(rubric.codes)})",
                "label",
            )
        try:
            reviewer = check_new_person_name(values["reviewer"])
        except InputError as error:
            raise fail(error.message, "reviewer") from None
        rationale = values["rationale"] or None
        if rationale and len(rationale) > MAX_RATIONALE_CHARS:
            raise fail(f"a rationale is at most {MAX_RATIONALE_CHARS} characters", "rationale")
        input_policy.check_text(rationale, field="rationale", source=source, line=line)
        unit = (values["case_id"], turn, reviewer, rubric.id, rubric.version)
        if unit in seen:
            raise fail(
                f"{reviewer} labels turn {turn} of {values['case_id']} twice in this file "
                f"(also on line {seen[unit]})",
                "turn",
            )
        seen[unit] = line
        records.append(
            LabelRecord(
                line,
                values["case_id"],
                turn,
                reviewer,
                values["label"],
                rubric.id,
                rubric.version,
                rationale,
                display_of(values["reviewer"]),
            )
        )
    if not records:
        raise InputError("the file has a header but no labels", source=source)
    return records


def import_labels(
    engine: Engine,
    actor: Actor,
    path: Path,
    *,
    catalog: RubricCatalog,
    sign_in_enabled: bool = False,
) -> LabelImportSummary:
    """Import a label CSV in one transaction (all rows or none)."""
    actor = authorize(engine, actor, "reviewer")
    source = str(path)
    records = parse_label_file(path, catalog=catalog)
    applies_to = {
        (r.rubric_id, r.rubric_version): catalog.get(f"{r.rubric_id}@{r.rubric_version}").applies_to
        for r in records
    }
    if not actor.has_role("policy_owner"):
        others = sorted({r.reviewer for r in records} - {actor.name})
        if others:
            raise PermissionDenied(
                f"a reviewer imports only their own labels; this file has labels by {others[0]}"
            )
    summary = LabelImportSummary(rows=len(records))
    now = datetime.now(UTC)
    with Session(engine) as session:
        if not actor.has_role("policy_owner"):
            # A reviewer's own file: only cases in their queue or labeled by them, and a
            # case that does not exist gets the same answer as one that is not theirs.
            assert actor.reviewer_id is not None
            theirs = assignments.reviewer_case_ids(
                session,
                reviewer_id=actor.reviewer_id,
                case_ids=[r.case_id for r in records],
            )
            for record in records:
                if record.case_id not in theirs:
                    raise record_error(
                        str(not_in_queue(actor, record.case_id)),
                        source=source,
                        record=record,
                        field="case_id",
                    )
        for record, turns in with_stored_turns(session, records, source=source):
            event_actor = turns.get(record.turn)
            wanted = applies_to[(record.rubric_id, record.rubric_version)]
            if event_actor is None:
                message = f"case {record.case_id} has no turn {record.turn}"
            elif event_actor != wanted:
                message = (
                    f"turn {record.turn} of {record.case_id} is a {event_actor} event; the "
                    f"rubric labels {wanted} turns"
                )
            else:
                continue
            raise record_error(message, source=source, record=record, field="turn")
        people = reviewers.reviewers_by_name(session, names={r.reviewer for r in records})
        new_names = sorted({r.reviewer for r in records} - set(people))
        if new_names and sign_in_enabled and not actor.has_role("admin"):
            first = next(r for r in records if r.reviewer == new_names[0])
            raise PermissionDenied(
                f"{source}, line {first.line}: reviewer {new_names[0]} does not exist and only "
                "an admin's import may create reviewers"
            )
        for name in new_names:
            typed = next(r.display for r in records if r.reviewer == name)
            people[name] = reviewers.ensure_reviewer(
                session, name=name, role="reviewer", display_name=typed
            )
        summary.reviewers_created = len(new_names)
        ids = {name: person.id for name, person in people.items()}
        by_rubric: dict[tuple[str, int], list[LabelRecord]] = defaultdict(list)
        for record in records:
            by_rubric[(record.rubric_id, record.rubric_version)].append(record)
        for (rubric_id, version), group in by_rubric.items():
            # The same row locks as a reviewer's save, so a save racing this import
            # waits for it (and the import for the save) instead of both staying current.
            assignments.lock_assignments(
                session,
                rubric_id=rubric_id,
                version=version,
                pairs=[(r.case_id, int(ids[r.reviewer] or 0)) for r in group],
            )
            current = labels.current_labels(
                session,
                rubric_id=rubric_id,
                version=version,
                case_ids=sorted({r.case_id for r in group}),
            )
            superseded: list[int] = []
            rows = []
            touched: set[tuple[str, int]] = set()
            for record in group:
                reviewer_id = ids[record.reviewer]
                assert reviewer_id is not None
                existing = current.get((record.case_id, record.turn, reviewer_id))
                if existing is not None and existing[1:] == (record.code, record.rationale):
                    summary.unchanged += 1
                    continue
                if existing is not None:
                    superseded.append(existing[0])
                rows.append(
                    (
                        record.case_id,
                        record.turn,
                        reviewer_id,
                        rubric_id,
                        version,
                        record.code,
                        record.rationale,
                        True,
                        "import",
                        now,
                    )
                )
                touched.add((record.case_id, reviewer_id))
            labels.supersede(session, label_ids=superseded)
            labels.insert_labels(session, rows=rows)
            assignments.refresh_progress(
                session,
                rubric_id=rubric_id,
                version=version,
                pairs=sorted(touched),
                applies_to=applies_to[(rubric_id, version)],
                now=now,
            )
            summary.stored += len(rows)
        audit.add_entry(
            session,
            actor=actor.name,
            action="labels_import",
            object_type="file",
            object_key=path.name,
            summary={
                "sha256": file_sha256(path),
                "rows": summary.rows,
                "stored": summary.stored,
                "unchanged": summary.unchanged,
                "reviewers_created": new_names,
                "rubrics": sorted(f"{r}@{v}" for r, v in by_rubric),
            },
        )
        session.commit()
    return summary


def export_labels_csv(
    engine: Engine, actor: Actor, *, rubric: Rubric, history: bool = False
) -> str:
    """Current labels of a rubric version (or every label ever, with ``history``) as CSV.

    Every reviewer's labels: policy owners and admins only. Recorded in the audit log.

    Rows are ordered by case, turn, reviewer (and time), so the same data always
    gives the same bytes. Cells that a spreadsheet would run as a formula are
    prefixed with ``'``.
    """
    actor = authorize(engine, actor, "policy_owner")
    with Session(engine) as session:
        rows = labels.export_rows(
            session, rubric_id=rubric.id, version=rubric.version, history=history
        )
        audit.add_entry(
            session,
            actor=actor.name,
            action="export",
            object_type="rubric",
            object_key=rubric.ref,
            summary={"format": "labels_csv", "history": history, "rows": len(rows)},
        )
        session.commit()
    return csv_text(
        list(LABEL_COLUMNS),
        [
            [case_id, str(turn), reviewer, code, rubric.ref, rationale or ""]
            for case_id, turn, reviewer, code, rationale in rows
        ],
    )
