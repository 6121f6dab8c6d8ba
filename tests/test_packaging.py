"""The install a user does (``pip install .``) holds everything the app imports.

Reference implementations (krippendorff, statsmodels), test tools and deepeval are
in the ``test`` and ``interop`` extras, so no module of the app may import them.
"""

from __future__ import annotations

import ast
import tomllib
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
TEST_ONLY = {"krippendorff", "statsmodels", "pytest", "hypothesis", "playwright", "deepeval"}


def _imported_modules(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.add(node.module.split(".")[0])
    return names


def test_the_app_imports_no_test_only_dependency() -> None:
    offenders = {
        str(path.relative_to(REPO)): sorted(_imported_modules(path) & TEST_ONLY)
        for package in ("review_app", "storage")
        for path in (REPO / package).rglob("*.py")
        if _imported_modules(path) & TEST_ONLY
    }
    assert not offenders, offenders


def test_reference_implementations_are_test_dependencies_only() -> None:
    project = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["project"]

    def names(requirements: list[str]) -> set[str]:
        return {
            r.split("[")[0].split(">")[0].split("=")[0].split("<")[0].strip() for r in requirements
        }

    runtime = names(project["dependencies"])
    extras = project["optional-dependencies"]
    assert not runtime & TEST_ONLY
    assert {"krippendorff", "statsmodels"} <= names(extras["test"])
    assert "deepeval" in names(extras["interop"])
