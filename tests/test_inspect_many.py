"""``review-app inspect`` over many paths: order, exit codes, error lines, start-up imports."""

from __future__ import annotations

import copy
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

from review_app.evaluator import diagnostic, evaluate_case
from tests.conftest import DEMO_CASES, REPO, cli_environment

PASSING = DEMO_CASES / "support-clean-late-parcel.json"
FAILING = DEMO_CASES / "support-delayed-refund-violation.json"
HEAVY = ("typer", "click", "rich", "sqlalchemy", "sqlmodel", "pydantic", "scipy", "streamlit")


def load(path: Path) -> dict[str, Any]:
    value: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    return value


def case_named(path: Path, case_id: str) -> dict[str, Any]:
    case = copy.deepcopy(load(path))
    case["case_id"] = case_id
    return case


def write_jsonl(path: Path, cases: list[Any]) -> Path:
    path.write_text("".join(json.dumps(c) + "\n" for c in cases), encoding="utf-8")
    return path


def test_mixed_inputs_one_line_each_in_order_and_the_worst_exit_code(
    run_cli: Any, tmp_path: Path
) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text('{"case_id": "x", "transcript": [}', encoding="utf-8")
    malformed = case_named(PASSING, "malformed")
    malformed["transcript"][3]["set_role"] = 4
    many = write_jsonl(
        tmp_path / "many.jsonl",
        [case_named(PASSING, "p1"), malformed, case_named(FAILING, "f1")],
    )

    result = run_cli("inspect", str(PASSING), str(bad), str(many), str(FAILING))

    assert result.returncode == 2
    lines = result.stdout.splitlines()
    assert len(lines) == 6, result.stdout
    assert lines[0] == f"{diagnostic(evaluate_case(load(PASSING)))} file={PASSING}"
    assert lines[1].startswith(f"error: {bad}, line 1: not valid JSON")
    assert lines[2].startswith("role-eval pass case=p1 ") and lines[2].endswith(
        f"file={many} line=1"
    )
    assert lines[3].startswith("role-eval invalid case=malformed ")
    assert lines[3].endswith(f"file={many} line=2 field=transcript[3].set_role")
    assert lines[4].startswith("role-eval fail case=f1 ") and lines[4].endswith("line=3")
    assert lines[5].startswith("role-eval fail case=support-delayed-refund-violation ")
    assert result.stderr == ""


def test_exit_code_is_the_worst_case(run_cli: Any, tmp_path: Path) -> None:
    assert run_cli("inspect", str(PASSING), str(PASSING)).returncode == 0
    assert run_cli("inspect", str(PASSING), str(FAILING)).returncode == 1
    no_contract = case_named(PASSING, "nc")
    del no_contract["contract"]
    path = tmp_path / "nc.json"
    path.write_text(json.dumps(no_contract), encoding="utf-8")
    assert run_cli("inspect", str(FAILING), str(path), str(PASSING)).returncode == 2
    assert run_cli("inspect", str(PASSING), str(tmp_path / "missing.json")).returncode == 2


def test_a_bad_line_in_jsonl_is_reported_and_other_files_still_inspected(
    run_cli: Any, tmp_path: Path
) -> None:
    broken = tmp_path / "broken.jsonl"
    broken.write_text(
        json.dumps(case_named(PASSING, "a"))
        + "\n"
        + "[1, 2\n"
        + json.dumps(case_named(PASSING, "c")),
        encoding="utf-8",
    )
    result = run_cli("inspect", "--summary", str(broken), str(FAILING))
    lines = result.stdout.splitlines()
    assert lines[0].startswith("role-eval pass case=a ")
    assert lines[1].startswith(f"error: {broken}, line 2: not valid JSON")
    assert lines[2].startswith("role-eval fail case=support-delayed-refund-violation ")
    assert lines[3] == (
        "role-eval summary files=2 cases=2 pass=1 fail=1 invalid=0 no-contract=0 "
        "unreadable=1 exit=2"
    )
    assert result.returncode == 2


def test_directories_are_walked_in_sorted_order(run_cli: Any, tmp_path: Path) -> None:
    root = tmp_path / "fixtures"
    (root / "b").mkdir(parents=True)
    (root / "a").mkdir()
    order = ["b/2.json", "a/z.jsonl", "c.json", "a/b.json", "b/10.json"]
    for name in order:  # created out of order on purpose
        path = root / name
        case = case_named(PASSING, name.replace("/", "-"))
        if path.suffix == ".jsonl":
            write_jsonl(path, [case])
        else:
            path.write_text(json.dumps(case), encoding="utf-8")
    (root / "notes.txt").write_text("not a case", encoding="utf-8")

    first = run_cli("inspect", str(root))
    second = run_cli("inspect", str(root))

    assert first.returncode == 0, first.stdout
    assert first.stdout == second.stdout
    ids = [line.split()[2].removeprefix("case=") for line in first.stdout.splitlines()]
    assert ids == ["a-b.json", "a-z.jsonl", "b-10.json", "b-2.json", "c.json"]


