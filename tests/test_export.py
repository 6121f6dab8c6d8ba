"""Exports on real databases: regression fixtures, their pytest module, label data, deepeval.

The demo set (17 cases, 333 labels from 3 reviewers) is loaded once per module into a
SQLite file and a PostgreSQL schema; tests that add data get a database of their own.
Expected values come from the demo files themselves (``expected.json``, ``labels.csv``,
the case files), not from the code under test.
"""

from __future__ import annotations

import csv
import io
import json
import os
import subprocess
import sys
from collections import defaultdict
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import Engine

from review_app.errors import InputError
from review_app.evaluator import EVALUATOR_VERSION, evaluate_case
from review_app.files.csv_safety import FORMULA_TRIGGERS, restore_cell
from review_app.formats.deepeval import read_deepeval
from review_app.formats.fixtures import (
    EXPORTER_VERSION,
    MANIFEST_NAME,
    TEST_MODULE_NAME,
    fixture_file_name,
)
from review_app.rubrics.model import Rubric
from review_app.services.access.actors import Actor, operator_actor, sign_in
from review_app.services.cases.case_views import list_cases
from review_app.services.cases.importing import import_paths
from review_app.services.exchange.demo import DEMO_CASES, DEMO_DIR, DEMO_LABELS, load_demo
from review_app.services.exchange.export import (
    EXPORT_FORMATS,
    LABEL_EXPORT_COLUMNS,
    ExportResult,
    export_data,
    write_export,
)
from review_app.services.exchange.labels_io import export_labels_csv
from review_app.services.exchange.uploads import zip_export
from review_app.services.labels.adjudication import record_gold
from review_app.services.labels.labeling import record_label
from review_app.services.rubrics.rubric_catalog import sync_rubrics
from storage.engine import create_database_engine
from storage.migrations.upgrade import upgrade_database
from tests.actors import assign
from tests.builders import BREAK_CODES
from tests.conftest import REPO, Database, postgres_schema

RUBRIC = "role-adherence@1"


# --- the demo, as the files describe it ---------------------------------------------------


def demo_cases() -> dict[str, dict[str, Any]]:
    cases = {}
    for path in sorted(DEMO_CASES.glob("*.json")):
        case = json.loads(path.read_text(encoding="utf-8"))
        cases[case["case_id"]] = case
    return cases


DEMO = demo_cases()
DEMO_EXPECTED: dict[str, dict[str, Any]] = json.loads(
    (DEMO_DIR / "expected.json").read_text(encoding="utf-8")
)


def demo_label_codes() -> dict[tuple[str, int], list[str]]:
    codes: dict[tuple[str, int], list[str]] = defaultdict(list)
    with DEMO_LABELS.open(encoding="utf-8", newline="") as handle:
        for row in csv.DictReader(handle):
            codes[(row["case_id"], int(row["turn"]))].append(row["label"])
    return codes


LABEL_CODES = demo_label_codes()
UNANIMOUS = {unit: codes[0] for unit, codes in LABEL_CODES.items() if len(set(codes)) == 1}
IN_DISAGREEMENT = {unit for unit, codes in LABEL_CODES.items() if len(set(codes)) > 1}


def system_transitions(case: dict[str, Any]) -> set[str]:
    """``from->to`` for each system event that changes the active role."""
    active = case["contract"]["initial_role"]
    found = set()
    for event in case["transcript"]:
        target = event.get("set_role")
        if event["actor"] == "system" and target and target != active:
            found.add(f"{active}->{target}")
            active = target
    return found


def distinctive_texts() -> list[str]:
    """Every transcript text of the demo long enough to be unmistakable."""
    return [
        event["text"]
        for case in DEMO.values()
        for event in case["transcript"]
        if len(event.get("text") or "") >= 25
    ]


def text_occurs(needle: str, haystack: str) -> bool:
    """Whether ``needle`` appears in ``haystack`` raw, JSON-escaped or CSV-quoted."""
    forms = {
        needle,
        json.dumps(needle, ensure_ascii=False)[1:-1],
        json.dumps(needle)[1:-1],
        needle.replace('"', '""'),
    }
    return any(form in haystack for form in forms)


# --- databases holding the demo ----------------------------------------------------------


@dataclass(frozen=True)
class DemoDatabase:
    kind: str
    url: str
    engine: Engine
    rubric: Rubric


def _demo_database(kind: str, url: str) -> DemoDatabase:
    engine = create_database_engine(url)
    upgrade_database(engine)
    load_demo(engine, operator_actor())
    return DemoDatabase(kind, url, engine, sync_rubrics(engine, operator_actor()).get(RUBRIC))


@pytest.fixture(scope="module")
def demo_sqlite(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DemoDatabase]:
    path = tmp_path_factory.mktemp("demo") / "review.db"
    demo = _demo_database("sqlite", f"sqlite:///{path}")
    yield demo
    demo.engine.dispose()


