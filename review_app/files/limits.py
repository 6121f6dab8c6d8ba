"""How large what a file holds may be: a file read whole, one record, a nesting.

* **Sizes**: one record (a JSONL line, a ``.json`` file holding one case, an item of
  a ``.json`` list, a CSV cell) is at most :data:`MAX_RECORD_BYTES`; a file read whole
  (``.json``, ``.csv``) at most :data:`MAX_WHOLE_FILE_BYTES` (JSONL is streamed, any
  size); a rubric or judge prompt file at most :data:`MAX_RUBRIC_FILE_BYTES`.
* **Nesting**: JSON at most :data:`MAX_JSON_DEPTH` levels, a rubric's YAML at most
  :data:`MAX_YAML_DEPTH`.
"""

from __future__ import annotations

MAX_RECORD_BYTES = 16 * 1024 * 1024
"""One record: a JSONL line, a ``.json`` file's case, a ``.json`` list item, a CSV cell."""
MAX_WHOLE_FILE_BYTES = 1024 * 1024 * 1024
"""Files read whole into memory (``.json``, ``.csv``); JSONL is streamed at any size."""
MAX_JSON_DEPTH = 1024
MAX_RUBRIC_FILE_BYTES = 1024 * 1024
"""A rubric file (YAML) or a judge prompt file: read whole, so bounded."""
MAX_YAML_DEPTH = 32
"""Nesting of a rubric file's mappings and lists (a rubric needs 4)."""


def record_size_error(size: int | None, *, limit: int = MAX_RECORD_BYTES) -> str:
    """The message for a record over the limit (``size`` when it is known)."""
    this = f" (this one: {size})" if size is not None else ""
    return (
        f"a record is longer than {limit} bytes{this}; raise the limit with "
        "--max-record-bytes if this is intended"
    )
