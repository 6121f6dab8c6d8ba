"""The ``review-app`` command line through its real entry point (a subprocess)."""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import typer

import storage.engine
from review_app.cli.application import app
from review_app.evaluator import compiled, diagnostic, evaluate_case, lane
from review_app.services.access.actors import operator_actor
from review_app.services.cases.importing import import_paths
from storage.engine import create_database_engine
from storage.migrations.upgrade import upgrade_database
from tests.conftest import DEMO_CASES, REPO, Database, row_counts, write_lock

EXPECTED: dict[str, dict[str, Any]] = json.loads(
    (REPO / "review_app" / "demo_data" / "expected.json").read_text(encoding="utf-8")
)
DEMO_PATHS = sorted(DEMO_CASES.glob("*.json"))
EXIT_BY_STATUS = {"pass": 0, "fail": 1, "invalid": 2}


def load(path: Path) -> dict[str, Any]:
    case: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    return case


def demo_lanes() -> dict[str, str]:
    return {load(path)["case_id"]: lane(evaluate_case(load(path))) for path in DEMO_PATHS}


# --- the demo cases against their expectations ----------------------------------------


def test_expectations_cover_exactly_the_demo_cases() -> None:
    assert sorted(EXPECTED) == sorted(load(path)["case_id"] for path in DEMO_PATHS)


@pytest.mark.parametrize("path", DEMO_PATHS, ids=lambda path: path.stem)
def test_every_demo_case_gives_what_expected_json_says(path: Path) -> None:
    case = load(path)
    expected = EXPECTED[case["case_id"]]
    result = evaluate_case(case)

    assert result["status"] == expected["status"]
    first = result["first_violation"]
    assert (first["turn"] if first else None) == expected["first_violation_turn"]
    assert [e["code"] for e in result["fixture_errors"]] == expected["fixture_error_codes"]
    assert sorted({h["code"] for h in result["harness_findings"]}) == expected["harness_codes"]


# --- inspect --------------------------------------------------------------------------


@pytest.mark.parametrize("path", DEMO_PATHS, ids=lambda path: path.stem)
def test_inspect_demo_case_exit_code_diagnostic_then_json(path: Path, run_cli: Any) -> None:
    case = load(path)
    expected = EXPECTED[case["case_id"]]
    result = run_cli("inspect", str(path), subprocess=True)

    assert result.returncode == EXIT_BY_STATUS[expected["status"]], result.stderr
    first_line, rest = result.stdout.split("\n", 1)
    assert first_line == diagnostic(evaluate_case(case))
    printed = json.loads(rest)
    assert printed == json.loads(json.dumps(evaluate_case(case)))
    assert printed["status"] == expected["status"]
    assert result.stderr == ""


def test_inspect_json_prints_only_json(run_cli: Any) -> None:
    path = DEMO_CASES / "support-delayed-refund-violation.json"
    result = run_cli("inspect", "--json", str(path), subprocess=True)
    assert result.returncode == 1
    printed = json.loads(result.stdout)
    assert printed["first_violation"]["turn"] == 8
    assert not result.stdout.startswith("role-eval")


def test_inspect_case_without_contract_exits_2(run_cli: Any, tmp_path: Path) -> None:
    case = load(DEMO_CASES / "support-clean-late-parcel.json")
    del case["contract"]
    path = tmp_path / "no-contract.json"
    path.write_text(json.dumps(case))
    result = run_cli("inspect", str(path), subprocess=True)
    assert result.returncode == 2
    assert result.stdout.splitlines()[0] == "role-eval no-contract case=support-clean-late-parcel"
    assert result.stderr.count("\n") == 1
    assert "no-contract.json, field contract" in result.stderr


def test_inspect_malformed_case_prints_the_field(run_cli: Any, tmp_path: Path) -> None:
    case = load(DEMO_CASES / "support-clean-late-parcel.json")
    case["transcript"][3]["set_role"] = 4
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(case))
    result = run_cli("inspect", str(path), subprocess=True)
    assert result.returncode == 2
    assert result.stdout.startswith("role-eval invalid case=support-clean-late-parcel ")
    assert result.stderr.strip().splitlines() == [
        f"error: {path}, field transcript[3].set_role: expected a string"
    ]


def test_inspect_output_carries_no_raw_control_characters(run_cli: Any, tmp_path: Path) -> None:
    case = load(DEMO_CASES / "support-delayed-refund-violation.json")
    case["case_id"] = "clear\x1b[2Jscreen\nFAKE role-eval pass"
    case["transcript"][0]["text"] = "\x1b[31mred\x1b[0m"
    path = tmp_path / "escapes.json"
    path.write_text(json.dumps(case))
    result = run_cli("inspect", str(path), subprocess=True)
    assert result.returncode == 1
    first_line, rest = result.stdout.split("\n", 1)
    assert first_line.startswith("role-eval fail case=clear\\x1b[2Jscreen\\x0aFAKE\\x20role-eval")
    assert "\x1b" not in result.stdout
    assert json.loads(rest)["case_id"] == case["case_id"]