@pytest.fixture(scope="module")
def demo_postgres() -> Iterator[DemoDatabase]:
    with postgres_schema() as url:
        demo = _demo_database("postgres", url)
        yield demo
        demo.engine.dispose()


@pytest.fixture(
    scope="module", params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)]
)
def demo(request: pytest.FixtureRequest) -> DemoDatabase:
    """The demo on SQLite and on PostgreSQL (tests using it run twice, read only)."""
    found: DemoDatabase = request.getfixturevalue(f"demo_{request.param}")
    return found


def _fixtures_written(demo: DemoDatabase, out: Path) -> Path:
    """The demo's fixtures export, written to ``out``."""
    write_export(
        export_data(demo.engine, operator_actor(), rubric=demo.rubric, format="fixtures"), out
    )
    return out


def fixture_documents(result: ExportResult) -> dict[str, dict[str, Any]]:
    documents = {}
    for name, data in result.files.items():
        if name.endswith(".json") and name != MANIFEST_NAME:
            document = json.loads(data)
            documents[document["case_id"]] = document
    return documents


def run_pytest(directory: Path) -> subprocess.CompletedProcess[str]:
    """The generated module run as CI would: ``python -m pytest DIR`` from elsewhere."""
    environment = dict(os.environ)
    environment["PYTHONPATH"] = str(REPO)
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", str(directory)],
        capture_output=True,
        text=True,
        cwd=directory.parent,
        env=environment,
        timeout=300,
    )


# --- fixtures export -----------------------------------------------------------------------


def test_fixtures_export_has_one_file_per_case_the_module_and_the_manifest(
    demo: DemoDatabase,
) -> None:
    result = export_data(demo.engine, operator_actor(), rubric=demo.rubric, format="fixtures")
    expected_names = {fixture_file_name(case_id) for case_id in DEMO}
    assert set(result.files) == expected_names | {TEST_MODULE_NAME, MANIFEST_NAME}
    assert len(expected_names) == 17
    documents = fixture_documents(result)
    assert set(documents) == set(DEMO)
    for case_id, document in documents.items():
        case = {key: value for key, value in document.items() if key != "expected"}
        # The case part is the case as imported (docs/reference.md, "Cases"), nothing lost or added.
        assert case == DEMO[case_id], case_id
        assert result.files[fixture_file_name(case_id)].decode("utf-8").endswith("}\n")


def test_expected_blocks_match_the_evaluator_and_the_gold_labels(demo: DemoDatabase) -> None:
    documents = fixture_documents(
        export_data(demo.engine, operator_actor(), rubric=demo.rubric, format="fixtures")
    )
    for case_id, document in documents.items():
        expected = document["expected"]
        deterministic = expected["deterministic"]
        truth = DEMO_EXPECTED[case_id]
        for key in ("status", "first_violation_turn", "fixture_error_codes", "harness_codes"):
            assert deterministic[key] == truth[key], (case_id, key)
        assert deterministic["diagnostic"].startswith(f"role-eval {truth['status']} case={case_id}")
        assert expected["contract_version"] == DEMO[case_id]["contract"]["version"]
        assert expected["rubric"] == RUBRIC
        assert expected["semantic"]["rubric"] == RUBRIC
        assert expected["evaluator_version"] == EVALUATOR_VERSION
        assert expected["exporter"] == EXPORTER_VERSION
        assert "redacted" not in expected

        assistant_turns = [
            e["turn"] for e in DEMO[case_id]["transcript"] if e["actor"] == "assistant"
        ]
        semantic = expected["semantic"]
        wanted_gold = {
            str(turn): {"label": UNANIMOUS[(case_id, turn)], "source": "unanimous"}
            for turn in assistant_turns
            if (case_id, turn) in UNANIMOUS
        }
        assert semantic["labels"] == wanted_gold, case_id
        assert semantic["units_without_gold"] == {
            str(turn): "in_disagreement"
            for turn in assistant_turns
            if (case_id, turn) in IN_DISAGREEMENT
        }
        breaks = [turn for turn in assistant_turns if UNANIMOUS.get((case_id, turn)) in BREAK_CODES]
        assert semantic["first_break_turn"] == (breaks[0] if breaks else None), case_id

    violation = documents["support-delayed-refund-violation"]["expected"]
    assert violation["deterministic"]["status"] == "fail"
    assert violation["deterministic"]["first_violation_turn"] == 8
    assert "action=refund_order" in violation["deterministic"]["diagnostic"]
    assert violation["semantic"]["first_break_turn"] == 8
    assert violation["semantic"]["labels"]["8"] == {
        "label": "authority_break",
        "source": "unanimous",
    }
    invalid = documents["support-unknown-action-store-credit"]["expected"]["deterministic"]
    assert invalid["status"] == "invalid"
    assert invalid["fixture_error_codes"] == ["unknown_action"]
    assert invalid["first_violation_turn"] is None
    retry = documents["support-retry-missing-context"]["expected"]["deterministic"]
    assert retry["harness_codes"] == [
        "request_contract_mismatch",
        "request_missing_turns",
        "role_instruction_mismatch",
    ]


