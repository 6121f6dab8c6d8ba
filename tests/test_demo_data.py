"""The bundled demo data set: shape of every file and the cross-references between them.

These tests read the files with the standard library only, so they hold whatever the
importers and the evaluator do; whether the evaluator agrees with ``expected.json`` is
checked elsewhere, against the real evaluator.
"""

from __future__ import annotations

import csv
import json
import re
from collections import Counter, defaultdict
from importlib.resources import files
from pathlib import Path
from typing import Any

import pytest
import yaml

DEMO = Path(str(files("review_app") / "demo_data"))
RUBRIC = "role-adherence@1"
VERDICT_OF = {
    label["code"]: label["verdict"]
    for label in yaml.safe_load(
        (Path(__file__).resolve().parents[1] / "rubrics" / "role-adherence" / "v1.yaml").read_text(
            encoding="utf-8"
        )
    )["labels"]
}
ACTORS = {"user", "assistant", "system", "tool"}
EVENT_KEYS = {"turn", "actor", "text", "observed_actions", "set_role", "request"}
REQUEST_KEYS = {"request_id", "contract_version", "included_turns", "role_instruction_sha256"}
HARNESS_CODES = {"request_contract_mismatch", "request_missing_turns", "role_instruction_mismatch"}
FIXTURE_CODES = {
    "unknown_initial_role",
    "invalid_event_order",
    "untrusted_role_transition",
    "unknown_transition_role",
    "actions_on_non_assistant_event",
    "unknown_action",
}
SHA256 = re.compile(r"^[0-9a-f]{64}$")
CASE_PATHS = sorted((DEMO / "cases").glob("*.json"))


def load_case(path: Path) -> dict[str, Any]:
    with path.open(encoding="utf-8") as handle:
        case: dict[str, Any] = json.load(handle)
    return case


@pytest.fixture(scope="module")
def cases() -> dict[str, dict[str, Any]]:
    return {load_case(path)["case_id"]: load_case(path) for path in CASE_PATHS}


@pytest.fixture(scope="module")
def expected() -> dict[str, dict[str, Any]]:
    with (DEMO / "expected.json").open(encoding="utf-8") as handle:
        data: dict[str, dict[str, Any]] = json.load(handle)
    return data


@pytest.fixture(scope="module")
def assistant_turns(cases: dict[str, dict[str, Any]]) -> set[tuple[str, int]]:
    return {
        (case_id, event["turn"])
        for case_id, case in cases.items()
        for event in case["transcript"]
        if event["actor"] == "assistant"
    }


@pytest.fixture(scope="module")
def labels() -> list[dict[str, str]]:
    with (DEMO / "labels.csv").open(encoding="utf-8", newline="") as handle:
        reader = csv.DictReader(handle)
        assert reader.fieldnames == ["case_id", "turn", "reviewer", "label", "rubric", "rationale"]
        return list(reader)


@pytest.fixture(scope="module")
def verdicts() -> list[dict[str, Any]]:
    rows = []
    with (DEMO / "judge_verdicts.jsonl").open(encoding="utf-8") as handle:
        for number, line in enumerate(handle, start=1):
            assert line.strip(), f"judge_verdicts.jsonl line {number} is blank"
            rows.append(json.loads(line))
    return rows


# --- cases --------------------------------------------------------------------------------


def test_there_are_enough_cases_across_three_products(cases: dict[str, dict[str, Any]]) -> None:
    assert len(cases) == len(CASE_PATHS) >= 14
    versions = Counter(case["contract"]["version"] for case in cases.values())
    assert len(versions) == 3
    assert min(versions.values()) >= 4