# --- import ---------------------------------------------------------------------------


def expected_summary_counts() -> Counter[str]:
    counts: Counter[str] = Counter()
    for expectation in EXPECTED.values():
        counts[expectation["status"]] += 1
        counts["harness"] += bool(expectation["harness_codes"])
    return counts


def test_import_summary_line_and_reimport_is_a_no_op(
    run_cli: Any, sqlite_database: Database
) -> None:
    counts = expected_summary_counts()
    first = run_cli("import", str(DEMO_CASES), db=sqlite_database.url)
    assert first.returncode == 0, first.stderr
    assert first.stdout == (
        f"imported 17, unchanged 0, invalid fixtures {counts['invalid']}, "
        f"with violations {counts['fail']}, with harness findings {counts['harness']} "
        "(17 files)\n"
    )
    assert (counts["invalid"], counts["fail"], counts["harness"]) == (1, 4, 2)
    stored = row_counts(sqlite_database.engine)
    assert stored["cases"] == 17
    assert stored["contracts"] == 3

    again = run_cli("import", str(DEMO_CASES), db=sqlite_database.url)
    assert again.returncode == 0, again.stderr
    assert again.stdout == (
        "imported 0, unchanged 17, invalid fixtures 0, with violations 0, "
        "with harness findings 0 (17 files)\n"
    )
    assert row_counts(sqlite_database.engine) == stored


def test_import_json_summary(run_cli: Any, sqlite_database: Database) -> None:
    path = DEMO_CASES / "support-unknown-action-store-credit.json"
    result = run_cli("import", "--json", str(path), db=sqlite_database.url)
    assert result.returncode == 0
    summary = json.loads(result.stdout)
    assert summary["totals"]["imported"] == 1
    assert summary["totals"]["invalid"] == 1
    assert summary["files"] == [{"path": str(path), **summary["totals"]}]


def test_import_of_a_missing_path_exits_2(run_cli: Any, sqlite_database: Database) -> None:
    result = run_cli("import", "no-such-dir/cases.jsonl", db=sqlite_database.url)
    assert result.returncode == 2
    assert result.stderr == "error: no-such-dir/cases.jsonl: no such file or directory\n"