def test_manifest_counts_are_the_demo_counts(demo: DemoDatabase) -> None:
    manifest = export_data(
        demo.engine, operator_actor(), rubric=demo.rubric, format="fixtures"
    ).manifest
    statuses = [truth["status"] for truth in DEMO_EXPECTED.values()]
    assert manifest["cases_exported"] == 17
    assert manifest["format"] == "fixtures"
    assert manifest["rubric"] == RUBRIC
    assert manifest["redacted"] is False
    assert manifest["exporter"] == EXPORTER_VERSION
    deterministic = manifest["deterministic"]
    assert deterministic["pass"] == statuses.count("pass")
    assert deterministic["fail"] == statuses.count("fail")
    assert deterministic["invalid_fixtures"] == 1
    assert deterministic["invalid_case_ids"] == ["support-unknown-action-store-credit"]
    assert deterministic["no_contract"] == 0

    semantic = manifest["semantic"]
    assert semantic["units"] == len(LABEL_CODES) == 111
    assert semantic["units_with_gold"] == len(UNANIMOUS) == 84
    assert semantic["gold_unanimous"] == 84
    assert semantic["gold_adjudicated"] == 0
    assert semantic["units_without_gold"] == len(IN_DISAGREEMENT) == 27
    assert semantic["without_gold_in_disagreement"] == 27
    assert semantic["without_gold_single_rater"] == 0
    assert semantic["without_gold_unlabeled"] == 0
    assert semantic["cases_with_a_semantic_break"] == 1

    by_contract: dict[str, dict[str, Any]] = defaultdict(
        lambda: {"cases": 0, "roles": set(), "transitions": set()}
    )
    for case_id, case in DEMO.items():
        entry = by_contract[case["contract"]["version"]]
        entry["cases"] += 1
        entry["roles"] = set(case["contract"]["roles"])
        if DEMO_EXPECTED[case_id]["status"] != "invalid":
            entry["transitions"] |= system_transitions(case)
    assert set(manifest["contracts"]) == set(by_contract)
    for version, wanted in by_contract.items():
        got = manifest["contracts"][version]
        assert got["cases"] == wanted["cases"], version
        assert got["roles"] == sorted(wanted["roles"])
        assert got["roles_covered"] == sorted(wanted["roles"])
        assert got["roles_not_covered"] == []
        assert got["transitions_covered"] == sorted(wanted["transitions"]), version
    support = manifest["contracts"]["support-role-v3"]
    assert support["transitions_covered"] == ["support_triage->billing_specialist"]
    assert support["cases"] == 8


def test_manifest_of_a_subset_lists_what_it_does_not_cover(demo: DemoDatabase) -> None:
    result = export_data(
        demo.engine,
        operator_actor(),
        rubric=demo.rubric,
        format="fixtures",
        case_ids=["support-clean-late-parcel"],
    )
    manifest = result.manifest
    assert manifest["cases_exported"] == 1
    assert set(manifest["contracts"]) == {"support-role-v3"}
    support = manifest["contracts"]["support-role-v3"]
    assert support["roles_covered"] == ["support_triage"]
    assert support["roles_not_covered"] == ["billing_specialist"]
    assert support["transitions_covered"] == []
    turns = [
        e["turn"]
        for e in DEMO["support-clean-late-parcel"]["transcript"]
        if e["actor"] == "assistant"
    ]
    assert manifest["semantic"]["units"] == len(turns)
    assert manifest["semantic"]["units_without_gold"] == sum(
        ("support-clean-late-parcel", t) in IN_DISAGREEMENT for t in turns
    )


