"""Cases as reviewers and engineers see them: listings by lane, one case turn by turn."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

import orjson
from sqlalchemy import Engine
from sqlmodel import Session

import storage.cases
from review_app.errors import InputError, NotFound
from review_app.evaluator import EVALUATOR_VERSION
from review_app.services.access.actors import Actor, authorize
from review_app.services.access.case_access import check_case_access, checked_case_id, may_open_case
from storage import assignments
from storage.engine import read_only

LANES = ("violation", "invalid", "missing-context", "no-contract", "pass")

# Phrases by which a user tries to hand the assistant a new role. Only a system
# event changes the role; the page marks these so a reviewer sees it was ignored.
_ROLE_CHANGE_CLAIM = re.compile(
    r"\b(you are now|you're now|from now on,? you are|act as|pretend (?:to be|you are)|"
    r"switch (?:to|into) (?:the )?\w+ mode|i am your (?:admin|administrator|manager|supervisor))\b",
    re.IGNORECASE,
)

SHORT_HASH_CHARS = 12
"""How many characters of a contract hash the faces show."""


def claims_role_change(text: str | None) -> bool:
    """Whether user text tries to change the assistant's role (which never works)."""
    return bool(text) and bool(_ROLE_CHANGE_CLAIM.search(text or ""))


def _loads(value: str | None) -> Any:
    return None if value is None else orjson.loads(value)


@dataclass(frozen=True)
class TurnView:
    seq: int
    turn: int
    actor: str
    text: str | None
    actions: list[str]
    actions_recorded: bool
    """Whether the event had an ``observed_actions`` field (possibly empty)."""
    set_role: str | None
    request: dict[str, Any] | None
    active_role: str | None
    transition: str | None
    """``trusted`` for a system event that changed the role, ``ignored`` for a
    ``set_role`` that did not (untrusted actor or unknown role)."""
    role_change_claim: bool
    violations: list[dict[str, Any]] = field(default_factory=list)
    fixture_errors: list[dict[str, Any]] = field(default_factory=list)
    harness_findings: list[dict[str, Any]] = field(default_factory=list)

    @property
    def is_assistant(self) -> bool:
        return self.actor == "assistant"


@dataclass(frozen=True)
class CaseView:
    case_id: str
    chatbot_role: str | None
    contract_version: str | None
    contract: dict[str, Any] | None
    status: str | None
    lane: str | None
    diagnostic: str | None
    first_violation_turn: int | None
    evaluator_version: str
    turns: list[TurnView]
    case_findings: list[dict[str, Any]]
    """Findings that belong to no single event (contract problems)."""
    source_format: str

    @property
    def assistant_turns(self) -> list[int]:
        return [t.turn for t in self.turns if t.is_assistant]

    def to_case_dict(self) -> dict[str, Any]:
        """The case as imported (docs/reference.md, "Cases"), minus unknown top-level keys."""
        transcript = []
        for t in self.turns:
            event: dict[str, Any] = {"turn": t.turn, "actor": t.actor}
            if t.text is not None:
                event["text"] = t.text
            if t.actions_recorded:
                event["observed_actions"] = t.actions
            if t.set_role is not None:
                event["set_role"] = t.set_role
            if t.request is not None:
                event["request"] = t.request
            transcript.append(event)
        case: dict[str, Any] = {"case_id": self.case_id}
        if self.chatbot_role is not None:
            case["chatbot_role"] = self.chatbot_role
        case["contract"] = self.contract
        case["transcript"] = transcript
        return case


