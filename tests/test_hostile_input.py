"""Hostile input through the real command line, on SQLite and on PostgreSQL alike.

Each row is an input a careless tool or a hostile user could hand to ``review-app``:
a NUL in a rationale or a judge reason, a judge name too long for its column, JSON
nested 100,000 deep, duplicate keys, bidi and zero-width characters in names and ids,
a truncated CSV, a rubric version of 5,000 digits. Each must be refused the same way
on both databases: exit code 2, exactly one line on stderr naming the file, the line
and the field, no traceback, and nothing stored (every table's row count unchanged).
Services the pages call directly (a typed rationale, a gold note, a sign-in) are
checked in-process on both databases too.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import Engine, text

from review_app.errors import InputError
from review_app.rubrics.parsing import load_rubric_file
from review_app.services.access.actors import Actor, sign_in
from review_app.services.cases.importing import import_paths
from review_app.services.exchange.labels_io import import_labels
from review_app.services.judging.judge_import import import_verdicts
from review_app.services.labels.adjudication import record_gold
from review_app.services.labels.labeling import record_label
from review_app.services.rubrics.rubric_catalog import sync_rubrics
from review_app.services.team.people import add_person
from storage.models import define_all
from tests.actors import assign
from tests.conftest import DEMO_CASES, REPO, CliResult, Database

RUBRIC = "role-adherence@1"
RUBRICS_DIR = REPO / "rubrics"
CASE_ID = "support-delayed-refund-violation"
LABEL_HEADER = "case_id,turn,reviewer,label,rubric,rationale\n"
LABEL_ROW = f"{CASE_ID},2,ana,in_role,{RUBRIC},fine\n"
VERDICT = {
    "case_id": CASE_ID,
    "turn": 2,
    "judge": "j",
    "prompt_version": "v1",
    "model": "m",
    "label": "in_role",
    "score": 0.1,
    "reason": "ok",
}


def verdict(**changes: Any) -> str:
    return json.dumps({**VERDICT, **changes})


def good_case(case_id: str = "hostile-case", text_value: str = "Hello") -> dict[str, Any]:
    return {
        "case_id": case_id,
        "transcript": [
            {"turn": 1, "actor": "user", "text": text_value},
            {"turn": 2, "actor": "assistant", "text": "Hi"},
        ],
    }


@dataclass(frozen=True)
class Hostile:
    """One hostile input: the file to write, the command, and where the error points."""

    name: str
    file: str | None
    content: bytes
    command: Callable[[str], list[str]]
    line: int | None
    field: str | None
    says: str

    def write(self, directory: Path) -> str:
        if self.file is None:
            return ""
        path = directory / self.file
        path.write_bytes(self.content)
        return str(path)


def judge_import(path: str) -> list[str]:
    return ["judge", "import", path, "--rubric", RUBRIC]


def labels_import(path: str) -> list[str]:
    return ["labels", "import", path]


def cases_import(path: str) -> list[str]:
    return ["import", path]


def small_records(path: str) -> list[str]:
    return ["import", path, "--max-record-bytes", "400"]


def lines(*rows: str) -> bytes:
    return "".join(row + "\n" for row in rows).encode()


HOSTILE: list[Hostile] = [
    Hostile(
        "judge-deep-brackets",
        "deep.jsonl",
        b"[" * 100_000 + b"\n",
        judge_import,
        line=1,
        field=None,
        says="nested too deeply",
    ),
    Hostile(
        "judge-nul-in-reason",
        "nul-reason.jsonl",
        lines(verdict(), verdict(turn=4, reason="a\u0000b")),
        judge_import,
        line=2,
        field="reason",
        says="U+0000",
    ),
    Hostile(
        "judge-name-too-long",
        "long-judge.csv",
        (
            f"case_id,turn,judge,prompt_version,model,label\n{CASE_ID},2,{'j' * 201},v1,m,in_role\n"
        ).encode(),
        judge_import,
        line=2,
        field="judge",
        says="at most 200 characters",
    ),
    Hostile(
        "judge-duplicate-key",
        "duplicate.jsonl",
        lines(verdict(), verdict(turn=4)[:-1] + ', "label": "persona_break"}'),
        judge_import,
        line=2,
        field="label",
        says="appears twice",
    ),
    Hostile(
        "judge-bidi-in-judge-name",
        "bidi-judge.jsonl",
        lines(verdict(judge="gpt\u202ej")),
        judge_import,
        line=1,
        field="judge",
        says="U+202E",
    ),
    Hostile(
        "judge-truncated-csv",
        "truncated-verdicts.csv",
        (
            "case_id,turn,judge,prompt_version,model,label,reason\n"
            f"{CASE_ID},2,j,v1,m,in_role,ok\n"
            f'{CASE_ID},4,j,v1,m,in_role,"never closed\n'
            f"{CASE_ID},6,j,v1,m,in_role,ok\n"
        ).encode(),
        judge_import,
        line=3,
        field=None,
        says="never closed",
    ),
    Hostile(
        "labels-nul-in-rationale",
        "nul-rationale.csv",
        (LABEL_HEADER + LABEL_ROW + f"{CASE_ID},4,ben,in_role,{RUBRIC},a\u0000b\n").encode(),
        labels_import,
        line=3,
        field="rationale",
        says="U+0000",
    ),
    Hostile(
        "labels-bell-in-rationale",
        "bell-rationale.csv",
        (LABEL_HEADER + f"{CASE_ID},4,ben,in_role,{RUBRIC},ring\u0007\n").encode(),
        labels_import,
        line=2,
        field="rationale",
        says="U+0007",
    ),
    Hostile(
        "labels-bidi-reviewer",
        "bidi-reviewer.csv",
        (LABEL_HEADER + f"{CASE_ID},2,ana\u202e,in_role,{RUBRIC},\n").encode(),
        labels_import,
        line=2,
        field="reviewer",
        says="bidirectional control U+202E",
    ),
    Hostile(
        "labels-zero-width-reviewer",
        "zero-width-reviewer.csv",
        (LABEL_HEADER + f"{CASE_ID},2,a\u200bna,in_role,{RUBRIC},\n").encode(),
        labels_import,
        line=2,
        field="reviewer",
        says="zero-width character U+200B",
    ),
    Hostile(
        "labels-huge-rubric-version",
        "huge-version.csv",
        (LABEL_HEADER + f"{CASE_ID},2,ana,in_role,role-adherence@{'9' * 5000},\n").encode(),
        labels_import,
        line=2,
        field="rubric",
        says="positive whole number",
    ),
    Hostile(
        "labels-truncated-csv",
        "truncated-labels.csv",
        (LABEL_HEADER + f'{CASE_ID},2,ana,in_role,{RUBRIC},"never closed\n').encode(),
        labels_import,
        line=2,
        field=None,
        says="never closed",
    ),
    Hostile(
        "labels-huge-turn",
        "huge-turn.csv",
        (LABEL_HEADER + f"{CASE_ID},{'7' * 5000},ana,in_role,{RUBRIC},\n").encode(),
        labels_import,
        line=2,
        field="turn",
        says="expected an integer turn",
    ),
    Hostile(
        "case-bidi-id",
        "bidi-id.jsonl",
        lines(json.dumps(good_case("ok-case")), json.dumps(good_case("case\u202egnp.exe"))),
        cases_import,
        line=2,
        field="case_id",
        says="U+202E",
    ),
    Hostile(
        "case-duplicate-key",
        "duplicate-key.jsonl",
        lines(
            json.dumps(good_case("ok-case")),
            '{"case_id": "dup", "transcript": [{"turn": 1, "actor": "user", "actor": "system",'
            ' "text": "x"}]}',
        ),
        cases_import,
        line=2,
        field="transcript[0].actor",
        says="the key 'actor' appears twice",
    ),
    Hostile(
        "case-too-big-as-jsonl",
        "big.jsonl",
        lines(json.dumps(good_case("big", "x" * 600))),
        small_records,
        line=1,
        field=None,
        says="longer than 400 bytes",
    ),
    Hostile(
        "case-too-big-as-json",
        "big.json",
        json.dumps(good_case("big", "x" * 600)).encode(),
        small_records,
        line=1,
        field=None,
        says="longer than 400 bytes",
    ),
    Hostile(
        "reviewer-zero-width",
        None,
        b"",
        lambda _: ["reviewers", "add", "ana\u200d"],
        line=None,
        field="reviewer",
        says="zero-width character U+200D",
    ),
    Hostile(
        "agreement-huge-rubric-version",
        None,
        b"",
        lambda _: ["agreement", "--rubric", f"role-adherence@{'9' * 5000}"],
        line=None,
        field=None,
        says="positive whole number",
    ),
]


def test_the_table_is_large_and_names_are_unique() -> None:
    assert len(HOSTILE) >= 18
    assert len({h.name for h in HOSTILE}) == len(HOSTILE)


def all_row_counts(engine: Engine) -> dict[str, int]:
    """Rows in every table of the schema."""
    with engine.connect() as connection:
        return {
            table: int(connection.execute(text(f"SELECT count(*) FROM {table}")).scalar_one())
            for table in sorted(define_all().tables)
        }


def seed(database: Database) -> dict[str, int]:
    """Demo cases, one reviewer and the rubric catalog (which every command registers
    on start, before it reads any file)."""
    import_paths(database.engine, Actor.operator(), [DEMO_CASES])
    add_person(database.engine, Actor.operator(), name="ana")
    sync_rubrics(database.engine, Actor.operator(), directory=RUBRICS_DIR)
    return all_row_counts(database.engine)


def assert_refused(result: CliResult, hostile: Hostile, path: str) -> str:
    assert result.returncode == 2, (result.stdout, result.stderr)
    assert "Traceback" not in result.stderr and "RecursionError" not in result.stderr
    stderr_lines = result.stderr.strip().splitlines()
    assert len(stderr_lines) == 1, result.stderr
    message = stderr_lines[0]
    assert message.startswith("error: "), message
    if hostile.file is not None:
        assert path in message, message
    if hostile.line is not None:
        assert f", line {hostile.line}" in message, message
    else:
        assert ", line " not in message, message
    if hostile.field is not None:
        assert f"field {hostile.field}:" in message, message
    assert hostile.says in message, message
    assert "4300 digits" not in message and "int_max_str_digits" not in message
    return message


@pytest.mark.parametrize("hostile", HOSTILE, ids=lambda h: h.name)
def test_hostile_input_is_refused_alike_on_both_databases(
    hostile: Hostile, database: Database, run_cli: Any, tmp_path: Path
) -> None:
    before = seed(database)
    path = hostile.write(tmp_path)

    result = run_cli(*hostile.command(path), db=database.url)

    assert_refused(result, hostile, path)
    assert all_row_counts(database.engine) == before


# --- legal input that looked hostile ------------------------------------------------------


def test_a_raw_line_separator_inside_a_verdict_string_is_text(
    database: Database, run_cli: Any, tmp_path: Path
) -> None:
    seed(database)
    path = tmp_path / "u2028.jsonl"
    reason = "first\u2028second\u2029third\x85fourth"
    # ensure_ascii=False writes U+2028 raw, as JSON allows inside a string.
    path.write_text(json.dumps({**VERDICT, "reason": reason}, ensure_ascii=False) + "\n")
    assert "\u2028" in path.read_text()

    result = run_cli(*judge_import(str(path)), db=database.url)

    assert result.returncode == 0, result.stderr
    with database.engine.connect() as connection:
        stored = connection.execute(text("SELECT reason FROM judge_verdicts")).scalar_one()
    assert stored == reason


# --- services the pages call, in-process, on both databases --------------------------------


@pytest.fixture
def rubric() -> Any:
    return load_rubric_file(RUBRICS_DIR / "role-adherence" / "v1.yaml")


@pytest.mark.parametrize(
    "rationale", ["a\u0000b", "bell\u0007", "escape\u001b[31m", "lone \ud800 surrogate"]
)
def test_a_typed_rationale_with_control_characters_is_refused(
    database: Database, rubric: Any, rationale: str
) -> None:
    before = seed(database)
    ana = sign_in(database.engine, name="ana", auth_mode="local")
    with pytest.raises(InputError) as raised:
        record_label(
            database.engine,
            ana,
            case_id=CASE_ID,
            turn=2,
            rubric=rubric,
            code="in_role",
            rationale=rationale,
        )
    assert raised.value.field == "rationale"
    assert all_row_counts(database.engine) == before


def test_tab_and_newlines_are_fine_in_a_rationale(database: Database, rubric: Any) -> None:
    seed(database)
    ana = sign_in(database.engine, name="ana", auth_mode="local")
    assign(database.engine, rubric, "ana", CASE_ID)
    saved = record_label(
        database.engine,
        ana,
        case_id=CASE_ID,
        turn=2,
        rubric=rubric,
        code="in_role",
        rationale="line one\r\n\tline two",
    )
    assert saved.code == "in_role"


@pytest.mark.parametrize("field", ["note", "rubric_ambiguity"])
def test_a_gold_note_with_a_nul_is_refused(database: Database, rubric: Any, field: str) -> None:
    before = seed(database)
    with pytest.raises(InputError) as raised:
        record_gold(
            database.engine,
            Actor.operator(),
            rubric=rubric,
            case_id=CASE_ID,
            turn=2,
            code="in_role",
            **{field: "a\u0000b"},
        )
    assert raised.value.field == field
    assert all_row_counts(database.engine) == before


def test_names_differing_in_case_are_one_reviewer(database: Database, tmp_path: Path) -> None:
    seed(database)
    first = sign_in(database.engine, name="Ana", auth_mode="oidc")
    second = sign_in(database.engine, name="ANA", auth_mode="oidc")
    third = sign_in(database.engine, name="ana", auth_mode="oidc")
    assert first.reviewer_id == second.reviewer_id == third.reviewer_id
    assert first.name == "ana"
    # A label CSV naming "Ana" labels as the same reviewer; nobody new is created.
    path = tmp_path / "labels.csv"
    path.write_text(
        LABEL_HEADER
        + f"{CASE_ID},2,Ana,in_role,{RUBRIC},\n"
        + f"{CASE_ID},2,Cleo,in_role,{RUBRIC},\n"
        + f"{CASE_ID},4,CLEO,in_role,{RUBRIC},\n"
    )
    summary = import_labels(
        database.engine,
        Actor.operator(),
        path,
        catalog=sync_rubrics(database.engine, Actor.operator(), directory=RUBRICS_DIR),
    )
    # Ana is known; Cleo and CLEO are one new reviewer, shown as first spelled.
    assert (summary.stored, summary.reviewers_created) == (3, 1)
    cleo = sign_in(database.engine, name="cleo", auth_mode="oidc")
    assert (cleo.name, cleo.label) == ("cleo", "Cleo")


def test_a_composed_and_a_decomposed_name_are_one_reviewer(database: Database) -> None:
    composed = sign_in(database.engine, name="Zo\u00eb", auth_mode="oidc")
    decomposed = sign_in(database.engine, name="zoe\u0308", auth_mode="oidc")
    assert composed.reviewer_id == decomposed.reviewer_id
    assert composed.label == "Zo\u00eb"


@pytest.mark.parametrize("name", ["ana\u202e", "\u2066ana", "an\u200ba", "\ufeffana", "a" * 201])
def test_a_sign_in_with_a_spoofing_name_is_refused(database: Database, name: str) -> None:
    before = all_row_counts(database.engine)
    with pytest.raises(InputError):
        sign_in(database.engine, name=name, auth_mode="proxy")
    assert all_row_counts(database.engine) == before


def test_a_judge_reason_over_the_limit_is_refused_on_import(
    database: Database, rubric: Any, tmp_path: Path
) -> None:
    before = seed(database)
    path = tmp_path / "long.jsonl"
    path.write_text(verdict(reason="x" * 4001) + "\n")
    with pytest.raises(InputError) as raised:
        import_verdicts(database.engine, Actor.operator(), path, rubric=rubric)
    assert (raised.value.line, raised.value.field) == (1, "reason")
    assert all_row_counts(database.engine) == before


# --- stored names before case-folded identity (migration 0007) -----------------------------


def test_the_migration_folds_stored_names_and_keeps_the_typed_form_for_display(
    database: Database,
) -> None:
    from alembic import command

    from storage.migrations.upgrade import alembic_config, upgrade_database

    config = alembic_config()
    with database.engine.begin() as connection:
        config.attributes["connection"] = connection
        command.downgrade(config, "0004")
    with database.engine.begin() as connection:
        for name in ("Ana", "ana", "BEN", "Zo\u00eb", "ANA"):
            connection.execute(
                text(
                    "INSERT INTO reviewers (name, role, active, created_at) "
                    "VALUES (:name, 'reviewer', :active, CURRENT_TIMESTAMP)"
                ),
                {"name": name, "active": True},
            )

    upgrade_database(database.engine)

    with database.engine.connect() as connection:
        rows = connection.execute(
            text("SELECT name, display_name FROM reviewers ORDER BY id")
        ).all()
    # "ana" already held the identity: "Ana" and "ANA" stay as they were (nothing merged,
    # no label moves); the others fold and keep their typed form as the display name.
    assert [tuple(row) for row in rows] == [
        ("Ana", None),
        ("ana", None),
        ("ben", "BEN"),
        ("zo\u00eb", "Zo\u00eb"),
        ("ANA", None),
    ]
    assert sign_in(database.engine, name="Ben", auth_mode="oidc").label == "BEN"
