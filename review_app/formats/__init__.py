"""Interoperability: cases from other evaluation tools' files, and files for them.

Readers are pure (they read a file, touch no database) and yield validated
:class:`~review_app.case_records.CaseRecord` objects, each with its findings and content
hash, exactly like the native reader; bad input raises
:class:`~review_app.errors.InputError` naming the file, the line of the ORIGINAL file
and the field or column. A reader may raise after yielding records: the caller
imports one file per transaction, so nothing of a bad file is stored.

Cases from tools without contracts have ``"contract": null`` (status
``no_contract``: semantic review only); no finding is invented. What a tool's file
holds beyond the case shape is kept under ``source_metadata`` keys.

Every reader takes the import's :class:`~review_app.formats.options.ImportOptions`
(the same object the command line and the import page build), each format the
options it names in its ``OPTIONS``; the rules of each format are in its module's
documentation and in docs/reference.md, "Foreign formats".
"""

from __future__ import annotations

from review_app.files.csv_safety import neutralise_cell, restore_cell
from review_app.formats._contracts import validate_contract
from review_app.formats.deepeval import read_deepeval, write_deepeval
from review_app.formats.detect import (
    FORMAT_NAMES,
    FORMATS,
    NATIVE,
    CaseFormat,
    detect_format,
    open_cases,
    read_cases,
)
from review_app.formats.galtea import read_galtea, write_galtea_csv
from review_app.formats.openai_chat import read_openai, write_openai_jsonl
from review_app.formats.openlayer import parse_timestamp, read_openlayer, write_openlayer_csv
from review_app.formats.options import ImportOptions

__all__ = [
    "FORMATS",
    "FORMAT_NAMES",
    "NATIVE",
    "CaseFormat",
    "ImportOptions",
    "detect_format",
    "neutralise_cell",
    "open_cases",
    "parse_timestamp",
    "read_cases",
    "read_deepeval",
    "read_galtea",
    "read_openai",
    "read_openlayer",
    "restore_cell",
    "validate_contract",
    "write_deepeval",
    "write_galtea_csv",
    "write_openai_jsonl",
    "write_openlayer_csv",
]