def test_recorded_gold_shows_as_adjudicated(database: Database) -> None:
    load_demo(database.engine, operator_actor())
    rubric = sync_rubrics(database.engine, operator_actor()).get(RUBRIC)
    # Turn 8 of the false refund claim is in disagreement (false_action_claim x2,
    # authority_break): no gold and no semantic break until a policy owner decides.
    case_id = "support-false-refund-claim"
    before = fixture_documents(
        export_data(
            database.engine, operator_actor(), rubric=rubric, format="fixtures", case_ids=[case_id]
        )
    )[case_id]["expected"]["semantic"]
    assert before["units_without_gold"]["8"] == "in_disagreement"
    assert "8" not in before["labels"]
    assert before["first_break_turn"] is None

    record_gold(
        database.engine,
        Actor.operator(),
        rubric=rubric,
        case_id=case_id,
        turn=8,
        code="false_action_claim",
        note="the refund was never issued",
    )
    # A unanimous unit can be overruled too: the adjudicated label wins.
    record_gold(
        database.engine, Actor.operator(), rubric=rubric, case_id=case_id, turn=2, code="borderline"
    )
    result = export_data(database.engine, operator_actor(), rubric=rubric, format="fixtures")
    after = fixture_documents(result)[case_id]["expected"]["semantic"]
    assert after["labels"]["8"] == {"label": "false_action_claim", "source": "adjudicated"}
    assert after["labels"]["2"] == {"label": "borderline", "source": "adjudicated"}
    assert "8" not in after["units_without_gold"]
    assert after["first_break_turn"] == 8
    semantic = result.manifest["semantic"]
    assert semantic["gold_adjudicated"] == 2
    assert semantic["gold_unanimous"] == 83
    assert semantic["units_with_gold"] == 85
    assert semantic["without_gold_in_disagreement"] == 26
    assert semantic["cases_with_a_semantic_break"] == 2


# --- re-import ---------------------------------------------------------------------------


def test_exported_fixtures_import_again_with_the_same_lanes(
    demo_sqlite: DemoDatabase, database: Database, tmp_path: Path
) -> None:
    out = _fixtures_written(demo_sqlite, tmp_path / "fixtures")
    # The export directory as a whole: the manifest and the module are not cases.
    summary = import_paths(database.engine, operator_actor(), [out])
    assert summary.totals.imported == 17
    assert summary.totals.invalid == 1
    lanes = {row.case_id: row.lane for row in list_cases(database.engine)}
    original = {row.case_id: row.lane for row in list_cases(demo_sqlite.engine)}
    assert lanes == original
    assert list(original.values()).count("violation") == 3
    with pytest.raises(InputError, match="cannot tell which format"):
        import_paths(database.engine, operator_actor(), [out / MANIFEST_NAME])
    # The same fixtures into the database they came from: nothing changed.
    again = import_paths(demo_sqlite.engine, operator_actor(), [out])
    assert again.totals.unchanged == 17
    assert again.totals.imported == 0


# --- determinism ---------------------------------------------------------------------------


def _all_exports(demo: DemoDatabase) -> dict[tuple[str, bool], ExportResult]:
    return {
        (data_format, redact): export_data(
            demo.engine, operator_actor(), rubric=demo.rubric, format=data_format, redact=redact
        )
        for data_format in EXPORT_FORMATS
        for redact in (False, True)
    }


def test_exports_are_byte_identical_when_repeated(demo: DemoDatabase) -> None:
    first = _all_exports(demo)
    second = _all_exports(demo)
    for key, result in first.items():
        assert result.files.keys() == second[key].files.keys(), key
        for name, data in result.files.items():
            assert data == second[key].files[name], (key, name)
        assert zip_export(demo.engine, operator_actor(), result) == zip_export(
            demo.engine, operator_actor(), second[key]
        ), key


@pytest.mark.postgres
def test_sqlite_and_postgres_export_the_same_bytes(
    demo_sqlite: DemoDatabase, demo_postgres: DemoDatabase
) -> None:
    on_sqlite = _all_exports(demo_sqlite)
    on_postgres = _all_exports(demo_postgres)
    for key, result in on_sqlite.items():
        other = on_postgres[key]
        assert result.files.keys() == other.files.keys(), key
        for name, data in result.files.items():
            assert data == other.files[name], (key, name)
        assert zip_export(demo_sqlite.engine, operator_actor(), result) == zip_export(
            demo_postgres.engine, operator_actor(), other
        )


# --- the generated pytest module -------------------------------------------------------------


def _edit(path: Path, change: Any) -> None:
    document = json.loads(path.read_text(encoding="utf-8"))
    change(document)
    path.write_text(json.dumps(document, indent=2), encoding="utf-8")


def _add_refund_to_first_assistant_turn(document: dict[str, Any]) -> None:
    for event in document["transcript"]:
        if event["actor"] == "assistant":
            event["observed_actions"] = [*event.get("observed_actions", []), "refund_order"]
            return


def _drop_system_handoff(document: dict[str, Any]) -> None:
    document["transcript"] = [
        event
        for event in document["transcript"]
        if not (event["actor"] == "system" and event.get("set_role"))
    ]


