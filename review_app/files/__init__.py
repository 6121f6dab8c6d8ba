"""Reading untrusted files: one home for decoding, JSON and JSONL records, CSV rows and tables.

Every file that comes in (native cases, every foreign format of
:mod:`review_app.formats`, label files, judge verdict files, rubric and judge prompt
files) is read here, by the
same rules, before anything checks what its values mean; refusals are
:class:`~review_app.errors.InputError` naming the file, the line and the field
(docs/reference.md, "Input limits").

Modules:

- ``limits``: how large a file, a record and a nesting may be;
- ``text``: bytes to text (strict UTF-8, the line of a bad byte), files read whole, and
  short texts (a rubric, a judge prompt) bounded (``read_short_text``,
  ``check_short_text``);
- ``json_records``: strict JSON, JSONL lines, the records of a
  JSON or JSONL file (streamed);
- ``csv_rows``: CSV rows with the line each starts on;
- ``csv_safety``: cells neutralised against formula injection
  when written, restored when read;
- ``tables``: table files (CSV, or JSON/JSONL rows) as rows of
  cells, for the foreign formats;
- ``named_rows``: label and verdict files (CSV with a header, or
  JSONL objects), their columns checked;
- ``discovery``: which files an import or an inspection reads.

What the values of a record mean (a case, a label, a verdict) is checked by its
reader; what text and names may hold, by :mod:`review_app.input_policy`.

The package is pure (no storage, no Streamlit) and light: ``review-app inspect``
reads through it at start-up, so its modules import only the standard library,
orjson and the evaluator.
"""
