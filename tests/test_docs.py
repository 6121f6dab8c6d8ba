"""The docs stay honest: every command in the README and, with every option, in the
format reference's command reference; every option with help text; a section for every
foreign format naming its options; the format reference's sections exist and every
citation of them names one, and nothing cites a document the repository does not
contain."""

from __future__ import annotations

import re
from dataclasses import fields
from pathlib import Path
from typing import Any

from typer.main import get_command

from review_app.agreement.summary import agreement_summary
from review_app.cli.application import app
from review_app.formats.detect import FORMATS, NATIVE
from review_app.formats.options import ImportOptions
from review_app.stats.table import RatingTable

REPO = Path(__file__).resolve().parents[1]
README = (REPO / "README.md").read_text(encoding="utf-8")
REFERENCE = REPO / "docs" / "reference.md"
REFERENCE_SECTIONS = (
    "Cases",
    "Foreign formats",
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
    "Commands",
)


def _commands(group: object, prefix: tuple[str, ...] = ()) -> dict[tuple[str, ...], Any]:
    """Every command (not group) by its path, ``("judge", "prompts", "list")``."""
    found: dict[tuple[str, ...], Any] = {}
    for name, command in sorted(getattr(group, "commands", {}).items()):
        path = (*prefix, name)
        if getattr(command, "commands", None):
            found.update(_commands(command, path))
        else:
            found[path] = command
    return found


COMMAND_OBJECTS = _commands(get_command(app))
COMMANDS = list(COMMAND_OBJECTS)


def _options(command: Any) -> list[str]:
    """A command's options, by their first flag (``--db`` included)."""
    return [p.opts[0] for p in command.params if p.param_type_name == "option"]


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


TEST_COMMAND = "python -m pytest -n 3 --dist worksteal"


def test_readme_shows_install_and_run_and_install_and_test() -> None:
    assert "pip install . && review-app demo" in README
    assert f'pip install -e ".[test]" && {TEST_COMMAND}' in README


def test_ci_runs_the_readme_test_command() -> None:
    ci = (Path(__file__).resolve().parents[1] / ".ci" / "run").read_text(encoding="utf-8")
    assert f"\n{TEST_COMMAND}\n" in ci
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


def _citations_of_missing_headings(cited: re.Pattern[str], headings: set[str]) -> list[str]:
    """``file: heading`` for each citation ``cited`` finds whose heading is not in
    ``headings`` (a citation's line breaks read as spaces)."""
    return [
        f"{path.relative_to(REPO)}: {name}"
        for path, text in _text_files()
        for name in (" ".join(found.split()) for found in cited.findall(text))
        if name not in headings
    ]


def test_every_reference_citation_names_a_section() -> None:
    cited = re.compile(r'docs/reference\.md`?, "([^"]+)"')
    headings = set(re.findall(r"^## (.+)$", REFERENCE.read_text(encoding="utf-8"), re.MULTILINE))
    wrong = _citations_of_missing_headings(cited, headings)
    assert not wrong, f"citations of sections docs/reference.md does not have: {wrong}"


def test_every_readme_citation_names_a_heading() -> None:
    cited = re.compile(r'README(?:\.md)?`?, "([^"]+)"')
    wrong = _citations_of_missing_headings(cited, set(re.findall(r"^#+ (.+)$", README, re.M)))
    assert not wrong, f"citations of headings the README does not have: {wrong}"


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


def test_every_argument_and_option_has_help_text() -> None:
    missing = [
        f"{' '.join(path)} {param.name}"
        for path, command in COMMAND_OBJECTS.items()
        for param in command.params
        if not getattr(param, "help", None)
    ]
    assert not missing, f"arguments and options without help text: {missing}"


def test_the_command_reference_names_every_command_with_its_options() -> None:
    rows = [line for line in _section("Commands").splitlines() if line.startswith("| `")]
    problems = []
    for path, command in COMMAND_OBJECTS.items():
        name = " ".join(path)
        found = [row for row in rows if re.match(rf"\| `{re.escape(name)}( [^`]*)?` \|", row)]
        if len(found) != 1:
            problems.append(f"{name}: {len(found)} rows")
            continue
        problems.extend(
            f"{name} {option}"
            for option in _options(command)
            if option != "--db" and f"`{option}`" not in found[0]
        )
    assert not problems, f"missing from docs/reference.md, Commands: {problems}"
    # The section says which commands take no --db; so it stays true.
    without_db = {" ".join(p) for p, c in COMMAND_OBJECTS.items() if "--db" not in _options(c)}
    assert without_db == {"inspect", "judge local-server"}
    assert "but `inspect` and `judge local-server`" in " ".join(_section("Commands").split())


def _import_flag(option: str) -> str:
    """The ``review-app import`` flag of an ImportOptions field."""
    [param] = [p for p in COMMAND_OBJECTS[("import",)].params if p.name == option]
    return str(param.opts[0])


def test_import_has_a_flag_for_every_import_option() -> None:
    names = {p.name for p in COMMAND_OBJECTS[("import",)].params}
    assert {field.name for field in fields(ImportOptions)} <= names


def test_every_foreign_format_has_a_section_naming_its_options() -> None:
    section = _section("Foreign formats")
    intro = section.split("\n### ", 1)[0]
    shared = {"contract", "case_id_prefix", "max_record_bytes"}
    assert all(f"`{_import_flag(option)}`" in intro for option in shared)
    missing = []
    for name, spec in FORMATS.items():
        if name == NATIVE:
            continue
        start = section.find(f"\n### {name}\n")
        if start < 0:
            missing.append(f"### {name}")
            continue
        end = section.find("\n### ", start + 1)
        text = section[start : end if end >= 0 else len(section)]
        assert shared <= set(spec.options), name
        missing.extend(
            f"{name} {_import_flag(option)}"
            for option in spec.options
            if option not in shared and f"`{_import_flag(option)}`" not in text
        )
    assert not missing, f"missing from docs/reference.md, Foreign formats: {missing}"
