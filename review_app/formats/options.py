"""What one import is asked for: one typed object, built by the command line and the
import page and passed down unchanged to the service and the readers.

The readers' options (the contract, the tool map, the case id prefix and the column
names of the table formats) are ``None`` when not given, so each format's own default
applies (the defaults differ: Openlayer's output column is ``output``, Galtea's
``actual_output``). A reader option given for a format that does not take it is an
error naming it (:meth:`ImportOptions.check_taken_by`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from review_app.errors import InputError
from review_app.files.limits import MAX_RECORD_BYTES


@dataclass(frozen=True, slots=True, kw_only=True)
class ImportOptions:
    """The options of one import (``review-app import``, the import page)."""

    format: str | None = None
    """The files' format (a name of :data:`review_app.formats.detect.FORMATS`); ``None``:
    detected per file."""
    replace: bool = False
    """Overwrite stored cases whose content changed (else they are refused)."""
    max_record_bytes: int = MAX_RECORD_BYTES
    """The largest record (a JSONL line, a case of a ``.json`` file, a CSV cell)."""
    contract: dict[str, Any] | None = None
    """A role contract for cases that carry none (foreign formats)."""
    tool_action_map: Mapping[str, str | None] | None = None
    """Tool name to contract action, or to ``None`` for a tool that is no action."""
    case_id_prefix: str | None = None
    """Put before every case id made from a file (default: the file's stem and ``-``
    for records without a name)."""
    session_column: str | None = None
    """The column grouping rows into conversations (table formats)."""
    timestamp_column: str | None = None
    """The column ordering a session's rows by time (Openlayer)."""
    sequence_column: str | None = None
    """The column ordering rows that share a time (Openlayer)."""
    input_column: str | None = None
    """The column of the user's message (table formats)."""
    output_column: str | None = None
    """The column of the chatbot's reply (table formats)."""
    role_column: str | None = None
    """The column of a session's role definition (Openlayer)."""
    product_description_column: str | None = None
    """The column of a conversation's product description (Galtea)."""
    order_column: str | None = None
    """The column ordering a conversation's turns (Galtea)."""
    role_definition: str | None = None
    """The role of sessions whose rows give none (Openlayer)."""
    product_description: str | None = None
    """The product description of conversations whose rows give none (Galtea)."""

    def reader_options(self) -> dict[str, Any]:
        """The readers' options that are given (not ``None``), by name, in this order.

        ``max_record_bytes`` is always given: every format takes it.
        """
        options = {
            "contract": self.contract,
            "tool_action_map": self.tool_action_map,
            "case_id_prefix": self.case_id_prefix,
            "session_column": self.session_column,
            "timestamp_column": self.timestamp_column,
            "sequence_column": self.sequence_column,
            "input_column": self.input_column,
            "output_column": self.output_column,
            "role_column": self.role_column,
            "product_description_column": self.product_description_column,
            "order_column": self.order_column,
            "role_definition": self.role_definition,
            "product_description": self.product_description,
            "max_record_bytes": self.max_record_bytes,
        }
        return {name: value for name, value in options.items() if value is not None}

    def check_taken_by(self, format_name: str, taken: tuple[str, ...]) -> None:
        """``InputError`` naming a reader option given that the format ``format_name``,
        whose reader takes ``taken``, does not take (the first by name)."""
        unknown = sorted(name for name in self.reader_options() if name not in taken)
        if unknown:
            raise InputError(
                f"the {format_name} format does not take the option {unknown[0]} (its options: "
                f"{', '.join(taken)})",
                field=unknown[0],
            )


def column(given: str | None, default: str) -> str:
    """A column name: the one given, else the format's default."""
    return default if given is None else given
