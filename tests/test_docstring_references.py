"""Docstrings name things that exist.

Every Sphinx-style reference in a docstring of ``review_app/`` or ``storage/``
(``:func:`~storage.gold.gold_rows```, ``:class:`Rubric```, ``:mod:`.first_break```) and
every project name written as a literal (````review_app.stats.core.Estimate````) must
resolve: a dotted name to a module of the repository and a name defined at its top
level (a class's member one level further); a bare name to something the module
defines or imports (or a builtin, an installed package, a member of one of its
classes); a relative name against the module's package. Read from the source, no
module is imported. A stale reference (``storage.selective.replace_certified`` after
the selective judging tables moved) fails here, naming file and reference.
"""

from __future__ import annotations

import ast
import builtins
import importlib.util
import re
from collections.abc import Iterator
from functools import cache
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
ROOTS = ("review_app", "storage")

ROLE = re.compile(r":(?:func|class|mod|data|meth|attr|exc|obj|const):`~?([A-Za-z_.][\w.]*)`")
LITERAL = re.compile(r"``((?:review_app|storage)\.[A-Za-z_][\w.]*)``")


def _module_file(dotted: str, root: Path) -> Path | None:
    """The file of a module, the ``__init__`` of a package, or a namespace directory."""
    path = root / dotted.replace(".", "/")
    if (path / "__init__.py").exists():
        return path / "__init__.py"
    if path.with_suffix(".py").exists():
        return path.with_suffix(".py")
    return path if path.is_dir() else None


@cache
def _tree(path: Path) -> ast.Module:
    return ast.parse(path.read_text(encoding="utf-8"))


@cache
def _top_level(path: Path) -> dict[str, ast.stmt]:
    """The names a module binds at its top level (imports included) and their statements."""
    names: dict[str, ast.stmt] = {}
    statements = list(_tree(path).body)
    for node in statements:
        if isinstance(node, ast.If | ast.Try):  # TYPE_CHECKING blocks, optional imports
            statements.extend(node.body)
        elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names[node.name] = node
        elif isinstance(node, ast.Assign):
            names.update((t.id, node) for t in node.targets if isinstance(t, ast.Name))
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names[node.target.id] = node
        elif isinstance(node, ast.Import | ast.ImportFrom):
            names.update(((a.asname or a.name).split(".")[0], node) for a in node.names)
    return names


def _members(node: ast.ClassDef) -> set[str]:
    """What a class defines: methods, nested classes, fields, attributes set on self."""
    found: set[str] = set()
    for child in ast.walk(node):
        if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            found.add(child.name)
        targets = (
            child.targets
            if isinstance(child, ast.Assign)
            else [child.target]
            if isinstance(child, ast.AnnAssign)
            else []
        )
        for target in targets:
            if isinstance(target, ast.Name):
                found.add(target.id)
            elif isinstance(target, ast.Attribute):
                found.add(target.attr)
    return found


def _defined(statement: ast.stmt, rest: list[str]) -> bool:
    """Whether ``rest`` (after the first name) exists on what ``statement`` binds."""
    if not rest or not isinstance(statement, ast.ClassDef):
        return True  # a member of an imported or assigned object is not followed
    return rest[0] in _members(statement)


def resolves(dotted: str, root: Path = REPO) -> bool:
    """Whether an absolute dotted name names a module of ``root`` or a name in one."""
    parts = dotted.split(".")
    for cut in range(len(parts), 0, -1):
        path = _module_file(".".join(parts[:cut]), root)
        if path is None:
            continue
        rest = parts[cut:]
        if not rest:
            return True
        if path.is_dir():
            return False
        statement = _top_level(path).get(rest[0])
        return statement is not None and _defined(statement, rest[1:])
    return False


def resolves_in(module_path: Path, reference: str, root: Path = REPO) -> bool:
    """Whether a reference resolves as written in the module at ``module_path``."""
    if reference.startswith(tuple(f"{top}." for top in ROOTS)):
        return resolves(reference, root)
    if reference.startswith("."):
        dots = len(reference) - len(reference.lstrip("."))
        package = module_path.relative_to(root).with_suffix("").parts[:-dots]
        return resolves(".".join(package) + "." + reference[dots:], root)
    first, *rest = reference.split(".")
    statement = _top_level(module_path).get(first)
    if statement is not None:
        return _defined(statement, rest)
    if hasattr(builtins, first) or importlib.util.find_spec(first) is not None:
        return True
    # a member of a class of this module, named from inside it (``:meth:`to_dict```)
    tree = _tree(module_path)
    return any(isinstance(n, ast.ClassDef) and first in _members(n) for n in ast.walk(tree))


def _docstrings(tree: ast.Module) -> Iterator[str]:
    """Module, class and function docstrings, and the strings documenting attributes."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            docstring = ast.get_docstring(node, clean=False)
            if docstring:
                yield docstring
        if isinstance(node, ast.Module | ast.ClassDef):
            for before, after in zip(node.body, node.body[1:], strict=False):
                if (
                    isinstance(before, ast.Assign | ast.AnnAssign)
                    and isinstance(after, ast.Expr)
                    and isinstance(after.value, ast.Constant)
                    and isinstance(after.value.value, str)
                ):
                    yield after.value.value


def references(tree: ast.Module) -> Iterator[str]:
    for docstring in _docstrings(tree):
        for match in ROLE.finditer(docstring):
            yield match[1].rstrip(".")
        for match in LITERAL.finditer(docstring):
            yield match[1].rstrip(".")


def stale_references(root: Path = REPO) -> list[str]:
    stale = []
    for top in ROOTS:
        for path in sorted((root / top).rglob("*.py")):
            if "versions" in path.parts:  # Alembic's revision scripts
                continue
            for reference in references(_tree(path)):
                if not resolves_in(path, reference, root):
                    stale.append(f"{path.relative_to(root)}: {reference}")
    return stale


def test_docstring_references_resolve() -> None:
    assert stale_references() == []


def test_the_check_sees_a_stale_reference(tmp_path: Path) -> None:
    package = tmp_path / "storage"
    package.mkdir()
    (package / "__init__.py").write_text('"""Storage."""\n')
    (package / "gold.py").write_text(
        '"""Gold: :func:`gold_rows`, :func:`~storage.gold.gold_rows`, :mod:`.gold`,\n'
        ":class:`Row`, :attr:`Row.code`, :meth:`Row.gone`, ``storage.gold.gone``,\n"
        ':func:`storage.selective.replace_certified`, :func:`json.dumps`."""\n'
        "import json\n\n\nclass Row:\n    code: str\n\n\ndef gold_rows():\n    pass\n"
    )
    assert stale_references(tmp_path) == [
        "storage/gold.py: Row.gone",
        "storage/gold.py: storage.selective.replace_certified",
        "storage/gold.py: storage.gold.gone",
    ]