def test_jsonl_with_many_cases_json_output_and_summary(run_cli: Any, tmp_path: Path) -> None:
    cases = [case_named(FAILING if i % 7 == 0 else PASSING, f"case-{i:03d}") for i in range(60)]
    path = write_jsonl(tmp_path / "many.jsonl", cases)

    result = run_cli("inspect", "--json", "--summary", str(path))

    assert result.returncode == 1
    lines = [json.loads(line) for line in result.stdout.splitlines()]
    assert len(lines) == 61
    for number, (case, printed) in enumerate(zip(cases, lines, strict=False), start=1):
        expected = json.loads(json.dumps(evaluate_case(case)))
        assert printed == {**expected, "file": str(path), "line": number, "record": None}
    assert lines[-1] == {
        "summary": {
            "files": 1,
            "cases": 60,
            "pass": 51,
            "fail": 9,
            "invalid": 0,
            "no_contract": 0,
            "unreadable": 0,
            "exit_code": 1,
        }
    }


def test_a_json_list_reports_each_record(run_cli: Any, tmp_path: Path) -> None:
    path = tmp_path / "list.json"
    path.write_text(json.dumps([case_named(PASSING, "one"), 42]), encoding="utf-8")
    result = run_cli("inspect", "--json", str(path))
    first, second = (json.loads(line) for line in result.stdout.splitlines())
    assert (first["case_id"], first["record"], first["status"]) == ("one", 0, "pass")
    assert (second["record"], second["status"]) == (1, "invalid")
    assert result.returncode == 2


def test_an_empty_directory_is_an_error(run_cli: Any, tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()
    result = run_cli("inspect", str(tmp_path / "empty"), str(PASSING))
    assert result.returncode == 2
    assert (
        result.stdout.splitlines()[0] == f"error: {tmp_path / 'empty'}: no case files "
        "(.json, .jsonl, .ndjson) in this directory"
    )


def test_the_typer_command_prints_the_same(tmp_path: Path) -> None:
    """``review_app.cli`` (the Typer application) and the light entry point agree."""
    args = ["inspect", "--summary", str(PASSING), str(FAILING), str(tmp_path / "nope.json")]
    light, typer_path = (
        subprocess.run(
            [sys.executable, "-m", module, *args],
            capture_output=True,
            text=True,
            env=cli_environment(),
            cwd=tmp_path,
        )
        for module in ("review_app", "review_app.cli")
    )
    assert light.returncode == typer_path.returncode == 2
    assert light.stdout == typer_path.stdout
    assert light.stdout.count("\n") == 4


def test_usage_errors_exit_2(run_cli: Any) -> None:
    result = run_cli("inspect")
    assert result.returncode == 2
    assert "Usage: review-app inspect" in result.stderr and "Missing argument" in result.stderr
    result = run_cli("inspect", "--bogus", str(PASSING))
    assert result.returncode == 2 and "No such option: --bogus" in result.stderr


_WHAT_WAS_LOADED = """
import atexit, sys
heavy = {heavy!r}
atexit.register(lambda: sys.stderr.write(
    "LOADED " + ",".join(m for m in heavy if m in sys.modules) + "\\n"))
sys.argv = ["review-app", *sys.argv[1:]]
from review_app.__main__ import main
main()
"""


def loaded_modules(*args: str, cwd: Path) -> list[str]:
    completed = subprocess.run(
        [sys.executable, "-c", _WHAT_WAS_LOADED.format(heavy=HEAVY), *args],
        capture_output=True,
        text=True,
        env=cli_environment(),
        cwd=cwd,
    )
    line = [x for x in completed.stderr.splitlines() if x.startswith("LOADED")][-1]
    return [name for name in line.removeprefix("LOADED").strip().split(",") if name]


def test_inspect_loads_no_heavy_module(tmp_path: Path) -> None:
    assert loaded_modules("inspect", str(FAILING), cwd=tmp_path) == []
    assert loaded_modules("inspect", "--json", str(DEMO_CASES), cwd=tmp_path) == []
    # the check can see them: any other command loads Typer
    assert "typer" in loaded_modules("--version", cwd=tmp_path)
    assert REPO.exists()