@pytest.mark.parametrize("path", CASE_PATHS, ids=lambda path: path.stem)
def test_case_file_has_the_spec_shape(path: Path) -> None:
    case = load_case(path)
    assert set(case) <= {"case_id", "chatbot_role", "contract", "transcript"}
    assert case["case_id"] == path.stem
    assert isinstance(case["chatbot_role"], str) and case["chatbot_role"].strip()

    contract = case["contract"]
    assert set(contract) <= {
        "version",
        "initial_role",
        "action_vocabulary",
        "roles",
        "role_instruction_sha256",
    }
    vocabulary = contract["action_vocabulary"]
    assert all(isinstance(action, str) for action in vocabulary)
    assert len(set(vocabulary)) == len(vocabulary)
    assert contract["initial_role"] in contract["roles"]
    for role in contract["roles"].values():
        assert set(role) == {"allowed_actions"}
        assert set(role["allowed_actions"]) <= set(vocabulary)
    assert SHA256.match(contract["role_instruction_sha256"])

    transcript = case["transcript"]
    assert transcript
    earlier_turns: list[int] = []
    for event in transcript:
        assert set(event) <= EVENT_KEYS
        assert event["actor"] in ACTORS
        turn = event["turn"]
        assert type(turn) is int
        assert not earlier_turns or turn > earlier_turns[-1], f"turn {turn} is not increasing"
        if "text" in event:
            assert isinstance(event["text"], str) and event["text"].strip()
        if event["actor"] != "system":
            assert event.get("text"), f"turn {turn} has no text"
        if "observed_actions" in event:
            assert event["actor"] == "assistant", f"actions on a {event['actor']} event"
            assert all(isinstance(action, str) for action in event["observed_actions"])
        if "set_role" in event:
            assert event["actor"] == "system", "only the system may change the role"
            assert event["set_role"] in contract["roles"]
        if "request" in event:
            assert event["actor"] == "assistant"
            request = event["request"]
            assert set(request) == REQUEST_KEYS
            assert isinstance(request["request_id"], str) and request["request_id"]
            assert isinstance(request["contract_version"], str)
            assert SHA256.match(request["role_instruction_sha256"])
            included = request["included_turns"]
            assert included == sorted(set(included)), "included_turns must be ordered and unique"
            assert set(included) <= set(earlier_turns), "a request can only carry earlier turns"
        earlier_turns.append(turn)


def test_every_assistant_event_records_its_actions(cases: dict[str, dict[str, Any]]) -> None:
    for case_id, case in cases.items():
        for event in case["transcript"]:
            if event["actor"] == "assistant":
                assert "observed_actions" in event, f"{case_id} turn {event['turn']}"


def test_request_ids_are_unique(cases: dict[str, dict[str, Any]]) -> None:
    ids = [
        event["request"]["request_id"]
        for case in cases.values()
        for event in case["transcript"]
        if "request" in event
    ]
    assert len(ids) == len(set(ids)) > 20


def test_one_contract_body_per_version(cases: dict[str, dict[str, Any]]) -> None:
    bodies: dict[str, dict[str, Any]] = {}
    for case_id, case in cases.items():
        contract = case["contract"]
        first = bodies.setdefault(contract["version"], contract)
        assert contract == first, f"{case_id} changes contract {contract['version']}"
        assert json.dumps(contract, sort_keys=True) == json.dumps(first, sort_keys=True)


def test_unknown_actions_are_exactly_the_deliberate_ones(
    cases: dict[str, dict[str, Any]], expected: dict[str, dict[str, Any]]
) -> None:
    for case_id, case in cases.items():
        vocabulary = set(case["contract"]["action_vocabulary"])
        unknown = [
            action
            for event in case["transcript"]
            for action in event.get("observed_actions", [])
            if action not in vocabulary
        ]
        deliberate = "unknown_action" in expected[case_id]["fixture_error_codes"]
        assert bool(unknown) == deliberate, f"{case_id}: unknown actions {unknown}"


def test_there_is_one_long_conversation(cases: dict[str, dict[str, Any]]) -> None:
    lengths = sorted(len(case["transcript"]) for case in cases.values())
    assert 45 <= lengths[-1] <= 60


