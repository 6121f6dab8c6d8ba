"""The label, reviewer, assignment, rubric and agreement commands, run as a user runs them.

Each command runs against a database of its own, in-process through Typer's runner
(tests.conftest.invoke_cli); a few run the real entry point in a subprocess.
"""

from __future__ import annotations

import csv
import io
import json
import re
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import pytest
from sqlalchemy import func, select
from sqlmodel import Session, col

from review_app.services.access.actors import Actor, operator_actor
from review_app.services.cases.importing import import_paths
from review_app.services.exchange.demo import DEMO_CASES, DEMO_LABELS
from review_app.services.exchange.labels_io import import_labels
from review_app.services.rubrics.rubric_catalog import sync_rubrics
from review_app.services.team.people import add_person
from storage.engine import create_database_engine
from storage.migrations.upgrade import upgrade_database
from storage.models import Assignment, Label, Reviewer
from tests.builders import AGREEMENT_REPORT_KEYS
from tests.conftest import Database, cli_test_environment, invoke_cli

RUBRIC = "role-adherence@1"
CASE = "support-clean-late-parcel"
N_CASES = 17
N_DEMO_LABELS = 333


@dataclass
class Run:
    returncode: int
    stdout: str
    stderr: str


def cli(
    *args: str, db: str | None, home: Path, stdin: str | None = None, subprocess: bool = False
) -> Run:
    done = invoke_cli(
        args,
        env=cli_test_environment(home, db),
        cwd=home,
        input=stdin,
        subprocess=subprocess,
    )
    return Run(done.returncode, done.stdout, done.stderr)


@pytest.fixture
def home(tmp_path: Path) -> Path:
    path = tmp_path / "home"
    path.mkdir()
    return path


@pytest.fixture
def db(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'cli.db'}"


def ok(run: Run) -> Run:
    assert run.returncode == 0, run.stderr
    assert "Traceback" not in run.stderr
    return run


def one_error_line(run: Run) -> str:
    assert run.returncode == 2, (run.stdout, run.stderr)
    assert "Traceback" not in run.stderr
    lines = run.stderr.strip().splitlines()
    assert len(lines) == 1, run.stderr
    assert lines[0].startswith("error: ")
    return lines[0]


def count(url: str, model: type[Label] | type[Reviewer] | type[Assignment]) -> int:
    engine = create_database_engine(url)
    try:
        with Session(engine) as session:
            return int(session.execute(select(func.count()).select_from(model)).scalar_one())
    finally:
        engine.dispose()


@pytest.fixture
def demo_db(db: str) -> str:
    """Cases imported and the demo labels loaded (in this process: setup, not under test)."""
    engine = create_database_engine(db)
    upgrade_database(engine)
    import_paths(engine, operator_actor(), [DEMO_CASES])
    summary = import_labels(
        engine, Actor.operator(), DEMO_LABELS, catalog=sync_rubrics(engine, operator_actor())
    )
    assert summary.stored == N_DEMO_LABELS
    engine.dispose()
    return db


@pytest.fixture
def cases_db(db: str) -> str:
    """The demo cases and reviewers a, b and c; no labels, no assignments."""
    engine = create_database_engine(db)
    upgrade_database(engine)
    import_paths(engine, operator_actor(), [DEMO_CASES])
    for name in ("a", "b", "c"):
        add_person(engine, Actor.operator(), name=name)
    engine.dispose()
    return db


def reviewer_names(url: str) -> set[str]:
    engine = create_database_engine(url)
    try:
        with Session(engine) as session:
            return set(session.scalars(select(col(Reviewer.name))))
    finally:
        engine.dispose()


# --- labels import / export --------------------------------------------------------------


