"""Each command imports only what it uses.

A command's start-up is Python's, plus what it imports: scipy costs 0.6-0.8 s, pandas
0.4 s, scikit-learn and statsmodels more. This test runs each command on the demo
database in a fresh process and lists the heavy modules loaded when it exits; a
command may load only those named for it below. A new import that slips a heavy
module into a command that does not need it fails here, naming the command.

Nor does a command build the rest of the command line: ``review-app reviewers list``
imports ``review_app.cli.reviewers`` (and the modules every command shares), not the
other commands' modules, their services or their options (review_app/cli/application.py).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from review_app.services.access.actors import operator_actor
from review_app.services.exchange.demo import load_demo
from storage.engine import create_database_engine
from storage.migrations.upgrade import upgrade_database
from tests.command_probe import HEAVY, LOADED_OUT_ENV, probe_command
from tests.conftest import DEMO_CASES, cli_test_environment

# What each command may load of the heavy modules (tests/command_probe.py), and why.
ALLOWED: dict[tuple[str, ...], frozenset[str]] = {
    ("--help",): frozenset(),
    ("inspect", "{case}"): frozenset(),
    ("cases", "list"): frozenset(),
    # numpy: the case view's labels (the listing commands load none: a command's start-up)
    ("cases", "show", "{case_id}"): frozenset({"numpy"}),
    ("reviewers", "list"): frozenset(),
    ("rubrics", "list"): frozenset(),
    ("rubrics", "diff", "role-adherence@1", "role-adherence@1"): frozenset(),
    ("judge", "runs"): frozenset(),
    ("judge", "runs", "--json"): frozenset(),
    ("cases", "list", "--json"): frozenset(),
    ("judge", "prompts", "list", "--rubric", "role-adherence@1"): frozenset(),
    ("judge", "prompts", "show", "role-judge@v1", "--rubric", "role-adherence@1"): frozenset(),
    ("audit",): frozenset(),
    ("labels", "export", "--rubric", "role-adherence@1"): frozenset({"numpy"}),
    # a rating table is built, its string codes numbered without pandas; no test statistic
    ("agreement", "--rubric", "role-adherence@1", "--json"): frozenset({"numpy"}),
    ("export", "--rubric", "role-adherence@1", "--out", "{out}"): frozenset({"pandas", "numpy"}),
    ("judge", "few-shot", "--rubric", "role-adherence@1"): frozenset({"pandas", "numpy"}),
    # the alternative annotator test's t-test and the PPI++ interval need scipy.stats
    ("judge", "report", "--rubric", "role-adherence@1", "--json"): frozenset(
        {"pandas", "scipy", "numpy"}
    ),
    ("judge", "estimate", "--rubric", "role-adherence@1", "--run", "1", "--json"): frozenset(
        {"pandas", "scipy", "numpy"}
    ),
}


# The modules of review_app.cli a command may load, where they are not named as the command.
OWN_MODULES: dict[str, tuple[str, ...]] = {
    "inspect": ("case_files",),
    "cases": ("cases", "render"),
    "labels": ("labels", "render"),
    "reviewers": ("reviewers", "render_reviewers"),
    "rubrics": ("rubrics", "render"),
    "judge": ("judge", "render_judging", "render_strata", "render"),
    "audit": ("admin",),
    "agreement": ("agreement", "render", "render_reviewers"),
    "export": ("export",),
}


@pytest.fixture(scope="module")
def demo_url(tmp_path_factory: pytest.TempPathFactory) -> str:
    url = f"sqlite:///{tmp_path_factory.mktemp('imports') / 'demo.db'}"
    engine = create_database_engine(url)
    upgrade_database(engine)
    load_demo(engine, operator_actor())
    engine.dispose()
    return url


def loaded(args: list[str], *, url: str, tmp_path: Path) -> tuple[list[str], str]:
    out = tmp_path / "loaded.json"
    out.unlink(missing_ok=True)
    env = cli_test_environment(tmp_path / "home", url)
    env[LOADED_OUT_ENV] = str(out)
    completed = subprocess.run(
        probe_command(args),
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
        timeout=120,
    )
    assert completed.returncode in (0, 1), completed.stderr  # 1: inspect found a violation
    return json.loads(out.read_text()), completed.stderr


@pytest.mark.slow
@pytest.mark.parametrize("command", list(ALLOWED), ids=lambda c: " ".join(c[:2]))
def test_a_command_loads_only_the_heavy_modules_it_uses(
    command: tuple[str, ...], demo_url: str, tmp_path: Path
) -> None:
    case = sorted(DEMO_CASES.glob("*.json"))[0]
    args = [a.format(case=case, case_id=case.stem, out=tmp_path / "export") for a in command]
    modules, stderr = loaded(args, url=demo_url, tmp_path=tmp_path)
    heavy = [m for m in modules if m in HEAVY]
    unexpected = sorted(set(heavy) - ALLOWED[command])
    assert not unexpected, f"review-app {' '.join(command)} loads {unexpected}: {stderr[-300:]}"
    if command[0] == "--help":  # the whole command line's help: every command's options
        return
    # its own command module (and what renders its output), none of the others'
    own = OWN_MODULES.get(command[0], (command[0],))
    others = [m for m in modules if m not in HEAVY and m.split(".")[2] not in own]
    assert not others, f"review-app {' '.join(command)} loads {others}"


def test_the_check_sees_a_heavy_import(demo_url: str, tmp_path: Path) -> None:
    """The probe is not blind: a command that needs scipy is seen loading it."""
    modules, _ = loaded(
        ["judge", "report", "--rubric", "role-adherence@1", "--json"],
        url=demo_url,
        tmp_path=tmp_path,
    )
    assert "scipy" in modules


# The table families (storage/tables/) a command reading the database defines: its own
# and what its services' storage modules name (issue 38: each table defined costs start-up).
TABLE_FAMILIES: dict[tuple[str, ...], frozenset[str]] = {
    # the rights preview (team/rights.py) and its assignments are the team page's
    ("reviewers", "list"): frozenset({"audit", "reviewers"}),
    ("cases", "list", "--json"): frozenset(
        {"assignments", "audit", "cases", "gold", "labels", "reviewers", "rubric_versions"}
    ),
    # the team's judge read from its table, not through the rubric catalog
    ("judge", "runs", "--json"): frozenset(
        {"audit", "cases", "judging", "reviewers", "team_judges"}
    ),
}

# Commands that list what is stored and read no rubric file (its YAML and its models are a
# tenth of a start-up): the rubric versions they name are the stored ones.
READS_NO_RUBRIC_FILES = {("reviewers", "list"), ("judge", "runs", "--json")}

_TABLES_PROBE = """
import atexit, sys
atexit.register(lambda: print(" ".join(sorted(
    m.rsplit(".", 1)[1] for m in sys.modules
    if m.startswith("storage.tables.") and m != "storage.tables.base")),
    "| yaml" if "yaml" in sys.modules else "|"))
sys.argv = ["review-app", *sys.argv[1:]]
from review_app.__main__ import main
main()
"""


@pytest.mark.slow
@pytest.mark.parametrize("command", list(TABLE_FAMILIES), ids=" ".join)
def test_a_command_defines_only_the_tables_it_reads(
    command: tuple[str, ...], demo_url: str, tmp_path: Path
) -> None:
    completed = subprocess.run(
        [sys.executable, "-c", _TABLES_PROBE, *command],
        capture_output=True,
        text=True,
        env=cli_test_environment(tmp_path / "home", demo_url),
        cwd=tmp_path,
        timeout=120,
    )
    assert completed.returncode == 0, completed.stderr
    families, _, read_yaml = completed.stdout.splitlines()[-1].partition("|")
    defined = set(families.split())
    assert defined <= TABLE_FAMILIES[command], sorted(defined - TABLE_FAMILIES[command])
    if command in READS_NO_RUBRIC_FILES:
        assert not read_yaml.strip(), f"review-app {' '.join(command)} read the rubric files"
