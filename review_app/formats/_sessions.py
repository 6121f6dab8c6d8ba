"""Session-rows tables (Galtea, Openlayer): rows of one input and its output, grouped
by a session into conversations; and transcripts paired back into such rows."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from review_app.case_records import CaseRecord
from review_app.files.tables import Row, require_text
from review_app.formats._context import ReadContext
from review_app.formats._ids import check_unique_case_ids


@dataclass(slots=True)
class Exchange:
    """One row of a session-rows table: its input, its output, and its role text."""

    position: int
    """The row's place among the file's rows, from 0."""
    row: Row
    user_text: str | None
    assistant_text: str | None
    role: str | None
    metadata: dict[str, Any]


@dataclass(frozen=True, slots=True)
class SessionColumns:
    """Which columns of a session-rows table hold what, and the role option."""

    session: str
    input: str
    output: str
    role: str
    role_name: str
    """What the role column holds, in messages: ``role definition``, ..."""
    role_option: str | None
    """The role of a conversation whose rows give none."""

    def exchange(
        self, row: Row, *, position: int, metadata: dict[str, Any], source: str
    ) -> Exchange:
        return Exchange(
            position=position,
            row=row,
            user_text=require_text(row, self.input, source=source),
            assistant_text=require_text(row, self.output, source=source),
            role=require_text(row, self.role, source=source),
            metadata=metadata,
        )

    def case_id(self, ctx: ReadContext, session: str, first: Row) -> str:
        """The case id of a session (named at its first row), claimed once per file."""
        field = first.field(self.session)
        case_id = ctx.case_id(session, line=first.line, field=field)
        if case_id is None:
            raise first.error(
                "this session id gives no usable case id (it has no letters or digits)",
                self.session,
                source=ctx.source,
            )
        ctx.ids.claim(case_id, line=first.line, field=field)
        return case_id

    def chatbot_role(self, exchanges: list[Exchange], *, source: str) -> str | None:
        """The one non-empty role text the rows give (else the option); two differ: error."""
        chosen: Exchange | None = None
        for exchange in exchanges:
            if exchange.role is None:
                continue
            if chosen is None:
                chosen = exchange
            elif exchange.role != chosen.role:
                raise exchange.row.error(
                    f"this {self.role_name} differs from the one at {chosen.row.place}; one "
                    f"conversation has one {self.role_name}",
                    self.role,
                    source=source,
                )
        return chosen.role if chosen is not None else self.role_option

    def case(
        self,
        ctx: ReadContext,
        ordered: list[Exchange],
        *,
        case_id: str,
        chatbot_role: str | None,
        session: str | None,
        line: int | None,
    ) -> CaseRecord:
        """A case from one session's rows, in turn order: each row's input then its output."""
        transcript: list[dict[str, Any]] = []
        for exchange in ordered:
            transcript.extend(
                _events(
                    exchange, first_turn=len(transcript) + 1, column=self.input, source=ctx.source
                )
            )
        return ctx.finish(
            case_id,
            chatbot_role=chatbot_role,
            contract=ctx.contract,
            transcript=transcript,
            source_metadata={"session_id": session} if session is not None else None,
            line=line,
        )


def _events(
    exchange: Exchange, *, first_turn: int, column: str, source: str
) -> list[dict[str, Any]]:
    """A row's user event (its input) then assistant event (its output).

    An empty input (a conversation the assistant opens) or an empty output (a
    message left unanswered) gives just the other event. The row's metadata goes
    with its last event, so it is stored once.
    """
    if exchange.user_text is None and exchange.assistant_text is None:
        raise exchange.row.error(
            "the row has neither an input nor an output", column, source=source
        )
    events: list[dict[str, Any]] = []
    turn = first_turn
    if exchange.user_text is not None:
        events.append({"turn": turn, "actor": "user", "text": exchange.user_text})
        turn += 1
    if exchange.assistant_text is not None:
        events.append({"turn": turn, "actor": "assistant", "text": exchange.assistant_text})
    if exchange.metadata:
        events[-1]["source_metadata"] = exchange.metadata
    return events


def exchanges(transcript: list[Mapping[str, Any]]) -> list[tuple[str | None, str | None]]:
    """User/assistant texts of a transcript paired as (input, output) rows.

    A user text opens a row; an assistant text completes it. Two user texts in a
    row give a row without output; an assistant text with no user text before it
    gives a row without input. Events of other actors, and events without text, are
    left out (table formats have no place for them).
    """
    pairs: list[tuple[str | None, str | None]] = []
    user: str | None = None
    for event in transcript:
        text = event.get("text")
        if text is None or text == "":
            continue
        actor = event.get("actor")
        if actor == "user":
            if user is not None:
                pairs.append((user, None))
            user = text
        elif actor == "assistant":
            pairs.append((user, text))
            user = None
    if user is not None:
        pairs.append((user, None))
    return pairs


def exchange_rows(cases: Iterable[Mapping[str, Any]]) -> list[tuple[str, int, str, str, str]]:
    """``(case id, n, input, output, role)`` for every user/assistant exchange of the
    cases (see :func:`exchanges`), numbered 1..n per case, in the order given; an
    absent text or role is ``""``. Two cases with one id are a ``ValueError``."""
    items = list(cases)
    check_unique_case_ids(items)
    return [
        (case["case_id"], index, user or "", assistant or "", case.get("chatbot_role") or "")
        for case in items
        for index, (user, assistant) in enumerate(exchanges(case["transcript"]), start=1)
    ]
