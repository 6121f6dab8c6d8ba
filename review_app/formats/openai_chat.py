"""OpenAI chat-completions message lists (the ``messages`` of a request), as JSONL.

Each line is ``{"messages": [...], "id"?: ..., "metadata"?: {...}}`` (the shape of
fine-tuning and evaluation files) or a bare list of messages. A ``.json`` file may
hold one such object, a list of them, or one bare list of messages.

Reading rules (for users: docs/reference.md, "Foreign formats", under ``openai``):

* the FIRST ``system`` (or ``developer``) message is the role instruction: its text
  becomes ``chatbot_role`` and its SHA-256 (hex, of the UTF-8 text) the case's
  top-level ``role_instruction_sha256``, to compare with a contract's; it makes no
  event. An empty first instruction gives neither. Later system messages become
  ``system`` events with their text. A role change is never read from prose:
  no event gets ``set_role``;
* ``user`` messages become user events; ``assistant`` messages assistant events
  (text from ``content``, or from ``refusal`` when there is no content); an
  assistant message's ``tool_calls`` (and the legacy ``function_call``) become its
  ``observed_actions`` through ``tool_action_map``: a mapped tool gives its action,
  a tool mapped to ``None`` is left out, an unmapped tool keeps its own name so that
  a contract's vocabulary check reports it (``unknown_action``) rather than the
  evidence disappearing; ``tool`` (and legacy ``function``) messages become tool
  events; turns are numbered 1..n;
* ``content`` may be text or a list of content parts; the text parts are joined
  with newlines, other parts (images, audio) are not text and are left out;
* the case id is ``id`` (slugified; letters, digits, ``_ . -`` are kept as they are)
  with the optional prefix, else ``<prefix><n>`` for the n-th record, the prefix
  defaulting to ``<file stem>-``;
* the contract is ``metadata.role_contract`` or the caller's (the ``contract`` option); both
  present and different is an error; neither gives ``"contract": null``;
* the rest of ``metadata`` and other top-level keys (``tools``, ``model``, ...) are
  kept under the case's ``source_metadata``; a message's keys other than ``role``
  and ``content`` (the raw ``tool_calls`` with their arguments, ``tool_call_id``,
  ``name``, ...) under its event's ``source_metadata``.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

import orjson

from review_app.case_records import CaseRecord
from review_app.evaluator import type_name
from review_app.files.json_records import join_field
from review_app.files.tables import ProgressCallback
from review_app.formats._context import Fail, ReadContext
from review_app.formats._contracts import map_tools
from review_app.formats._ids import check_unique_case_ids
from review_app.formats.options import ImportOptions

OPTIONS = ("contract", "tool_action_map", "case_id_prefix", "max_record_bytes")
"""The fields of :class:`~review_app.formats.options.ImportOptions` this reader takes."""
FORMAT_NAME = "openai"
SYSTEM_ROLES = ("system", "developer")
MESSAGE_ROLES = ("system", "developer", "user", "assistant", "tool", "function")
TEXT_PART_TYPES = ("text", "input_text", "output_text")
_MESSAGE_KEYS_USED = frozenset({"role", "content"})
_RECORD_KEYS_USED = frozenset({"messages", "id", "metadata"})


def _records(ctx: ReadContext) -> Iterator[tuple[int | None, str | None, Any]]:
    """Records of the file; a ``.json`` file that is one bare message list gives one."""
    records = ctx.records()
    first = next(records, None)
    if first is None:
        return
    _, prefix, value = first
    if (
        prefix is not None
        and isinstance(value, dict)
        and "role" in value
        and "messages" not in value
    ):
        yield None, None, [value, *(item for _, _, item in records)]
        return
    yield first
    yield from records


def read_openai(
    path: Path, options: ImportOptions | None = None, *, progress: ProgressCallback | None = None
) -> Iterator[CaseRecord]:
    """Cases from OpenAI chat message lists (JSONL or JSON), one per record, in order.

    Takes the options :data:`OPTIONS` (see the module documentation for every rule).
    """
    ctx = ReadContext.check(
        path, options, format_name=FORMAT_NAME, takes=OPTIONS, progress=progress
    )
    return (
        _read_record(value, ctx, line=line, prefix=prefix, index=index)
        for index, (line, prefix, value) in enumerate(_records(ctx), start=1)
    )


def _read_record(
    value: Any, ctx: ReadContext, *, line: int | None, prefix: str | None, index: int
) -> CaseRecord:
    fail = ctx.fail_at(line, prefix)
    kept: dict[str, Any] = {}
    contract = ctx.contract
    raw_id: Any = None
    if isinstance(value, list):
        messages: Any = value
        base = ""
    elif isinstance(value, dict):
        messages = value.get("messages")
        base = "messages"
        if not isinstance(messages, list):
            raise fail(f"expected a list of messages, got {type_name(messages)}", "messages")
        raw_id = value.get("id")
        metadata = value.get("metadata")
        if metadata is not None and not isinstance(metadata, dict):
            raise fail(f"expected an object, got {type_name(metadata)}", "metadata")
        metadata = dict(metadata or {})
        contract = ctx.record_contract(
            metadata.pop("role_contract", None),
            line=line,
            field=join_field(prefix, "metadata.role_contract"),
        )
        kept = {key: item for key, item in value.items() if key not in _RECORD_KEYS_USED}
        if metadata:
            kept["metadata"] = metadata
    else:
        raise fail(
            f"expected an object with messages or a list of messages, got {type_name(value)}",
            None,
        )
    if not messages:
        raise fail("the conversation has no messages", base or None)

    if type(raw_id) is int:
        raw_id = str(raw_id)
    if raw_id is not None and type(raw_id) is not str:
        raise fail(f"expected text or an integer, got {type_name(raw_id)}", "id")
    case_id = ctx.named_case_id(
        raw_id, index=index, line=line, prefix=prefix, field=join_field(prefix, "id")
    )
    if raw_id is not None and raw_id != case_id:
        kept["id"] = raw_id

    chatbot_role: str | None = None
    instruction_seen = False
    transcript: list[dict[str, Any]] = []
    for position, message in enumerate(messages):
        field = f"{base}[{position}]"
        if not isinstance(message, dict):
            raise fail(f"expected a message object, got {type_name(message)}", field)
        role = message.get("role")
        if role not in MESSAGE_ROLES:
            shown = role if type(role) is str else type_name(role)
            raise fail(
                f"expected one of {', '.join(MESSAGE_ROLES)}, got {shown!r}", f"{field}.role"
            )
        text = _content_text(message.get("content"), f"{field}.content", fail)
        if role in SYSTEM_ROLES and not instruction_seen:
            instruction_seen = True
            chatbot_role = text or None
            continue
        event: dict[str, Any] = {"turn": len(transcript) + 1}
        if role in SYSTEM_ROLES:
            event["actor"] = "system"
            if text is None:
                raise fail("a system message needs text content", f"{field}.content")
        elif role == "user":
            event["actor"] = "user"
            if message.get("content") is None:
                raise fail("a user message needs content", f"{field}.content")
        elif role == "assistant":
            event["actor"] = "assistant"
            if text is None:
                refusal = message.get("refusal")
                if refusal is not None and type(refusal) is not str:
                    raise fail(f"expected text, got {type_name(refusal)}", f"{field}.refusal")
                text = refusal
            names = _tool_names(message, field, fail)
            if names is not None:
                event["observed_actions"] = map_tools(names, ctx.tools)
        else:
            event["actor"] = "tool"
            if message.get("content") is None:
                raise fail("a tool message needs content", f"{field}.content")
        if text is not None:
            event["text"] = text
        others = {key: item for key, item in message.items() if key not in _MESSAGE_KEYS_USED}
        if others:
            event["source_metadata"] = others
        transcript.append(event)

    instruction_hash = None
    if chatbot_role is not None:
        instruction_hash = {"role_instruction_sha256": _sha256_hex(chatbot_role)}
    return ctx.finish(
        case_id,
        chatbot_role=chatbot_role,
        role_fields=instruction_hash,
        contract=contract,
        transcript=transcript,
        source_metadata=kept,
        line=line,
        prefix=prefix,
    )


def _sha256_hex(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def _content_text(content: Any, field: str, fail: Fail) -> str | None:
    if content is None or type(content) is str:
        return content
    if not isinstance(content, list):
        raise fail(f"expected text or a list of content parts, got {type_name(content)}", field)
    texts: list[str] = []
    for number, part in enumerate(content):
        if not isinstance(part, dict):
            raise fail(
                f"expected a content part object, got {type_name(part)}", f"{field}[{number}]"
            )
        if part.get("type") in TEXT_PART_TYPES:
            text = part.get("text")
            if type(text) is not str:
                raise fail(f"expected text, got {type_name(text)}", f"{field}[{number}].text")
            texts.append(text)
    return "\n".join(texts) if texts else None


def _tool_names(message: dict[str, Any], field: str, fail: Fail) -> list[str] | None:
    """Tool names an assistant message called, in order; ``None`` when it called none."""
    calls = message.get("tool_calls")
    legacy = message.get("function_call")
    if calls is None and legacy is None:
        return None
    names: list[str] = []
    if calls is not None:
        if not isinstance(calls, list):
            raise fail(
                f"expected a list of tool calls, got {type_name(calls)}", f"{field}.tool_calls"
            )
        for number, call in enumerate(calls):
            kind = call.get("type", "function") if isinstance(call, dict) else None
            body = call.get(kind) if isinstance(call, dict) and type(kind) is str else None
            name = body.get("name") if isinstance(body, dict) else None
            if type(name) is not str or not name:
                raise fail(
                    "expected a tool call with a function name",
                    f"{field}.tool_calls[{number}].function.name",
                )
            names.append(name)
    if legacy is not None:
        name = legacy.get("name") if isinstance(legacy, dict) else None
        if type(name) is not str or not name:
            raise fail("expected a function call with a name", f"{field}.function_call.name")
        names.append(name)
    return names


def write_openai_jsonl(cases: Iterable[Mapping[str, Any]]) -> str:
    """Cases as OpenAI chat message lists: JSONL text, one case per line, deterministic.

    Each line is ``{"id": case_id, "messages": [...], "metadata"?: {"role_contract":
    contract}}`` with sorted keys. ``chatbot_role`` is the first ``system`` message
    (an empty one when the case has no role but has system events with text, so the
    reader does not take such an event for the instruction). Events follow in order:
    user, assistant (``content`` null when it has no text; observed actions as
    ``tool_calls`` with ids ``call_<turn>_<n>`` and ``"{}"`` arguments), tool
    (answering the pending calls' ids in order, when there are any) and system
    events with text. A ``system`` event without text (a bare role change) and the
    ``set_role`` and ``request`` fields have no place in the message list and are not
    written.
    """
    items = list(cases)
    check_unique_case_ids(items)
    lines: list[bytes] = []
    for case in items:
        transcript = case["transcript"]
        messages: list[dict[str, Any]] = []
        role = case.get("chatbot_role")
        has_system_text = any(
            event.get("actor") == "system" and event.get("text") is not None for event in transcript
        )
        if role is not None or has_system_text:
            messages.append({"role": "system", "content": role or ""})
        pending: list[str] = []
        for event in transcript:
            actor = event.get("actor")
            text = event.get("text")
            if actor == "user":
                messages.append({"role": "user", "content": text or ""})
            elif actor == "assistant":
                message: dict[str, Any] = {"role": "assistant", "content": text}
                actions = event.get("observed_actions") or []
                if actions:
                    ids = [f"call_{event.get('turn')}_{n}" for n in range(1, len(actions) + 1)]
                    message["tool_calls"] = [
                        {
                            "id": call_id,
                            "type": "function",
                            "function": {"name": action, "arguments": "{}"},
                        }
                        for call_id, action in zip(ids, actions, strict=True)
                    ]
                    pending = ids
                else:
                    pending = []
                messages.append(message)
            elif actor == "tool":
                message = {"role": "tool", "content": text or ""}
                if pending:
                    message["tool_call_id"] = pending.pop(0)
                messages.append(message)
            elif actor == "system" and text is not None:
                messages.append({"role": "system", "content": text})
        record: dict[str, Any] = {"id": case["case_id"], "messages": messages}
        if case.get("contract") is not None:
            record["metadata"] = {"role_contract": case["contract"]}
        lines.append(orjson.dumps(record, option=orjson.OPT_SORT_KEYS))
    return "".join(line.decode("utf-8") + "\n" for line in lines)
