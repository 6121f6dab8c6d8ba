"""What services return is typed: no table row and no dictionary of ``Any`` leaves them.

An AST scan of ``review_app/services/``: the return annotation of each public function
may not name a ``table=True`` class of ``storage/models.py`` (services return its
``Public`` shapes, or frozen values of their own) nor a ``dict`` whose values are
``Any`` (a frozen dataclass for a small result; for a JSON document that is printed by
``--json`` and stored as a report payload, a ``TypedDict`` naming its keys). The few
exceptions are listed below with the reason (issue 24).
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SERVICES = REPO / "review_app" / "services"

ALLOWED = {
    "judging.runs.find_or_create_run": "takes its caller's Session: returns the row the "
    "caller goes on to update in the same transaction",
    "judging.judge_prompts.store_for_run": "takes its caller's Session: a building block of "
    "run_judge inside its transaction",
    "judging.transport.verdict_schema": "a JSON Schema, sent to the endpoint as a document",
    "rubrics.rubric_keys.rubric_with_keys": "the rubrics show --json document",
    "judging.align.align_json": "the --json document, its keys fixed by align.JSON_KEYS",
    "judging.align.run_align_job": "a job's result: stored as JSON with the job and read "
    "back by the workbench and the command (typing job results is issue 39's)",
    "judging.align.confirm_by_hand": "printed by judge compare --confirmation-set --json "
    "as it is (typing it is issue 39's typed reports)",
}


def table_classes() -> set[str]:
    """The ``table=True`` classes of the table families (storage/tables/, which
    storage/models.py names)."""
    return {
        node.name
        for path in sorted((REPO / "storage" / "tables").glob("*.py"))
        for node in ast.parse(path.read_text(encoding="utf-8")).body
        if isinstance(node, ast.ClassDef) and any(k.arg == "table" for k in node.keywords)
    }


def untyped_results(source: str, tables: set[str]) -> list[tuple[str, str]]:
    """``(function, annotation)`` for each public top-level function of ``source`` that
    returns a table row or a dictionary of ``Any``."""
    found = []
    for node in ast.parse(source).body:
        if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            continue
        if node.name.startswith("_") or node.returns is None:
            continue
        annotation = ast.unparse(node.returns)
        names = set(re.findall(r"[A-Za-z_][A-Za-z0-9_]*", annotation))
        any_values = any(
            isinstance(sub, ast.Subscript)
            and ast.unparse(sub.value) in ("dict", "Mapping", "Dict")
            and "Any" in ast.unparse(sub.slice)
            for sub in ast.walk(node.returns)
        )
        if names & tables or any_values:
            found.append((node.name, annotation))
    return found


def service_results() -> dict[str, str]:
    tables = table_classes()
    found = {}
    for path in sorted(SERVICES.rglob("*.py")):
        module = ".".join(path.relative_to(SERVICES).with_suffix("").parts)
        for name, annotation in untyped_results(path.read_text(encoding="utf-8"), tables):
            found[f"{module}.{name}"] = annotation
    return found


def test_the_scan_finds_rows_and_dictionaries_of_any() -> None:
    source = (
        "def a() -> dict[str, Any]: ...\n"
        "def b() -> list[dict[str, Any]] | None: ...\n"
        "def c() -> Reviewer: ...\n"
        "def d() -> Shown[dict[str, Any]]: ...\n"
        "def e() -> dict[str, int]: ...\n"
        "def f() -> ReviewerPublic: ...\n"
        "def _g() -> dict[str, Any]: ...\n"
    )
    assert [name for name, _ in untyped_results(source, {"Reviewer"})] == ["a", "b", "c", "d"]


def test_services_return_typed_results() -> None:
    found = service_results()
    unexplained = {name: annotation for name, annotation in found.items() if name not in ALLOWED}
    assert unexplained == {}, "return a Public shape, a frozen dataclass or a TypedDict"
    stale = sorted(set(ALLOWED) - set(found))
    assert stale == [], "no longer needed: remove from ALLOWED"


DOCUMENTS = [
    REPO / "review_app" / "services",
    REPO / "review_app" / "stats",
    REPO / "review_app" / "calibration",
    REPO / "review_app" / "agreement",
]
"""Where the report documents and the JSON forms of the figures they carry are declared."""


def any_fields(source: str) -> list[str]:
    """``Class.field`` for each field of a ``TypedDict`` of ``source`` whose type names
    ``Any`` (a key whose contents mypy cannot check where a page or a renderer reads it)."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.ClassDef):
            continue
        if not any(ast.unparse(base) == "TypedDict" for base in node.bases):
            continue
        for item in node.body:
            if isinstance(item, ast.AnnAssign) and "Any" in re.findall(
                r"[A-Za-z_][A-Za-z0-9_]*", ast.unparse(item.annotation)
            ):
                found.append(f"{node.name}.{ast.unparse(item.target)}")
    return found


def test_the_field_scan_finds_any() -> None:
    source = (
        "class A(TypedDict):\n"
        "    a: dict[str, Any]\n"
        "    b: list[Figure] | None\n"
        "    c: NotRequired[dict[str, dict[str, Any]]]\n"
        "class B:\n"
        "    d: Any\n"
    )
    assert any_fields(source) == ["A.a", "A.c"]


def test_report_documents_name_every_key() -> None:
    """Report documents are typed down to the figures that pages read (issue 39): no
    ``TypedDict`` field of ``Any``."""
    found = {
        str(path.relative_to(REPO)): fields
        for root in DOCUMENTS
        for path in sorted(root.rglob("*.py"))
        if (fields := any_fields(path.read_text(encoding="utf-8")))
    }
    assert found == {}, "name the keys with a TypedDict of their own"