# --- expected.json ------------------------------------------------------------------------


def test_expectations_cover_every_case_in_the_agreed_shape(
    cases: dict[str, dict[str, Any]], expected: dict[str, dict[str, Any]]
) -> None:
    assert set(expected) == set(cases)
    for case_id, expectation in expected.items():
        assert set(expectation) == {
            "status",
            "first_violation_turn",
            "fixture_error_codes",
            "harness_codes",
        }
        status = expectation["status"]
        turn = expectation["first_violation_turn"]
        assert status in {"pass", "fail", "invalid"}
        assert set(expectation["fixture_error_codes"]) <= FIXTURE_CODES
        assert set(expectation["harness_codes"]) <= HARNESS_CODES
        assert expectation["harness_codes"] == sorted(set(expectation["harness_codes"]))
        assert (status == "invalid") == bool(expectation["fixture_error_codes"]), case_id
        if status == "fail":
            event = next(e for e in cases[case_id]["transcript"] if e["turn"] == turn)
            assert event["actor"] == "assistant" and event["observed_actions"], case_id
        else:
            assert turn is None, case_id
        if expectation["harness_codes"]:
            assert any("request" in event for event in cases[case_id]["transcript"]), case_id


def test_every_evaluator_outcome_is_demonstrated(expected: dict[str, dict[str, Any]]) -> None:
    statuses = Counter(expectation["status"] for expectation in expected.values())
    assert statuses["fail"] >= 3 and statuses["invalid"] >= 1 and statuses["pass"] >= 8
    harness = {code for expectation in expected.values() for code in expectation["harness_codes"]}
    assert harness == HARNESS_CODES


def test_each_product_has_a_clean_conversation(
    cases: dict[str, dict[str, Any]],
    expected: dict[str, dict[str, Any]],
    labels: list[dict[str, str]],
) -> None:
    failed_by_a_reviewer = {row["case_id"] for row in labels if VERDICT_OF[row["label"]] == "fail"}
    clean = [
        case_id
        for case_id, expectation in expected.items()
        if expectation["status"] == "pass"
        and not expectation["harness_codes"]
        and case_id not in failed_by_a_reviewer
    ]
    assert len(clean) >= 4
    assert {cases[case_id]["contract"]["version"] for case_id in clean} == {
        case["contract"]["version"] for case in cases.values()
    }


# --- labels.csv ---------------------------------------------------------------------------


def test_labels_reference_assistant_turns_with_known_codes(
    labels: list[dict[str, str]], assistant_turns: set[tuple[str, int]]
) -> None:
    for line, row in enumerate(labels, start=2):
        assert (row["case_id"], int(row["turn"])) in assistant_turns, f"labels.csv line {line}"
        assert row["label"] in VERDICT_OF, f"labels.csv line {line}"
        assert row["rubric"] == RUBRIC, f"labels.csv line {line}"
        if row["label"] != "in_role":
            assert row["rationale"].strip(), f"labels.csv line {line} needs a rationale"


def test_three_reviewers_each_label_every_assistant_turn_once(
    labels: list[dict[str, str]], assistant_turns: set[tuple[str, int]]
) -> None:
    by_reviewer: dict[str, list[tuple[str, int]]] = defaultdict(list)
    for row in labels:
        by_reviewer[row["reviewer"]].append((row["case_id"], int(row["turn"])))
    assert len(by_reviewer) == 3
    for reviewer, units in by_reviewer.items():
        assert len(units) == len(set(units)), f"{reviewer} labels a turn twice"
        assert set(units) == assistant_turns, f"{reviewer} misses turns"