def test_labels_import_prints_a_summary_and_is_idempotent(database: Database, home: Path) -> None:
    import_paths(database.engine, operator_actor(), [DEMO_CASES])
    # The real entry point, in its own process (most commands here run in-process).
    first = ok(
        cli("labels", "import", str(DEMO_LABELS), db=database.url, home=home, subprocess=True)
    )
    assert first.stdout == (
        f"read {N_DEMO_LABELS} labels: stored {N_DEMO_LABELS}, unchanged 0, new reviewers 3\n"
    )
    again = ok(cli("labels", "import", str(DEMO_LABELS), db=database.url, home=home))
    assert again.stdout == (
        f"read {N_DEMO_LABELS} labels: stored 0, unchanged {N_DEMO_LABELS}, new reviewers 0\n"
    )
    assert count(database.url, Label) == N_DEMO_LABELS


@pytest.mark.parametrize(
    ("bad_line", "field"),
    [
        (f"no-such-case,2,ana,in_role,{RUBRIC},", "case_id"),
        (f"{CASE},3,ana,in_role,{RUBRIC},", "turn"),
        (f"{CASE},two,ana,in_role,{RUBRIC},", "turn"),
        (f"{CASE},2,ana,splendid,{RUBRIC},", "label"),
        (f"{CASE},2,ana,in_role,role-adherence@7,", "rubric"),
    ],
    ids=["unknown_case", "user_turn", "turn_not_integer", "unknown_code", "unknown_rubric"],
)
def test_a_bad_label_file_exits_2_naming_file_line_and_field(
    demo_db: str, home: Path, tmp_path: Path, bad_line: str, field: str
) -> None:
    path = tmp_path / "bad labels.csv"
    path.write_text(
        "case_id,turn,reviewer,label,rubric,rationale\n"
        f"{CASE},2,ana,tone_break,{RUBRIC},would be a change\n"
        f"{CASE},4,newbie,in_role,{RUBRIC},would be a new reviewer\n"
        f"{bad_line}\n",
        encoding="utf-8",
    )
    line = one_error_line(cli("labels", "import", str(path), db=demo_db, home=home))
    assert line.startswith(f"error: {path}, line 4, field {field}: ")
    assert count(demo_db, Label) == N_DEMO_LABELS
    assert count(demo_db, Reviewer) == 3
    assert "newbie" not in reviewer_names(demo_db)


def test_labels_import_of_a_missing_file_exits_2(demo_db: str, home: Path, tmp_path: Path) -> None:
    line = one_error_line(
        cli("labels", "import", str(tmp_path / "nope.csv"), db=demo_db, home=home)
    )
    assert "nope.csv" in line


def test_labels_export_to_stdout_and_to_a_file(demo_db: str, home: Path, tmp_path: Path) -> None:
    printed = ok(cli("labels", "export", "--rubric", RUBRIC, db=demo_db, home=home)).stdout
    rows = list(csv.DictReader(io.StringIO(printed)))
    assert len(rows) == N_DEMO_LABELS
    assert list(rows[0]) == ["case_id", "turn", "reviewer", "label", "rubric", "rationale"]
    with DEMO_LABELS.open(encoding="utf-8", newline="") as handle:
        demo_rows = list(csv.DictReader(handle))

    def key(row: dict[str, str]) -> tuple[str, int, str, str, str]:
        return row["case_id"], int(row["turn"]), row["reviewer"], row["label"], row["rationale"]

    assert sorted(map(key, rows)) == sorted(map(key, demo_rows))
    target = tmp_path / "out.csv"
    written = ok(
        cli("labels", "export", "--rubric", RUBRIC, "--out", str(target), db=demo_db, home=home)
    )
    assert written.stdout.strip() == f"wrote {N_DEMO_LABELS} labels to {target}"
    assert target.read_text(encoding="utf-8") == printed
    # What was exported imports back as unchanged.
    again = ok(cli("labels", "import", str(target), db=demo_db, home=home))
    assert f"stored 0, unchanged {N_DEMO_LABELS}" in again.stdout


# --- agreement ---------------------------------------------------------------------------


