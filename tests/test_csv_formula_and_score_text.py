"""Smaller holes of issue 18: CSV cells that start a formula after blanks or with a
full-width sign, and a judge verdict file's score written as a text."""

from __future__ import annotations

import csv
import io
from pathlib import Path

import pytest

from review_app.errors import InputError
from review_app.files.csv_safety import neutralise_cell, restore_cell
from review_app.judging import read_verdict_file
from review_app.rubrics.parsing import load_rubric_file
from review_app.services.exchange.demo import load_demo
from review_app.services.exchange.labels_io import export_labels_csv
from review_app.services.labels.labeling import record_label
from review_app.services.rubrics.rubric_catalog import sync_rubrics
from tests.actors import assign, operator, signed_in
from tests.conftest import REPO, Database

SNEAKY = [
    ' =HYPERLINK("http://evil")',
    '\u00a0=HYPERLINK("http://evil")',
    '\n=HYPERLINK("http://evil")',
    "\r\n\n+1+1",
    "  @SUM(A1)",
    '\uff1dHYPERLINK("http://evil")',  # ＝
    "\uff0b1",  # ＋
    "\uff0d1",  # －
    "\uff20SUM(A1)",  # ＠
    '\u3000=HYPERLINK("http://evil")',  # ideographic space
]


@pytest.mark.parametrize("cell", SNEAKY)
def test_cells_starting_a_formula_after_blanks_or_full_width_are_neutralised(cell: str) -> None:
    assert neutralise_cell(cell) == "'" + cell
    assert restore_cell(neutralise_cell(cell)) == cell
    assert restore_cell(neutralise_cell("'" + cell)) == "'" + cell


@pytest.mark.parametrize("cell", ["plain", " plain", "a = b", "\u00a0x", "1-2", "  "])
def test_other_cells_are_left_as_they_are(cell: str) -> None:
    assert neutralise_cell(cell) == cell
    assert restore_cell(cell) == cell


def test_an_exported_label_csv_neutralises_them(database: Database) -> None:
    load_demo(database.engine, operator())
    rubric = sync_rubrics(database.engine, operator()).get("role-adherence@1")
    case = "support-clean-late-parcel"
    rita = signed_in(database.engine, "rita", role="reviewer")
    assign(database.engine, rubric, "rita", case)
    for turn, rationale in ((2, SNEAKY[5]), (4, SNEAKY[6])):  # (rationales are stripped)
        record_label(
            database.engine,
            rita,
            case_id=case,
            turn=turn,
            rubric=rubric,
            code="in_role",
            rationale=rationale,
        )
    text = export_labels_csv(database.engine, operator(), rubric=rubric)
    rows = list(csv.DictReader(io.StringIO(text, newline="")))
    mine = sorted(r["rationale"] for r in rows if r["reviewer"] == "rita")
    assert mine == sorted("'" + r for r in (SNEAKY[5], SNEAKY[6]))


def test_a_score_written_as_text_in_a_json_verdict_file_is_refused(tmp_path: Path) -> None:
    rubric = load_rubric_file(REPO / "rubrics" / "role-adherence" / "v1.yaml")
    path = tmp_path / "verdicts.jsonl"
    good = (
        '{"case_id": "c1", "turn": 2, "judge": "j", "prompt_version": "v1", "model": "m", '
        '"label": "in_role", "score": 0.5}\n'
    )
    path.write_text(good + good.replace('"score": 0.5', '"score": "0.5"').replace("2", "4"))
    with pytest.raises(InputError) as raised:
        read_verdict_file(path, rubric=rubric)
    assert (raised.value.source, raised.value.line, raised.value.field) == (str(path), 2, "score")
    assert "is a text" in str(raised.value)
    # a CSV cell is text by nature: "0.5" there is a number
    table = tmp_path / "verdicts.csv"
    table.write_text(
        "case_id,turn,judge,prompt_version,model,label,score\nc1,2,j,v1,m,in_role,0.5\n"
    )
    assert [v.score for v in read_verdict_file(table, rubric=rubric)] == [0.5]
