"""Exports opened by the tools they name, as their users would open them.

* deepeval: the demo's ``export --format deepeval`` loads with deepeval's own loader
  (``EvaluationDataset.add_goldens_from_json_file``), every conversation and every
  turn in order; each golden makes a ``ConversationalTestCase``; the export and the
  file deepeval saves from it import back through ``review-app import --format
  deepeval`` with the same turns and texts. These tests use deepeval when it is
  installed (the ``interop`` extra) and skip otherwise, unless
  ``REVIEW_APP_REQUIRE_INTEROP=1`` (set by ``.ci/run``).
* CSV: ``export --format csv`` opens in pandas with the documented columns and
  dtypes; neutralised formula cells show their quote and the documented rule
  (docs/reference.md, "Label CSV") gives the original text back.
* JSONL: ``export --format jsonl`` imports back through ``review-app labels import``
  into a database holding the same cases, and the labels come out identical.
"""

from __future__ import annotations

import csv
import io
import json
import re
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from review_app.files.csv_safety import neutralise_cell
from review_app.services.exchange.export import LABEL_EXPORT_COLUMNS
from tests.conftest import DEMO_CASES, require_deepeval

RUBRIC = "role-adherence@1"
DEMO = {
    path.stem: json.loads(path.read_text(encoding="utf-8"))
    for path in sorted(DEMO_CASES.glob("*.json"))
}
FORMULAS = ['=HYPERLINK("http://evil.example","click")', "+1 agreed", "'=already quoted", "-"]


def conversation(events: list[dict[str, Any]]) -> list[tuple[str, str, list[str]]]:
    """The user and assistant events as (actor, text, actions): what deepeval holds."""
    return [
        (e["actor"], e.get("text") or "", list(e.get("observed_actions") or []))
        for e in events
        if e["actor"] in ("user", "assistant")
    ]


def transcript(events: list[dict[str, Any]]) -> list[tuple[Any, ...]]:
    """Every event as (turn, actor, text, actions, set_role); no text and "" alike."""
    return [
        (
            e["turn"],
            e["actor"],
            e.get("text") or None,
            list(e.get("observed_actions") or []),
            e.get("set_role"),
        )
        for e in events
    ]


def stored_conversation(run_cli: Any, db: str, case_id: str) -> dict[str, Any]:
    shown = run_cli("cases", "show", case_id, "--json", db=db)
    assert shown.returncode == 0, shown.stderr
    view = json.loads(shown.stdout)
    events = [
        {
            "turn": t["turn"],
            "actor": t["actor"],
            "text": t["text"],
            "observed_actions": t["actions"],
            "set_role": t["set_role"],
        }
        for t in view["turns"]
    ]
    return {
        "chatbot_role": view["chatbot_role"],
        "contract": view["contract"],
        "conversation": conversation(events),
        "transcript": transcript(events),
        "violations": [(t["turn"], [v["code"] for v in t["violations"]]) for t in view["turns"]],
    }


@pytest.fixture
def demo_db(run_cli: Any, tmp_path: Path) -> str:
    db = f"sqlite:///{tmp_path / 'demo.db'}"
    loaded = run_cli("demo", "--no-serve", db=db)
    assert loaded.returncode == 0, loaded.stderr
    return db


def export(run_cli: Any, db: str, data_format: str, out: Path) -> Path:
    done = run_cli("export", "--rubric", RUBRIC, "--format", data_format, "--out", str(out), db=db)
    assert done.returncode == 0, done.stderr
    return out


# --- deepeval --------------------------------------------------------------------------


