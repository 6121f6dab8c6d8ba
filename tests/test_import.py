"""Importing cases into the database, on SQLite and on PostgreSQL (``database`` fixture)."""

from __future__ import annotations

import copy
import json
import threading
from collections import Counter
from pathlib import Path
from typing import Any

import orjson
import pytest
from sqlalchemy import text
from sqlmodel import Session

from benchmarks.corpus import generate_corpus
from review_app.case_records import canonical_json
from review_app.errors import InputError
from review_app.evaluator import EVALUATOR_VERSION, diagnostic, evaluate_case, lane
from review_app.formats.options import ImportOptions
from review_app.services.access.actors import operator_actor
from review_app.services.cases.case_rows import KNOWN_CASE_KEYS, KNOWN_EVENT_KEYS
from review_app.services.cases.case_views import case_view, list_cases, load_case_view
from review_app.services.cases.importing import import_paths
from tests.conftest import DEMO_CASES, REPO, Database, lane_counts, row_counts

EXPECTED: dict[str, dict[str, Any]] = json.loads(
    (REPO / "review_app" / "demo_data" / "expected.json").read_text(encoding="utf-8")
)
DEMO: dict[str, dict[str, Any]] = {
    case["case_id"]: case
    for case in (
        json.loads(path.read_text(encoding="utf-8")) for path in sorted(DEMO_CASES.glob("*.json"))
    )
}


def rows(database: Database, query: str, **params: Any) -> list[Any]:
    with database.engine.connect() as connection:
        return list(connection.execute(text(query), params))


def by_case(database: Database, query: str) -> dict[str, Any]:
    """The rows of ``query`` by their ``case_id`` column."""
    return {row.case_id: row for row in rows(database, query)}


def write_jsonl(path: Path, cases: Any) -> Path:
    with path.open("wb") as handle:
        for case in cases:
            handle.write(orjson.dumps(case) + b"\n")
    return path


# --- the demo cases -------------------------------------------------------------------


def test_demo_import_stores_the_right_rows(database: Database) -> None:
    summary = import_paths(database.engine, operator_actor(), [DEMO_CASES])
    assert summary.totals.imported == 17
    assert len(summary.files) == 17

    cases = by_case(
        database,
        "SELECT case_id, contract_version, n_events, n_assistant_turns, source_format, "
        "chatbot_role, extra_json FROM cases",
    )
    assert set(cases) == set(DEMO)
    for case_id, case in DEMO.items():
        row = cases[case_id]
        assert row.n_events == len(case["transcript"])
        assert row.n_assistant_turns == sum(e["actor"] == "assistant" for e in case["transcript"])
        assert row.contract_version == case["contract"]["version"]
        assert row.chatbot_role == case["chatbot_role"]
        assert row.source_format == "native"
        assert row.extra_json is None

    events = rows(database, "SELECT case_id, seq, turn, actor FROM events ORDER BY case_id, seq")
    assert len(events) == sum(len(case["transcript"]) for case in DEMO.values())
    for case_id, case in DEMO.items():
        stored = [(r.seq, r.turn, r.actor) for r in events if r.case_id == case_id]
        assert stored == [(i, e["turn"], e["actor"]) for i, e in enumerate(case["transcript"])]

    evaluations = by_case(
        database,
        "SELECT case_id, evaluator_version, status, lane, first_violation_turn, diagnostic "
        "FROM evaluations",
    )
    assert set(evaluations) == set(DEMO)
    for case_id, expected in EXPECTED.items():
        row = evaluations[case_id]
        assert row.status == expected["status"]
        assert row.first_violation_turn == expected["first_violation_turn"]
        assert row.lane == lane(evaluate_case(DEMO[case_id]))
        assert row.diagnostic == diagnostic(evaluate_case(DEMO[case_id]))
        assert row.evaluator_version == EVALUATOR_VERSION

    findings = rows(database, "SELECT case_id, kind, code, turn FROM findings ORDER BY id")
    for case_id, expected in EXPECTED.items():
        mine = [f for f in findings if f.case_id == case_id]
        assert [f.code for f in mine if f.kind == "fixture_error"] == expected[
            "fixture_error_codes"
        ]
        assert sorted({f.code for f in mine if f.kind == "harness"}) == expected["harness_codes"]
        violation_turns = [f.turn for f in mine if f.kind == "violation"]
        if expected["first_violation_turn"] is None:
            assert violation_turns == []
        else:
            assert violation_turns[0] == expected["first_violation_turn"]

    contracts = rows(database, "SELECT version, body_json FROM contracts ORDER BY version")
    bodies = {case["contract"]["version"]: case["contract"] for case in DEMO.values()}
    assert [c.version for c in contracts] == sorted(bodies)
    for contract in contracts:
        assert contract.body_json == canonical_json(bodies[contract.version]).decode()


def test_reimport_changes_nothing(database: Database) -> None:
    import_paths(database.engine, operator_actor(), [DEMO_CASES])
    before = row_counts(database.engine)
    again = import_paths(database.engine, operator_actor(), [DEMO_CASES])
    assert again.totals.imported == 0
    assert again.totals.unchanged == 17
    assert row_counts(database.engine) == before


