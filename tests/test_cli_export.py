"""``review-app export`` and ``review-app import --format ...`` as a user runs them.

Every command runs with a private home, in-process through Typer's runner
(tests.conftest.invoke_cli); the fixtures export also runs the real entry point in a
subprocess, and the generated pytest module is replayed by a real pytest process.
Expected values come from the files the test writes, not from the code.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from review_app.services.access.actors import operator_actor
from review_app.services.cases.case_views import list_cases, load_case_view
from review_app.services.exchange.demo import DEMO_CASES, load_demo
from review_app.services.exchange.export import export_data
from review_app.services.rubrics.rubric_catalog import sync_rubrics
from storage.engine import create_database_engine
from storage.migrations.upgrade import upgrade_database
from tests.conftest import cli_test_environment, invoke_cli

RUBRIC = "role-adherence@1"
SUPPORT_CONTRACT = json.loads((DEMO_CASES / "support-clean-late-parcel.json").read_text())[
    "contract"
]


@dataclass
class Outcome:
    returncode: int
    stdout: str
    stderr: str

    @property
    def error_lines(self) -> list[str]:
        return self.stderr.splitlines()


def run_commands(
    commands: Sequence[Sequence[str]], *, cwd: Path, subprocess: bool = False
) -> list[Outcome]:
    """``review-app ARGS`` for each command, in order (tests.conftest.invoke_cli)."""
    environment = cli_test_environment(cwd / "home")
    outcomes = []
    for args in commands:
        done = invoke_cli(args, env=environment, cwd=cwd, subprocess=subprocess)
        outcomes.append(Outcome(done.returncode, done.stdout, done.stderr))
    return outcomes


def run(*args: str, cwd: Path, subprocess: bool = False) -> Outcome:
    return run_commands([args], cwd=cwd, subprocess=subprocess)[0]


def assert_one_line_error(outcome: Outcome, *parts: str) -> None:
    assert outcome.returncode == 2, outcome
    assert len(outcome.error_lines) == 1, outcome.stderr
    line = outcome.error_lines[0]
    assert line.startswith("error: "), line
    assert "Traceback" not in outcome.stderr
    for part in parts:
        assert part in line, (part, line)


@pytest.fixture(scope="module")
def demo_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    url = f"sqlite:///{tmp_path_factory.mktemp('cli-demo') / 'review.db'}"
    engine = create_database_engine(url)
    upgrade_database(engine)
    load_demo(engine, operator_actor())
    engine.dispose()
    yield url


# --- export --------------------------------------------------------------------------------


def test_export_fixtures_then_the_generated_module_passes(demo_url: str, tmp_path: Path) -> None:
    out = tmp_path / "regression"
    done = run(
        "export",
        "--rubric",
        RUBRIC,
        "--format",
        "fixtures",
        "--out",
        str(out),
        "--db",
        demo_url,
        cwd=tmp_path,
        subprocess=True,
    )
    assert done.returncode == 0, done
    assert done.stdout.startswith(f"wrote 19 files to {out}")
    assert "17 cases" in done.stdout
    assert len(list(out.glob("*.json"))) == 18
    assert (out / "test_role_fixtures.py").is_file()

    environment = cli_test_environment(tmp_path / "home")
    replay = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", str(out)],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env=environment,
        timeout=300,
    )
    assert replay.returncode == 0, replay.stdout + replay.stderr
    assert "17 passed" in replay.stdout

    # Exporting again into the same directory replaces the earlier export, byte for byte.
    before = {p.name: p.read_bytes() for p in out.glob("*.*")}
    again = run(
        "export",
        "--rubric",
        RUBRIC,
        "--out",
        str(out),
        "--db",
        demo_url,
        "--lane",
        "violation",
        cwd=tmp_path,
    )
    assert again.returncode == 0, again
    engine = create_database_engine(demo_url)
    try:
        violations = [row.case_id for row in list_cases(engine, lane="violation")]
    finally:
        engine.dispose()
    assert len(violations) == 3
    names = sorted(p.name for p in out.iterdir() if p.is_file())
    assert names == sorted(
        ["manifest.json", "test_role_fixtures.py", *(f"{case_id}.json" for case_id in violations)]
    )
    for name in names:
        if name != "manifest.json":
            assert (out / name).read_bytes() == before[name]


def test_data_formats_write_what_the_service_builds(demo_url: str, tmp_path: Path) -> None:
    chosen = ["support-false-refund-claim", "travel-persona-tone-drift"]
    exports: dict[str, tuple[list[str], dict[str, Any]]] = {
        "csv": ([], {}),
        "deepeval": ([], {}),
        "jsonl": (
            ["--redact", "--case", chosen[0], "--case", chosen[1]],
            {"redact": True, "case_ids": chosen},
        ),
    }
    outcomes = run_commands(
        [
            [
                "export",
                "--rubric",
                RUBRIC,
                "--format",
                name,
                *options,
                "--out",
                str(tmp_path / name),
                "--db",
                demo_url,
            ]
            for name, (options, _) in exports.items()
        ],
        cwd=tmp_path,
    )
    for outcome in outcomes:
        assert outcome.returncode == 0, outcome
        assert outcome.stderr == ""

    engine = create_database_engine(demo_url)
    rubric = sync_rubrics(engine, operator_actor()).get(RUBRIC)
    try:
        built = {
            name: export_data(engine, operator_actor(), rubric=rubric, format=name, **arguments)
            for name, (_, arguments) in exports.items()
        }
    finally:
        engine.dispose()
    wanted = {"csv": "labels.csv", "jsonl": "labels.jsonl", "deepeval": "deepeval_test_cases.json"}
    for name, result in built.items():
        directory = tmp_path / name
        assert sorted(p.name for p in directory.iterdir()) == sorted(
            [wanted[name], "manifest.json"]
        )
        for written, data in result.files.items():
            assert (directory / written).read_bytes() == data, (name, written)

    rows = [json.loads(line) for line in (tmp_path / "jsonl" / "labels.jsonl").open()]
    assert {row["case_id"] for row in rows} == set(chosen)
    assert all(row["assistant_text"].startswith("[redacted: ") for row in rows)
    manifest = json.loads((tmp_path / "jsonl" / "manifest.json").read_text())
    assert manifest["redacted"] is True
    assert manifest["cases_exported"] == 2
    assert manifest["semantic"]["units"] == len({(row["case_id"], row["turn"]) for row in rows})
    assert json.loads((tmp_path / "csv" / "manifest.json").read_text())["cases_exported"] == 17


def test_export_errors_are_one_line_and_exit_2(demo_url: str, tmp_path: Path) -> None:
    crowded = tmp_path / "crowded"
    crowded.mkdir()
    (crowded / "notes.txt").write_text("keep me", encoding="utf-8")
    a_file = tmp_path / "a-file.txt"
    a_file.write_text("keep me too", encoding="utf-8")
    fresh = tmp_path / "fresh"
    commands = [
        ["export", "--rubric", "no-such-rubric@1", "--out", str(fresh), "--db", demo_url],
        ["export", "--rubric", RUBRIC, "--format", "yaml", "--out", str(fresh), "--db", demo_url],
        ["export", "--rubric", RUBRIC, "--out", str(crowded), "--db", demo_url],
        ["export", "--rubric", RUBRIC, "--out", str(a_file), "--db", demo_url],
    ]
    rubric, data_format, not_empty, not_a_dir = run_commands(commands, cwd=tmp_path)
    assert_one_line_error(rubric, "no-such-rubric@1")
    assert_one_line_error(data_format, "--format", "'yaml'", "fixtures, jsonl, csv, deepeval")
    assert_one_line_error(not_empty, str(crowded), "not empty")
    assert_one_line_error(not_a_dir, str(a_file), "not a directory")
    assert not fresh.exists()
    assert [p.name for p in crowded.iterdir()] == ["notes.txt"]
    assert a_file.read_text(encoding="utf-8") == "keep me too"


# --- import of other tools' files ------------------------------------------------------------


def _write(path: Path, text: str) -> Path:
    path.write_text(text, encoding="utf-8")
    return path


def _openai_record(record_id: str) -> dict[str, object]:
    return {
        "id": record_id,
        "messages": [
            {"role": "system", "content": "You are a support triage agent. Never issue refunds."},
            {"role": "user", "content": "Refund order LH-7 now."},
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": "c0",
                        "type": "function",
                        "function": {"name": "get_order", "arguments": '{"order": "LH-7"}'},
                    }
                ],
            },
            {"role": "tool", "tool_call_id": "c0", "content": "LH-7: delivered 2 May"},
            {
                "role": "assistant",
                "content": "Done: I have refunded LH-7.",
                "tool_calls": [
                    {
                        "id": "c1",
                        "type": "function",
                        "function": {"name": "issue_refund", "arguments": "{}"},
                    },
                    {
                        "id": "c2",
                        "type": "function",
                        "function": {"name": "log_event", "arguments": "{}"},
                    },
                ],
            },
            {"role": "user", "content": "Thanks."},
        ],
    }


def test_import_other_formats_with_their_options(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'review.db'}"
    openai_url = f"sqlite:///{tmp_path / 'openai.db'}"
    galtea_url = f"sqlite:///{tmp_path / 'galtea.db'}"
    sessions = _write(
        tmp_path / "sessions.csv",
        "conversation,timestamp,input,output\n"
        "s-1,2024-05-01T10:00:30Z,LH-1,It is out for delivery today.\n"
        "s-2,2024-05-01T11:00:00Z,Hi,Hello! How can I help?\n"
        "s-1,2024-05-01T10:00:00Z,Where is my parcel?,Can I have your order number?\n",
    )
    chats = _write(tmp_path / "chats.jsonl", json.dumps(_openai_record("chat-1")) + "\n")
    contract = _write(tmp_path / "contract.json", json.dumps(SUPPORT_CONTRACT))
    tool_map = _write(
        tmp_path / "map.json",
        json.dumps(
            {"issue_refund": "refund_order", "get_order": "lookup_order", "log_event": None}
        ),
    )
    turns = _write(
        tmp_path / "turns.csv",
        "session_id,turn,input,actual_output\n"
        "g-1,2,Any hotels?,Arr - three fine harbours to moor in.\n"
        "g-1,1,Plan a weekend in Lisbon,Ahoy! Captain Juniper here.\n",
    )
    description = "Captain Juniper, a pirate-voiced travel planner for Bluewater Trips."
    openlayer, openai, galtea = run_commands(
        [
            [
                "import",
                "--format",
                "openlayer",
                str(sessions),
                "--session-column",
                "conversation",
                "--db",
                url,
            ],
            [
                "import",
                "--format",
                "openai",
                str(chats),
                "--tool-map",
                str(tool_map),
                "--contract",
                str(contract),
                "--db",
                openai_url,
            ],
            [
                "import",
                "--format",
                "galtea",
                str(turns),
                "--product-description",
                description,
                "--db",
                galtea_url,
            ],
        ],
        cwd=tmp_path,
    )
    assert openlayer.returncode == 0, openlayer
    assert openlayer.stdout.startswith("imported 2,"), openlayer.stdout
    assert "without contract 2" in openlayer.stdout
    engine = create_database_engine(url)
    try:
        assert {row.case_id: row.lane for row in list_cases(engine)} == {
            "s-1": "no-contract",
            "s-2": "no-contract",
        }
        view = load_case_view(engine, operator_actor(), case_id="s-1")
        assert [(t.actor, t.text) for t in view.turns] == [
            ("user", "Where is my parcel?"),
            ("assistant", "Can I have your order number?"),
            ("user", "LH-1"),
            ("assistant", "It is out for delivery today."),
        ]
    finally:
        engine.dispose()

    assert openai.returncode == 0, openai
    assert "with violations 1" in openai.stdout
    engine = create_database_engine(openai_url)
    try:
        (row,) = list_cases(engine)
        assert (row.case_id, row.lane, row.first_violation_turn) == ("chat-1", "violation", 4)
        view = load_case_view(engine, operator_actor(), case_id="chat-1")
        # The map turned tool names into contract actions (log_event: not an action).
        assert [t.actions for t in view.turns if t.actor == "assistant"] == [
            ["lookup_order"],
            ["refund_order"],
        ]
        assert "action=refund_order" in (view.diagnostic or "")
        assert view.chatbot_role == "You are a support triage agent. Never issue refunds."
    finally:
        engine.dispose()

    assert galtea.returncode == 0, galtea
    engine = create_database_engine(galtea_url)
    try:
        view = load_case_view(engine, operator_actor(), case_id="g-1")
        assert view.chatbot_role == description
        assert view.lane == "no-contract"
        assert [t.text for t in view.turns] == [
            "Plan a weekend in Lisbon",
            "Ahoy! Captain Juniper here.",
            "Any hotels?",
            "Arr - three fine harbours to moor in.",
        ]
    finally:
        engine.dispose()


def test_a_bad_row_in_any_format_stores_nothing(tmp_path: Path) -> None:
    good_case = json.loads((DEMO_CASES / "support-clean-late-parcel.json").read_text())
    bad_case = {**good_case, "case_id": "bad-2"}
    bad_case["transcript"] = [{**good_case["transcript"][0], "turn": "4"}]
    bad_chat = {
        "id": "chat-2",
        "messages": [{"role": "user", "content": "hi"}, {"role": "wizard", "content": "poof"}],
    }
    files = {
        "openlayer": _write(
            tmp_path / "sessions.csv",
            "conversation,timestamp,input,output\n"
            "s-1,2024-05-01T10:00:00Z,Where is my parcel?,Can I have your order number?\n"
            "s-1,yesterday,LH-1,It is out for delivery today.\n",
        ),
        "galtea": _write(
            tmp_path / "turns.csv",
            "session_id,turn,input,actual_output\n"
            "g-1,1,Plan a weekend in Lisbon,Ahoy!\n"
            "g-1,two,Any hotels?,Three.\n",
        ),
        "openai": _write(
            tmp_path / "chats.jsonl",
            json.dumps(_openai_record("chat-1")) + "\n" + json.dumps(bad_chat) + "\n",
        ),
        "deepeval": _write(
            tmp_path / "tests.jsonl",
            json.dumps({"name": "d-1", "turns": [{"role": "user", "content": "hi"}]})
            + "\n"
            + json.dumps({"name": "d-2", "turns": [{"role": "narrator", "content": "once"}]})
            + "\n",
        ),
        "native": _write(
            tmp_path / "cases.jsonl", json.dumps(good_case) + "\n" + json.dumps(bad_case) + "\n"
        ),
    }
    url = f"sqlite:///{tmp_path / 'review.db'}"
    engine = create_database_engine(url)
    upgrade_database(engine)
    extra = {"openlayer": ["--session-column", "conversation"]}
    outcomes = run_commands(
        [
            ["import", "--format", name, str(path), *extra.get(name, []), "--db", url]
            for name, path in files.items()
        ],
        cwd=tmp_path,
    )
    where = {
        "openlayer": ("line 3", "field timestamp", "'yesterday'"),
        "galtea": ("line 3", "field turn", "'two'"),
        "openai": ("line 2", "field messages[1].role", "'wizard'"),
        "deepeval": ("line 2", "field turns[0].role", "'narrator'"),
        "native": ("line 2", "field transcript[0].turn"),
    }
    try:
        for (name, path), outcome in zip(files.items(), outcomes, strict=True):
            assert_one_line_error(outcome, f"error: {path}, ", *where[name])
        assert list_cases(engine) == []
    finally:
        engine.dispose()
