"""Contracts given as an option or embedded in a record, and tool-to-action mapping."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from review_app.errors import InputError
from review_app.evaluator import evaluate_case, type_name

CONTRACT_OPTION_SOURCE = "the contract option"


def validate_contract(
    contract: Any,
    *,
    source: str | None = CONTRACT_OPTION_SOURCE,
    line: int | None = None,
    field: str = "contract",
) -> dict[str, Any] | None:
    """``contract`` if usable (docs/reference.md, "Cases"), else ``InputError`` naming the field.

    ``None`` passes (no contract). A contract that is well formed but inconsistent
    (an initial role it does not define, an allowed action missing from the
    vocabulary) passes too: the evaluator reports that as a fixture error and the
    case lands in the ``invalid`` lane.
    """
    if contract is None:
        return None
    if not isinstance(contract, dict):
        raise InputError(
            f"expected a contract object, got {type_name(contract)}",
            source=source,
            line=line,
            field=field,
        )
    result = evaluate_case({"case_id": "contract-check", "contract": contract, "transcript": []})
    for error in result["fixture_errors"]:
        if error["code"] == "malformed_case":
            rest = str(error["field"]).removeprefix("contract")
            raise InputError(error["message"], source=source, line=line, field=field + rest)
    return contract


def choose_contract(
    given: dict[str, Any] | None,
    embedded: dict[str, Any] | None,
    *,
    source: str,
    line: int | None,
    field: str,
) -> dict[str, Any] | None:
    """The contract of one record: its own, else the one given as an option.

    A record carrying a contract that differs from the option is refused rather than
    silently overridden in either direction.
    """
    if embedded is None:
        return given
    if given is not None and given != embedded:
        raise InputError(
            f"this record carries its own contract (version {embedded.get('version')}), "
            f"which differs from the contract given as an option (version "
            f"{given.get('version')}); drop one of them",
            source=source,
            line=line,
            field=field,
        )
    return embedded


def validate_tool_action_map(
    tool_action_map: Mapping[str, str | None] | None,
) -> Mapping[str, str | None]:
    if tool_action_map is None:
        return {}
    if not isinstance(tool_action_map, Mapping):
        raise InputError(
            "expected a mapping of tool name to contract action", field="tool_action_map"
        )
    for tool, action in tool_action_map.items():
        if type(tool) is not str or not (action is None or type(action) is str):
            raise InputError(
                f"entry {tool!r}: expected a tool name mapped to an action name (or to null "
                "to ignore that tool)",
                field="tool_action_map",
            )
    return tool_action_map


def map_tools(names: list[str], tool_action_map: Mapping[str, str | None]) -> list[str]:
    """Contract actions for tool calls, in call order.

    A mapped tool gives its action; a tool mapped to ``None`` is not an action and is
    left out; an unmapped tool keeps its own name, so a contract's vocabulary check
    reports it (``unknown_action``) instead of the evidence quietly disappearing.
    """
    actions: list[str] = []
    for name in names:
        if name in tool_action_map:
            action = tool_action_map[name]
            if action is not None:
                actions.append(action)
        else:
            actions.append(name)
    return actions