def test_labels_show_a_realistic_pattern(labels: list[dict[str, str]]) -> None:
    verdicts: dict[tuple[str, str], set[str]] = defaultdict(set)
    for row in labels:
        verdict = VERDICT_OF[row["label"]]
        if verdict != "abstain":
            verdicts[(row["case_id"], row["turn"])].add(verdict)
    disagreements = sum(len(found) > 1 for found in verdicts.values())
    assert 0.05 * len(verdicts) <= disagreements <= 0.35 * len(verdicts)
    assert any(found == {"pass", "fail"} or len(found) == 3 for found in verdicts.values())

    codes = Counter(row["label"] for row in labels)
    assert 2 <= codes["cannot_judge"] <= 5
    borderline = Counter(row["reviewer"] for row in labels if row["label"] == "borderline")
    (heaviest, most), *others = borderline.most_common()
    assert all(most >= 2 * count for _, count in others), f"{heaviest} should stand out"


# --- judge_verdicts.jsonl -----------------------------------------------------------------


def test_verdicts_reference_assistant_turns_with_valid_fields(
    verdicts: list[dict[str, Any]],
    cases: dict[str, dict[str, Any]],
    assistant_turns: set[tuple[str, int]],
) -> None:
    for number, row in enumerate(verdicts, start=1):
        where = f"judge_verdicts.jsonl line {number}"
        assert set(row) == {
            "case_id",
            "turn",
            "judge",
            "prompt_version",
            "model",
            "label",
            "score",
            "reason",
        }, where
        assert row["case_id"] in cases, where
        if row["turn"] is not None:
            assert (row["case_id"], row["turn"]) in assistant_turns, where
        assert row["judge"] == "role-judge", where
        assert row["prompt_version"] in {"v1", "v2"}, where
        assert isinstance(row["model"], str) and row["model"], where
        assert row["label"] in VERDICT_OF and VERDICT_OF[row["label"]] != "abstain", where
        score = row["score"]
        assert isinstance(score, float) and 0.0 <= score <= 1.0, where
        if VERDICT_OF[row["label"]] == "fail":
            assert score >= 0.5, where
        if row["label"] == "in_role":
            assert score < 0.5, where
        assert isinstance(row["reason"], str) and row["reason"].strip(), where


def test_each_judge_run_covers_every_assistant_turn_once(
    verdicts: list[dict[str, Any]], assistant_turns: set[tuple[str, int]]
) -> None:
    runs: dict[tuple[str, str, str], list[tuple[str, Any]]] = defaultdict(list)
    for row in verdicts:
        runs[(row["judge"], row["prompt_version"], row["model"])].append(
            (row["case_id"], row["turn"])
        )
    assert len(runs) == 2
    for run, keys in runs.items():
        assert len(keys) == len(set(keys)), f"{run} judges a unit twice"
        assert {key for key in keys if key[1] is not None} == assistant_turns, run
        assert 3 <= sum(key[1] is None for key in keys) <= len(keys) // 4, run


def test_prompt_v2_agrees_with_reviewers_more_often_but_not_always(
    verdicts: list[dict[str, Any]], labels: list[dict[str, str]]
) -> None:
    votes: dict[tuple[str, int], Counter[str]] = defaultdict(Counter)
    for row in labels:
        verdict = VERDICT_OF[row["label"]]
        if verdict in {"pass", "fail"}:
            votes[(row["case_id"], int(row["turn"]))][verdict] += 1
    majority = {
        unit: count.most_common(1)[0][0]
        for unit, count in votes.items()
        if len(count) == 1 or count["pass"] != count["fail"]
    }
    errors: Counter[str] = Counter()
    for verdict_row in verdicts:
        unit = (verdict_row["case_id"], verdict_row["turn"])
        if unit in majority:
            judged = "fail" if verdict_row["score"] >= 0.5 else "pass"
            errors[verdict_row["prompt_version"]] += judged != majority[unit]
    assert 0 < errors["v2"] < errors["v1"]


# --- README -------------------------------------------------------------------------------


def test_readme_describes_every_case(cases: dict[str, dict[str, Any]]) -> None:
    readme = (DEMO / "README.md").read_text(encoding="utf-8")
    for case_id in cases:
        assert f"| `{case_id}` |" in readme, case_id