def test_agreement_json_has_the_spec_keys(demo_db: str, home: Path) -> None:
    run = ok(
        cli("agreement", "--rubric", RUBRIC, "--json", "--resamples", "200", db=demo_db, home=home)
    )
    report = json.loads(run.stdout)
    assert set(report) >= AGREEMENT_REPORT_KEYS
    assert report["rubric"] == RUBRIC and report["level"] == "turn"
    assert (report["units"], report["raters"], report["ratings"]) == (111, 3, N_DEMO_LABELS)
    assert sorted(report["cohen_kappa"]) == ["ana|ben", "ana|chloe", "ben|chloe"]
    for pair in report["cohen_kappa"].values():  # turns resampled by conversation
        assert pair["ci95"][0] <= pair["value"] <= pair["ci95"][1]
        assert pair["method"] == "percentile bootstrap over conversations (cluster bootstrap)"
    assert report["bootstrap"]["n_resamples"] == 200
    assert "NaN" not in run.stdout and "Infinity" not in run.stdout
    same_seed = ok(
        cli("agreement", "--rubric", RUBRIC, "--json", "--resamples", "200", db=demo_db, home=home)
    )
    assert json.loads(same_seed.stdout)["alpha_ci95"] == report["alpha_ci95"]


def test_agreement_prints_a_readable_table(demo_db: str, home: Path) -> None:
    run = ok(cli("agreement", "--rubric", RUBRIC, "--resamples", "100", db=demo_db, home=home))
    text = run.stdout
    assert text.startswith(f"agreement on {RUBRIC}: 111 units, 3 raters, {N_DEMO_LABELS} ratings")
    assert "Krippendorff" in text
    for pair in ("ana|ben", "ana|chloe", "ben|chloe"):
        interval = r"\[-?\d\.\d{3}, -?\d\.\d{3}\]"
        line = rf"^\s+{re.escape(pair)}\s+-?\d\.\d+\s+{interval}"
        assert re.search(line, text, re.MULTILINE), pair
    assert "kappa's intervals: percentile bootstrap over conversations (cluster bootstrap)" in text
    assert "Fleiss" in text and "Gwet" in text
    assert "gold labels: 84 units (0 adjudicated, 84 unanimous)" in text


def test_agreement_without_labels_prints_nulls_not_a_crash(cases_db: str, home: Path) -> None:
    db = cases_db
    report = json.loads(ok(cli("agreement", "--rubric", RUBRIC, "--json", db=db, home=home)).stdout)
    assert report["units"] == 0
    assert report["krippendorff_alpha"]["value"] is None
    assert report["krippendorff_alpha"]["reason"]
    ok(cli("agreement", "--rubric", RUBRIC, db=db, home=home))


@pytest.mark.parametrize("rubric", ["role-adherence@9", "no-such-rubric@1", "role-adherence"])
def test_agreement_on_an_unknown_rubric_exits_2(demo_db: str, home: Path, rubric: str) -> None:
    line = one_error_line(cli("agreement", "--rubric", rubric, db=demo_db, home=home))
    assert rubric.split("@")[0] in line


def test_agreement_refuses_negative_resamples(demo_db: str, home: Path) -> None:
    line = one_error_line(
        cli("agreement", "--rubric", RUBRIC, "--resamples", "-1", db=demo_db, home=home)
    )
    assert "--resamples" in line


# --- reviewers, assignments, rubrics ------------------------------------------------------


def test_reviewers_add_and_list(db: str, home: Path) -> None:
    assert ok(cli("reviewers", "add", "x", "--role", "policy_owner", db=db, home=home)).stdout == (
        "x: policy_owner\n"
    )
    ok(cli("reviewers", "add", "y@example.com", db=db, home=home))
    listed = ok(cli("reviewers", "list", db=db, home=home)).stdout.splitlines()
    assert [line.split() for line in listed] == [
        ["x", "policy_owner"],
        ["y@example.com", "reviewer"],
    ]
    as_json = json.loads(ok(cli("reviewers", "list", "--json", db=db, home=home)).stdout)
    assert as_json == [
        {"name": "x", "role": "policy_owner", "active": True},
        {"name": "y@example.com", "role": "reviewer", "active": True},
    ]
    # Changing a role; a made-up role is refused.
    ok(cli("reviewers", "add", "y@example.com", "--role", "admin", db=db, home=home))
    assert "admin" in ok(cli("reviewers", "list", db=db, home=home)).stdout
    line = one_error_line(cli("reviewers", "add", "z", "--role", "boss", db=db, home=home))
    assert "boss" in line and "role" in line


