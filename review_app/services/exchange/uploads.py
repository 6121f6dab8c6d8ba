"""Files uploaded through the pages: checked, previewed, imported (as the CLI would).

An upload is written to a private temporary file under its original name (the
suffix decides JSON / JSONL / CSV), then handed to the same services the command
line uses; nothing is stored unless the whole file is valid.
"""

from __future__ import annotations

import io
import tempfile
import zipfile
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sqlalchemy import Engine

from review_app.errors import InputError
from review_app.evaluator import lane
from review_app.formats.detect import FORMATS, open_cases
from review_app.formats.options import ImportOptions
from review_app.rubrics.model import Rubric
from review_app.services.access.actors import Actor, authorize
from review_app.services.cases.importing import ImportSummary, StoredConflicts, import_paths
from review_app.services.exchange.export import ExportResult
from review_app.services.exchange.labels_io import LabelImportSummary, import_labels
from review_app.services.judging.judge_import import JudgeImportSummary, import_verdicts
from review_app.services.rubrics.rubric_catalog import RubricCatalog

MAX_UPLOAD_BYTES = 200 * 1024 * 1024
_SAFE_SUFFIXES = (".json", ".jsonl", ".ndjson", ".csv")


@contextmanager
def uploaded_file(name: str, data: bytes) -> Iterator[Path]:
    suffix = Path(name).suffix.lower()
    if suffix not in _SAFE_SUFFIXES:
        raise InputError(f"expected a {', '.join(_SAFE_SUFFIXES)} file", source=name)
    if len(data) > MAX_UPLOAD_BYTES:
        raise InputError(
            f"larger than {MAX_UPLOAD_BYTES // (1024 * 1024)} MB; use "
            "review-app import for big files",
            source=name,
        )
    with tempfile.TemporaryDirectory(prefix="role-review-upload-") as directory:
        path = Path(directory) / Path(name).name
        path.write_bytes(data)
        yield path


@dataclass
class ValidationReport:
    """What an uploaded case file would bring, before anything is stored."""

    file: str
    format: str
    cases: list[dict[str, Any]] = field(default_factory=list)
    lanes: dict[str, int] = field(default_factory=dict)
    error: str | None = None

    @property
    def ok(self) -> bool:
        return self.error is None


def validate_upload(
    engine: Engine,
    actor: Actor,
    *,
    name: str,
    data: bytes,
    options: ImportOptions,
) -> ValidationReport:
    """Read and check the file as the import would, with the same ``options``, against
    what is stored too (cases stored with other content unless ``options.replace``,
    contract versions stored with another body): a file reported ``ok`` is one the
    import accepts."""
    authorize(engine, actor, "policy_owner")
    report = ValidationReport(file=name, format=options.format or "?")
    conflicts = StoredConflicts(engine, replace=options.replace)
    try:
        with uploaded_file(name, data) as path:
            report.format, records = open_cases(path, options)
            for record in records:
                conflicts.add(record)
                result = record.result
                report.cases.append(
                    {
                        "case_id": record.case["case_id"],
                        "events": len(record.case["transcript"]),
                        "lane": lane(result),
                        "diagnostic_status": result["status"],
                        "line": record.line,
                    }
                )
            conflicts.flush()
    except InputError as error:
        report.error = _display_name(str(error), name)
    report.lanes = dict(Counter(case["lane"] for case in report.cases))
    return report


def _display_name(message: str, name: str) -> str:
    """Error messages name the uploaded file, not its temporary copy."""
    temporary = str(Path(tempfile.gettempdir()))
    if message.startswith(temporary):
        first, _, rest = message.partition(Path(name).name)
        return f"{name}{rest}" if rest or first else message
    return message


@contextmanager
def _imported_upload(name: str, data: bytes) -> Iterator[Path]:
    """The upload as a file for an import whose errors name the upload."""
    with uploaded_file(name, data) as path:
        try:
            yield path
        except InputError as error:
            raise InputError(_display_name(str(error), name)) from None


def import_upload(
    engine: Engine,
    actor: Actor,
    *,
    name: str,
    data: bytes,
    options: ImportOptions,
) -> ImportSummary:
    """Import an uploaded case file with ``options``, as ``review-app import`` would."""
    actor = authorize(engine, actor, "policy_owner")
    if options.format is not None and options.format not in FORMATS:
        raise InputError(f"unknown format {options.format!r}", field="format")
    with _imported_upload(name, data) as path:
        return import_paths(engine, actor, [path], options)


def import_label_upload(
    engine: Engine,
    actor: Actor,
    *,
    name: str,
    data: bytes,
    catalog: RubricCatalog,
    sign_in_enabled: bool,
) -> LabelImportSummary:
    with _imported_upload(name, data) as path:
        return import_labels(engine, actor, path, catalog=catalog, sign_in_enabled=sign_in_enabled)


def import_verdict_upload(
    engine: Engine,
    actor: Actor,
    *,
    name: str,
    data: bytes,
    rubric: Rubric,
    score_means: str,
) -> JudgeImportSummary:
    with _imported_upload(name, data) as path:
        return import_verdicts(engine, actor, path, rubric=rubric, score_means=score_means)


def zip_export(engine: Engine, actor: Actor, result: ExportResult) -> bytes:
    """The export's files as a zip with fixed timestamps (same data, same bytes)."""
    authorize(engine, actor, "policy_owner")
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        for name, data in sorted(result.files.items()):
            info = zipfile.ZipInfo(name, date_time=(1980, 1, 1, 0, 0, 0))
            info.compress_type = zipfile.ZIP_DEFLATED
            info.external_attr = 0o644 << 16
            archive.writestr(info, data)
    return buffer.getvalue()
