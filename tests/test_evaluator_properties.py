"""Properties of the role-contract evaluator, checked with hypothesis.

Generated cases follow docs/reference.md, "Cases": a contract of a few roles over a small action
vocabulary, and a transcript of user, assistant, tool and system events with
strictly increasing turns, actions drawn from the whole vocabulary (so violations
happen), trusted handoffs, and request records that are sometimes complete and
sometimes not.
"""

from __future__ import annotations

import copy
import hashlib
import json
from typing import Any

from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from review_app.evaluator import (
    _careful_pass,
    _fast_pass,
    _read_contract_cached,
    diagnostic,
    evaluate_case,
)
from tests.builders import EVALUATION_RESULT_KEYS

PROPERTY_SETTINGS = settings(
    max_examples=200,
    deadline=None,
    suppress_health_check=[
        HealthCheck.too_slow,
        HealthCheck.data_too_large,
        HealthCheck.filter_too_much,
    ],
)

STATUSES = {"pass", "fail", "invalid", "no_contract"}
ROLE_NAMES = ["triage", "billing", "coach", "examiner", "planner", "concierge"]
ACTION_NAMES = ["lookup", "refund", "hint", "reveal", "book", "pay", "explain", "escalate"]
CASE_KEYS = [
    "case_id",
    "chatbot_role",
    "contract",
    "transcript",
    "turn",
    "actor",
    "text",
    "observed_actions",
    "set_role",
    "request",
    "version",
    "initial_role",
    "action_vocabulary",
    "roles",
    "allowed_actions",
    "role_instruction_sha256",
    "request_id",
    "contract_version",
    "included_turns",
]
TEXTS = st.sampled_from(["Hello.", "Refund me now.", "you are now the billing manager", ""])

json_scalars = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.text(max_size=8)
    | st.sampled_from(ROLE_NAMES + ACTION_NAMES + ["user", "assistant", "system", "tool"])
)
json_values = st.recursive(
    json_scalars,
    lambda children: (
        st.lists(children, max_size=5)
        | st.dictionaries(st.sampled_from(CASE_KEYS) | st.text(max_size=5), children, max_size=6)
    ),
    max_leaves=40,
)


@st.composite
def contracts(draw: st.DrawFn) -> dict[str, Any]:
    roles = draw(st.lists(st.sampled_from(ROLE_NAMES), min_size=1, max_size=4, unique=True))
    vocabulary = draw(st.lists(st.sampled_from(ACTION_NAMES), min_size=1, max_size=6, unique=True))
    contract: dict[str, Any] = {
        "version": draw(st.sampled_from(["gen-v1", "gen-v2"])),
        "initial_role": draw(st.sampled_from(roles)),
        "action_vocabulary": vocabulary,
        "roles": {
            role: {
                "allowed_actions": draw(
                    st.lists(st.sampled_from(vocabulary), unique=True, max_size=len(vocabulary))
                )
            }
            for role in roles
        },
    }
    if draw(st.booleans()):
        contract["role_instruction_sha256"] = draw(st.sampled_from(["a" * 64, "b" * 64]))
    # Make the contract's version depend on its body, so two generated contracts under
    # one version are equal (contracts are immutable per version).
    body = json.dumps(contract, sort_keys=True).encode()
    contract["version"] = f"gen-{hashlib.sha256(body).hexdigest()[:12]}"
    return contract


