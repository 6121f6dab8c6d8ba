"""The docs stay honest: every command in the README, the format reference's sections
exist and every citation of them names one, and nothing cites a document the
repository does not contain."""

from __future__ import annotations

import re
from pathlib import Path

from typer.main import get_command

from review_app.agreement import RatingTable, agreement_summary
from review_app.cli import app

REPO = Path(__file__).resolve().parents[1]
README = (REPO / "README.md").read_text(encoding="utf-8")
REFERENCE = REPO / "docs" / "reference.md"
REFERENCE_SECTIONS = (
    "Cases",
    "Findings",
    "Rubric files",
    "Rubric versions: mapping and carry-over",
    "Label CSV",
    "Judge verdicts",
    "Exit codes",
    "Agreement JSON",
    "Judge report JSON",
    "Judge estimate JSON",
    "Audit log",
    "Input limits",
)


def _command_paths(group: object, prefix: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
    paths = []
    for name, command in sorted(getattr(group, "commands", {}).items()):
        path = (*prefix, name)
        if getattr(command, "commands", None):
            paths.extend(_command_paths(command, path))
        else:
            paths.append(path)
    return paths


COMMANDS = _command_paths(get_command(app))


def test_there_are_commands_to_document() -> None:
    assert ("inspect",) in COMMANDS and ("judge", "report") in COMMANDS


def test_every_command_appears_in_the_readme() -> None:
    missing = []
    for path in COMMANDS:
        if len(path) == 1:
            pattern = rf"review-app {re.escape(path[0])}\b"
        else:  # "review-app judge import" or, in a table row, "judge runs" after a slash
            pattern = (
                rf"(review-app {re.escape(path[0])} |`{re.escape(path[0])} ){re.escape(path[1])}\b"
            )
        if not re.search(pattern, README):
            missing.append(" ".join(path))
    assert not missing, f"commands missing from README.md: {missing}"


def test_readme_shows_install_and_run_and_install_and_test() -> None:
    assert "pip install . && review-app demo" in README
    assert 'pip install -e ".[test]" && python -m pytest' in README


def test_ci_runs_the_readme_test_command() -> None:
    ci = (Path(__file__).resolve().parents[1] / ".ci" / "run").read_text(encoding="utf-8")
    assert "python -m pytest" in ci
    assert "REVIEW_APP_REQUIRE_POSTGRES=1" in ci and "REVIEW_APP_REQUIRE_BROWSER=1" in ci
    assert 'pip install -q -e ".[test,local-judge,interop]"' in ci
    assert "REVIEW_APP_REQUIRE_INTEROP=1" in ci


def _text_files() -> list[tuple[Path, str]]:
    """The repository's text files (not .git, virtual environments or caches)."""
    skipped = {".git", "__pycache__", ".venv", ".venv-ci", ".mypy_cache", ".ruff_cache"}
    found = []
    for path in REPO.rglob("*"):
        if not path.is_file() or skipped & set(path.relative_to(REPO).parts):
            continue
        if path.suffix in {".png", ".db", ".gguf", ".pyc"}:
            continue
        try:
            found.append((path, path.read_text(encoding="utf-8")))
        except UnicodeDecodeError:
            continue
    return found


def test_the_format_reference_has_the_sections_others_cite() -> None:
    headings = re.findall(r"^## (.+)$", REFERENCE.read_text(encoding="utf-8"), re.MULTILINE)
    assert [h for h in headings if h in REFERENCE_SECTIONS] == list(REFERENCE_SECTIONS)
    assert "](docs/reference.md)" in README


def test_every_reference_citation_names_a_section() -> None:
    cited = re.compile(r'docs/reference\.md`?, "([^"]+)"')
    headings = set(re.findall(r"^## (.+)$", REFERENCE.read_text(encoding="utf-8"), re.MULTILINE))
    wrong = [
        f"{path.relative_to(REPO)}: {name}"
        for path, text in _text_files()
        for name in (" ".join(found.split()) for found in cited.findall(text))
        if name not in headings
    ]
    assert not wrong, f"citations of sections docs/reference.md does not have: {wrong}"


def test_nothing_cites_the_old_specification() -> None:
    """Code, help texts, errors, tests and docs cite docs/reference.md, not the old spec."""
    word = re.compile(r"\b" + "SP" + "EC")  # spelled apart so this file does not match itself
    migrations = REPO / "storage" / "migrations" / "versions"
    found = [
        f"{path.relative_to(REPO)}:{number}"
        for path, text in _text_files()
        if migrations not in path.parents
        for number, line in enumerate(text.splitlines(), start=1)
        if word.search(line)
    ]
    assert not found, f"cite docs/reference.md by section instead: {found}"


def _section(name: str) -> str:
    text = REFERENCE.read_text(encoding="utf-8")
    start = text.index(f"\n## {name}\n")
    end = text.find("\n## ", start + 1)
    return text[start : end if end >= 0 else len(text)]


def test_the_agreement_json_section_names_every_key() -> None:
    records = [
        ((f"case-{c}", turn), rater, "break" if (c + turn + (rater == "ben")) % 3 == 0 else "ok")
        for c in range(12)
        for turn in (1, 2)
        for rater in ("ana", "ben")
    ]
    summary = agreement_summary(
        RatingTable.from_records(records),
        break_mapping={"break": "break", "ok": "no_break"},
        verdict_mapping={"break": "fail", "ok": "pass"},
        conversation_of=lambda unit: unit[0],
        turn_of=lambda unit: unit[1],
        n_resamples=50,
    )
    documented = {
        name
        for span in re.findall(r"`([^`]+)`", _section("Agreement JSON"))
        for name in re.findall(r"[a-z_0-9]+", span)
    }
    (pair,) = summary["cohen_kappa"].values()
    assert pair["ci95"] is not None and pair["method"]
    keys = {*summary, "rubric", "gold", *summary["bootstrap"], *pair}
    assert keys - documented == set(), "keys missing from docs/reference.md, Agreement JSON"
