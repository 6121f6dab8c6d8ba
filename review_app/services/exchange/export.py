"""Exports: labeled regression fixtures for CI, label data with context, deepeval cases.

``fixtures``: one JSON case per file with an ``expected`` block, a generated pytest
module replaying them through ``review_app.evaluator``, and a manifest with honest
denominators. ``jsonl`` / ``csv``: every current label with its case and turn
context (CSV cells neutralised against formula injection). ``deepeval``:
conversational test cases carrying the gold verdict as the expected outcome.
``redact`` masks transcript text (and rationales) but keeps events and labels.
Exports are deterministic: the same data gives byte-identical files.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sqlalchemy import Engine
from sqlmodel import Session

import storage.certified_verdicts
import storage.labels
from review_app.errors import InputError
from review_app.files.csv_safety import csv_text
from review_app.files.discovery import export_manifest
from review_app.formats.deepeval import write_deepeval
from review_app.formats.fixtures import (
    EXPORTER_VERSION,
    MANIFEST_NAME,
    TEST_MODULE_NAME,
    CaseExport,
    SemanticLabel,
    dumps,
    fixture_document,
    fixture_file_names,
    manifest,
    pytest_module_text,
    redact_case,
    redact_text,
)
from review_app.rubrics.model import Rubric
from review_app.services.access.actors import Actor, authorize
from review_app.services.cases.case_selection import selected_cases
from review_app.services.cases.case_views import CaseView, case_view, check_lane
from review_app.services.labels.adjudication import GoldSet, gold_labels
from storage import audit
from storage.engine import read_only

EXPORT_FORMATS = ("fixtures", "jsonl", "csv", "deepeval")
LABEL_EXPORT_COLUMNS = (
    "case_id",
    "turn",
    "reviewer",
    "label",
    "rubric",
    "rationale",
    "verdict",
    "gold_label",
    "gold_source",
    "active_role",
    "actions",
    "findings",
    "user_text",
    "assistant_text",
)


@dataclass
class ExportResult:
    files: dict[str, bytes]
    manifest: dict[str, Any]

    def line(self) -> str:
        return f"{len(self.files)} files: {self.manifest['cases_exported']} cases"


def export_file_name(rubric: Rubric, *, format: str, lane: str | None, redact: bool) -> str:
    """The download's name: what it holds, so two exports of other choices never share
    one (``role-adherence-v1-csv-lane-violation-redacted.zip``)."""
    parts = [f"{rubric.id}-v{rubric.version}", format]
    if lane is not None:
        parts.append(f"lane-{lane}")
    if redact:
        parts.append("redacted")
    return "-".join(parts) + ".zip"


def _views(engine: Engine, *, lane: str | None, case_ids: Sequence[str] | None) -> list[CaseView]:
    check_lane(lane)
    with Session(read_only(engine)) as session:
        rows = selected_cases(session, case_ids=case_ids, lane=lane)
        return [case_view(session, case_id=row.case_id) for row in rows]


def _case_export(view: CaseView, gold: GoldSet, rubric: Rubric) -> CaseExport:
    labels: list[SemanticLabel] = []
    without: dict[int, str] = {}
    for turn in view.turns:
        if turn.actor != rubric.applies_to:
            continue
        unit = (view.case_id, turn.turn)
        entry = gold.labels.get(unit)
        if entry is not None:
            labels.append(SemanticLabel(turn.turn, entry.code, entry.source))
        elif unit in gold.in_disagreement:
            without[turn.turn] = "in_disagreement"
        elif unit in gold.single_rater:
            without[turn.turn] = "single_rater"
        else:
            without[turn.turn] = "unlabeled"
    return CaseExport(view.to_case_dict(), labels, without)


def export_data(
    engine: Engine,
    actor: Actor,
    *,
    rubric: Rubric,
    format: str,
    redact: bool = False,
    lane: str | None = None,
    case_ids: Sequence[str] | None = None,
) -> ExportResult:
    """The export's files (relative path -> bytes), built in memory; policy owners.

    The export is recorded in the audit log (format, rubric, counts, manifest hash).
    """
    actor = authorize(engine, actor, "policy_owner")
    if format not in EXPORT_FORMATS:
        raise InputError(
            f"unknown export format {format!r}; choose one of {', '.join(EXPORT_FORMATS)}",
            field="--format",
        )
    views = _views(engine, lane=lane, case_ids=case_ids)
    gold = gold_labels(engine, actor, rubric=rubric)
    exports = [_case_export(view, gold, rubric) for view in views]
    summary = manifest(
        exports,
        rubric_ref=rubric.ref,
        break_codes=rubric.break_codes,
        redact=redact,
        data_format=format,
    )
    files: dict[str, bytes] = {}
    if format == "fixtures":
        names = fixture_file_names(e.case["case_id"] for e in exports)
        certified = _certified_by_case(engine, rubric)
        if certified:
            summary["certified_judge_verdicts"] = sum(len(v) for v in certified.values())
        for export in exports:
            name = names[export.case["case_id"]]
            document = fixture_document(
                export, rubric_ref=rubric.ref, break_codes=rubric.break_codes, redact=redact
            )
            if export.case["case_id"] in certified:
                # Judge verdicts certified by `judge route --apply` (docs/reference.md,
                # "Judge route JSON"): decided by the judge, not by reviewers.
                document["certified_judge_verdicts"] = certified[export.case["case_id"]]
            files[name] = dumps(document).encode("utf-8")
        files[TEST_MODULE_NAME] = pytest_module_text(rubric_ref=rubric.ref).encode("utf-8")
    elif format == "deepeval":
        cases = [redact_case(e.case) if redact else e.case for e in exports]
        expected = {e.case["case_id"]: _deepeval_expected(e, rubric) for e in exports}
        files["deepeval_test_cases.json"] = write_deepeval(cases, expected=expected).encode()
    else:
        rows = _label_rows(engine, rubric=rubric, views=views, gold=gold, redact=redact)
        if format == "jsonl":
            text = "".join(
                json.dumps(row, sort_keys=True, ensure_ascii=False) + "\n" for row in rows
            )
            files["labels.jsonl"] = text.encode("utf-8")
        else:
            files["labels.csv"] = _labels_csv(rows).encode("utf-8")
    # The manifest lists the export's files, so a later export into the same
    # directory replaces exactly these and leaves the user's own files alone.
    summary["files"] = sorted(files)
    files[MANIFEST_NAME] = dumps(summary).encode("utf-8")
    with Session(engine) as session:
        audit.add_entry(
            session,
            actor=actor.name,
            action="export",
            object_type="rubric",
            object_key=rubric.ref,
            summary={
                "format": format,
                "redact": redact,
                "lane": lane,
                "cases": summary.get("cases_exported"),
                "files": len(files),
                "manifest_sha256": hashlib.sha256(files[MANIFEST_NAME]).hexdigest(),
            },
        )
        session.commit()
    return ExportResult(files, summary)


def _certified_by_case(engine: Engine, rubric: Rubric) -> dict[str, list[dict[str, Any]]]:
    with Session(read_only(engine)) as session:
        rows = storage.certified_verdicts.certified_verdicts(
            session, rubric_id=rubric.id, version=rubric.version
        )
    by_case: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for (case_id, turn), row in sorted(rows.items()):
        by_case[case_id].append(
            {
                "turn": turn,
                "label": row.label,
                "run": row.run_id,
                "confidence": row.confidence,
                "threshold": row.threshold,
                "alpha": row.alpha,
                "delta": row.delta,
            }
        )
    return dict(by_case)


def _deepeval_expected(export: CaseExport, rubric: Rubric) -> dict[str, Any]:
    breaks = [g for g in sorted(export.gold, key=lambda g: g.turn) if g.code in rubric.break_codes]
    if breaks:
        outcome = f"The chatbot breaks its role at turn {breaks[0].turn} ({breaks[0].code})."
    elif export.units_without_gold:
        outcome = (
            "No role break in the turns with a gold label; "
            f"{len(export.units_without_gold)} turns have none."
        )
    else:
        outcome = "The chatbot stays in its role in every turn."
    return {
        "expected_outcome": outcome,
        "rubric": rubric.ref,
        "gold_labels": {str(g.turn): g.code for g in export.gold},
        "first_break_turn": breaks[0].turn if breaks else None,
        "exporter": EXPORTER_VERSION,
    }


def _label_rows(
    engine: Engine, *, rubric: Rubric, views: list[CaseView], gold: GoldSet, redact: bool
) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    with Session(read_only(engine)) as session:
        for view in views:
            labels = storage.labels.labels_for_case(
                session, case_id=view.case_id, rubric_id=rubric.id, version=rubric.version
            )
            if not labels:
                continue
            by_turn = defaultdict(list)
            for label in labels:
                by_turn[label.turn].append(label)
            previous_user: str | None = None
            for turn in view.turns:
                if turn.actor == "user":
                    previous_user = turn.text
                for label in sorted(by_turn.get(turn.turn, []), key=lambda r: r.reviewer):
                    entry = gold.labels.get((view.case_id, turn.turn))
                    findings = sorted(
                        {
                            f["code"]
                            for f in turn.violations + turn.fixture_errors + turn.harness_findings
                        }
                    )
                    user_text, reply = previous_user, turn.text
                    rationale = label.rationale
                    if redact:
                        user_text = redact_text(user_text) if user_text else user_text
                        reply = redact_text(reply) if reply else reply
                        rationale = redact_text(rationale) if rationale else rationale
                    rows.append(
                        {
                            "case_id": view.case_id,
                            "turn": turn.turn,
                            "reviewer": label.reviewer,
                            "label": label.code,
                            "rubric": rubric.ref,
                            "rationale": rationale,
                            "verdict": rubric.verdict_of(label.code),
                            "gold_label": entry.code if entry else None,
                            "gold_source": entry.source if entry else None,
                            "active_role": turn.active_role,
                            "actions": turn.actions,
                            "findings": findings,
                            "user_text": user_text,
                            "assistant_text": reply,
                        }
                    )
    return rows


def _labels_csv(rows: list[dict[str, Any]]) -> str:
    # csv_text ends lines with \r\n, so a cell holding a carriage return is quoted;
    # with a bare \n terminator the csv module would leave it unquoted and break the row.
    table = []
    for row in rows:
        cells = []
        for column in LABEL_EXPORT_COLUMNS:
            value = row[column]
            if isinstance(value, list):
                value = ",".join(value)
            cells.append("" if value is None else str(value))
        table.append(cells)
    return csv_text(list(LABEL_EXPORT_COLUMNS), table)


def _earlier_manifest(out_dir: Path) -> dict[str, Any] | None:
    """The manifest of an earlier export in ``out_dir``; ``None`` when there is none.

    A ``manifest.json`` that another tool wrote (a browser extension, a web app)
    is not ours: it must not make the directory's files ours to delete.
    """
    path = out_dir / MANIFEST_NAME
    if path.is_symlink() or not path.is_file():
        return None
    return export_manifest(path)


def _files_of(manifest: dict[str, Any], out_dir: Path) -> list[Path]:
    """The files an earlier export wrote (its manifest lists them)."""
    names = manifest.get("files")
    if not isinstance(names, list):
        # A manifest without a file list (earlier versions): it names no file, so none
        # is deleted; the new export's files replace those of the same name.
        return []
    found = []
    for name in names:
        if isinstance(name, str) and name == Path(name).name and name not in ("", ".", ".."):
            path = out_dir / name
            if path.is_symlink() or path.is_file():
                found.append(path)  # unlinking a link removes the link, not its target
    return found


def _refuse_links(out_dir: Path, names: list[str]) -> None:
    """Refuse before anything is changed when a file the export writes is a symbolic
    link (writing through it would write outside ``--out``)."""
    for name in [*names, MANIFEST_NAME]:
        if (out_dir / name).is_symlink():
            raise InputError(
                f"{name} is a symbolic link; the export never writes through links "
                "(remove it or choose another directory)",
                source=str(out_dir),
            )


def _write_new(target: Path, data: bytes) -> None:
    """Write ``data`` to ``target`` without following a link there (``O_NOFOLLOW``)."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC | getattr(os, "O_NOFOLLOW", 0)
    descriptor = os.open(target, flags, 0o644)
    with os.fdopen(descriptor, "wb") as handle:
        handle.write(data)


def write_export(result: ExportResult, out_dir: Path) -> list[Path]:
    """Write the files; a directory holding an earlier export has that export's files replaced.

    A non-empty directory that holds no earlier export is refused, so an export
    never mixes with unrelated files (a stale fixture would be replayed by CI).
    Files the user added beside an earlier export (a README, a conftest.py) stay.
    """
    if out_dir.exists() and not out_dir.is_dir():
        raise InputError("not a directory; choose an empty or new directory", source=str(out_dir))
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
        _refuse_links(out_dir, sorted(result.files))
        if any(out_dir.iterdir()):
            previous = _earlier_manifest(out_dir)
            if previous is None:
                raise InputError(
                    "the directory is not empty and holds no earlier export; choose "
                    "an empty or new directory",
                    source=str(out_dir),
                )
            for path in _files_of(previous, out_dir):
                path.unlink()
            (out_dir / MANIFEST_NAME).unlink(missing_ok=True)
        written = []
        for name, data in sorted(result.files.items()):
            target = out_dir / name
            _write_new(target, data)
            written.append(target)
    except OSError as error:
        raise InputError(
            f"cannot write the export: {error.strerror or error}", source=str(out_dir)
        ) from None
    return written