def test_lane_counts_and_listing(database: Database) -> None:
    import_paths(database.engine, operator_actor(), [DEMO_CASES])
    expected_lanes = Counter(lane(evaluate_case(case)) for case in DEMO.values())
    counts = lane_counts(database.engine)
    assert counts == {name: expected_lanes.get(name, 0) for name in counts}
    violations = list_cases(database.engine, lane="violation")
    assert [row.case_id for row in violations] == sorted(
        case_id for case_id, case in DEMO.items() if lane(evaluate_case(case)) == "violation"
    )
    page = list_cases(database.engine, offset=2, limit=3)
    assert [row.case_id for row in page] == sorted(DEMO)[2:5]


@pytest.mark.parametrize("case_id", sorted(DEMO))
def test_case_view_reconstructs_each_demo_case(case_id: str, sqlite_database: Database) -> None:
    import_paths(sqlite_database.engine, operator_actor(), [DEMO_CASES / f"{case_id}.json"])
    view = load_case_view(sqlite_database.engine, operator_actor(), case_id=case_id)
    assert view.to_case_dict() == DEMO[case_id]
    result = evaluate_case(DEMO[case_id])
    assert view.status == result["status"]
    assert [t.active_role for t in view.turns] == [
        result["role_by_turn"][e["turn"]] for e in DEMO[case_id]["transcript"]
    ]


# --- replacing -----------------------------------------------------------------------


def _clean_case() -> dict[str, Any]:
    return copy.deepcopy(DEMO["support-clean-late-parcel"])


def test_replace_semantics(database: Database, tmp_path: Path) -> None:
    original = _clean_case()
    write_jsonl(tmp_path / "v1.jsonl", [original])
    assert (
        import_paths(database.engine, operator_actor(), [tmp_path / "v1.jsonl"]).totals.imported
        == 1
    )
    before = row_counts(database.engine)

    changed = _clean_case()
    changed["transcript"] = changed["transcript"][:4]
    changed["transcript"][1]["observed_actions"] = ["refund_order"]
    path = write_jsonl(tmp_path / "v2.jsonl", [changed])

    with pytest.raises(InputError) as refused:
        import_paths(database.engine, operator_actor(), [path])
    assert refused.value.line == 1
    assert refused.value.field == "case_id"
    assert row_counts(database.engine) == before

    summary = import_paths(database.engine, operator_actor(), [path], ImportOptions(replace=True))
    assert (summary.totals.imported, summary.totals.replaced) == (1, 1)
    assert summary.totals.with_violations == 1
    after = row_counts(database.engine)
    assert after["cases"] == before["cases"] == 1
    assert after["events"] == 4
    assert after["evaluations"] == 1
    assert after["contracts"] == 1
    with Session(database.engine) as session:
        view = case_view(session, case_id=changed["case_id"])
    assert view.to_case_dict() == changed
    assert view.status == "fail"
    assert view.first_violation_turn == changed["transcript"][1]["turn"]
    findings = rows(database, "SELECT kind, code, turn FROM findings")
    assert [(f.kind, f.code) for f in findings] == [("violation", "action_outside_role")]

    # Replacing with identical content is a no-op, not a replacement.
    again = import_paths(database.engine, operator_actor(), [path], ImportOptions(replace=True))
    assert (again.totals.imported, again.totals.replaced, again.totals.unchanged) == (0, 0, 1)


def test_contract_body_conflict_is_refused_and_stores_nothing(
    database: Database, tmp_path: Path
) -> None:
    import_paths(database.engine, operator_actor(), [DEMO_CASES / "support-clean-late-parcel.json"])
    before = row_counts(database.engine)
    case = _clean_case()
    case["case_id"] = "support-new"
    case["contract"]["roles"]["support_triage"]["allowed_actions"].append("refund_order")
    path = write_jsonl(tmp_path / "conflict.jsonl", [case])
    with pytest.raises(InputError) as refused:
        import_paths(database.engine, operator_actor(), [path])
    assert (refused.value.line, refused.value.field) == (1, "contract")
    assert row_counts(database.engine) == before


def test_one_contract_row_per_version_within_one_file(database: Database, tmp_path: Path) -> None:
    path = write_jsonl(tmp_path / "many.jsonl", generate_corpus(30, 6))
    import_paths(database.engine, operator_actor(), [path])
    assert rows(database, "SELECT version FROM contracts") == [("bench-support-v1",)]


# --- unknown keys --------------------------------------------------------------------


