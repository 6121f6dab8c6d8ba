"""Each storage module queries its own table family: its name says which tables it reads.

An AST scan of every module of ``storage/``: per top-level function or class (and the
module's own statements), the tables it names, either as a model class of
``storage.models`` (``Label``) or as a table name in a string (``"labels"``, raw SQL
``FROM labels``; docstrings are not read). A module may name the tables of its family
(:data:`FAMILIES`); a function that joins or filters on another family's table is
listed in :data:`JOINS` with that table. Anything else fails: a query of the
``labels`` table has its home in ``storage/labels.py``, not in a module named after a
feature. A new module needs a family (or to be infrastructure, :data:`INFRASTRUCTURE`).
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import storage.models

REPO = Path(__file__).resolve().parents[1]
STORAGE = REPO / "storage"

INFRASTRUCTURE = {
    "__init__": "the package",
    "models": "the tables themselves (their names; storage/tables/ defines them)",
    "engine": "engines and sessions",
    "bulk": "bulk inserts, IN-list chunks and SQL text shared by the families",
    "backup": "copies of the whole database",
    "write_queue": "the SQLite writers' lock file",
}
"""Modules that hold no table family's queries."""

FAMILIES: dict[str, frozenset[str]] = {
    "cases": frozenset({"contracts", "cases", "events", "evaluations", "findings"}),
    "reviewers": frozenset({"reviewers"}),
    "rubric_versions": frozenset({"rubric_versions"}),
    "assignments": frozenset({"assignments"}),
    "labels": frozenset({"labels", "label_events"}),
    "gold": frozenset({"gold_labels"}),
    # what the two unit tables share (the current row of a unit, carrying, staleness)
    "units": frozenset({"labels", "gold_labels"}),
    "judging": frozenset({"judge_runs", "judge_verdicts"}),
    "judge_prompts": frozenset({"judge_prompts"}),
    "certified_verdicts": frozenset({"certified_verdicts"}),
    "audit": frozenset({"audit_log"}),
    "audit_samples": frozenset({"audit_samples", "audit_units"}),
    "carry": frozenset({"rubric_carries", "re_reviews"}),
    "jobs": frozenset({"background_jobs"}),
    "team_judges": frozenset({"team_judges"}),
    "reports": frozenset({"computed_reports"}),
    "prompt_align": frozenset(
        {"confirmation_sets", "confirmation_tests", "align_candidates", "align_proposals"}
    ),
    # runs the tables' modules in order for ``import --replace``; no query of its own
    "replacing": frozenset(),
}
"""Module -> the tables it owns. Every table has one owner (``units`` shares the two
unit tables with ``labels`` and ``gold``)."""

SHARED = {"units": ("labels", "gold")}

JOINS: dict[tuple[str, str], frozenset[str]] = {
    # the queue: assignments with their cases' sizes and their evaluation's lane
    ("assignments", "_evaluation_of_assignment"): frozenset({"evaluations"}),
    ("assignments", "_selected"): frozenset({"evaluations"}),
    ("assignments", "queue_cases"): frozenset({"evaluations"}),
    ("assignments", "queue_page"): frozenset({"cases", "evaluations"}),
    ("assignments", "queue_count"): frozenset({"evaluations"}),
    ("assignments", "cases_without_reviewer"): frozenset({"cases"}),
    # a reviewer's cases: in their queue, or carrying their labels
    ("assignments", "reviewer_has_case"): frozenset({"labels"}),
    ("assignments", "case_hash_and_access"): frozenset({"cases", "labels"}),
    ("assignments", "_reviewer_rows_on_case"): frozenset({"labels", "rubric_versions"}),
    ("assignments", "reviewer_case_ids"): frozenset({"labels"}),
    # progress of carried queue entries, counted from the labels now there
    ("assignments", "carry_assignments"): frozenset({"cases", "labels"}),
    # the queue's progress token: the newest label id and audit entry beside its own
    ("assignments", "progress_token"): frozenset({"labels", "audit_log"}),
    # label rows carry their reviewer's name
    ("labels", "<module>"): frozenset({"reviewers"}),
    ("labels", "_label_select"): frozenset({"reviewers"}),
    ("labels", "export_rows"): frozenset({"reviewers"}),
    ("labels", "pass_labels_on_violations"): frozenset({"reviewers", "findings", "evaluations"}),
    ("labels", "turns_with_labels"): frozenset({"events", "reviewers"}),
    ("gold", "gold_history"): frozenset({"reviewers"}),
    # a publication: its lock, and the labels it queues for re-review
    ("carry", "lock_for_carry"): frozenset(
        {"labels", "gold_labels", "judge_runs", "judge_verdicts", "assignments"}
    ),
    ("carry", "queue_re_reviews"): frozenset({"labels", "reviewers"}),
    ("carry", "re_reviews_of"): frozenset({"labels"}),
    # an audit draw with a seed used before: the earlier draws and who drew them
    ("audit_samples", "draws_with_seed"): frozenset({"reviewers"}),
    # a reviewer's default rubric version: the published versions their queue names
    ("rubric_versions", "newest_assigned_versions"): frozenset({"assignments"}),
}
"""``(module, function)`` -> the other families' tables it joins or filters on."""

