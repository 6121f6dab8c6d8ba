"""No private name crosses a module: a name starting with one underscore stays in its module.

An AST scan of ``review_app/`` and ``storage/`` fails on ``from m import _x`` of a project
module (absolute or relative) and on ``m._x`` where ``m`` is a name bound by importing from
the project (a module, or anything imported from one; dotted chains such as
``storage.models._x`` included). Dunder names are not private. What a module needs from
another is public there, with a docstring.

There is no allowlist: the last uses (the judge-run registry's verdict reader) became
public in the services reorganisation (issue 24).
"""

from __future__ import annotations

import ast
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PROJECT_PACKAGES = ("review_app", "storage")


def _is_private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")


def _is_project(module: str) -> bool:
    return module.split(".")[0] in PROJECT_PACKAGES


def _absolute(node: ast.ImportFrom, module: str, is_package: bool) -> str:
    """The absolute module an ``import from`` names, relative imports resolved."""
    if node.level == 0:
        return node.module or ""
    package = module.split(".") if is_package else module.split(".")[:-1]
    base = package[: len(package) - (node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


def _chain(node: ast.expr) -> list[str] | None:
    """``a.b.c`` as ``["a", "b", "c"]``; None for anything but names and attributes."""
    parts: list[str] = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if not isinstance(node, ast.Name):
        return None
    return [node.id, *reversed(parts)]


def private_uses(source: str, module: str, *, is_package: bool = False) -> list[tuple[int, str]]:
    """``(line, "<module>.<_name>")`` for each private name of another project module that
    ``source`` (the text of ``module``) imports or reads."""
    tree = ast.parse(source)
    bound: dict[str, str] = {}  # local name -> the project object it stands for
    uses: list[tuple[int, str]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            origin = _absolute(node, module, is_package)
            if not _is_project(origin):
                continue
            for alias in node.names:
                if _is_private(alias.name):
                    uses.append((node.lineno, f"{origin}.{alias.name}"))
                elif alias.name != "*":
                    bound[alias.asname or alias.name] = f"{origin}.{alias.name}"
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if _is_project(alias.name):
                    if alias.asname:
                        bound[alias.asname] = alias.name
                    else:
                        root = alias.name.split(".")[0]
                        bound[root] = root
    for node in ast.walk(tree):
        if not isinstance(node, ast.Attribute) or not _is_private(node.attr):
            continue
        parts = _chain(node)
        if parts is None or parts[0] not in bound:
            continue
        uses.append((node.lineno, ".".join([bound[parts[0]], *parts[1:]])))
    return sorted(set(uses))


def project_private_uses() -> list[tuple[str, int, str]]:
    found = []
    for package in PROJECT_PACKAGES:
        for path in sorted((REPO / package).rglob("*.py")):
            relative = path.relative_to(REPO)
            parts = list(relative.with_suffix("").parts)
            is_package = parts[-1] == "__init__"
            module = ".".join(parts[:-1] if is_package else parts)
            for line, use in private_uses(path.read_text(), module, is_package=is_package):
                found.append((relative.as_posix(), line, use))
    return found


def test_no_private_name_is_used_across_modules() -> None:
    found = project_private_uses()
    uses = [f"{path}:{line}: {use}" for path, line, use in found]
    assert not uses, "private names used across modules (make them public):\n" + "\n".join(uses)


def test_the_scan_finds_each_kind_of_private_use() -> None:
    source = """
from review_app.stats.core import _cluster_draws, ratio
from . import _sibling
from .core import _z, Estimate
from ..agreement.coefficients import pair_kappa
from numpy import _private_numpy
import review_app.stats.core as core
import storage.models

core._z(1)
storage.models._thing
ratio._attribute
Estimate.__name__
core.__doc__
self._own
_local = 1
"""
    assert private_uses(source, "review_app.stats.drift") == [
        (2, "review_app.stats.core._cluster_draws"),
        (3, "review_app.stats._sibling"),
        (4, "review_app.stats.core._z"),
        (10, "review_app.stats.core._z"),
        (11, "storage.models._thing"),
        (12, "review_app.stats.core.ratio._attribute"),
    ]
    # In a package's __init__, "." is the package itself.
    assert private_uses("from . import _x\n", "review_app.stats", is_package=True) == [
        (1, "review_app.stats._x")
    ]
    assert private_uses("from .core import ratio\nratio(1)\n", "review_app.stats.drift") == []
