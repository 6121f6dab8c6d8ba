"""Deeply nested or huge rubric and judge prompt files: one line naming file, line and
field, exit code 2 (issue 18: 1,500 levels gave a RecursionError and a 2,991-line
traceback, 100,000 levels hung for more than a minute)."""

from __future__ import annotations

from pathlib import Path

import pytest

from review_app.errors import InputError
from review_app.files import limits
from review_app.files.text import holds_text, read_whole
from review_app.judging import load_judge_prompt
from review_app.rubrics.parsing import load_rubric_file, parse_rubric_text

HEAD = "id: demo\nversion: 1\ntitle: Demo rubric\n"


def _nested(levels: int, *, mapping: bool = False) -> str:
    if mapping:
        return HEAD + "labels: " + "{a: " * levels + "x" + "}" * levels + "\n"
    return HEAD + "labels: " + "[" * levels + "]" * levels + "\n"


@pytest.mark.parametrize("levels", [1_500, 100_000])
def test_the_rubrics_command_refuses_a_deep_rubric_in_one_line(
    run_cli, tmp_path: Path, levels: int
) -> None:  # type: ignore[no-untyped-def]
    rubrics = tmp_path / "rubrics"
    (rubrics / "demo").mkdir(parents=True)
    path = rubrics / "demo" / "v1.yaml"
    path.write_text(_nested(levels), encoding="utf-8")
    where = {"REVIEW_APP_RUBRICS_DIR": str(rubrics)}
    db = f"sqlite:///{tmp_path / 'review.db'}"
    done = run_cli("rubrics", "diff", "demo@1", "demo@1", env=where, db=db, subprocess=True)
    assert done.returncode == 2, done.stderr[-2000:]
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, lines[:5]
    assert f"{path}, line 4, field labels: nested more than" in lines[0]
    # the listing names the refused version and why, in one line
    listed = run_cli("rubrics", "list", env=where, db=db, subprocess=True)
    assert listed.returncode == 0 and "Traceback" not in listed.stderr
    assert "nested more than" in listed.stdout


@pytest.mark.parametrize("mapping", [False, True])
def test_nesting_is_limited_in_rubric_text(mapping: bool) -> None:
    depth = limits.MAX_YAML_DEPTH
    with pytest.raises(InputError, match="nested more than") as raised:
        parse_rubric_text(_nested(depth + 1, mapping=mapping), source="r.yaml")
    assert (raised.value.line, raised.value.field) == (4, "labels")
    # just under the limit it is only the usual "labels must be a list" kind of error
    with pytest.raises(InputError) as shallow:
        parse_rubric_text(_nested(depth - 1, mapping=mapping), source="r.yaml")
    assert "nested more than" not in str(shallow.value)


def test_a_huge_rubric_or_prompt_file_is_refused(tmp_path: Path) -> None:
    folder = tmp_path / "demo"
    folder.mkdir()
    rubric = folder / "v1.yaml"
    rubric.write_text(HEAD + "# " + "x" * limits.MAX_RUBRIC_FILE_BYTES + "\n")
    with pytest.raises(InputError, match="larger than") as raised:
        load_rubric_file(rubric)
    assert raised.value.source == str(rubric)
    prompt = tmp_path / "judge" / "v1.txt"
    prompt.parent.mkdir()
    prompt.write_text("$codes $conversation " + "x" * limits.MAX_RUBRIC_FILE_BYTES)
    with pytest.raises(InputError, match="larger than"):
        load_judge_prompt(prompt)
    assert str(raised.value).endswith("the file is larger than 1024 KB; a rubric is a short text")


def test_rubric_and_prompt_files_are_read_as_every_file_is(tmp_path: Path) -> None:
    """Through review_app/files/: a bad byte is named by its line, a text typed in is
    bounded like a file, a file over the bound is not read past it."""
    folder = tmp_path / "demo"
    folder.mkdir()
    rubric = folder / "v1.yaml"
    rubric.write_bytes(HEAD.encode() + b"description: caf\xe9\n")
    with pytest.raises(InputError) as raised:
        load_rubric_file(rubric)
    assert (raised.value.source, raised.value.line, raised.value.message) == (
        str(rubric),
        4,
        "not valid UTF-8 text",
    )
    prompt = tmp_path / "judge" / "v1.txt"
    prompt.parent.mkdir()
    prompt.write_bytes(b"Codes: $codes\n$conversation\n\xff\n")
    with pytest.raises(InputError) as raised:
        load_judge_prompt(prompt)
    assert (raised.value.line, raised.value.message) == (3, "not valid UTF-8 text")
    typed = "x" * (limits.MAX_RUBRIC_FILE_BYTES // 2) + "\u00e9" * (
        limits.MAX_RUBRIC_FILE_BYTES // 3
    )
    with pytest.raises(InputError, match="the text is larger than 1024 KB; a rubric is a short"):
        parse_rubric_text(typed, source="draft")
    with pytest.raises(InputError, match="larger than 10 bytes"):
        read_whole(rubric, limit=10)
    assert holds_text(rubric, HEAD + "description: caf\ufffd\n") is False
    rubric.write_text(HEAD, encoding="utf-8")
    assert holds_text(rubric, HEAD) and not holds_text(rubric, HEAD + " ")
    assert not holds_text(tmp_path / "missing.yaml", HEAD)


def test_a_huge_prompt_file_given_to_the_command_exits_2_and_stores_nothing(
    run_cli, tmp_path: Path
) -> None:  # type: ignore[no-untyped-def]
    before = run_cli("judge", "prompts", "list", "--rubric", "role-adherence@1", "--json")
    assert before.returncode == 0, before.stderr
    huge = tmp_path / "draft.txt"
    huge.write_text("$codes $conversation " + "x" * limits.MAX_RUBRIC_FILE_BYTES)
    created = run_cli(
        "judge", "prompts", "create", "--rubric", "role-adherence@1", "--judge", "role-judge",
        "--file", str(huge),
    )  # fmt: skip
    assert created.returncode == 2
    assert created.stderr.strip().endswith(
        f"{huge}: the file is larger than 1024 KB; a judge prompt is a short text"
    ), created.stderr
    after = run_cli("judge", "prompts", "list", "--rubric", "role-adherence@1", "--json")
    assert after.stdout == before.stdout