def test_generated_module_passes_then_fails_on_a_changed_transcript(
    demo_sqlite: DemoDatabase, tmp_path: Path
) -> None:
    out = _fixtures_written(demo_sqlite, tmp_path / "fixtures")
    passed = run_pytest(out)
    assert passed.returncode == 0, passed.stdout + passed.stderr
    assert "17 passed" in passed.stdout

    _edit(out / "support-clean-late-parcel.json", _add_refund_to_first_assistant_turn)
    _edit(out / "support-authorized-handoff-refund.json", _drop_system_handoff)
    failed = run_pytest(out)
    output = failed.stdout + failed.stderr
    assert failed.returncode == 1, output
    assert "2 failed, 15 passed" in output
    first_turn = next(
        e["turn"]
        for e in DEMO["support-clean-late-parcel"]["transcript"]
        if e["actor"] == "assistant"
    )
    assert (
        "support-clean-late-parcel.json: now role-eval fail case=support-clean-late-parcel "
        f"contract=support-role-v3 first_violation_turn={first_turn} active_role=support_triage "
        "action=refund_order"
    ) in output
    assert (
        "expected role-eval pass case=support-clean-late-parcel contract=support-role-v3" in output
    )
    assert (
        "support-authorized-handoff-refund.json: now role-eval fail "
        "case=support-authorized-handoff-refund"
    ) in output
    assert "active_role=support_triage action=refund_order" in output


# --- redaction ------------------------------------------------------------------------------


def _masked(document: Any) -> Any:
    """The document with every transcript text replaced by a placeholder."""
    document = json.loads(json.dumps(document))
    for event in document["transcript"]:
        if event.get("text"):
            event["text"] = "<text>"
    document["expected"].pop("redacted", None)
    return document


def test_redacted_export_keeps_no_transcript_text(
    demo_sqlite: DemoDatabase, tmp_path: Path
) -> None:
    texts = distinctive_texts()
    assert len(texts) > 150
    # Fragments of single sentences, so a partly masked text would show too.
    fragments = [
        "issued a full refund of £129.00",
        "Two identical payments of £64.50",
        "flagged duplicate by payments",
    ]
    for fragment in fragments:
        assert any(fragment in t for t in texts), fragment
    for data_format in EXPORT_FORMATS:
        plain = export_data(
            demo_sqlite.engine, operator_actor(), rubric=demo_sqlite.rubric, format=data_format
        )
        shown = "\n".join(data.decode("utf-8") for data in plain.files.values())
        assert any(fragment in shown for fragment in fragments), data_format

        result = export_data(
            demo_sqlite.engine,
            operator_actor(),
            rubric=demo_sqlite.rubric,
            format=data_format,
            redact=True,
        )
        assert result.manifest["redacted"] is True
        everything = "\n".join(data.decode("utf-8") for data in result.files.values())
        leaked = [t for t in texts if text_occurs(t, everything)]
        assert leaked == [], (data_format, leaked[:3])
        assert not [f for f in fragments if f in everything], data_format

    plain = export_data(
        demo_sqlite.engine, operator_actor(), rubric=demo_sqlite.rubric, format="fixtures"
    )
    redacted = export_data(
        demo_sqlite.engine,
        operator_actor(),
        rubric=demo_sqlite.rubric,
        format="fixtures",
        redact=True,
    )
    plain_documents = fixture_documents(plain)
    redacted_documents = fixture_documents(redacted)
    for case_id, document in redacted_documents.items():
        assert document["expected"]["redacted"] is True
        # Events, actions, roles, requests, contract and labels are all kept.
        assert _masked(document) == _masked(plain_documents[case_id]), case_id
        for event, original in zip(
            document["transcript"], plain_documents[case_id]["transcript"], strict=True
        ):
            if original.get("text"):
                assert event["text"].startswith(f"[redacted: {len(original['text'])} characters")

    # Label rows keep everything but the texts (user and assistant text, rationale).
    masked_columns = ("user_text", "assistant_text", "rationale")
    label_rows = {}
    for redact in (False, True):
        data = export_data(
            demo_sqlite.engine,
            operator_actor(),
            rubric=demo_sqlite.rubric,
            format="jsonl",
            redact=redact,
        ).files["labels.jsonl"]
        label_rows[redact] = [json.loads(line) for line in data.decode().splitlines()]
    assert len(label_rows[True]) == len(label_rows[False]) == 333
    for masked, row in zip(label_rows[True], label_rows[False], strict=True):
        for column in masked_columns:
            if row[column]:
                assert masked[column].startswith("[redacted: "), column
        kept = {k: v for k, v in row.items() if k not in masked_columns}
        assert {k: v for k, v in masked.items() if k not in masked_columns} == kept

    out = tmp_path / "redacted"
    write_export(redacted, out)
    replay = run_pytest(out)
    assert replay.returncode == 0, replay.stdout + replay.stderr
    assert "17 passed" in replay.stdout


# --- label data ------------------------------------------------------------------------------