def test_import_while_another_writer_holds_the_database_exits_4(
    run_cli: Any, sqlite_database: Database, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(storage.engine, "SQLITE_BUSY_TIMEOUT_MS", 100)
    path = DEMO_CASES / "support-unknown-action-store-credit.json"
    with write_lock(Path(sqlite_database.engine.url.database or "")):
        result = run_cli("import", str(path), db=sqlite_database.url)
    assert (result.returncode, result.stdout) == (4, "")
    assert result.stderr == (
        "error: the database is busy (another writer held it for more than 0.1 s); "
        "this change was not saved, try again\n"
    )
    assert row_counts(sqlite_database.engine)["cases"] == 0
    again = run_cli("import", "--json", str(path), db=sqlite_database.url)
    assert again.returncode == 0, again.stderr
    assert json.loads(again.stdout)["totals"]["imported"] == 1


# --- cases list / show ----------------------------------------------------------------


@pytest.fixture(scope="module")
def demo_db(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Database]:
    """The demo cases in one SQLite file, shared by the read-only listing tests."""
    url = f"sqlite:///{tmp_path_factory.mktemp('demo') / 'review.db'}"
    engine = create_database_engine(url)
    upgrade_database(engine)
    import_paths(engine, operator_actor(), [DEMO_CASES])
    yield Database("sqlite", url, engine)
    engine.dispose()


def listed_ids(stdout: str) -> list[str]:
    lines = stdout.strip().splitlines()
    assert lines[0].split()[:3] == ["case_id", "lane", "contract"]
    return [line.split()[0] for line in lines[1:]]


def test_cases_list_all(run_cli: Any, demo_db: Database) -> None:
    result = run_cli("cases", "list", db=demo_db.url)
    assert result.returncode == 0
    assert listed_ids(result.stdout) == sorted(EXPECTED)
    row = next(
        line for line in result.stdout.splitlines() if line.startswith("support-delayed-refund")
    )
    assert row.split()[:5] == [
        "support-delayed-refund-violation",
        "violation",
        "support-role-v3",
        "12",
        "8",
    ]
    assert row.endswith(diagnostic(evaluate_case(load(DEMO_CASES / f"{row.split()[0]}.json"))))


@pytest.mark.parametrize(
    "lane_name", ["violation", "invalid", "missing-context", "no-contract", "pass"]
)
def test_cases_list_by_lane(lane_name: str, run_cli: Any, demo_db: Database) -> None:
    expected = sorted(case_id for case_id, name in demo_lanes().items() if name == lane_name)
    result = run_cli("cases", "list", "--lane", lane_name, db=demo_db.url)
    assert result.returncode == 0
    if expected:
        assert listed_ids(result.stdout) == expected
    else:
        assert result.stdout == f"no cases in lane {lane_name}\n"


def test_cases_list_by_lane_as_json(run_cli: Any, demo_db: Database) -> None:
    expected = sorted(
        case_id for case_id, name in demo_lanes().items() if name == "missing-context"
    )
    result = run_cli("cases", "list", "--lane", "missing-context", "--json", db=demo_db.url)
    rows = json.loads(result.stdout)
    assert [row["case_id"] for row in rows] == expected
    assert {row["lane"] for row in rows} == {"missing-context"}


def test_lane_counts_of_the_demo() -> None:
    assert Counter(demo_lanes().values()) == {
        "pass": 11,
        "violation": 3,
        "missing-context": 2,
        "invalid": 1,
    }


def test_cases_list_json_limit_and_offset(run_cli: Any, demo_db: Database) -> None:
    everything = json.loads(run_cli("cases", "list", "--json", db=demo_db.url).stdout)
    assert [row["case_id"] for row in everything] == sorted(EXPECTED)
    assert set(everything[0]) >= {
        "case_id",
        "contract_version",
        "lane",
        "status",
        "first_violation_turn",
        "n_events",
        "n_assistant_turns",
        "diagnostic",
    }
    by_id = {row["case_id"]: row for row in everything}
    for case_id, expectation in EXPECTED.items():
        assert by_id[case_id]["status"] == expectation["status"]
        assert by_id[case_id]["first_violation_turn"] == expectation["first_violation_turn"]

    page = run_cli("cases", "list", "--json", "--limit", "5", "--offset", "3", db=demo_db.url)
    assert [row["case_id"] for row in json.loads(page.stdout)] == sorted(EXPECTED)[3:8]
    text_page = run_cli("cases", "list", "--limit", "2", "--offset", "16", db=demo_db.url)
    assert listed_ids(text_page.stdout) == sorted(EXPECTED)[16:]


def test_cases_list_unknown_lane_exits_2(run_cli: Any, demo_db: Database) -> None:
    result = run_cli("cases", "list", "--lane", "bogus", db=demo_db.url)
    assert result.returncode == 2
    assert result.stderr.strip().splitlines() == [
        "error: field --lane: unknown lane 'bogus'; choose one of violation, invalid, "
        "missing-context, no-contract, pass"
    ]


def turn_blocks(text: str) -> dict[int, str]:
    """The lines of ``cases show`` grouped by the turn they belong to."""
    blocks: dict[int, list[str]] = {}
    current: list[str] | None = None
    for line in text.splitlines():
        match = re.match(r"turn (\d+) ", line)
        if match:
            current = blocks.setdefault(int(match.group(1)), [])
        if current is not None:
            current.append(line)
    return {turn: "\n".join(lines) for turn, lines in blocks.items()}


def test_cases_show_marks_violation_and_ignored_fake_role_change(
    run_cli: Any, demo_db: Database
) -> None:
    result = run_cli("cases", "show", "support-user-fake-role-change", db=demo_db.url)
    assert result.returncode == 0
    text = result.stdout
    assert text.startswith(
        "case support-user-fake-role-change  contract support-role-v3  lane violation  "
        "status fail\n"
    )
    blocks = turn_blocks(text)
    assert sorted(blocks) == list(range(1, 11))
    assert all("[support_triage]" in block.splitlines()[0] for block in blocks.values())
    assert [turn for turn, block in blocks.items() if "!! violation" in block] == [8]
    assert "refund_order is not allowed for support_triage" in blocks[8]
    assert [turn for turn, block in blocks.items() if "role in text; ignored" in block] == [7]


def test_cases_show_trusted_handoff_changes_the_role(run_cli: Any, demo_db: Database) -> None:
    result = run_cli("cases", "show", "support-authorized-handoff-refund", db=demo_db.url)
    assert result.returncode == 0
    assert "role -> billing_specialist (trusted role transition)" in result.stdout
    roles = re.findall(r"^turn \d+\s+\w+\s+\[(\w+)\]", result.stdout, flags=re.MULTILINE)
    assert roles[0] == "support_triage"
    assert roles[-1] == "billing_specialist"
    assert "!! violation" not in result.stdout


def test_cases_show_json(run_cli: Any, demo_db: Database) -> None:
    result = run_cli("cases", "show", "--json", "support-delayed-refund-violation", db=demo_db.url)
    view = json.loads(result.stdout)
    assert view["first_violation_turn"] == 8
    assert view["lane"] == "violation"
    assert [t["turn"] for t in view["turns"] if t["violations"]] == [8]
    assert view["assistant_turns"] == [2, 4, 6, 8, 10, 12]


def test_cases_show_unknown_case_exits_2(run_cli: Any, demo_db: Database) -> None:
    result = run_cli("cases", "show", "nope", db=demo_db.url)
    assert result.returncode == 2
    assert result.stderr == "error: no case 'nope' in the database\n"


def test_cases_show_makes_control_characters_visible(
    run_cli: Any, sqlite_database: Database, tmp_path: Path
) -> None:
    case = load(DEMO_CASES / "support-clean-late-parcel.json")
    case["case_id"] = "escape-sequences"
    case["chatbot_role"] = "Support \x1b]0;owned\x07 triage"
    case["transcript"][0]["text"] = "Hello \x1b[31mRED\x1b[0m and a bell \x07 and \x7f."
    path = tmp_path / "escape.json"
    path.write_text(json.dumps(case))
    assert run_cli("import", str(path), db=sqlite_database.url).returncode == 0

    result = run_cli("cases", "show", "escape-sequences", db=sqlite_database.url)
    assert result.returncode == 0
    assert "\x1b" not in result.stdout
    assert "\x07" not in result.stdout
    assert "\x7f" not in result.stdout
    assert "Hello \\x1b[31mRED\\x1b[0m and a bell \\x07 and \\x7f." in result.stdout
    listing = run_cli("cases", "list", db=sqlite_database.url)
    assert "\x1b" not in listing.stdout


# --- database selection ---------------------------------------------------------------


def test_db_option_overrides_the_environment(
    run_cli: Any, sqlite_database: Database, tmp_path: Path
) -> None:
    other = f"sqlite:///{tmp_path / 'other.db'}"
    one = DEMO_CASES / "travel-clean-lisbon-weekend.json"
    # The environment names sqlite_database; --db sends the import elsewhere.
    result = run_cli("import", str(one), "--db", other, db=sqlite_database.url)
    assert result.returncode == 0, result.stderr
    assert row_counts(sqlite_database.engine)["cases"] == 0
    assert (tmp_path / "other.db").exists()

    from_env = run_cli("cases", "list", db=sqlite_database.url)
    assert from_env.stdout == "no cases\n"
    from_option = run_cli("cases", "list", "--db", other, db=sqlite_database.url)
    assert listed_ids(from_option.stdout) == ["travel-clean-lisbon-weekend"]


def test_environment_is_used_without_db_option(run_cli: Any, sqlite_database: Database) -> None:
    one = DEMO_CASES / "travel-clean-lisbon-weekend.json"
    assert run_cli("import", str(one), db=sqlite_database.url).returncode == 0
    assert row_counts(sqlite_database.engine)["cases"] == 1


def test_unreachable_database_is_one_line_exit_2(run_cli: Any, tmp_path: Path) -> None:
    result = run_cli(
        "cases", "list", "--db", "postgresql://nobody@127.0.0.1:1/none?connect_timeout=2"
    )
    assert result.returncode == 2
    assert "Traceback" not in result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1
    assert lines[0].startswith("error: field --db: cannot open the database")


# --- help -----------------------------------------------------------------------------


def command_paths() -> list[tuple[str, ...]]:
    """Every command and subcommand of the real application, found by walking it."""
    root = typer.main.get_command(app)
    found: list[tuple[str, ...]] = [()]

    def walk(command: Any, prefix: tuple[str, ...]) -> None:
        for name, sub in getattr(command, "commands", {}).items():
            found.append((*prefix, name))
            walk(sub, (*prefix, name))

    walk(root, ())
    return found


def test_the_commands_this_suite_knows_are_there() -> None:
    assert {("inspect",), ("import",), ("cases",), ("cases", "list"), ("cases", "show")} <= set(
        command_paths()
    )


@pytest.mark.parametrize("path", command_paths(), ids=lambda path: " ".join(path) or "(root)")
def test_every_command_has_help(path: tuple[str, ...], run_cli: Any) -> None:
    result = run_cli(*path, "--help")
    assert result.returncode == 0, result.stderr
    assert "Usage:" in result.stdout
    assert result.stderr == ""


def test_version(run_cli: Any) -> None:
    result = run_cli("--version", subprocess=True)
    assert result.returncode == 0
    # It says how the evaluator was built (README, "The compiled evaluator").
    build = (
        r" \(evaluator compiled with mypyc\)"
        if compiled()
        else r" \(evaluator in pure Python( \(.+\))?\)"
    )
    assert re.fullmatch(rf"review-app \d+\.\d+\.\d+{build}\n", result.stdout)
