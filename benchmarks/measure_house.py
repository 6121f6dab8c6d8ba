"""Figures on the code's layout (issue 39): print them before and after a refactor.

- arrows between the packages of ``review_app/services/`` (package A imports from B),
  and how many pairs go both ways;
- imports inside functions in ``review_app/`` and ``storage/`` (each one a dodged cycle
  or a deliberate lazy import);
- string-key lookups on reports (``x["key"]`` and ``x.get("key")``) in
  ``review_app/ui/`` and the services that build the sentences pages show.

Run: ``python benchmarks/measure_house.py``. Prints one figure per line.
"""

from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SERVICES = REPO / "review_app" / "services"


def _module_name(path: Path) -> str:
    relative = path.relative_to(REPO).with_suffix("")
    parts = list(relative.parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _imported_modules(
    path: Path, tree: ast.AST, *, with_names: bool = False
) -> list[tuple[str, bool]]:
    """(module imported, inside a function?) for every import statement of the file (with
    ``with_names``, also ``module.name`` for every name a ``from`` import takes)."""
    found: list[tuple[str, bool]] = []
    names: list[tuple[str, bool]] = []
    package = _module_name(path).split(".")
    if path.name != "__init__.py":
        package = package[:-1]

    def visit(node: ast.AST, in_function: bool) -> None:
        for child in ast.iter_child_nodes(node):
            inside = in_function or isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef)
            if isinstance(child, ast.Import):
                found.extend((alias.name, in_function) for alias in child.names)
            elif isinstance(child, ast.ImportFrom):
                if child.level:
                    base = package[: len(package) - child.level + 1]
                    module = ".".join(base + ([child.module] if child.module else []))
                else:
                    module = child.module or ""
                found.append((module, in_function))
                names.extend((f"{module}.{alias.name}", in_function) for alias in child.names)
            visit(child, inside)

    visit(tree, False)
    return found + names if with_names else found


def _service_package(module: str) -> str | None:
    parts = module.split(".")
    if parts[:2] == ["review_app", "services"] and len(parts) >= 3:
        return parts[2]
    return None


def service_arrows() -> tuple[set[tuple[str, str]], int]:
    arrows: set[tuple[str, str]] = set()
    packages = {p.name for p in SERVICES.iterdir() if (p / "__init__.py").exists()}
    for path in SERVICES.rglob("*.py"):
        source = _service_package(_module_name(path))
        if source is None:
            continue
        for module, _ in _imported_modules(path, ast.parse(path.read_text()), with_names=True):
            target = _service_package(module)
            if target and target != source and target in packages:
                arrows.add((source, target))
    return arrows, len(packages)


def function_level_imports() -> dict[str, int]:
    counts: dict[str, int] = defaultdict(int)
    for root in (REPO / "review_app", REPO / "storage"):
        for path in root.rglob("*.py"):
            if "migrations" in path.parts:
                continue
            for module, inside in _imported_modules(path, ast.parse(path.read_text())):
                if inside and module.split(".")[0] in {"review_app", "storage"}:
                    counts[str(path.relative_to(REPO))] += 1
    return counts


def string_key_lookups(paths: list[Path]) -> int:
    count = 0
    for root in paths:
        files = [root] if root.is_file() else list(root.rglob("*.py"))
        for path in files:
            for node in ast.walk(ast.parse(path.read_text())):
                if (
                    isinstance(node, ast.Subscript)
                    and isinstance(node.slice, ast.Constant)
                    and isinstance(node.slice.value, str)
                    and not (
                        isinstance(node.value, ast.Attribute) and node.value.attr == "session_state"
                    )
                ) or (
                    isinstance(node, ast.Call)
                    and isinstance(node.func, ast.Attribute)
                    and node.func.attr == "get"
                    and node.args
                    and isinstance(node.args[0], ast.Constant)
                    and isinstance(node.args[0].value, str)
                ):
                    count += 1
    return count


def main() -> None:
    arrows, packages = service_arrows()
    both = {tuple(sorted(pair)) for pair in arrows if (pair[1], pair[0]) in arrows}
    print(f"service packages: {packages}")
    print(f"arrows between service packages: {len(arrows)} of {packages * (packages - 1)}")
    print(f"pairs both ways: {len(both)} {sorted(both)}")
    imports = function_level_imports()
    print(f"import statements of project modules inside functions: {sum(imports.values())}")
    in_services = sum(n for name, n in imports.items() if name.startswith("review_app/services/"))
    print(f"  of which inside review_app/services: {in_services}")
    for name, count in sorted(imports.items(), key=lambda item: -item[1])[:8]:
        print(f"  {count:3d} {name}")
    ui = REPO / "review_app" / "ui"
    readings = [p for p in REPO.glob("review_app/services/**/readings.py")]
    print(
        f"string-key lookups in review_app/ui and readings: {string_key_lookups([ui, *readings])}"
    )


if __name__ == "__main__":
    main()