_WORD = re.compile(r"[a-z_]+")


def model_tables() -> dict[str, str]:
    """Model class name -> its table, for the table classes of ``storage.models``."""
    tables = set(storage.models.define_all().tables.values())
    found: dict[str, str] = {}
    for name in storage.models.HOMES:
        table = getattr(getattr(storage.models, name), "__table__", None)
        if table is not None and table in tables:
            found[name] = table.name
    return found


def _docstrings(tree: ast.Module) -> set[int]:
    """``id()`` of every docstring constant (first statement of a body, or the string
    right after an assignment)."""
    found: set[int] = set()
    for node in ast.walk(tree):
        if not isinstance(node, ast.Module | ast.FunctionDef | ast.ClassDef):
            continue
        for index, statement in enumerate(node.body):
            if (
                isinstance(statement, ast.Expr)
                and isinstance(statement.value, ast.Constant)
                and isinstance(statement.value.value, str)
                and (index == 0 or isinstance(node.body[index - 1], ast.Assign | ast.AnnAssign))
            ):
                found.add(id(statement.value))
    return found


def tables_named(source: str, models: dict[str, str]) -> dict[str, set[str]]:
    """Per top-level definition of ``source`` (``"<module>"`` for the other statements):
    the tables it names, by model class or in a string. Imports are not uses."""
    tree = ast.parse(source)
    docstrings = _docstrings(tree)
    tables = set(models.values())
    named: dict[str, set[str]] = {}
    for node in tree.body:
        if isinstance(node, ast.Import | ast.ImportFrom):
            continue
        scope = node.name if isinstance(node, ast.FunctionDef | ast.ClassDef) else "<module>"
        found = named.setdefault(scope, set())
        for inner in ast.walk(node):
            if isinstance(inner, ast.Name) and inner.id in models:
                found.add(models[inner.id])
            elif (
                isinstance(inner, ast.Constant)
                and isinstance(inner.value, str)
                and id(inner) not in docstrings
            ):
                found.update(set(_WORD.findall(inner.value)) & tables)
    return {scope: found for scope, found in named.items() if found}


def outside_family(module: str, source: str, models: dict[str, str]) -> list[str]:
    """``"module.function: table"`` for each table ``source`` names outside its family
    and not listed in :data:`JOINS`."""
    family = FAMILIES[module]
    return [
        f"{module}.{scope}: {table}"
        for scope, found in sorted(tables_named(source, models).items())
        for table in sorted(found - family - JOINS.get((module, scope), frozenset()))
    ]


def _modules() -> dict[str, str]:
    return {path.stem: path.read_text(encoding="utf-8") for path in sorted(STORAGE.glob("*.py"))}


def test_every_storage_module_is_a_family_or_infrastructure() -> None:
    modules = set(_modules())
    assert modules - set(FAMILIES) - set(INFRASTRUCTURE) == set()
    assert set(FAMILIES) - modules == set()
    assert set(INFRASTRUCTURE) - modules == set()


def test_every_table_has_one_home() -> None:
    owners: dict[str, list[str]] = {}
    for module, tables in FAMILIES.items():
        if module in SHARED:
            shared = set().union(*(FAMILIES[owner] for owner in SHARED[module]))
            assert tables <= shared, module
            continue
        for table in tables:
            owners.setdefault(table, []).append(module)
    assert {table: found for table, found in owners.items() if len(found) > 1} == {}
    assert set(owners) == set(storage.models.define_all().tables)


def test_each_module_queries_its_own_family() -> None:
    models = model_tables()
    found = [
        problem
        for module, source in _modules().items()
        if module in FAMILIES
        for problem in outside_family(module, source, models)
    ]
    assert found == []


def test_every_listed_join_is_still_there() -> None:
    """A :data:`JOINS` entry no function needs any more is taken out, so the list stays
    the true list of cross-family queries."""
    models = model_tables()
    named = {module: tables_named(source, models) for module, source in _modules().items()}
    stale = {
        (module, scope): sorted(tables - named.get(module, {}).get(scope, set()))
        for (module, scope), tables in JOINS.items()
        if tables - named.get(module, {}).get(scope, set())
    }
    assert stale == {}


def test_the_scan_sees_models_sql_and_table_arguments() -> None:
    models = model_tables()
    source = '''
"""A module docstring naming labels and reviewers is not a use."""
from storage.models import Label, Reviewer
ROW = (col(Reviewer.name),)
def by_model(session):
    """Docstrings name judge_runs freely."""
    return select(col(Label.id))
def by_sql(session):
    return text("SELECT count(*) FROM judge_verdicts v JOIN judge_runs r ON r.id = v.run_id")
def by_argument(connection):
    insert_rows(connection, table="events", columns=(), rows=[])
def neither(session):
    return "case_id, turn"
'''
    assert tables_named(source, models) == {
        "<module>": {"reviewers"},
        "by_model": {"labels"},
        "by_sql": {"judge_runs", "judge_verdicts"},
        "by_argument": {"events"},
    }
    assert outside_family("judging", source, models) == [
        "judging.<module>: reviewers",
        "judging.by_argument: events",
        "judging.by_model: labels",
    ]
    assert outside_family("cases", source, models)[-1] == "cases.by_sql: judge_verdicts"