def test_jsonl_and_csv_label_exports_carry_case_and_turn_context(demo: DemoDatabase) -> None:
    jsonl = export_data(demo.engine, operator_actor(), rubric=demo.rubric, format="jsonl")
    assert set(jsonl.files) == {"labels.jsonl", MANIFEST_NAME}
    rows = [json.loads(line) for line in jsonl.files["labels.jsonl"].decode().splitlines()]
    assert len(rows) == 333
    assert all(set(row) == set(LABEL_EXPORT_COLUMNS) for row in rows)
    assert {(row["case_id"], row["turn"]) for row in rows} == set(LABEL_CODES)
    for row in rows:
        unit = (row["case_id"], row["turn"])
        assert row["gold_label"] == UNANIMOUS.get(unit)
        assert row["gold_source"] == ("unanimous" if unit in UNANIMOUS else None)
        assert row["rubric"] == RUBRIC

    case = DEMO["support-delayed-refund-violation"]
    events = {e["turn"]: e for e in case["transcript"]}
    (row,) = [
        r
        for r in rows
        if r["case_id"] == "support-delayed-refund-violation"
        and r["turn"] == 8
        and r["reviewer"] == "ana"
    ]
    result = evaluate_case(case)
    assert row["label"] == "authority_break"
    assert row["verdict"] == "fail"
    assert row["gold_label"] == "authority_break"
    assert row["gold_source"] == "unanimous"
    assert row["active_role"] == "support_triage"
    assert row["actions"] == ["refund_order"]
    assert row["findings"] == sorted({v["code"] for v in result["violations"] if v["turn"] == 8})
    assert row["findings"]
    assert row["user_text"] == events[7]["text"]
    assert row["assistant_text"] == events[8]["text"]

    csv_export = export_data(demo.engine, operator_actor(), rubric=demo.rubric, format="csv")
    assert set(csv_export.files) == {"labels.csv", MANIFEST_NAME}
    table = list(csv.reader(io.StringIO(csv_export.files["labels.csv"].decode("utf-8"))))
    assert tuple(table[0]) == LABEL_EXPORT_COLUMNS
    assert len(table) == 334
    for cells, json_row in zip(table[1:], rows, strict=True):
        restored = dict(zip(LABEL_EXPORT_COLUMNS, map(restore_cell, cells), strict=True))
        for column, value in json_row.items():
            if isinstance(value, list):
                value = ",".join(value)
            assert restored[column] == ("" if value is None else str(value)), column


def test_csv_cells_that_a_spreadsheet_would_run_are_neutralised(
    database: Database, tmp_path: Path
) -> None:
    contract = DEMO["support-clean-late-parcel"]["contract"]
    case = {
        "case_id": "csv-injection",
        "chatbot_role": "Support triage agent.",
        "contract": contract,
        "transcript": [
            {"turn": 1, "actor": "user", "text": "-1 star, and =SUM(A1:A9) for you"},
            {
                "turn": 2,
                "actor": "assistant",
                "text": "@here +44 is our line",
                "observed_actions": [],
            },
            {"turn": 3, "actor": "user", "text": "\tcmd|' /C calc'!A0"},
            {"turn": 4, "actor": "assistant", "text": "\rOK", "observed_actions": []},
        ],
    }
    case_file = tmp_path / "injection.json"
    case_file.write_text(json.dumps(case), encoding="utf-8")
    import_paths(database.engine, operator_actor(), [case_file])
    rubric = sync_rubrics(database.engine, operator_actor()).get(RUBRIC)
    formula = '=HYPERLINK("http://x")'
    rater = sign_in(database.engine, name="@rater", auth_mode="oidc")
    assign(database.engine, rubric, "@rater", "csv-injection")
    record_label(
        database.engine,
        rater,
        case_id="csv-injection",
        turn=2,
        rubric=rubric,
        code="in_role",
        rationale=formula,
    )
    record_label(
        database.engine,
        rater,
        case_id="csv-injection",
        turn=4,
        rubric=rubric,
        code="borderline",
        rationale="+1 agree\rsee turn 2",
    )

    data = export_data(database.engine, operator_actor(), rubric=rubric, format="csv").files[
        "labels.csv"
    ]
    table = list(csv.reader(io.StringIO(data.decode("utf-8"))))
    rows = [dict(zip(LABEL_EXPORT_COLUMNS, cells, strict=True)) for cells in table[1:]]
    assert len(rows) == 2
    first, second = rows
    assert first["rationale"] == "'" + formula
    assert first["user_text"] == "'-1 star, and =SUM(A1:A9) for you"
    assert first["assistant_text"] == "'@here +44 is our line"
    assert first["reviewer"] == "'@rater"
    assert second["rationale"] == "'+1 agree\rsee turn 2"
    assert second["user_text"] == "'\tcmd|' /C calc'!A0"
    assert second["assistant_text"] == "'\rOK"
    for cells in table:
        for cell in cells:
            assert not cell.startswith(FORMULA_TRIGGERS), cell
    # Neutralising is exactly reversible, so nothing of the text is lost.
    jsonl = export_data(database.engine, operator_actor(), rubric=rubric, format="jsonl").files[
        "labels.jsonl"
    ]
    originals = [json.loads(line) for line in jsonl.decode().splitlines()]
    assert restore_cell(first["rationale"]) == originals[0]["rationale"] == formula
    assert restore_cell(second["assistant_text"]) == originals[1]["assistant_text"] == "\rOK"
    # The label CSV (docs/reference.md, "Label CSV") quotes the carriage return as well.
    spec_rows = list(
        csv.DictReader(
            io.StringIO(export_labels_csv(database.engine, operator_actor(), rubric=rubric))
        )
    )
    assert [restore_cell(row["rationale"]) for row in spec_rows] == [
        formula,
        "+1 agree\rsee turn 2",
    ]
    assert [row["reviewer"] for row in spec_rows] == ["'@rater", "'@rater"]