def test_unknown_keys_are_preserved_and_the_case_reconstructs(
    database: Database, tmp_path: Path
) -> None:
    case = _clean_case()
    case["case_id"] = "with-extras"
    case["source_system"] = {"name": "helpdesk", "export": 7}
    case["tags"] = ["lamp", "late"]
    case["transcript"][0]["latency_ms"] = 412
    case["transcript"][1]["model"] = {"name": "m-1", "temperature": 0.2}
    path = write_jsonl(tmp_path / "extras.jsonl", [case])
    import_paths(database.engine, operator_actor(), [path])

    (case_row,) = rows(database, "SELECT extra_json FROM cases")
    assert json.loads(case_row.extra_json) == {
        "source_system": {"name": "helpdesk", "export": 7},
        "tags": ["lamp", "late"],
    }
    event_extras = rows(database, "SELECT seq, extra_json FROM events ORDER BY seq")
    assert json.loads(event_extras[0].extra_json) == {"latency_ms": 412}
    assert json.loads(event_extras[1].extra_json) == {"model": {"name": "m-1", "temperature": 0.2}}
    assert all(row.extra_json is None for row in event_extras[2:])

    without_extras = {k: v for k, v in case.items() if k in KNOWN_CASE_KEYS}
    without_extras["transcript"] = [
        {k: v for k, v in event.items() if k in KNOWN_EVENT_KEYS} for event in case["transcript"]
    ]
    view = load_case_view(database.engine, operator_actor(), case_id="with-extras")
    assert view.to_case_dict() == without_extras
    # The extra keys are part of the content: changing one is a change of the case.
    case["tags"].append("urgent")
    with pytest.raises(InputError):
        import_paths(
            database.engine, operator_actor(), [write_jsonl(tmp_path / "extras2.jsonl", [case])]
        )


def test_case_without_contract_is_stored_in_the_no_contract_lane(
    database: Database, tmp_path: Path
) -> None:
    case = _clean_case()
    case["case_id"] = "free-form"
    del case["contract"]
    summary = import_paths(
        database.engine, operator_actor(), [write_jsonl(tmp_path / "free.jsonl", [case])]
    )
    assert summary.totals.without_contract == 1
    assert "without contract 1" in summary.line()
    view = load_case_view(database.engine, operator_actor(), case_id="free-form")
    assert (view.lane, view.status, view.contract_version) == ("no-contract", "no_contract", None)
    assert view.to_case_dict() == {**case, "contract": None}


def test_decreasing_unique_turns_are_stored_as_an_invalid_fixture(
    database: Database, tmp_path: Path
) -> None:
    case = _clean_case()
    case["case_id"] = "out-of-order"
    case["transcript"][2]["turn"], case["transcript"][3]["turn"] = (
        case["transcript"][3]["turn"],
        case["transcript"][2]["turn"],
    )
    summary = import_paths(
        database.engine, operator_actor(), [write_jsonl(tmp_path / "order.jsonl", [case])]
    )
    assert summary.totals.invalid == 1
    view = load_case_view(database.engine, operator_actor(), case_id="out-of-order")
    assert view.lane == "invalid"
    assert [t.turn for t in view.turns] == [e["turn"] for e in case["transcript"]]
    codes = [e["code"] for t in view.turns for e in t.fixture_errors]
    assert codes == ["invalid_event_order"]


# --- volume and concurrency ----------------------------------------------------------


def test_two_thousand_generated_cases(database: Database, tmp_path: Path) -> None:
    corpus = list(generate_corpus(2000, 12, seed=11))
    path = write_jsonl(tmp_path / "corpus.jsonl", corpus)
    results = [evaluate_case(case) for case in corpus]

    summary = import_paths(database.engine, operator_actor(), [path])

    statuses = Counter(result["status"] for result in results)
    assert summary.totals.imported == 2000
    assert summary.totals.with_violations == statuses["fail"] > 0
    assert summary.totals.invalid == 0
    counts = row_counts(database.engine)
    assert counts == {
        "contracts": 1,
        "cases": 2000,
        "events": sum(len(case["transcript"]) for case in corpus),
        "evaluations": 2000,
        "findings": sum(len(result["violations"]) for result in results),
    }
    assert lane_counts(database.engine)["violation"] == statuses["fail"]
    again = import_paths(database.engine, operator_actor(), [path])
    assert again.totals.unchanged == 2000


def test_two_threads_import_different_files_concurrently(
    database: Database, tmp_path: Path
) -> None:
    """Writers wait for each other (SQLite: BEGIN IMMEDIATE + busy timeout) instead of
    failing; both files share a contract version that neither has stored yet."""
    corpus = list(generate_corpus(400, 8, seed=3))
    files = [
        write_jsonl(tmp_path / "first.jsonl", corpus[:200]),
        write_jsonl(tmp_path / "second.jsonl", corpus[200:]),
    ]
    start = threading.Barrier(2)
    outcomes: dict[int, Any] = {}

    def run(index: int) -> None:
        start.wait()
        try:
            outcomes[index] = import_paths(
                database.engine, operator_actor(), [files[index]]
            ).totals.imported
        except Exception as error:  # reported below, with the thread's error
            outcomes[index] = error

    threads = [threading.Thread(target=run, args=(index,)) for index in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)

    assert outcomes == {0: 200, 1: 200}
    assert row_counts(database.engine)["cases"] == 400
    assert row_counts(database.engine)["contracts"] == 1
