"""What one reader call knows: the file, the import's options (validated), the case ids made
so far."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from review_app.case_records import CaseRecord, validate_case
from review_app.errors import InputError
from review_app.files.json_records import iter_json_records, join_field
from review_app.files.tables import ProgressCallback, Table, open_table
from review_app.formats._contracts import (
    choose_contract,
    validate_contract,
    validate_tool_action_map,
)
from review_app.formats._ids import (
    CaseIds,
    case_id_from,
    fallback_case_id,
    validate_prefix,
)
from review_app.formats.options import ImportOptions

Fail = Callable[[str, str | None], InputError]
"""Makes the error for a message and a field below a record's place (``None``: the record)."""


@dataclass(frozen=True, slots=True)
class ReadContext:
    """One file being read and the import's options, checked once (see :meth:`check`)."""

    path: Path
    source: str
    options: ImportOptions
    contract: dict[str, Any] | None
    """The ``contract`` option, validated; a record's own contract may stand instead."""
    tools: Mapping[str, str | None]
    progress: ProgressCallback | None
    ids: CaseIds

    @classmethod
    def check(
        cls,
        path: Path,
        options: ImportOptions | None,
        *,
        format_name: str,
        takes: tuple[str, ...],
        progress: ProgressCallback | None,
    ) -> ReadContext:
        """The context of one reader call: the options the format ``format_name`` takes
        (``takes``), checked; a bad or foreign option raises here, before any reading."""
        options = options or ImportOptions()
        options.check_taken_by(format_name, takes)
        source = str(path)
        given = validate_contract(options.contract)
        tools = validate_tool_action_map(options.tool_action_map)
        validate_prefix(options.case_id_prefix)
        return cls(path, source, options, given, tools, progress, CaseIds(source))

    @property
    def case_id_prefix(self) -> str | None:
        return self.options.case_id_prefix

    @property
    def max_record_bytes(self) -> int:
        return self.options.max_record_bytes

    def records(self) -> Iterator[tuple[int | None, str | None, Any]]:
        """The file's JSON records: ``(line, JSON path prefix, value)``."""
        return iter_json_records(
            self.path, max_record_bytes=self.max_record_bytes, progress=self.progress
        )

    def table(self) -> Table:
        return open_table(self.path, max_record_bytes=self.max_record_bytes, progress=self.progress)

    def fail_at(self, line: int | None, prefix: str | None) -> Fail:
        def fail(message: str, field: str | None) -> InputError:
            where = join_field(prefix, field) if field else prefix
            return InputError(message, source=self.source, line=line, field=where)

        return fail

    def record_contract(
        self, embedded: Any, *, line: int | None, field: str
    ) -> dict[str, Any] | None:
        """A record's contract: its own (``embedded``, validated) or the option's."""
        own = validate_contract(embedded, source=self.source, line=line, field=field)
        return choose_contract(self.contract, own, source=self.source, line=line, field=field)

    def case_id(self, raw: str, *, line: int | None, field: str) -> str | None:
        """The case id made from ``raw`` with the prefix; ``None`` when it gives none."""
        return case_id_from(
            raw, prefix=self.case_id_prefix, source=self.source, line=line, field=field
        )

    def named_case_id(
        self, name: str | None, *, index: int, line: int | None, prefix: str | None, field: str
    ) -> str:
        """The id of the ``index``-th record, from its ``name`` (at ``field``) when that
        gives one, else ``<prefix><index>``; refused when an earlier record has it."""
        case_id = self.case_id(name, line=line, field=field) if name is not None else None
        if case_id is None:
            case_id = fallback_case_id(self.path, index, prefix=self.case_id_prefix)
        self.ids.claim(case_id, line=line, field=field if name is not None else prefix)
        return case_id

    def finish(
        self,
        case_id: str,
        *,
        chatbot_role: str | None,
        role_fields: Mapping[str, Any] | None = None,
        contract: dict[str, Any] | None,
        transcript: list[dict[str, Any]],
        source_metadata: dict[str, Any] | None,
        line: int | None,
        prefix: str | None = None,
    ) -> CaseRecord:
        """The converted case, validated (its findings and content hash come along).

        ``role_fields`` go beside ``chatbot_role`` when there is one.
        """
        case: dict[str, Any] = {"case_id": case_id}
        if chatbot_role is not None:
            case["chatbot_role"] = chatbot_role
            case.update(role_fields or {})
        case["contract"] = contract
        case["transcript"] = transcript
        if source_metadata:
            case["source_metadata"] = source_metadata
        return validate_case(case, source=self.source, line=line, prefix=prefix)
