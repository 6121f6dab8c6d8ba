"""Importing case files into the database.

One transaction per file: a file either lands whole or not at all. Re-importing an
identical case changes nothing (content hash); a changed case under a stored
``case_id`` is refused unless ``replace=True``; a contract version stored with a
different body is refused. Findings are computed and stored at import.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import orjson
from sqlalchemy import Engine

from review_app.cases import (
    DEFAULT_MAX_RECORD_BYTES,
    CaseRecord,
    canonical_json,
    content_sha256,
    discover_case_files,
)
from review_app.errors import InputError
from review_app.evaluator import diagnostic, lane
from review_app.formats import FORMATS, NATIVE, detect_format, read_cases
from review_app.services.audit import file_sha256
from review_app.services.people import Actor, authorize
from review_app.services.queue import forget_progress
from storage import audit
from storage.bulk import timestamp_param
from storage.cases import (
    CaseRows,
    delete_case_content,
    insert_case_rows,
    insert_contracts,
    lock_case_writes,
    stored_case_hashes,
    stored_contract_hashes,
)
from storage.replacing import mark_replaced_turns_stale

BATCH_CASES = 1000
KNOWN_CASE_KEYS = frozenset({"case_id", "chatbot_role", "contract", "transcript"})
KNOWN_EVENT_KEYS = frozenset({"turn", "actor", "text", "observed_actions", "set_role", "request"})

ProgressCallback = Callable[[int], None]
ProgressFactory = Callable[[Path, int], ProgressCallback | None]


@dataclass
class FileImport:
    """What one file brought: counts of cases by outcome."""

    path: str
    imported: int = 0
    replaced: int = 0
    unchanged: int = 0
    invalid: int = 0
    with_violations: int = 0
    with_harness_findings: int = 0
    without_contract: int = 0

    def add(self, other: FileImport) -> None:
        for name in (
            "imported",
            "replaced",
            "unchanged",
            "invalid",
            "with_violations",
            "with_harness_findings",
            "without_contract",
        ):
            setattr(self, name, getattr(self, name) + getattr(other, name))


@dataclass
class ImportSummary:
    files: list[FileImport] = field(default_factory=list)

    @property
    def totals(self) -> FileImport:
        total = FileImport(path="(all)")
        for item in self.files:
            total.add(item)
        return total

    def line(self) -> str:
        """The one-line summary the command prints."""
        t = self.totals
        text = (
            f"imported {t.imported}"
            + (f" ({t.replaced} replaced)" if t.replaced else "")
            + f", unchanged {t.unchanged}, invalid fixtures {t.invalid}, "
            f"with violations {t.with_violations}, "
            f"with harness findings {t.with_harness_findings}"
        )
        if t.without_contract:
            text += f", without contract {t.without_contract}"
        files = len(self.files)
        return f"{text} ({files} file{'s' if files != 1 else ''})"

    def to_dict(self) -> dict[str, Any]:
        return {
            "totals": _counts(self.totals),
            "files": [{"path": f.path, **_counts(f)} for f in self.files],
        }


def _counts(item: FileImport) -> dict[str, int]:
    return {
        "imported": item.imported,
        "replaced": item.replaced,
        "unchanged": item.unchanged,
        "invalid": item.invalid,
        "with_violations": item.with_violations,
        "with_harness_findings": item.with_harness_findings,
        "without_contract": item.without_contract,
    }


def _json_text(value: Any) -> str:
    return orjson.dumps(value).decode()


def _role_spans(role_by_turn: dict[int, str | None]) -> list[list[Any]]:
    """``[[first_turn, role], ...]``: the role in force from each turn on."""
    spans: list[list[Any]] = []
    current: object = object()
    for turn, role in role_by_turn.items():
        if role != current:
            spans.append([turn, role])
            current = role
    return spans


def add_case_rows(
    rows: CaseRows,
    record: CaseRecord,
    *,
    source_format: str,
    now: Any,
) -> None:
    """Append the rows that store one validated case (case, events, evaluation, findings)."""
    case = record.case
    result = record.result
    case_id = case["case_id"]
    transcript = case["transcript"]
    events = rows.events
    assistant_turns = 0
    for seq, event in enumerate(transcript):
        text = event.get("text")
        actions = event.get("observed_actions")
        set_role = event.get("set_role")
        request = event.get("request")
        actor = event["actor"]
        if actor == "assistant":
            assistant_turns += 1
        present = 2 + (text is not None) + (actions is not None)
        present += (set_role is not None) + (request is not None)
        extra = None
        if len(event) > present:
            others = {k: v for k, v in event.items() if k not in KNOWN_EVENT_KEYS}
            extra = _json_text(others) if others else None
        events.append(
            (
                case_id,
                seq,
                event["turn"],
                actor,
                text,
                None if actions is None else _json_text(actions),
                set_role,
                None if request is None else _json_text(request),
                extra,
            )
        )
    contract = case.get("contract")
    case_extra = {k: v for k, v in case.items() if k not in KNOWN_CASE_KEYS}
    rows.cases.append(
        (
            case_id,
            case.get("chatbot_role"),
            contract["version"] if contract is not None else None,
            len(transcript),
            assistant_turns,
            record.sha256,
            record.source,
            source_format,
            _json_text(case_extra) if case_extra else None,
            now,
        )
    )
    version = result["evaluator_version"]
    violation = result["first_violation"]
    rows.evaluations.append(
        (
            case_id,
            version,
            result["status"],
            lane(result),
            violation["turn"] if violation else None,
            diagnostic(result),
            _json_text(_role_spans(result["role_by_turn"])),
            len(result["fixture_errors"]),
            len(result["violations"]),
            len(result["harness_findings"]),
            now,
        )
    )
    for kind, key in (
        ("fixture_error", "fixture_errors"),
        ("violation", "violations"),
        ("harness", "harness_findings"),
    ):
        for finding in result[key]:
            rows.findings.append(
                (case_id, version, kind, finding["code"], finding.get("turn"), _json_text(finding))
            )


def _batched(records: Iterable[CaseRecord], size: int) -> Iterator[list[CaseRecord]]:
    batch: list[CaseRecord] = []
    for record in records:
        batch.append(record)
        if len(batch) >= size:
            yield batch
            batch = []
    if batch:
        yield batch


def import_records(
    engine: Engine,
    actor: Actor,
    records: Iterable[CaseRecord],
    *,
    source: str,
    replace: bool = False,
    source_format: str = "native",
    sha256: str | None = None,
) -> FileImport:
    """Store validated records in ONE transaction; any ``InputError`` stores nothing.

    Policy owners and admins. The import (and each ``--replace``) is recorded in the
    audit log in the same transaction, with the file's ``sha256`` when given.
    """
    actor = authorize(engine, actor, "policy_owner")
    outcome = FileImport(path=source)
    replaced_ids: list[str] = []
    now = datetime.now(UTC)
    with engine.begin() as connection:
        lock_case_writes(connection)
        stamp = timestamp_param(connection, now)
        contracts = stored_contract_hashes(connection)
        for batch in _batched(records, BATCH_CASES):
            stored = stored_case_hashes(connection, case_ids=[r.case["case_id"] for r in batch])
            rows = CaseRows.empty()
            new_contracts: list[tuple[str, str, str, Any]] = []
            to_replace: list[str] = []
            for record in batch:
                case_id = record.case["case_id"]
                previous = stored.get(case_id)
                if previous == record.sha256:
                    outcome.unchanged += 1
                    continue
                if previous is not None:
                    if not replace:
                        raise InputError(
                            f"case {case_id} is already stored with different content; "
                            "import with --replace to overwrite it",
                            source=record.source,
                            line=record.line,
                            field="case_id",
                        )
                    to_replace.append(case_id)
                    rows.replaced.add(case_id)
                    outcome.replaced += 1
                contract = record.case.get("contract")
                if contract is not None:
                    version = contract["version"]
                    body = canonical_json(contract)
                    sha = content_sha256(contract)
                    known = contracts.get(version)
                    if known is None:
                        contracts[version] = sha
                        new_contracts.append((version, sha, body.decode(), stamp))
                    elif known != sha:
                        raise InputError(
                            f"contract version {version} is already stored with a different "
                            "body; contracts are immutable, so give the changed contract a "
                            "new version",
                            source=record.source,
                            line=record.line,
                            field="contract",
                        )
                add_case_rows(rows, record, source_format=source_format, now=stamp)
                outcome.imported += 1
                status = record.result["status"]
                outcome.invalid += status == "invalid"
                outcome.with_violations += status == "fail"
                outcome.without_contract += status == "no_contract"
                outcome.with_harness_findings += bool(record.result["harness_findings"])
            if to_replace:
                mark_replaced_turns_stale(
                    connection, case_ids=to_replace, new_cases=rows.cases, new_events=rows.events
                )
                delete_case_content(connection, case_ids=to_replace)
                replaced_ids.extend(to_replace)
            insert_contracts(connection, rows=new_contracts)
            insert_case_rows(connection, rows=rows)
        audit.add_entry(
            connection,
            actor=actor.name,
            action="cases_import",
            object_type="file",
            object_key=Path(source).name,
            summary={
                "sha256": sha256,
                "format": source_format,
                "replace": replace,
                "imported": outcome.imported,
                "unchanged": outcome.unchanged,
                "replaced": outcome.replaced,
            },
        )
        if replaced_ids:
            audit.add_entry(
                connection,
                actor=actor.name,
                action="cases_replace",
                object_type="file",
                object_key=Path(source).name,
                summary={"sha256": sha256, "cases": sorted(replaced_ids)},
            )
    return outcome


def import_paths(
    engine: Engine,
    actor: Actor,
    paths: Iterable[str | Path],
    *,
    replace: bool = False,
    max_record_bytes: int = DEFAULT_MAX_RECORD_BYTES,
    progress: ProgressFactory | None = None,
    on_file_done: Callable[[FileImport], None] | None = None,
    format: str | None = None,
    options: dict[str, Any] | None = None,
) -> ImportSummary:
    """Import case files (and directories of them), one transaction per file.

    ``format`` names the files' format (see :data:`review_app.formats.FORMATS`); without
    it each file's format is detected. ``options`` go to the format's reader. Stops at
    the first file that cannot be stored (that file stores nothing; the files before
    it stay imported) by raising ``InputError``.
    """
    authorize(engine, actor, "policy_owner")
    summary = ImportSummary()
    suffixes = FORMATS[format].suffixes if format in FORMATS else None
    for path in discover_case_files(paths, suffixes=suffixes):
        callback = progress(path, path.stat().st_size) if progress else None
        name = format or detect_format(path, max_record_bytes=max_record_bytes)
        reader_options = dict(options or {})
        if name == NATIVE:
            reader_options = {}
        records = read_cases(
            path,
            format=name,
            max_record_bytes=max_record_bytes,
            progress=callback,
            **reader_options,
        )
        outcome = import_records(
            engine,
            actor,
            records,
            source=str(path),
            replace=replace,
            source_format=name,
            sha256=file_sha256(path),
        )
        if outcome.replaced:
            forget_progress()  # a replacement recounts reviewers' progress on its cases
        summary.files.append(outcome)
        if on_file_done:
            on_file_done(outcome)
    return summary


class StoredConflicts:
    """The checks :func:`import_records` makes against what is stored, without storing:
    a case stored with other content (unless ``replace``), a contract version stored
    with another body (or given two bodies in the file). Feed it records in file order;
    it raises the import's own ``InputError`` at the first record the import would
    refuse. The import page validates with it, so a file shown as importable imports.
    """

    def __init__(self, engine: Engine, *, replace: bool = False) -> None:
        self._engine = engine
        self._replace = replace
        self._contracts: dict[str, str] | None = None
        self._batch: list[CaseRecord] = []

    def add(self, record: CaseRecord) -> None:
        self._batch.append(record)
        if len(self._batch) >= BATCH_CASES:
            self.flush()

    def flush(self) -> None:
        batch, self._batch = self._batch, []
        if not batch:
            return
        with self._engine.connect() as connection:
            if self._contracts is None:
                self._contracts = stored_contract_hashes(connection)
            stored = stored_case_hashes(connection, case_ids=[r.case["case_id"] for r in batch])
        contracts = self._contracts
        for record in batch:
            case_id = record.case["case_id"]
            previous = stored.get(case_id)
            if previous == record.sha256:
                continue
            if previous is not None and not self._replace:
                raise InputError(
                    f"case {case_id} is already stored with different content; "
                    "import with --replace to overwrite it",
                    source=record.source,
                    line=record.line,
                    field="case_id",
                )
            contract = record.case.get("contract")
            if contract is None:
                continue
            version = contract["version"]
            sha = content_sha256(contract)
            known = contracts.setdefault(version, sha)
            if known != sha:
                raise InputError(
                    f"contract version {version} is already stored with a different "
                    "body; contracts are immutable, so give the changed contract a "
                    "new version",
                    source=record.source,
                    line=record.line,
                    field="contract",
                )