@pytest.mark.interop
def test_deepeval_export_loads_in_deepeval_and_imports_back(
    run_cli: Any, demo_db: str, tmp_path: Path
) -> None:
    require_deepeval()
    from deepeval.dataset import ConversationalGolden, EvaluationDataset
    from deepeval.test_case import ConversationalTestCase

    path = export(run_cli, demo_db, "deepeval", tmp_path / "out") / "deepeval_test_cases.json"
    items = json.loads(path.read_text(encoding="utf-8"))
    assert sorted(item["name"] for item in items) == sorted(DEMO)

    dataset = EvaluationDataset()
    dataset.add_goldens_from_json_file(str(path))
    goldens = dataset.goldens
    assert len(goldens) == len(items) == 17
    for golden, item in zip(goldens, items, strict=True):
        case = DEMO[item["name"]]
        assert isinstance(golden, ConversationalGolden)
        assert golden.name == case["case_id"]
        assert golden.scenario == item["scenario"]
        assert case["case_id"] in golden.scenario
        assert golden.expected_outcome == item["expected_outcome"]
        assert golden.expected_outcome
        metadata = golden.additional_metadata
        assert metadata is not None
        assert metadata["role_contract"] == case["contract"]
        assert metadata["chatbot_role"] == case["chatbot_role"]
        # Every turn, in order, with its text, its tool calls and its native turn number.
        loaded = [
            (t.role, t.content, [call.name for call in t.tools_called or []]) for t in golden.turns
        ]
        assert loaded == conversation(case["transcript"])
        numbers = [e["turn"] for e in case["transcript"] if e["actor"] in ("user", "assistant")]
        assert [(t.metadata or {})["turn"] for t in golden.turns] == numbers

        test_case = ConversationalTestCase(
            name=golden.name,
            scenario=golden.scenario,
            turns=golden.turns,
            expected_outcome=golden.expected_outcome,
            chatbot_role=metadata["chatbot_role"],
            metadata=metadata,
        )
        assert [(t.role, t.content) for t in test_case.turns] == [
            (actor, text) for actor, text, _ in conversation(case["transcript"])
        ]
        assert test_case.chatbot_role == case["chatbot_role"]
        # The file's objects are also test cases as they stand.
        direct = ConversationalTestCase(**item)
        assert [(t.role, t.content) for t in direct.turns] == [
            (t.role, t.content) for t in test_case.turns
        ]

    # deepeval saves the dataset in its own shape; both files import back.
    original = {case_id: stored_conversation(run_cli, demo_db, case_id) for case_id in DEMO}
    saved = Path(dataset.save_as("json", str(tmp_path / "saved"), file_name="goldens"))
    for source in (path, saved):
        db = f"sqlite:///{tmp_path / (source.stem + '.db')}"
        imported = run_cli("import", "--format", "deepeval", str(source), db=db)
        assert imported.returncode == 0, imported.stderr
        for case_id, case in DEMO.items():
            stored = stored_conversation(run_cli, db, case_id)
            assert stored["conversation"] == conversation(case["transcript"]), (source, case_id)
            # The same case: turn numbers, system handoffs and tool events come back too
            # (only the harness's request records have no place in deepeval's format).
            assert stored["transcript"] == transcript(case["transcript"]), (source, case_id)
            assert stored["violations"] == original[case_id]["violations"], (source, case_id)
            assert stored["chatbot_role"] == case["chatbot_role"]
            assert stored["contract"] == case["contract"]


def test_deepeval_old_export_shape_still_imports(run_cli: Any, tmp_path: Path) -> None:
    """Files written before ``scenario`` was added (no scenario, role only on top)."""
    case = DEMO["support-delayed-refund-violation"]
    turns = [
        {"role": actor, "content": text, "tools_called": [{"name": a} for a in actions]}
        for actor, text, actions in conversation(case["transcript"])
    ]
    old = [
        {
            "name": case["case_id"],
            "chatbot_role": case["chatbot_role"],
            "turns": turns,
            "additional_metadata": {"role_contract": case["contract"]},
        }
    ]
    path = tmp_path / "old.json"
    path.write_text(json.dumps(old), encoding="utf-8")
    db = f"sqlite:///{tmp_path / 'old.db'}"
    imported = run_cli("import", "--format", "deepeval", str(path), db=db)
    assert imported.returncode == 0, imported.stderr
    stored = stored_conversation(run_cli, db, case["case_id"])
    assert stored["conversation"] == conversation(case["transcript"])
    assert stored["chatbot_role"] == case["chatbot_role"]


# --- CSV and JSONL label data -------------------------------------------------------------