# --- deepeval ------------------------------------------------------------------------------


def test_deepeval_export_shape_and_read_back(demo: DemoDatabase, tmp_path: Path) -> None:
    result = export_data(demo.engine, operator_actor(), rubric=demo.rubric, format="deepeval")
    assert set(result.files) == {"deepeval_test_cases.json", MANIFEST_NAME}
    items = json.loads(result.files["deepeval_test_cases.json"])
    assert isinstance(items, list)
    assert len(items) == 17
    by_name = {item["name"]: item for item in items}
    assert set(by_name) == set(DEMO)
    for case_id, item in by_name.items():
        case = DEMO[case_id]
        assert item["chatbot_role"] == case["chatbot_role"]
        conversational = [e for e in case["transcript"] if e["actor"] in ("user", "assistant")]
        assert [t["role"] for t in item["turns"]] == [e["actor"] for e in conversational]
        assert [t["content"] for t in item["turns"]] == [
            e.get("text") or "" for e in conversational
        ]
        assert isinstance(item["expected_outcome"], str)
        assert item["additional_metadata"]["role_contract"] == case["contract"]
        assert item["additional_metadata"]["chatbot_role"] == case["chatbot_role"]
        assert case_id in item["scenario"] and case["chatbot_role"] in item["scenario"]
    breaking = by_name["support-delayed-refund-violation"]
    assert "turn 8" in breaking["expected_outcome"]
    assert breaking["additional_metadata"]["expected"]["first_break_turn"] == 8
    clean = by_name["support-clean-late-parcel"]
    assert "breaks its role" not in clean["expected_outcome"]
    assert clean["additional_metadata"]["expected"]["first_break_turn"] is None

    path = tmp_path / "deepeval_test_cases.json"
    path.write_bytes(result.files["deepeval_test_cases.json"])
    records = list(read_deepeval(path))
    assert [r.case["case_id"] for r in records] == [item["name"] for item in items]
    for record in records:
        case = DEMO[record.case["case_id"]]
        assert record.case["chatbot_role"] == case["chatbot_role"]
        assert record.case["contract"] == case["contract"]
        # Our own export carries the system and tool events too: the whole conversation,
        # turn numbers included, comes back.
        assert [
            (e["turn"], e["actor"], e.get("text") or "") for e in record.case["transcript"]
        ] == [(e["turn"], e["actor"], e.get("text") or "") for e in case["transcript"]]


# --- writing, filters, errors ------------------------------------------------------------


def test_write_export_refuses_unrelated_directories(
    demo_sqlite: DemoDatabase, tmp_path: Path
) -> None:
    result = export_data(
        demo_sqlite.engine, operator_actor(), rubric=demo_sqlite.rubric, format="fixtures"
    )
    notes = tmp_path / "notes"
    notes.mkdir()
    (notes / "todo.txt").write_text("mine", encoding="utf-8")
    (notes / "data.json").write_text("{}", encoding="utf-8")
    with pytest.raises(InputError, match="not empty"):
        write_export(result, notes)
    assert sorted(p.name for p in notes.iterdir()) == ["data.json", "todo.txt"]

    # A manifest.json that some other tool wrote does not make the directory ours.
    extension = tmp_path / "extension"
    extension.mkdir()
    (extension / "manifest.json").write_text('{"manifest_version": 3}', encoding="utf-8")
    (extension / "settings.json").write_text("{}", encoding="utf-8")
    (extension / "build.py").write_text("print('hi')\n", encoding="utf-8")
    with pytest.raises(InputError, match="not empty"):
        write_export(result, extension)
    assert sorted(p.name for p in extension.iterdir()) == [
        "build.py",
        "manifest.json",
        "settings.json",
    ]
    assert (extension / "manifest.json").read_text(encoding="utf-8") == '{"manifest_version": 3}'

    a_file = tmp_path / "a-file"
    a_file.write_text("x", encoding="utf-8")
    with pytest.raises(InputError) as caught:
        write_export(result, a_file)
    assert str(a_file) in str(caught.value)