def assignment_counts(url: str) -> tuple[Counter[str], Counter[str]]:
    """Assignments per case and per reviewer name."""
    engine = create_database_engine(url)
    try:
        with Session(engine) as session:
            rows = session.execute(
                select(col(Assignment.case_id), col(Reviewer.name)).join(
                    Reviewer, col(Reviewer.id) == col(Assignment.reviewer_id)
                )
            ).all()
    finally:
        engine.dispose()
    return Counter(row[0] for row in rows), Counter(row[1] for row in rows)


def test_assign_gives_each_case_to_overlap_reviewers_evenly(cases_db: str, home: Path) -> None:
    db = cases_db
    first = ok(
        cli("assign", "--rubric", RUBRIC, "--reviewers", "a,b", "--fill", "2", db=db, home=home)
    )
    assert first.stdout.startswith(
        f"fill each of {N_CASES} cases up to 2 reviewers: assigned {2 * N_CASES} (case, "
        "reviewer) pairs"
    )
    per_case, per_reviewer = assignment_counts(db)
    assert len(per_case) == N_CASES and set(per_case.values()) == {2}
    assert per_reviewer == {"a": N_CASES, "b": N_CASES}
    again = ok(
        cli("assign", "--rubric", RUBRIC, "--reviewers", "a,b", "--overlap", "2", db=db, home=home)
    )
    assert ": assigned 0 " in again.stdout
    assert f"{N_CASES} cases already had 2 or more reviewers" in again.stdout
    assert assignment_counts(db) == (per_case, per_reviewer)


def test_add_puts_the_chosen_reviewers_on_every_case_and_dry_run_says_the_pairs(
    cases_db: str, home: Path
) -> None:
    """Cases with 2 reviewers each: --fill 2 for c assigns nothing, --add gives c every
    case; --dry-run prints exactly the pairs the same command then assigns."""
    db = cases_db
    ok(cli("assign", "--rubric", RUBRIC, "--reviewers", "a,b", "--fill", "2", db=db, home=home))
    filled = ok(
        cli("assign", "--rubric", RUBRIC, "--reviewers", "c", "--fill", "2", db=db, home=home)
    )
    assert ": assigned 0 " in filled.stdout
    preview = ok(
        cli(
            "assign",
            "--rubric",
            RUBRIC,
            "--reviewers",
            "a,c",
            "--add",
            "--dry-run",
            db=db,
            home=home,
        )
    )
    *pairs, line = preview.stdout.splitlines()
    assert line == (
        f"add the chosen reviewers to each of {N_CASES} cases: would assign {N_CASES} (case, "
        f"reviewer) pairs (c +{N_CASES}); {N_CASES} pairs were assigned already"
    )
    assert [p.split("\t")[1] for p in pairs] == ["c"] * N_CASES
    assert assignment_counts(db)[1] == {"a": N_CASES, "b": N_CASES}  # nothing written
    added = ok(cli("assign", "--rubric", RUBRIC, "--reviewers", "a,c", "--add", db=db, home=home))
    assert added.stdout.splitlines() == [line.replace("would assign", "assigned")]
    per_case, per_reviewer = assignment_counts(db)
    assert set(per_case.values()) == {3}
    assert per_reviewer == {"a": N_CASES, "b": N_CASES, "c": N_CASES}
    both = cli(
        "assign", "--rubric", RUBRIC, "--reviewers", "a", "--add", "--fill", "2", db=db, home=home
    )
    assert both.returncode == 2 and "--add" in both.stderr


