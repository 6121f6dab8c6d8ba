"""Importing case files into the database.

One file is one write transaction: its cases are written in chunks (memory stays
bounded) inside it, and a bad line anywhere, a changed case, a changed contract or a
killed process leaves the database as it was before the file. Re-importing an
identical case changes nothing (content hash); a changed case under a stored
``case_id`` is refused unless ``replace=True``; a contract version stored with a
different body is refused. Findings are computed and stored at import.

On PostgreSQL reviewers save labels beside an import as usual; on SQLite a save waits
for the file's transaction (within the busy timeout; the review page sends again what
the database refused as busy).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from sqlalchemy import Connection, Engine

from review_app.case_records import CaseRecord, content_sha256
from review_app.errors import InputError
from review_app.files.discovery import discover_case_files
from review_app.formats.detect import FORMATS, open_cases
from review_app.formats.options import ImportOptions
from review_app.services.access.actors import Actor, authorize
from review_app.services.cases.case_rows import ContractHashes, PreparedCase, prepare_case
from review_app.services.cases.file_import import file_sha256
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

CHUNK_EVENTS = 20_000
"""Events (rows) prepared before they are written, inside the file's transaction."""

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
    stale_labels: int = 0
    """Labels on replaced cases whose turn changed: history now, "needs relabeling"."""
    stale_gold: int = 0
    dropped_verdicts: int = 0
    """Judge verdicts on changed turns (and conversation verdicts on changed cases),
    deleted with the old content: they judged a conversation that is gone."""
    complete: bool = True
    """False when the import of this file stopped at an error (nothing of it stored)."""

    def add(self, other: FileImport) -> None:
        for name in (
            "imported",
            "replaced",
            "unchanged",
            "invalid",
            "with_violations",
            "with_harness_findings",
            "without_contract",
            "stale_labels",
            "stale_gold",
            "dropped_verdicts",
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
            + (f" ({t.replaced} replaced{_stale_text(t)})" if t.replaced else "")
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


def _stale_text(t: FileImport) -> str:
    parts = [
        f"{t.stale_labels} label{'s' if t.stale_labels != 1 else ''}",
        f"{t.stale_gold} gold label{'s' if t.stale_gold != 1 else ''}",
    ]
    text = f": {' and '.join(parts)} went stale"
    if t.dropped_verdicts:
        text += (
            f", {t.dropped_verdicts} judge verdict{'s' if t.dropped_verdicts != 1 else ''} "
            "on changed turns removed"
        )
    return text


def _counts(item: FileImport) -> dict[str, int]:
    return {
        "imported": item.imported,
        "replaced": item.replaced,
        "unchanged": item.unchanged,
        "invalid": item.invalid,
        "with_violations": item.with_violations,
        "with_harness_findings": item.with_harness_findings,
        "without_contract": item.without_contract,
        "stale_labels": item.stale_labels,
        "stale_gold": item.stale_gold,
        "dropped_verdicts": item.dropped_verdicts,
    }


def _changed_case_error(case_id: str, *, source: str | None, line: int | None) -> InputError:
    """The refusal of a case stored with other content, imported without ``replace``."""
    return InputError(
        f"case {case_id} is already stored with different content; "
        "import with --replace to overwrite it",
        source=source,
        line=line,
        field="case_id",
    )


def _changed_contract_error(version: str, *, source: str | None, line: int | None) -> InputError:
    """The refusal of a contract version stored (or given earlier) with another body."""
    return InputError(
        f"contract version {version} is already stored with a different body; contracts "
        "are immutable, so give the changed contract a new version",
        source=source,
        line=line,
        field="contract",
    )


@dataclass(frozen=True)
class _AuditContext:
    """What an import's audit entries say besides a chunk's counts."""

    actor: str
    source: str
    sha256: str | None
    source_format: str
    replace: bool


def _store_chunk(
    connection: Connection,
    chunk: list[PreparedCase],
    *,
    replace: bool,
    counts: FileImport,
    contracts: dict[str, str],
    replaced: list[str],
) -> None:
    """Write whole cases inside the file's transaction; an ``InputError`` raised here
    stores nothing of the file (the caller's transaction is rolled back).

    Which cases are stored already (by content hash) is read inside the transaction
    (earlier chunks of the file included), and ``contracts`` holds every contract
    version stored or written by the file so far, so two imports running at once
    cannot both insert a row (they hold the case write lock in turn).
    """
    stored = stored_case_hashes(connection, case_ids=[p.case_id for p in chunk])
    rows = CaseRows.empty()
    new_contracts: list[tuple[str, str, str, Any]] = []
    to_replace: list[str] = []
    for prepared in chunk:
        case_id = prepared.case_id
        previous = stored.get(case_id)
        if previous == prepared.sha256:
            counts.unchanged += 1
            continue
        if previous is not None:
            if not replace:
                raise _changed_case_error(case_id, source=prepared.source, line=prepared.line)
            to_replace.append(case_id)
            rows.replaced.add(case_id)
            counts.replaced += 1
        if prepared.contract is not None:
            version, sha, body = prepared.contract
            known = contracts.get(version)
            if known is None:
                contracts[version] = sha
                new_contracts.append((version, sha, body, prepared.case_row[-1]))
            elif known != sha:
                raise _changed_contract_error(version, source=prepared.source, line=prepared.line)
        rows.cases.append(prepared.case_row)
        rows.events.extend(prepared.event_rows)
        rows.evaluations.append(prepared.evaluation_row)
        rows.findings.extend(prepared.finding_rows)
        counts.imported += 1
        status = prepared.status
        counts.invalid += status == "invalid"
        counts.with_violations += status == "fail"
        counts.without_contract += status == "no_contract"
        counts.with_harness_findings += prepared.has_harness_findings
    if to_replace:
        # Here, not at the top: replacing needs the label, assignment and judging
        # queries (and numpy), which a plain import never loads.
        from storage.replacing import mark_replaced_turns_stale

        marks = mark_replaced_turns_stale(
            connection, case_ids=to_replace, new_cases=rows.cases, new_events=rows.events
        )
        counts.stale_labels += marks.labels
        counts.stale_gold += marks.gold_labels
        counts.dropped_verdicts += marks.verdicts
        delete_case_content(connection, case_ids=to_replace)
        replaced.extend(to_replace)
    insert_contracts(connection, rows=new_contracts)
    insert_case_rows(connection, rows=rows)


def _record_import(
    connection: Connection, counts: FileImport, replaced: list[str], entry: _AuditContext
) -> None:
    """The file's audit entries, in its transaction: what it stored, and the cases it
    replaced with what went stale."""
    audit.add_entry(
        connection,
        actor=entry.actor,
        action="cases_import",
        object_type="file",
        object_key=Path(entry.source).name,
        summary={
            "sha256": entry.sha256,
            "format": entry.source_format,
            "replace": entry.replace,
            "imported": counts.imported,
            "unchanged": counts.unchanged,
            "replaced": counts.replaced,
        },
    )
    if replaced:
        audit.add_entry(
            connection,
            actor=entry.actor,
            action="cases_replace",
            object_type="file",
            object_key=Path(entry.source).name,
            summary={
                "sha256": entry.sha256,
                "cases": sorted(replaced),
                "stale_labels": counts.stale_labels,
                "stale_gold": counts.stale_gold,
                "dropped_verdicts": counts.dropped_verdicts,
            },
        )


def import_records(
    engine: Engine,
    actor: Actor,
    records: Iterable[CaseRecord],
    *,
    source: str,
    replace: bool = False,
    source_format: str = "native",
    sha256: str | None = None,
    outcome: FileImport | None = None,
    chunk_events: int = CHUNK_EVENTS,
) -> FileImport:
    """Store validated records, all of them or none: one write transaction.

    Records are read (parsed, validated, evaluated) as the import goes and written a
    chunk of about ``chunk_events`` events at a time inside the transaction, so memory
    stays bounded whatever the file's size. The transaction begins with the first chunk
    (on SQLite that is when the write lock is taken) and commits after the last, with
    the file's audit entries (what it stored, the cases it replaced, its ``sha256``).

    An ``InputError`` anywhere (a record that cannot be stored, a changed case without
    ``replace``, a changed contract), an interrupt or a killed process rolls it back:
    nothing of the file is stored and the counts stay zero. Policy owners and admins.
    """
    actor = authorize(engine, actor, "policy_owner")
    entry = _AuditContext(
        actor=actor.name,
        source=source,
        sha256=sha256,
        source_format=source_format,
        replace=replace,
    )
    outcome = outcome if outcome is not None else FileImport(path=source)
    counts = FileImport(path=outcome.path)
    replaced: list[str] = []
    stamp = timestamp_param(engine, datetime.now(UTC))
    hashes = ContractHashes()
    budget = max(1, chunk_events)
    with contextlib.ExitStack() as stack:
        connection: Connection | None = None
        contracts: dict[str, str] = {}

        def write(chunk: list[PreparedCase]) -> None:
            nonlocal connection, contracts
            if connection is None:  # the transaction begins with the first chunk
                connection = stack.enter_context(engine.begin())
                lock_case_writes(connection)
                contracts = stored_contract_hashes(connection)
            _store_chunk(
                connection,
                chunk,
                replace=replace,
                counts=counts,
                contracts=contracts,
                replaced=replaced,
            )

        try:
            chunk: list[PreparedCase] = []
            pending_events = 0
            for record in records:
                prepared = prepare_case(
                    record, source_format=source_format, now=stamp, contracts=hashes
                )
                chunk.append(prepared)
                pending_events += len(prepared.event_rows) + 1
                if pending_events >= budget:
                    write(chunk)
                    chunk, pending_events = [], 0
            if chunk or connection is None:
                write(chunk)
            assert connection is not None
            _record_import(connection, counts, replaced, entry)
        except BaseException:
            outcome.complete = False
            raise
    outcome.add(counts)  # counted once committed
    return outcome


def import_paths(
    engine: Engine,
    actor: Actor,
    paths: Iterable[str | Path],
    options: ImportOptions | None = None,
    *,
    progress: ProgressFactory | None = None,
    on_file_done: Callable[[FileImport], None] | None = None,
) -> ImportSummary:
    """Import case files (and directories of them), each case whole (see :func:`import_records`).

    ``options`` (the command line's or the import page's, passed on unchanged) name the
    files' format (see :data:`review_app.formats.detect.FORMATS`; without it each file's format
    is detected), whether to replace changed cases, and the readers' options. Stops at
    the first file that cannot be stored by raising ``InputError``: nothing of that
    file is stored; the files before it stay imported (``on_file_done`` heard of each).
    """
    authorize(engine, actor, "policy_owner")
    options = options or ImportOptions()
    summary = ImportSummary()
    suffixes = FORMATS[options.format].suffixes if options.format in FORMATS else None
    for path in discover_case_files(paths, suffixes=suffixes):
        callback = progress(path, path.stat().st_size) if progress else None
        name, records = open_cases(path, options, progress=callback)
        outcome = FileImport(path=str(path))
        import_records(
            engine,
            actor,
            records,
            source=str(path),
            replace=options.replace,
            source_format=name,
            outcome=outcome,
            sha256=file_sha256(path),
        )
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

    BATCH_CASES = 1000
    """Records looked up in the database at once."""

    def __init__(self, engine: Engine, *, replace: bool = False) -> None:
        self._engine = engine
        self._replace = replace
        self._contracts: dict[str, str] | None = None
        self._batch: list[CaseRecord] = []

    def add(self, record: CaseRecord) -> None:
        self._batch.append(record)
        if len(self._batch) >= self.BATCH_CASES:
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
                raise _changed_case_error(case_id, source=record.source, line=record.line)
            contract = record.case.get("contract")
            if contract is None:
                continue
            version = contract["version"]
            sha = content_sha256(contract)
            known = contracts.setdefault(version, sha)
            if known != sha:
                raise _changed_contract_error(version, source=record.source, line=record.line)