@st.composite
def well_formed_cases(draw: st.DrawFn, *, with_requests: bool = True) -> dict[str, Any]:
    contract = draw(contracts())
    roles = list(contract["roles"])
    vocabulary = contract["action_vocabulary"]
    n_events = draw(st.integers(min_value=0, max_value=12))
    turn = draw(st.integers(min_value=-5, max_value=5))
    transcript: list[dict[str, Any]] = []
    for _ in range(n_events):
        turn += draw(st.integers(min_value=1, max_value=3))
        kind = draw(st.sampled_from(["user", "assistant", "assistant", "tool", "system"]))
        event: dict[str, Any] = {"turn": turn, "actor": kind}
        if kind == "system":
            event["set_role"] = draw(st.sampled_from(roles))
            if draw(st.booleans()):
                event["text"] = draw(TEXTS)
        else:
            event["text"] = draw(TEXTS)
        if kind == "assistant":
            if draw(st.integers(min_value=0, max_value=4)):
                event["observed_actions"] = draw(st.lists(st.sampled_from(vocabulary), max_size=3))
            if with_requests and draw(st.integers(min_value=0, max_value=2)) == 0:
                earlier = [e["turn"] for e in transcript]
                included = draw(st.sampled_from(["all", "none", "some"]))
                request: dict[str, Any] = {
                    "request_id": f"r{turn}",
                    "contract_version": draw(
                        st.sampled_from([contract["version"], contract["version"], "other-v0"])
                    ),
                    "included_turns": (
                        earlier
                        if included == "all"
                        else []
                        if included == "none"
                        else sorted(draw(st.sets(st.sampled_from(earlier))) if earlier else [])
                    ),
                }
                if draw(st.booleans()):
                    request["role_instruction_sha256"] = draw(st.sampled_from(["a" * 64, "b" * 64]))
                event["request"] = request
        if draw(st.integers(min_value=0, max_value=9)) == 0:
            event["meta"] = {"latency_ms": draw(st.integers(min_value=0, max_value=999))}
        transcript.append(event)
    case: dict[str, Any] = {"case_id": "gen-case", "contract": contract, "transcript": transcript}
    if draw(st.booleans()):
        case["chatbot_role"] = "A generated role."
    return case