def test_assign_balances_load_across_more_reviewers_than_the_overlap(
    cases_db: str, home: Path
) -> None:
    db = cases_db
    ok(
        cli(
            "assign", "--rubric", RUBRIC, "--reviewers", "a,b,c", "--overlap", "2", db=db, home=home
        )
    )
    per_case, per_reviewer = assignment_counts(db)
    assert len(per_case) == N_CASES and set(per_case.values()) == {2}
    assert sum(per_reviewer.values()) == 2 * N_CASES
    assert max(per_reviewer.values()) - min(per_reviewer.values()) <= 1
    again = ok(
        cli(
            "assign", "--rubric", RUBRIC, "--reviewers", "a,b,c", "--overlap", "2", db=db, home=home
        )
    )
    assert ": assigned 0 " in again.stdout
    assert assignment_counts(db) == (per_case, per_reviewer)


def test_assign_refuses_unknown_reviewers_and_rubrics(cases_db: str, home: Path) -> None:
    db = cases_db
    line = one_error_line(
        cli("assign", "--rubric", RUBRIC, "--reviewers", "a,ghost", db=db, home=home)
    )
    assert "ghost" in line
    one_error_line(
        cli("assign", "--rubric", "role-adherence@5", "--reviewers", "a", db=db, home=home)
    )
    line = one_error_line(
        cli("assign", "--rubric", RUBRIC, "--reviewers", "a", "--overlap", "0", db=db, home=home)
    )
    assert "overlap" in line
    assert count(db, Assignment) == 0


def test_rubrics_list_shows_status(home: Path, demo_db: str) -> None:
    run = ok(cli("rubrics", "list", db=demo_db, home=home))
    assert re.search(rf"^{re.escape(RUBRIC)}\s+labeled\s+Role adherence", run.stdout, re.MULTILINE)
    fresh = tmp_db(home)
    assert re.search(
        rf"^{re.escape(RUBRIC)}\s+offered\s",
        ok(cli("rubrics", "list", db=fresh, home=home)).stdout,
        re.MULTILINE,
    )
    rows = json.loads(ok(cli("rubrics", "list", "--json", db=demo_db, home=home)).stdout)
    assert [(r["rubric"], r["status"]) for r in rows] == [(RUBRIC, "labeled")]
    assert re.fullmatch(r"[0-9a-f]{64}", rows[0]["sha256"])
    diff = json.loads(ok(cli("rubrics", "diff", RUBRIC, RUBRIC, db=demo_db, home=home)).stdout)
    assert diff["is_empty"] is True


def tmp_db(home: Path) -> str:
    return f"sqlite:///{home / 'fresh.db'}"


# --- the help is the documentation ---------------------------------------------------------


def listed_commands(help_text: str) -> list[str]:
    """Command names under the ``Commands:`` heading of a help screen."""
    names: list[str] = []
    in_commands = False
    for line in help_text.splitlines():
        if line.strip() == "Commands:":
            in_commands = True
            continue
        if in_commands:
            if not line.strip():
                break
            match = re.match(r"^  (\S+)", line)
            if match:
                names.append(match.group(1))
    return names


def test_every_listed_command_has_working_help(home: Path) -> None:
    top = ok(cli("--help", db=None, home=home))
    commands = listed_commands(top.stdout)
    assert {"labels", "agreement", "reviewers", "assign", "rubrics"} <= set(commands)
    checked = []
    pending = [[name] for name in commands]
    while pending:
        path = pending.pop(0)
        run = ok(cli(*path, "--help", db=None, home=home))
        assert run.stdout.startswith("Usage: "), path
        assert " ".join(path) in run.stdout.splitlines()[0], path
        checked.append(" ".join(path))
        pending.extend([*path, name] for name in listed_commands(run.stdout))
    for expected in (
        "labels import",
        "labels export",
        "reviewers add",
        "reviewers list",
        "rubrics list",
        "rubrics diff",
    ):
        assert expected in checked
