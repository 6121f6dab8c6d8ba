"""A validated case as the rows that store it: case, events, evaluation, findings.

The keys a case or event has beyond the known ones are kept as JSON ("extra"), so
nothing in a file is lost.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import orjson

from review_app.case_records import CaseRecord, canonical_json, content_sha256
from review_app.evaluator import diagnostic, lane

KNOWN_CASE_KEYS = frozenset({"case_id", "chatbot_role", "contract", "transcript"})
KNOWN_EVENT_KEYS = frozenset({"turn", "actor", "text", "observed_actions", "set_role", "request"})


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


@dataclass(slots=True)
class PreparedCase:
    """One validated case turned into its rows, before the database is asked anything.

    The parsed case is dropped once its rows exist, so a chunk in memory is plain
    tuples (cheap for the garbage collector), not parse trees.
    """

    case_id: str
    sha256: str
    source: str
    line: int | None
    contract: tuple[str, str, str] | None
    """``(version, sha256, canonical body)`` of the case's contract, if it has one."""
    status: str
    has_harness_findings: bool
    case_row: tuple[Any, ...]
    event_rows: list[tuple[Any, ...]]
    evaluation_row: tuple[Any, ...]
    finding_rows: list[tuple[Any, ...]]


class ContractHashes:
    """Contract hashes by version, computed once per distinct body in an import."""

    def __init__(self) -> None:
        self._seen: dict[str, tuple[dict[str, Any], tuple[str, str, str]]] = {}

    def of(self, contract: dict[str, Any]) -> tuple[str, str, str]:
        version = contract["version"]
        seen = self._seen.get(version)
        if seen is not None and seen[0] == contract:
            return seen[1]
        body = canonical_json(contract)
        known = (version, content_sha256(contract), body.decode())
        self._seen[version] = (contract, known)
        return known


def prepare_case(
    record: CaseRecord,
    *,
    source_format: str,
    now: Any,
    contracts: ContractHashes | None = None,
) -> PreparedCase:
    """The rows that store one validated case (case, events, evaluation, findings)."""
    case = record.case
    result = record.result
    case_id = case["case_id"]
    transcript = case["transcript"]
    events: list[tuple[Any, ...]] = []
    append = events.append
    assistant_turns = 0
    dumps = orjson.dumps
    for seq, event in enumerate(transcript):
        # The two common shapes first. Every event has "turn" and "actor" (validated),
        # so three keys with a text are exactly those, and four with a text and actions
        # too: no set_role, no request, nothing extra.
        size = len(event)
        if size == 3 or size == 4:
            text = event.get("text")
            if text is not None:
                actor = event["actor"]
                if size == 3:
                    append((case_id, seq, event["turn"], actor, text, None, None, None, None))
                    assistant_turns += actor == "assistant"
                    continue
                actions = event.get("observed_actions")
                if actions is not None:
                    append(
                        (
                            case_id,
                            seq,
                            event["turn"],
                            actor,
                            text,
                            dumps(actions).decode(),
                            None,
                            None,
                            None,
                        )
                    )
                    assistant_turns += actor == "assistant"
                    continue
        get = event.get
        text = get("text")
        actions = get("observed_actions")
        set_role = get("set_role")
        request = get("request")
        actor = event["actor"]
        if actor == "assistant":
            assistant_turns += 1
        present = 2 + (text is not None) + (actions is not None)
        present += (set_role is not None) + (request is not None)
        extra = None
        if len(event) > present:
            others = {k: v for k, v in event.items() if k not in KNOWN_EVENT_KEYS}
            extra = _json_text(others) if others else None
        append(
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
    contract_key = None
    if contract is not None:
        contract_key = (contracts or ContractHashes()).of(contract)
    case_extra = {k: v for k, v in case.items() if k not in KNOWN_CASE_KEYS}
    case_row = (
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
    version = result["evaluator_version"]
    violation = result["first_violation"]
    evaluation_row = (
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
    findings = [
        (case_id, version, kind, finding["code"], finding.get("turn"), _json_text(finding))
        for kind, key in (
            ("fixture_error", "fixture_errors"),
            ("violation", "violations"),
            ("harness", "harness_findings"),
        )
        for finding in result[key]
    ]
    return PreparedCase(
        case_id,
        record.sha256,
        record.source,
        record.line,
        contract_key,
        result["status"],
        bool(result["harness_findings"]),
        case_row,
        events,
        evaluation_row,
        findings,
    )
