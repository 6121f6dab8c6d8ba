"""deepeval conversational test cases (``ConversationalTestCase`` as JSON).

deepeval's role-adherence metric judges each assistant turn of a test case against
its ``chatbot_role``. A test case is ``{"chatbot_role", "turns": [{"role": "user" |
"assistant", "content", "tools_called"?: [{"name", ...}]}], "name"?, "scenario"?,
"expected_outcome"?, "additional_metadata"?, ...}``.

File: JSON holding one test case, a list of them, or ``{"test_cases": [...]}``; or
JSONL with one test case per line (a line may also hold ``{"test_cases": [...]}``).

Reading rules (for users: docs/reference.md, "Foreign formats", under ``deepeval``):

* turns become events in order, numbered 1..n; ``role`` is the actor (deepeval
  knows only ``user`` and ``assistant``), ``content`` the text. A file this module
  wrote gets its native turn numbers and its system and tool events back (see
  :func:`_restore_native_turns`), so an export re-imports as the same case;
* ``tools_called`` names become the event's ``observed_actions`` through
  ``tool_action_map``. An unmapped tool name is kept as the action itself, with or
  without a contract: with one, the vocabulary check reports it as
  ``unknown_action`` (the contract needs a mapping or an entry), so no recorded
  tool call disappears silently; without one, no action is judged and reviewers see
  the tool names. A tool mapped to ``None`` is declared not to be a contract action
  and is left out. Tools called on a ``user`` turn are kept there too, and the
  evaluator reports ``actions_on_non_assistant_event`` (an invalid fixture);
* the case id is ``name`` (slugified: a name of letters, digits, ``_ . -`` is kept
  as is) with the optional prefix, else ``<prefix><n>`` for the n-th test case of
  the file, the prefix defaulting to ``<file stem>-``;
* the contract is the caller's (the ``contract`` option) or the test case's own
  ``additional_metadata.role_contract``; both present and different is an error;
  neither gives ``"contract": null``;
* the role is ``chatbot_role``, else ``additional_metadata.chatbot_role`` (where
  this module's export also puts it, because deepeval's golden loader keeps only
  ``additional_metadata``); a file saved by deepeval (``save_as``) therefore keeps
  it too;
* everything else the test case holds (``scenario``, ``expected_outcome``, the rest
  of ``additional_metadata``, ...) is kept under the case's ``source_metadata``; a
  turn's other keys (the raw ``tools_called``, ``retrieval_context``, ...) under the
  event's ``source_metadata``.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from itertools import pairwise
from pathlib import Path
from typing import Any

import orjson

from review_app.case_records import CaseRecord
from review_app.errors import InputError
from review_app.evaluator import type_name
from review_app.files.json_records import join_field
from review_app.files.tables import ProgressCallback
from review_app.formats._context import Fail, ReadContext
from review_app.formats._contracts import map_tools
from review_app.formats._ids import check_unique_case_ids
from review_app.formats.options import ImportOptions

OPTIONS = ("contract", "tool_action_map", "case_id_prefix", "max_record_bytes")
"""The fields of :class:`~review_app.formats.options.ImportOptions` this reader takes."""
FORMAT_NAME = "deepeval"
TURN_ROLES = ("user", "assistant")
_CASE_KEYS_USED = frozenset({"turns", "chatbot_role", "name", "additional_metadata"})
_TURN_KEYS_USED = frozenset({"role", "content"})


def _test_cases(
    value: Any, prefix: str | None, *, source: str, line: int | None
) -> Iterator[tuple[str | None, Any]]:
    if isinstance(value, dict) and "test_cases" in value and "turns" not in value:
        items = value["test_cases"]
        field = join_field(prefix, "test_cases")
        if not isinstance(items, list) or not items:
            raise InputError(
                "expected a non-empty list of test cases", source=source, line=line, field=field
            )
        for position, item in enumerate(items):
            yield f"{field}[{position}]", item
    else:
        yield prefix, value


def read_deepeval(
    path: Path, options: ImportOptions | None = None, *, progress: ProgressCallback | None = None
) -> Iterator[CaseRecord]:
    """Cases from deepeval conversational test cases (JSON or JSONL), in file order.

    Takes the options :data:`OPTIONS` (see the module documentation for every rule).
    """
    ctx = ReadContext.check(
        path, options, format_name=FORMAT_NAME, takes=OPTIONS, progress=progress
    )
    return _cases(ctx)


def _cases(ctx: ReadContext) -> Iterator[CaseRecord]:
    index = 0
    for line, record_prefix, value in ctx.records():
        for prefix, item in _test_cases(value, record_prefix, source=ctx.source, line=line):
            index += 1
            yield _read_test_case(item, ctx, line=line, prefix=prefix, index=index)


def _read_test_case(
    item: Any, ctx: ReadContext, *, line: int | None, prefix: str | None, index: int
) -> CaseRecord:
    fail = ctx.fail_at(line, prefix)
    if not isinstance(item, dict):
        raise fail(f"expected a test case object, got {type_name(item)}", None)
    turns = item.get("turns")
    if turns is None:
        raise fail("a conversational test case needs turns", "turns")
    if not isinstance(turns, list) or not turns:
        raise fail(f"expected a non-empty list of turns, got {type_name(turns)}", "turns")
    chatbot_role = item.get("chatbot_role")
    if chatbot_role is not None and type(chatbot_role) is not str:
        raise fail(f"expected text, got {type_name(chatbot_role)}", "chatbot_role")
    metadata = item.get("additional_metadata")
    if metadata is not None and not isinstance(metadata, dict):
        raise fail(f"expected an object, got {type_name(metadata)}", "additional_metadata")
    metadata = dict(metadata or {})
    if chatbot_role is None or metadata.get("chatbot_role") == chatbot_role:
        described = metadata.get("chatbot_role")
        if described is not None and type(described) is not str:
            raise fail(
                f"expected text, got {type_name(described)}", "additional_metadata.chatbot_role"
            )
        chatbot_role = metadata.pop("chatbot_role", chatbot_role)
    contract = ctx.record_contract(
        metadata.pop("role_contract", None),
        line=line,
        field=join_field(prefix, "additional_metadata.role_contract"),
    )

    name = item.get("name")
    if name is not None and type(name) is not str:
        raise fail(f"expected text, got {type_name(name)}", "name")
    case_id = ctx.named_case_id(
        name, index=index, line=line, prefix=prefix, field=join_field(prefix, "name")
    )

    transcript = [
        _event(turn, position, tools=ctx.tools, fail=fail) for position, turn in enumerate(turns)
    ]
    transcript = _restore_native_turns(transcript, turns, metadata, fail=fail)
    kept = {key: value for key, value in item.items() if key not in _CASE_KEYS_USED}
    if metadata:
        kept["additional_metadata"] = metadata
    if name is not None and name != case_id:
        kept["name"] = name
    return ctx.finish(
        case_id,
        chatbot_role=chatbot_role,
        contract=contract,
        transcript=transcript,
        source_metadata=kept,
        line=line,
        prefix=prefix,
    )


def _native_turn(turn: dict[str, Any]) -> Any:
    for key in ("additional_metadata", "metadata"):
        value = turn.get(key)
        if isinstance(value, dict) and "turn" in value:
            return value["turn"]
    return None


def _restore_native_turns(
    transcript: list[dict[str, Any]],
    turns: list[Any],
    metadata: dict[str, Any],
    *,
    fail: Fail,
) -> list[dict[str, Any]]:
    """The turn numbers and system/tool events of a file this module exported.

    When every turn carries its native number (``additional_metadata.turn``, or
    ``metadata.turn`` as deepeval saves it) and the numbers increase, the events
    take them; the events kept under ``additional_metadata.role_review.omitted_events``
    go back in their place (they are checked like any case's events). Any other
    file keeps the numbering 1..n.
    """
    numbers = [_native_turn(turn) for turn in turns]
    if not all(type(n) is int for n in numbers) or any(a >= b for a, b in pairwise(numbers)):
        return transcript
    restored = [
        {**event, "turn": number} for event, number in zip(transcript, numbers, strict=True)
    ]
    review = metadata.get("role_review")
    omitted = review.get("omitted_events") if isinstance(review, dict) else None
    if omitted is None:
        return restored
    field = "additional_metadata.role_review.omitted_events"
    if not isinstance(omitted, list):
        raise fail(f"expected a list of events, got {type_name(omitted)}", field)
    for index, event in enumerate(omitted):
        if not isinstance(event, dict) or type(event.get("turn")) is not int:
            raise fail("expected an event object with an integer turn", f"{field}[{index}]")
        if event.get("actor") in TURN_ROLES:
            raise fail("expected a system or tool event", f"{field}[{index}].actor")
    metadata.pop("role_review")
    return sorted([*restored, *(dict(event) for event in omitted)], key=lambda e: e["turn"])


def _event(
    turn: Any, position: int, *, tools: Mapping[str, str | None], fail: Fail
) -> dict[str, Any]:
    field = f"turns[{position}]"
    if not isinstance(turn, dict):
        raise fail(f"expected a turn object, got {type_name(turn)}", field)
    role = turn.get("role")
    if role not in TURN_ROLES:
        shown = role if type(role) is str else type_name(role)
        raise fail(f"expected user or assistant, got {shown!r}", f"{field}.role")
    content = turn.get("content")
    if type(content) is not str:
        raise fail(f"expected text, got {type_name(content)}", f"{field}.content")
    event: dict[str, Any] = {"turn": position + 1, "actor": role, "text": content}
    called = turn.get("tools_called")
    if called is not None:
        if not isinstance(called, list):
            raise fail(
                f"expected a list of tool calls, got {type_name(called)}", f"{field}.tools_called"
            )
        names: list[str] = []
        for number, call in enumerate(called):
            name = call.get("name") if isinstance(call, dict) else None
            if type(name) is not str or not name:
                raise fail(
                    "expected a tool call object with a name",
                    f"{field}.tools_called[{number}].name",
                )
            names.append(name)
        if names or role == "assistant":
            event["observed_actions"] = map_tools(names, tools)
    kept = {key: value for key, value in turn.items() if key not in _TURN_KEYS_USED}
    if kept:
        event["source_metadata"] = kept
    return event


def write_deepeval(
    cases: Iterable[Mapping[str, Any]],
    *,
    expected: Mapping[str, Mapping[str, Any]] | None = None,
) -> str:
    """Cases as deepeval conversational goldens / test cases: JSON text, deterministic.

    A list (in the order given) of ``{"name": case_id, "scenario", "chatbot_role",
    "turns": [{"role", "content", "tools_called"?, "additional_metadata": {"turn":
    N}}], "additional_metadata": {...}, "expected_outcome"?}``, keys sorted,
    two-space indent, ending in a newline. deepeval 4 loads the file with
    ``EvaluationDataset().add_goldens_from_json_file(path)``: an object with a
    non-empty ``scenario`` becomes a ``ConversationalGolden`` with its turns in
    order; ``ConversationalTestCase(**item)`` builds a test case directly (deepeval
    4.3 has no JSON loader for conversational test cases: its
    ``add_test_cases_from_json_file`` reads single-turn ones).

    * ``scenario``: the case's own (``source_metadata.scenario``, kept when it was
      read from deepeval), else a sentence naming the case and its role;
    * ``chatbot_role``: the role, at the top (for ``ConversationalTestCase``) and as
      ``additional_metadata.chatbot_role`` (the golden loader keeps only
      ``additional_metadata``); both left out when the case has none;

    * turns: the user and assistant events; ``content`` is the text (``""`` for an
      assistant event that only acted); ``tools_called`` lists the observed actions
      as ``{"name": action}``; each turn's ``additional_metadata.turn`` is the
      native turn number, so per-turn verdicts keyed by turn can be matched;
    * ``additional_metadata.role_contract``: the contract (absent when none);
    * ``additional_metadata.role_review``: ``{"case_id", "omitted_events"}`` where
      omitted events are the system and tool events (deepeval turns have no place for
      them; a role change by a ``system`` event is among them), written verbatim;
    * ``expected``: per case id, a JSON object stored as
      ``additional_metadata.expected`` (for instance ``{"verdict": "fail",
      "turns": {"8": "authority_break"}, "expected_outcome": "..."}``); a string
      ``expected_outcome`` in it also becomes the test case's ``expected_outcome``.
      A case id in ``expected`` that is not among the cases is a ``ValueError``.

    """
    items = list(cases)
    check_unique_case_ids(items)
    expected = expected or {}
    unknown = sorted(set(expected) - {case["case_id"] for case in items})
    if unknown:
        raise ValueError(
            f"expected names case ids that are not among the cases: {', '.join(unknown)}"
        )
    test_cases: list[dict[str, Any]] = []
    for case in items:
        case_id = case["case_id"]
        turns: list[dict[str, Any]] = []
        omitted: list[dict[str, Any]] = []
        for event in case["transcript"]:
            actor = event.get("actor")
            if actor not in TURN_ROLES:
                omitted.append(dict(event))
                continue
            turn: dict[str, Any] = {
                "role": actor,
                "content": event.get("text") or "",
                "additional_metadata": {"turn": event.get("turn")},
            }
            actions = event.get("observed_actions")
            if actions:
                turn["tools_called"] = [{"name": action} for action in actions]
            turns.append(turn)
        metadata: dict[str, Any] = {"role_review": {"case_id": case_id, "omitted_events": omitted}}
        contract = case.get("contract")
        if contract is not None:
            metadata["role_contract"] = contract
        test_case: dict[str, Any] = {
            "name": case_id,
            "scenario": _scenario(case),
            "turns": turns,
            "additional_metadata": metadata,
        }
        if case.get("chatbot_role") is not None:
            test_case["chatbot_role"] = case["chatbot_role"]
            metadata["chatbot_role"] = case["chatbot_role"]
        gold = expected.get(case_id)
        if gold is not None:
            metadata["expected"] = dict(gold)
            outcome = gold.get("expected_outcome")
            if type(outcome) is str:
                test_case["expected_outcome"] = outcome
        test_cases.append(test_case)
    text = orjson.dumps(
        test_cases, option=orjson.OPT_SORT_KEYS | orjson.OPT_INDENT_2 | orjson.OPT_NON_STR_KEYS
    )
    return text.decode("utf-8") + "\n"


def _scenario(case: Mapping[str, Any]) -> str:
    """deepeval's ``scenario`` (required, non-empty, for a conversational golden)."""
    kept = case.get("source_metadata")
    if isinstance(kept, Mapping):
        own = kept.get("scenario")
        if type(own) is str and own.strip():
            return own
    scenario = f"Recorded conversation {case['case_id']}: the chatbot must stay in its role"
    role = case.get("chatbot_role")
    if type(role) is str and role.strip():
        return f"{scenario}: {role}"
    return f"{scenario}."