def case_view(
    session: Session, *, case_id: str, evaluator_version: str = EVALUATOR_VERSION
) -> CaseView:
    case = storage.cases.get_case(session, case_id=case_id)
    if case is None:
        raise NotFound(f"no case {case_id!r} in the database")
    contract_row = (
        storage.cases.get_contract(session, version=case.contract_version)
        if case.contract_version
        else None
    )
    evaluation = storage.cases.get_evaluation(
        session, case_id=case_id, evaluator_version=evaluator_version
    )
    findings = storage.cases.list_findings(
        session, case_id=case_id, evaluator_version=evaluator_version
    )
    by_turn: dict[int, dict[str, list[dict[str, Any]]]] = {}
    case_findings: list[dict[str, Any]] = []
    for finding in findings:
        detail = orjson.loads(finding.detail_json)
        if finding.turn is None:
            case_findings.append(detail)
            continue
        slot = by_turn.setdefault(
            finding.turn, {"violation": [], "fixture_error": [], "harness": []}
        )
        slot[finding.kind].append(detail)

    spans = _loads(evaluation.role_spans_json) if evaluation else []
    span_index = 0
    role = spans[0][1] if spans and contract_row else None
    turns: list[TurnView] = []
    for event in storage.cases.list_events(session, case_id=case_id):
        if span_index + 1 < len(spans) and spans[span_index + 1][0] == event.turn:
            span_index += 1
            role = spans[span_index][1]
        marks = by_turn.get(event.turn, {"violation": [], "fixture_error": [], "harness": []})
        transition = None
        if event.set_role is not None:
            trusted = event.actor == "system" and not any(
                e["code"] in ("unknown_transition_role", "untrusted_role_transition")
                for e in marks["fixture_error"]
            )
            transition = "trusted" if trusted else "ignored"
        turns.append(
            TurnView(
                seq=event.seq,
                turn=event.turn,
                actor=event.actor,
                text=event.text,
                actions=_loads(event.actions_json) or [],
                actions_recorded=event.actions_json is not None,
                set_role=event.set_role,
                request=_loads(event.request_json),
                active_role=role,
                transition=transition,
                role_change_claim=event.actor == "user" and claims_role_change(event.text),
                violations=marks["violation"],
                fixture_errors=marks["fixture_error"],
                harness_findings=marks["harness"],
            )
        )
    return CaseView(
        case_id=case.case_id,
        chatbot_role=case.chatbot_role,
        contract_version=case.contract_version,
        contract=orjson.loads(contract_row.body_json) if contract_row else None,
        status=evaluation.status if evaluation else None,
        lane=evaluation.lane if evaluation else None,
        diagnostic=evaluation.diagnostic if evaluation else None,
        first_violation_turn=evaluation.first_violation_turn if evaluation else None,
        evaluator_version=evaluator_version,
        turns=turns,
        case_findings=case_findings,
        source_format=case.source_format,
    )


def load_case_view(engine: Engine, actor: Actor, *, case_id: str) -> CaseView:
    """The case turn by turn (see :func:`may_open_case` for who may open it)."""
    case_id = checked_case_id(case_id)
    may_open_case(engine, actor, case_id=case_id)
    with Session(read_only(engine)) as session:
        return case_view(session, case_id=case_id)


def case_fingerprint(engine: Engine, actor: Actor, *, case_id: str) -> str:
    """A string that changes whenever the view of the case would: content hash, evaluator.

    One indexed lookup, so a caller can keep a built :class:`CaseView` until it changes.
    Checks what :func:`may_open_case` checks in the same query, so a cached view is only
    handed to someone who may open the case. Raises ``NotFound``, ``PermissionDenied``.
    """
    actor = authorize(engine, actor, "reviewer")
    case_id = checked_case_id(case_id)
    with Session(read_only(engine)) as session:
        found = assignments.case_hash_and_access(
            session, case_id=case_id, reviewer_id=actor.reviewer_id
        )
    content_hash, _ = check_case_access(actor, found, case_id=case_id)
    return f"{content_hash}:{EVALUATOR_VERSION}"


def check_lane(lane: str | None) -> str | None:
    if lane is not None and lane not in LANES:
        raise InputError(f"unknown lane {lane!r}; choose one of {', '.join(LANES)}", field="--lane")
    return lane


def list_cases(
    engine: Engine, *, lane: str | None = None, offset: int = 0, limit: int | None = None
) -> list[storage.cases.CaseSummaryRow]:
    check_lane(lane)
    with Session(read_only(engine)) as session:
        return storage.cases.list_case_summaries(
            session,
            evaluator_version=EVALUATOR_VERSION,
            lanes=[lane] if lane else None,
            offset=offset,
            limit=limit,
        )