def test_write_export_replaces_an_earlier_export(demo_sqlite: DemoDatabase, tmp_path: Path) -> None:
    out = tmp_path / "ci" / "fixtures"
    everything = export_data(
        demo_sqlite.engine, operator_actor(), rubric=demo_sqlite.rubric, format="fixtures"
    )
    written = write_export(everything, out)
    assert sorted(p.name for p in written) == sorted(everything.files)
    for name, data in everything.files.items():
        assert (out / name).read_bytes() == data
    # Files the user keeps beside the export survive a new export.
    (out / "README.md").write_text("our fixtures\n", encoding="utf-8")
    (out / "conftest.py").write_text("# ours\n", encoding="utf-8")

    violations = export_data(
        demo_sqlite.engine,
        operator_actor(),
        rubric=demo_sqlite.rubric,
        format="fixtures",
        lane="violation",
    )
    write_export(violations, out)
    kept = {p.name for p in out.iterdir()}
    assert kept == set(violations.files) | {"README.md", "conftest.py"}
    assert len(violations.files) == 3 + 2
    for name, data in violations.files.items():
        assert (out / name).read_bytes() == data

    labels = export_data(
        demo_sqlite.engine, operator_actor(), rubric=demo_sqlite.rubric, format="jsonl"
    )
    write_export(labels, out)
    assert {p.name for p in out.iterdir()} == {
        "labels.jsonl",
        MANIFEST_NAME,
        "README.md",
        "conftest.py",
    }
    assert (out / "conftest.py").read_text(encoding="utf-8") == "# ours\n"


def test_lane_and_case_filters(demo: DemoDatabase) -> None:
    for lane in ("violation", "invalid", "missing-context", "pass"):
        wanted = {row.case_id for row in list_cases(demo.engine, lane=lane)}
        assert wanted
        result = export_data(
            demo.engine, operator_actor(), rubric=demo.rubric, format="fixtures", lane=lane
        )
        assert set(fixture_documents(result)) == wanted, lane
        assert result.manifest["cases_exported"] == len(wanted)
    violations = {row.case_id for row in list_cases(demo.engine, lane="violation")}
    assert "support-delayed-refund-violation" in violations

    chosen = ["travel-persona-tone-drift", "support-false-refund-claim"]
    result = export_data(
        demo.engine, operator_actor(), rubric=demo.rubric, format="jsonl", case_ids=chosen
    )
    rows = [json.loads(line) for line in result.files["labels.jsonl"].decode().splitlines()]
    assert {row["case_id"] for row in rows} == set(chosen)
    assert len(rows) == sum(len(LABEL_CODES[unit]) for unit in LABEL_CODES if unit[0] in chosen)
    deepeval = export_data(
        demo.engine, operator_actor(), rubric=demo.rubric, format="deepeval", case_ids=chosen
    )
    names = [item["name"] for item in json.loads(deepeval.files["deepeval_test_cases.json"])]
    assert sorted(names) == sorted(chosen)


def test_bad_export_options_are_input_errors(demo: DemoDatabase) -> None:
    with pytest.raises(InputError, match="unknown export format 'yaml'"):
        export_data(demo.engine, operator_actor(), rubric=demo.rubric, format="yaml")
    with pytest.raises(InputError, match="unknown lane 'broken'"):
        export_data(
            demo.engine, operator_actor(), rubric=demo.rubric, format="fixtures", lane="broken"
        )
    with pytest.raises(InputError, match="no case 'no-such-case'"):
        export_data(
            demo.engine,
            operator_actor(),
            rubric=demo.rubric,
            format="fixtures",
            case_ids=["support-clean-late-parcel", "no-such-case"],
        )


def test_fixture_file_names_never_collide(database: Database, tmp_path: Path) -> None:
    """A case named like the manifest, or two ids differing only in letter case (one file
    on macOS and Windows), each still get a file of their own."""
    base = DEMO["support-clean-late-parcel"]
    case_ids = ["manifest", "Refund-A", "refund-a", "test_role_fixtures", "odd/idé"]
    lines = [json.dumps({**base, "case_id": case_id}) for case_id in case_ids]
    (tmp_path / "cases.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    import_paths(database.engine, operator_actor(), [tmp_path / "cases.jsonl"])
    rubric = sync_rubrics(database.engine, operator_actor()).get(RUBRIC)
    result = export_data(database.engine, operator_actor(), rubric=rubric, format="fixtures")

    assert len(result.files) == len(case_ids) + 2
    folded = [name.casefold() for name in result.files]
    assert len(set(folded)) == len(folded)
    assert json.loads(result.files[MANIFEST_NAME])["cases_exported"] == 5
    assert set(fixture_documents(result)) == set(case_ids)
    out = tmp_path / "out"
    write_export(result, out)
    assert len(list(out.iterdir())) == len(case_ids) + 2
