"""The packages of ``review_app/services/`` are floors: each imports only from the floors
below it (and from the core, ``storage`` and the standard library), never from one
above, and never from inside a function to dodge a cycle.

An AST scan of every module of ``review_app/services/``. Bottom to top
(:data:`FLOORS`): who may act (``access``), running the house (``operations``), work
that runs later (``jobs``), then the features, each on the floor of what it reads,
and the reports pages show at the top (``reports``). A new package needs a floor; a
module that needs a higher floor's code belongs on that floor, or the higher floor
hands it what it needs (as ``judging`` and ``reports`` register their job kinds with
``jobs``).
"""

from __future__ import annotations

import ast
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SERVICES = REPO / "review_app" / "services"

FLOORS: tuple[str, ...] = (
    "access",
    "operations",
    "jobs",
    "rubrics",
    "cases",
    "team",
    "labels",
    "review",
    "judging",
    "exchange",
    "reports",
)
"""Service packages, bottom floor first."""

TOP_MODULES = {"job_kinds"}
"""Modules of ``services/`` itself, above every floor (they assemble the floors)."""


def _package_of(module: str) -> str | None:
    parts = module.split(".")
    if parts[:2] == ["review_app", "services"] and len(parts) >= 3:
        return parts[2]
    return None


def _imports(path: Path) -> list[tuple[str, int, bool]]:
    """(imported module or module.name, line, inside a function?) of one file."""
    found: list[tuple[str, int, bool]] = []

    def visit(node: ast.AST, in_function: bool) -> None:
        for child in ast.iter_child_nodes(node):
            inside = in_function or isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef)
            if isinstance(child, ast.Import):
                found.extend((alias.name, child.lineno, in_function) for alias in child.names)
            elif isinstance(child, ast.ImportFrom) and child.module and not child.level:
                found.append((child.module, child.lineno, in_function))
                found.extend(
                    (f"{child.module}.{alias.name}", child.lineno, in_function)
                    for alias in child.names
                )
            visit(child, inside)

    visit(ast.parse(path.read_text(encoding="utf-8")), False)
    return found


def _service_modules() -> list[tuple[Path, str]]:
    modules = []
    for path in sorted(SERVICES.rglob("*.py")):
        if path.parent == SERVICES and path.name == "__init__.py":
            continue  # the floors' catalogue, a docstring (tests/test_package_faces.py)
        relative = path.relative_to(SERVICES)
        package = relative.parts[0] if len(relative.parts) > 1 else relative.stem
        modules.append((path, package))
    return modules


def test_every_service_package_has_a_floor() -> None:
    packages = {p.name for p in SERVICES.iterdir() if p.is_dir() and p.name != "__pycache__"}
    top = {p.stem for p in SERVICES.glob("*.py")} - {"__init__"}
    assert packages == set(FLOORS), f"give these a floor (or remove them): {packages ^ set(FLOORS)}"
    assert top <= TOP_MODULES, f"modules of services/ itself: {top - TOP_MODULES}"


def test_no_service_imports_from_a_floor_above() -> None:
    upward = []
    for path, package in _service_modules():
        if package in TOP_MODULES:
            continue
        floor = FLOORS.index(package)
        for module, line, _ in _imports(path):
            target = _package_of(module)
            if target is None or target not in FLOORS:
                continue
            if FLOORS.index(target) > floor:
                upward.append(f"{path.relative_to(REPO)}:{line} imports {module} ({target})")
    assert upward == [], "\n".join(sorted(set(upward)))


def test_no_service_imports_project_code_inside_a_function() -> None:
    """An import of a service module inside a function hides a cycle from this scan.
    Modules below the services (the core, ``storage``) and third-party ones may be
    imported lazily, for start-up: they cannot close a cycle through the services."""
    inside = []
    for path, _ in _service_modules():
        for module, line, in_function in _imports(path):
            if in_function and _package_of(module) is not None:
                inside.append(f"{path.relative_to(REPO)}:{line} imports {module}")
    assert inside == [], "\n".join(sorted(set(inside)))


def test_the_floor_test_sees_an_upward_import(tmp_path: Path) -> None:
    """The scan itself: an upward import and a function-level one are found."""
    module = tmp_path / "probe.py"
    module.write_text(
        "from review_app.services.reports.report_store import x\n"
        "def f():\n    from review_app.services.access import actors\n",
        encoding="utf-8",
    )
    found = _imports(module)
    assert ("review_app.services.reports.report_store", 1, False) in found
    assert ("review_app.services.access", 3, True) in found
    assert _package_of("review_app.services.reports.report_store") == "reports"


def test_the_job_runner_knows_no_kind_by_name() -> None:
    """The runner runs what the floors above register; it names none of their kinds."""
    from review_app.services import job_kinds

    source = (SERVICES / "jobs" / "runner.py").read_text(encoding="utf-8")
    for kind in job_kinds.ALL_KINDS:
        assert f'"{kind}"' not in source


def test_job_kinds_gathers_every_registered_kind() -> None:
    from review_app.services import job_kinds
    from review_app.services.jobs.runner import registered_kinds

    assert sorted(job_kinds.ALL_KINDS) == list(registered_kinds())
    assert len(set(job_kinds.ALL_KINDS)) == len(job_kinds.ALL_KINDS) == 3
