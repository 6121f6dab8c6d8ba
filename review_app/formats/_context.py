"""What one reader call knows: the file, its validated options, the case ids made so far."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from review_app.cases import CaseRecord, validate_case
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

Fail = Callable[[str, str | None], InputError]
"""Makes the error for a message and a field below a record's place (``None``: the record)."""


@dataclass(frozen=True, slots=True)
class ReadContext:
    """One file being read and the reader's options, checked once (see :meth:`check`)."""

    path: Path
    source: str
    contract: dict[str, Any] | None
    """The ``contract`` option, validated; a record's own contract may stand instead."""
    tools: Mapping[str, str | None]
    case_id_prefix: str | None
    max_record_bytes: int
    progress: ProgressCallback | None
    ids: CaseIds

    @classmethod
    def check(
        cls,
        path: Path,
        *,
        contract: Any,
        tool_action_map: Mapping[str, str | None] | None = None,
        case_id_prefix: str | None,
        max_record_bytes: int,
        progress: ProgressCallback | None,
    ) -> ReadContext:
        """The context of one reader call; a bad option raises here, before any reading."""
        source = str(path)
        given = validate_contract(contract)
        tools = validate_tool_action_map(tool_action_map)
        validate_prefix(case_id_prefix)
        return cls(
            path, source, given, tools, case_id_prefix, max_record_bytes, progress, CaseIds(source)
        )

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
