"""evaluate_case's common-case path gives exactly what the careful path gives.

:func:`review_app.evaluator.evaluate_case` settles a well-formed case with a
remembered contract without :func:`_evaluate`, and its fast pass reads the keys of
the events with the case's own key strings. Here every result is compared with the
careful path's (``_evaluate(case, try_fast_pass=False)``: the contract checks and the
careful pass, which explain every problem) as JSON text, so key order, list order and
every message count: over the benchmark corpus (parsed by the standard library and by
orjson, whose key strings are shared differently), over the same corpus with random
edits, and over generated cases.
"""

from __future__ import annotations

import copy
import json
import random
from collections.abc import Iterator
from typing import Any

import orjson
import pytest
from hypothesis import given

from benchmarks.corpus import SUPPORT_CONTRACT, generate_corpus
from review_app import evaluator
from review_app.evaluator import _evaluate, _fast_pass, _read_contract_cached, evaluate_case
from tests.test_evaluator_properties import (
    PROPERTY_SETTINGS,
    corrupted_cases,
    json_values,
    well_formed_cases,
)

EDIT_VALUES: list[Any] = [
    None,
    True,
    False,
    0,
    1,
    -1,
    2.0,
    float("nan"),
    10**20,
    -(1 << 62) - 5,
    "",
    "x",
    "user",
    "assistant",
    "system",
    "tool",
    "support_triage",
    "billing_specialist",
    "refund_order",
    [],
    ["refund_order"],
    ["lookup_order", "escalate"],
    ["not_in_vocabulary"],
    [1],
    {},
    {"request_id": "r", "included_turns": []},
]
EDIT_KEYS = ["turn", "actor", "text", "observed_actions", "set_role", "request", "meta"]


def as_json(result: dict[str, Any]) -> str:
    return json.dumps(result)  # NaN stays NaN here: a result may quote an input value


def assert_same(case: Any) -> None:
    careful = _evaluate(copy.deepcopy(case), try_fast_pass=False)
    before = copy.deepcopy(case)
    result = evaluate_case(case)
    assert as_json(result) == as_json(careful)
    assert case == before  # (deepcopy keeps a NaN the same object, so equal)


def corpus_lines(n_cases: int) -> list[bytes]:
    return [json.dumps(case).encode() for case in generate_corpus(n_cases, 50, seed=11)]


def test_the_benchmark_corpus_gives_what_the_careful_path_gives() -> None:
    lines = corpus_lines(400)
    statuses = set()
    for line in lines:
        for case in (json.loads(line), orjson.loads(line)):
            assert_same(case)
            statuses.add(evaluate_case(case)["status"])
            # and the fast pass, not the careful one, found it
            contract = _read_contract_cached(case["contract"], [])
            assert contract is not None
            assert _fast_pass(case["transcript"], contract) is not None
    assert statuses == {"pass", "fail"}


def test_events_with_their_keys_in_another_order_give_what_the_careful_path_gives() -> None:
    for line in corpus_lines(100):
        case = json.loads(line)
        for event in case["transcript"]:
            items = sorted(event.items(), reverse=True)
            event.clear()
            event.update(items)
        assert_same(json.loads(json.dumps(case)))


def test_the_first_case_of_a_contract_gives_what_a_remembered_one_gives() -> None:
    line = corpus_lines(1)[0]
    evaluator._CONTRACT_CACHE.clear()
    first = evaluate_case(json.loads(line))
    assert SUPPORT_CONTRACT["version"] in evaluator._CONTRACT_CACHE
    assert as_json(evaluate_case(json.loads(line))) == as_json(first)


def test_a_contract_mutated_in_place_between_calls_is_read_again() -> None:
    """The same contract dict, changed by the caller after a case remembered it: the
    next case must not get the remembered reading (identity is not equality)."""
    case = json.loads(corpus_lines(1)[0])
    contract = case["contract"]
    mutations = [
        lambda c: c["action_vocabulary"].remove("refund_order"),
        lambda c: c["roles"]["support_triage"]["allowed_actions"].append("refund_order"),
        lambda c: c["roles"]["support_triage"]["allowed_actions"].__setitem__(0, "nope"),
        lambda c: c["roles"].pop("billing_specialist"),
        lambda c: c["roles"].__setitem__("auditor", {"allowed_actions": ["lookup_order"]}),
        lambda c: c.__setitem__("initial_role", "billing_specialist"),
        lambda c: c.__setitem__("initial_role", "nobody"),
        lambda c: c.__setitem__("role_instruction_sha256", "0" * 64),
    ]
    for mutate in mutations:
        evaluator._CONTRACT_CACHE.clear()
        case["contract"] = contract = copy.deepcopy(SUPPORT_CONTRACT)
        assert_same(case)  # remembers the contract
        mutate(contract)
        assert_same(case)


