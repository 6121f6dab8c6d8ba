"""Key presses of the review page, applied in order and exactly once.

The page's keyboard component numbers each label key press per page load
(``client_id``, ``seq``) together with the turn that was focused on screen when the
key went down, and sends every press the server has not acknowledged yet at each
change, and again after a pause while some stay unacknowledged (when the database
was busy, :class:`~review_app.errors.DatabaseBusy` escapes this function and the page
acknowledges nothing). A rerun may therefore carry presses that an earlier rerun
already stored: each press is stored with its label in one transaction, and the unique index on
``label_events`` turns a second application into :class:`AlreadyApplied`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import Engine
from sqlalchemy.exc import IntegrityError

from review_app.errors import InputError, NotFound
from review_app.rubrics.model import Rubric
from review_app.services.access.actors import Actor, authorize
from review_app.services.labels.labeling import (
    AlreadyApplied,
    SavedLabel,
    case_labels,
    record_label,
)

MAX_CLIENT_ID_CHARS = 64
MAX_EVENTS_PER_CALL = 500


@dataclass(frozen=True)
class KeyEvent:
    """One label key press: ``code`` on ``turn``; ``rationale`` ``None`` keeps the
    turn's current rationale."""

    seq: int
    turn: int
    code: str
    rationale: str | None = None


@dataclass
class KeyEventsResult:
    applied: list[SavedLabel] = field(default_factory=list)
    duplicates: int = 0
    errors: list[str] = field(default_factory=list)
    last_seq: int = 0
    """The highest sequence number handled (stored now, stored before, or refused)."""


def parse_key_events(raw: Any) -> tuple[str, list[KeyEvent]]:
    """The client id and the events of the component's value, in sequence order.

    Raises ``InputError`` for anything but ``{"client": str, "events": [{"seq": int,
    "turn": int, "code": str, "rationale": str | null}, ...]}``.
    """
    if not isinstance(raw, Mapping):
        raise InputError("key events: expected an object", field="events")
    client = raw.get("client")
    if not isinstance(client, str) or not 0 < len(client) <= MAX_CLIENT_ID_CHARS:
        raise InputError("key events: client must be a short string", field="client")
    items = raw.get("events")
    if items is None:
        items = []
    if not isinstance(items, list) or len(items) > MAX_EVENTS_PER_CALL:
        raise InputError(
            f"key events: events must be a list of at most {MAX_EVENTS_PER_CALL}", field="events"
        )
    events: dict[int, KeyEvent] = {}
    for item in items:
        if not isinstance(item, Mapping):
            raise InputError("key events: each event must be an object", field="events")
        seq, turn, code = item.get("seq"), item.get("turn"), item.get("code")
        rationale = item.get("rationale")
        if not (isinstance(seq, int) and not isinstance(seq, bool) and seq > 0):
            raise InputError("key events: seq must be a positive integer", field="seq")
        if not (isinstance(turn, int) and not isinstance(turn, bool)):
            raise InputError("key events: turn must be an integer", field="turn")
        if not isinstance(code, str):
            raise InputError("key events: code must be a string", field="code")
        if rationale is not None and not isinstance(rationale, str):
            raise InputError("key events: rationale must be a string or null", field="rationale")
        events[seq] = KeyEvent(seq, turn, code, rationale)
    return client, [events[seq] for seq in sorted(events)]


def apply_key_events(
    engine: Engine,
    actor: Actor,
    *,
    case_id: str,
    rubric: Rubric,
    client_id: str,
    events: Iterable[KeyEvent],
    after_seq: int = 0,
) -> KeyEventsResult:
    """Store each key press above ``after_seq`` as the actor's label, in sequence order,
    each at most once (whatever was stored before, by this call or an earlier one, is
    counted in ``duplicates``). A refused press (a code not in the rubric, a turn that
    is not labelable) is reported in ``errors`` and does not stop the ones after it.
    """
    actor = authorize(engine, actor, "reviewer")
    result = KeyEventsResult(last_seq=after_seq)
    pending = [e for e in events if e.seq > after_seq]
    if not pending:
        return result
    current = case_labels(engine, actor, case_id=case_id, rubric=rubric).mine
    rationales = {turn: row.rationale for turn, row in current.items()}
    for event in sorted(pending, key=lambda e: e.seq):
        rationale = event.rationale if event.rationale is not None else rationales.get(event.turn)
        try:
            saved = record_label(
                engine,
                actor,
                case_id=case_id,
                turn=event.turn,
                rubric=rubric,
                code=event.code,
                rationale=rationale,
                event=(client_id, event.seq),
            )
        except (AlreadyApplied, IntegrityError):
            # IntegrityError: another request stored the same press in between.
            result.duplicates += 1
        except InputError as error:
            result.errors.append(f"turn {event.turn}: {error.message}")
        except NotFound as error:
            result.errors.append(f"turn {event.turn}: {error}")
        else:
            result.applied.append(saved)
            rationales[event.turn] = rationale
        result.last_seq = max(result.last_seq, event.seq)
    return result