def add_formula_labels(run_cli: Any, db: str, tmp_path: Path) -> list[str]:
    """A reviewer whose rationales a spreadsheet would run as formulas."""
    case_id = "support-delayed-refund-violation"
    turns = [e["turn"] for e in DEMO[case_id]["transcript"] if e["actor"] == "assistant"]
    buffer = io.StringIO()
    writer = csv.writer(buffer)
    writer.writerow(["case_id", "turn", "reviewer", "label", "rubric", "rationale"])
    # The import restores a neutralised cell, so write each rationale neutralised.
    for turn, rationale in zip(turns, FORMULAS, strict=False):
        writer.writerow([case_id, turn, "mallory", "in_role", RUBRIC, neutralise_cell(rationale)])
    path = tmp_path / "formulas.csv"
    path.write_text(buffer.getvalue(), encoding="utf-8")
    done = run_cli("labels", "import", str(path), db=db)
    assert done.returncode == 0, done.stderr
    return FORMULAS


def restore(cell: str) -> str:
    """The documented rule: one leading quote off a cell of the shape '+[=+-@\\t\\r]..."""
    return cell[1:] if re.match(r"'+[=+\-@\t\r]", cell) else cell


def test_csv_export_opens_in_pandas_with_documented_columns_and_dtypes(
    run_cli: Any, demo_db: str, tmp_path: Path
) -> None:
    rationales = add_formula_labels(run_cli, demo_db, tmp_path)
    csv_path = export(run_cli, demo_db, "csv", tmp_path / "csv") / "labels.csv"
    jsonl_path = export(run_cli, demo_db, "jsonl", tmp_path / "jsonl") / "labels.jsonl"
    rows = [json.loads(line) for line in jsonl_path.read_text(encoding="utf-8").splitlines()]

    # Opened as a pandas user would, without hints: the columns, integer turns.
    plain = pd.read_csv(csv_path)
    assert list(plain.columns) == list(LABEL_EXPORT_COLUMNS)
    assert plain["turn"].dtype == "int64"
    assert len(plain) == len(rows) == 333 + len(rationales)

    # With the documented dtypes (text everywhere but turn; empty cells stay empty).
    dtypes = {column: "string" for column in LABEL_EXPORT_COLUMNS} | {"turn": "int64"}
    frame = pd.read_csv(csv_path, dtype=dtypes, keep_default_na=False)
    assert {column: str(frame[column].dtype) for column in frame.columns} == dtypes
    for record, row in zip(frame.to_dict("records"), rows, strict=True):
        for column in LABEL_EXPORT_COLUMNS:
            value = row[column]
            if isinstance(value, list):
                value = ",".join(value)
            expected = "" if value is None else value
            assert (record[column] if column == "turn" else restore(record[column])) == expected

    mallory = frame[frame["reviewer"] == "mallory"]
    assert list(mallory["rationale"]) == [neutralise_cell(r) for r in rationales]
    # The quote is visible in the file (a spreadsheet shows the cell as text).
    assert list(mallory["rationale"])[:3] == [
        "'" + rationales[0],
        "'+1 agreed",
        "''=already quoted",
    ]
    assert [restore(cell) for cell in mallory["rationale"]] == rationales


def test_jsonl_export_imports_back_through_labels_import(
    run_cli: Any, demo_db: str, tmp_path: Path
) -> None:
    add_formula_labels(run_cli, demo_db, tmp_path)
    jsonl_path = export(run_cli, demo_db, "jsonl", tmp_path / "jsonl") / "labels.jsonl"

    fresh = f"sqlite:///{tmp_path / 'fresh.db'}"
    cases = run_cli("import", str(DEMO_CASES), db=fresh)
    assert cases.returncode == 0, cases.stderr
    imported = run_cli("labels", "import", str(jsonl_path), db=fresh)
    assert imported.returncode == 0, imported.stderr
    assert "stored 337" in imported.stdout

    before = run_cli("labels", "export", "--rubric", RUBRIC, db=demo_db)
    after = run_cli("labels", "export", "--rubric", RUBRIC, db=fresh)
    assert before.returncode == after.returncode == 0
    assert after.stdout == before.stdout
    again = run_cli("labels", "import", str(jsonl_path), db=fresh)
    assert "stored 0, unchanged 337" in again.stdout
