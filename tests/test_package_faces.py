"""One convention for package faces: a package's ``__init__.py`` is its docstring alone.

Every package of ``review_app/`` and ``storage/`` has an ``__init__.py`` holding one
docstring and nothing else: no imports, no re-exports, no code. Importing a package
therefore costs nothing (a command loads only the modules it uses, issue 38), and a
caller imports a name from the module that defines it.

The docstring is the package's catalogue: one bullet per module, in the form

    - ``module``: what it is for, one line (may wrap), optionally ``public_name``, ...

and this test keeps the catalogue true: it names exactly the package's modules (its
``.py`` files and its subpackages, private modules included, ``__main__`` not), each
once, and any other ````name```` a bullet mentions is a public name defined at the top of
that module. Both are read from the source (no module is imported).
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from tests.test_service_floors import FLOORS

REPO = Path(__file__).resolve().parents[1]
ROOTS = ("review_app", "storage")

BULLET = re.compile(r"^- ``(?P<module>[A-Za-z_]\w*)``:(?P<text>.*)$")
MENTION = re.compile(r"``([A-Za-z_]\w*)``")


def packages() -> list[Path]:
    """Every directory under the roots with an ``__init__.py``."""
    return sorted(
        init.parent
        for root in ROOTS
        for init in (REPO / root).rglob("__init__.py")
        if "__pycache__" not in init.parts
    )


def modules_of(package: Path) -> set[str]:
    """The package's modules: its ``.py`` files and its subdirectories holding Python
    (packages, or namespace directories such as ``review_app/ui/views``)."""
    files = {p.stem for p in package.glob("*.py") if not p.name.startswith("__")}
    directories = {
        d.name
        for d in package.iterdir()
        if d.is_dir() and d.name != "__pycache__" and any(d.glob("*.py"))
    }
    return files | directories


def catalogue(docstring: str) -> dict[str, list[str]]:
    """``module -> the text of its bullet`` (continuation lines joined); a module named
    twice appears once per bullet in the list of texts."""
    entries: dict[str, list[str]] = {}
    current: list[str] | None = None
    for line in docstring.splitlines():
        match = BULLET.match(line)
        if match:
            current = entries.setdefault(match["module"], [])
            current.append(match["text"])
        elif current is not None and line.startswith("  ") and line.strip():
            current[-1] += " " + line.strip()
        else:
            current = None
    return entries


def top_level_names(path: Path) -> set[str]:
    """The names a module's source defines at its top level."""
    names: set[str] = set()
    for node in ast.parse(path.read_text(encoding="utf-8")).body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names.add(node.name)
        elif isinstance(node, ast.Assign):
            names.update(t.id for t in node.targets if isinstance(t, ast.Name))
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names.add(node.target.id)
    return names


def face_problems(package: Path, root: Path = REPO) -> list[str]:
    """What is wrong with a package's face, one sentence each (paths relative to root)."""
    init = package / "__init__.py"
    where = init.relative_to(root)
    body = ast.parse(init.read_text(encoding="utf-8")).body
    docstring = (
        body[0].value.value
        if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant)
        else None
    )
    if not isinstance(docstring, str):
        return [f"{where} has no docstring"]
    problems = [
        f"{where}:{node.lineno} holds {type(node).__name__} (a face is its docstring alone)"
        for node in body[1:]
    ]
    entries = catalogue(docstring)
    modules = modules_of(package)
    problems += [f"{where} does not name its module {m}" for m in sorted(modules - set(entries))]
    problems += [f"{where} names {m}, not a module of it" for m in sorted(set(entries) - modules)]
    problems += [f"{where} names {m} twice" for m, texts in entries.items() if len(texts) > 1]
    for module, texts in entries.items():
        source = package / f"{module}.py"
        if not source.exists():
            continue
        defined = top_level_names(source)
        for name in MENTION.findall(" ".join(texts)):
            if name.startswith("_") or name not in defined:
                problems.append(f"{where} lists {module}.{name}, not a public name there")
    return problems


@pytest.mark.parametrize("package", packages(), ids=lambda p: str(p.relative_to(REPO)))
def test_a_package_face_is_a_docstring_naming_its_modules(package: Path) -> None:
    assert face_problems(package) == []


def test_the_services_catalogue_lists_the_floors_bottom_first() -> None:
    """review_app/services/__init__.py names its packages in the order the floors test keeps."""
    init = REPO / "review_app" / "services" / "__init__.py"
    docstring = ast.get_docstring(ast.parse(init.read_text(encoding="utf-8"))) or ""
    floors = [m for m in catalogue(docstring) if m in FLOORS]
    assert floors == list(FLOORS)


def test_the_check_sees_a_stale_catalogue(tmp_path: Path) -> None:
    """Not blind: a re-export, a missing module, a gone module and a gone function are seen."""
    package = tmp_path / "pkg"
    package.mkdir()
    (package / "kept.py").write_text("def used():\n    pass\n\n\ndef _hidden():\n    pass\n")
    (package / "new.py").write_text("")
    (package / "__init__.py").write_text(
        '"""A package.\n\n- ``kept``: kept (``used``, ``gone``, ``_hidden``);\n'
        '- ``old``: moved away.\n"""\n\nfrom pkg.kept import used\n'
    )
    assert face_problems(package, tmp_path) == [
        "pkg/__init__.py:7 holds ImportFrom (a face is its docstring alone)",
        "pkg/__init__.py does not name its module new",
        "pkg/__init__.py names old, not a module of it",
        "pkg/__init__.py lists kept.gone, not a public name there",
        "pkg/__init__.py lists kept._hidden, not a public name there",
    ]