@pytest.mark.parametrize("value", [1, 1.0, True, None, ["support_triage"], {"x": 1}])
def test_contract_values_of_another_type_never_pass_for_remembered_strings(value: Any) -> None:
    """A remembered contract holds strings; 1, 1.0 and True are equal to one another
    in Python but never to a string, so each of these contracts is read again (and
    gets its own fixture error)."""
    line = corpus_lines(1)[0]
    evaluator._CONTRACT_CACHE.clear()
    assert_same(json.loads(line))  # remembers the contract
    edits = [
        lambda c: c.__setitem__("initial_role", value),
        lambda c: c["action_vocabulary"].__setitem__(0, value),
        lambda c: c["roles"]["support_triage"]["allowed_actions"].__setitem__(0, value),
        lambda c: c["roles"].__setitem__("support_triage", value),
        lambda c: c.__setitem__("role_instruction_sha256", value),
    ]
    for edit in edits:
        case = json.loads(line)
        edit(case["contract"])
        assert_same(case)
        if value is not None:
            assert evaluate_case(case)["status"] == "invalid"


@pytest.mark.parametrize("field", ["case_id", "chatbot_role", "contract", "transcript"])
def test_a_case_without_one_of_its_fields_gives_what_the_careful_path_gives(field: str) -> None:
    case = json.loads(corpus_lines(1)[0])
    del case[field]
    assert_same(case)


def _edit(case: dict[str, Any], rng: random.Random) -> dict[str, Any]:
    """One to three random edits of a corpus case: a key set or removed, an event
    repeated or replaced, a case field replaced, or an event's keys reordered."""
    transcript = case["transcript"]
    for _ in range(rng.randint(1, 3)):
        event = rng.choice(transcript)
        operation = rng.random()
        if operation < 0.35 and type(event) is dict:
            event[rng.choice(EDIT_KEYS)] = copy.deepcopy(rng.choice(EDIT_VALUES))
        elif operation < 0.55 and type(event) is dict:
            event.pop(rng.choice(EDIT_KEYS), None)
        elif operation < 0.65:
            position = rng.randrange(len(transcript))
            transcript.insert(position, copy.deepcopy(transcript[position]))
        elif operation < 0.75:
            transcript[rng.randrange(len(transcript))] = copy.deepcopy(rng.choice(EDIT_VALUES))
        elif operation < 0.85:
            field = rng.choice(["case_id", "chatbot_role", "contract"])
            case[field] = copy.deepcopy(rng.choice(EDIT_VALUES))
        elif operation < 0.92:
            # (An earlier edit may have replaced the contract with any value.)
            contract = case["contract"]
            roles = contract.get("roles") if type(contract) is dict else None
            role = roles.get("support_triage") if type(roles) is dict else None
            allowed = role.get("allowed_actions") if type(role) is dict else None
            if type(allowed) is list:
                allowed.append(rng.choice(EDIT_VALUES))
        elif type(event) is dict:
            items = list(event.items())
            rng.shuffle(items)
            event.clear()
            event.update(items)
    return case


def edited_corpus_cases(*, seed: int, n_cases: int = 3000) -> Iterator[dict[str, Any]]:
    """Corpus cases with one to three random edits each (:func:`_edit`), parsed by the
    standard library and by orjson in turn."""
    rng = random.Random(seed)
    lines = corpus_lines(200)
    for index in range(n_cases):
        line = rng.choice(lines)
        yield _edit(orjson.loads(line) if index % 2 else json.loads(line), rng)


def test_the_benchmark_corpus_with_random_edits_gives_what_the_careful_path_gives() -> None:
    statuses = set()
    for case in edited_corpus_cases(seed=23):
        assert_same(case)
        statuses.add(evaluate_case(case)["status"])
    assert statuses == {"pass", "fail", "invalid", "no_contract"}


@PROPERTY_SETTINGS
@given(well_formed_cases())
def test_generated_cases_give_what_the_careful_path_gives(case: dict[str, Any]) -> None:
    assert_same(case)
    # Parsed from JSON text, the events share their key strings (the fast pass reads
    # keys with them).
    assert_same(orjson.loads(orjson.dumps(case)))


@PROPERTY_SETTINGS
@given(corrupted_cases())
def test_corrupted_cases_give_what_the_careful_path_gives(case: Any) -> None:
    assert_same(case)


@PROPERTY_SETTINGS
@given(json_values)
def test_any_json_value_gives_what_the_careful_path_gives(value: Any) -> None:
    assert_same(value)