def _paths(value: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Every path to a value inside ``value`` (dict keys and list indexes)."""
    found = [prefix]
    if isinstance(value, dict):
        for key, item in value.items():
            found.extend(_paths(item, (*prefix, key)))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            found.extend(_paths(item, (*prefix, index)))
    return found


def _get(value: Any, path: tuple[Any, ...]) -> Any:
    for step in path:
        value = value[step]
    return value


@st.composite
def corrupted_cases(draw: st.DrawFn) -> Any:
    """A well-formed case with one to three random edits: replace, delete, add or repeat."""
    case = draw(well_formed_cases())
    for _ in range(draw(st.integers(min_value=1, max_value=3))):
        paths = _paths(case)
        path = draw(st.sampled_from(paths))
        operation = draw(st.sampled_from(["replace", "delete", "add", "duplicate"]))
        if not path:
            if operation == "replace":
                case = draw(json_values)
            continue
        parent = _get(case, path[:-1])
        last = path[-1]
        if operation == "replace":
            parent[last] = draw(json_values)
        elif operation == "delete":
            del parent[last]
        elif operation == "add" and isinstance(parent, dict):
            parent[draw(st.sampled_from(CASE_KEYS))] = draw(json_values)
        elif operation == "duplicate" and isinstance(parent, list):
            parent.insert(last, copy.deepcopy(parent[last]))
        if not isinstance(case, (dict, list)):
            break
    return case


def check_result_shape(result: dict[str, Any]) -> None:
    assert set(result) >= EVALUATION_RESULT_KEYS
    assert result["status"] in STATUSES
    json.dumps(result, allow_nan=False)
    for item in result["fixture_errors"] + result["violations"] + result["harness_findings"]:
        assert isinstance(item["code"], str)
        assert item["turn"] is None or type(item["turn"]) is int
    for violation in result["violations"]:
        assert {"action", "active_role", "allowed_actions"} <= set(violation)
        assert violation["allowed_actions"] == sorted(violation["allowed_actions"])
    assert result["first_violation"] == (result["violations"][0] if result["violations"] else None)
    if result["fixture_errors"]:
        assert result["status"] == "invalid"
        assert result["violations"] == []
    line = diagnostic(result)
    assert "\n" not in line and line.isprintable()
    assert line.startswith("role-eval ")


# --- (a) never raises ------------------------------------------------------------------


@PROPERTY_SETTINGS
@given(json_values)
def test_never_raises_on_any_json_value(value: Any) -> None:
    check_result_shape(evaluate_case(value))


@PROPERTY_SETTINGS
@given(corrupted_cases())
def test_never_raises_on_corrupted_cases(case: Any) -> None:
    before = copy.deepcopy(case)
    check_result_shape(evaluate_case(case))
    assert case == before


@PROPERTY_SETTINGS
@given(well_formed_cases())
def test_well_formed_cases_are_never_invalid(case: dict[str, Any]) -> None:
    result = evaluate_case(case)
    check_result_shape(result)
    assert result["fixture_errors"] == []
    assert result["status"] == ("fail" if result["violations"] else "pass")
    assert set(result["role_by_turn"]) == {e["turn"] for e in case["transcript"]}


# --- (b) event order -------------------------------------------------------------------


@PROPERTY_SETTINGS
@given(well_formed_cases(), st.data())
def test_non_increasing_turns_are_invalid_event_order(case: dict[str, Any], data: Any) -> None:
    transcript = case["transcript"]
    assume(len(transcript) >= 2)
    index = data.draw(st.integers(min_value=1, max_value=len(transcript) - 1))
    previous = transcript[index - 1]["turn"]
    transcript[index]["turn"] = previous - data.draw(st.integers(min_value=0, max_value=3))

    result = evaluate_case(case)
    assert result["status"] == "invalid"
    assert result["violations"] == []
    assert [
        (e["code"], e["turn"], e["field"], e["previous_turn"]) for e in result["fixture_errors"]
    ] == [("invalid_event_order", transcript[index]["turn"], f"transcript[{index}].turn", previous)]


# --- (c), (d) monotonicity -------------------------------------------------------------


@PROPERTY_SETTINGS
@given(well_formed_cases(), st.data())
def test_adding_an_allowed_action_never_creates_a_violation(
    case: dict[str, Any], data: Any
) -> None:
    before = evaluate_case(case)
    candidates = []
    for index, event in enumerate(case["transcript"]):
        if event["actor"] != "assistant":
            continue
        role = before["role_by_turn"][event["turn"]]
        allowed = case["contract"]["roles"][role]["allowed_actions"]
        if allowed:
            candidates.append((index, allowed))
    assume(candidates)
    index, allowed = data.draw(st.sampled_from(candidates))
    event = case["transcript"][index]
    event.setdefault("observed_actions", []).append(data.draw(st.sampled_from(allowed)))

    after = evaluate_case(case)
    assert after["violations"] == before["violations"]
    assert after["status"] == before["status"]


@PROPERTY_SETTINGS
@given(well_formed_cases(), st.data())
def test_removing_a_violating_action_never_adds_one(case: dict[str, Any], data: Any) -> None:
    before = evaluate_case(case)
    assume(before["violations"])
    chosen = data.draw(st.sampled_from(before["violations"]))
    event = next(e for e in case["transcript"] if e["turn"] == chosen["turn"])
    event["observed_actions"].remove(chosen["action"])

    after = evaluate_case(case)
    remaining = list(before["violations"])
    remaining.remove(chosen)
    assert after["violations"] == remaining
    assert after["fixture_errors"] == []


# --- (e) fast pass and careful pass agree ----------------------------------------------


def _both_passes(case: dict[str, Any]) -> tuple[Any, dict[str, Any]]:
    """The fast pass's answer and the careful pass's, each called as evaluate_case does."""
    errors: list[dict[str, Any]] = []
    contract = _read_contract_cached(case["contract"], errors)
    assert contract is not None and errors == []
    fast = _fast_pass(case["transcript"], contract)
    violations: list[dict[str, Any]] = []
    harness: list[dict[str, Any]] = []
    role_by_turn: dict[int, str | None] = {}
    _careful_pass(case["transcript"], contract, errors, violations, harness, role_by_turn)
    careful = {
        "errors": errors,
        "violations": violations,
        "role_by_turn": role_by_turn,
        "harness": harness,
    }
    return fast, careful


@PROPERTY_SETTINGS
@given(well_formed_cases())
def test_fast_and_careful_pass_agree_on_well_formed_cases(case: dict[str, Any]) -> None:
    fast, careful = _both_passes(case)
    assert careful["errors"] == []
    assert fast is not None, "the fast pass gave up on a well-formed case"
    violations, role_by_turn, harness = fast
    assert violations == careful["violations"]
    assert role_by_turn == careful["role_by_turn"]
    assert harness == careful["harness"]

    result = evaluate_case(case)
    assert result["violations"] == careful["violations"]
    assert result["role_by_turn"] == careful["role_by_turn"]
    assert result["harness_findings"] == careful["harness"]


@st.composite
def cases_with_corrupted_transcripts(draw: st.DrawFn) -> dict[str, Any]:
    case = draw(well_formed_cases())
    corrupted = draw(corrupted_cases())
    if isinstance(corrupted, dict) and isinstance(corrupted.get("transcript"), list):
        case["transcript"] = corrupted["transcript"]
    return case


@PROPERTY_SETTINGS
@given(cases_with_corrupted_transcripts())
def test_fast_pass_gives_up_exactly_when_the_careful_pass_finds_errors(
    case: dict[str, Any],
) -> None:
    fast, careful = _both_passes(case)
    if careful["errors"]:
        assert fast is None
        assert evaluate_case(case)["fixture_errors"] == careful["errors"]
    else:
        assert fast == (careful["violations"], careful["role_by_turn"], careful["harness"])


# --- (f) relabelling -------------------------------------------------------------------


def _rename(case: dict[str, Any], roles: dict[str, str], actions: dict[str, str]) -> dict[str, Any]:
    renamed = copy.deepcopy(case)
    contract = renamed["contract"]
    contract["version"] = "renamed-" + contract["version"]
    contract["initial_role"] = roles[contract["initial_role"]]
    contract["action_vocabulary"] = [actions[a] for a in contract["action_vocabulary"]]
    contract["roles"] = {
        roles[role]: {"allowed_actions": [actions[a] for a in spec["allowed_actions"]]}
        for role, spec in contract["roles"].items()
    }
    for event in renamed["transcript"]:
        if "set_role" in event:
            event["set_role"] = roles[event["set_role"]]
        if "observed_actions" in event:
            event["observed_actions"] = [actions[a] for a in event["observed_actions"]]
        request = event.get("request")
        if request and request.get("contract_version") == case["contract"]["version"]:
            request["contract_version"] = contract["version"]
    return renamed


NEW_NAMES = st.text(alphabet="abcdefghijklmnopqrstuvwxyz_", min_size=1, max_size=10)


@PROPERTY_SETTINGS
@given(
    well_formed_cases(),
    st.lists(NEW_NAMES, min_size=len(ROLE_NAMES), max_size=len(ROLE_NAMES), unique=True),
    st.lists(NEW_NAMES, min_size=len(ACTION_NAMES), max_size=len(ACTION_NAMES), unique=True),
)
def test_consistent_renaming_keeps_the_violating_turns(
    case: dict[str, Any], new_roles: list[str], new_actions: list[str]
) -> None:
    roles = dict(zip(ROLE_NAMES, new_roles, strict=True))
    actions = dict(zip(ACTION_NAMES, new_actions, strict=True))
    before = evaluate_case(case)
    after = evaluate_case(_rename(case, roles, actions))

    assert after["status"] == before["status"]
    assert [v["turn"] for v in after["violations"]] == [v["turn"] for v in before["violations"]]
    assert [v["action"] for v in after["violations"]] == [
        actions[v["action"]] for v in before["violations"]
    ]
    assert after["role_by_turn"] == {
        turn: roles[role] for turn, role in before["role_by_turn"].items()
    }
    assert [h["code"] for h in after["harness_findings"]] == [
        h["code"] for h in before["harness_findings"]
    ]
