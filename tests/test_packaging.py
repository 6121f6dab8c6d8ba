"""The install a user does (``pip install .``) holds everything the app imports, and
the evaluator compiled wherever it can be (README, "The compiled evaluator").

Reference implementations (krippendorff, statsmodels), test tools and deepeval are
in the ``test`` and ``interop`` extras, so no module of the app may import them.

The build hook (hatch_build.py) compiles the evaluator with mypyc when a C compiler and
Python's headers are present and installs pure Python otherwise, or when compiling
fails; ``HATCH_BUILD_HOOK_ENABLE_MYPYC`` forces either. Two slow tests build a wheel
from a copy of the checkout, one each way.
"""

from __future__ import annotations

import ast
import json
import os
import shutil
import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path
from typing import Any

import pytest

import hatch_build
from benchmarks.bench_foundation import python_build_evaluator
from tests.test_evaluator_equivalence import corpus_lines

REPO = Path(__file__).resolve().parents[1]
REQUIRED = os.environ.get("REVIEW_APP_REQUIRE_COMPILED_EVALUATOR") == "1"
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


# --- the build hook ----------------------------------------------------------------------


def test_the_variable_forces_either_way_and_unset_decides_by_itself() -> None:
    mode = hatch_build.requested_mode
    assert [mode({hatch_build.MODE_VARIABLE: v}) for v in ("1", "true", " ON ")] == ["compiled"] * 3
    assert [mode({hatch_build.MODE_VARIABLE: v}) for v in ("0", "false", "off")] == ["python"] * 3
    assert mode({}) == mode({hatch_build.MODE_VARIABLE: ""}) == "auto"


def test_a_machine_without_a_compiler_is_told_so(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CC", "/nonexistent/cc-for-role-review -O2")
    assert hatch_build.missing_toolchain() == (
        "no C compiler (/nonexistent/cc-for-role-review not found)"
    )


class _FailingMypyc:
    def __init__(self) -> None:
        self.cleaned: list[list[str]] = []

    def initialize(self, version: str, build_data: dict[str, Any]) -> None:
        build_data["artifacts"].append("/review_app/evaluator.*.so")  # half done
        raise RuntimeError("Error while invoking Mypyc:\nerror: command 'gcc' failed")

    def clean(self, versions: list[str]) -> None:
        self.cleaned.append(versions)


def _hook(tmp_path: Path) -> hatch_build.CompiledEvaluatorHook:
    return hatch_build.CompiledEvaluatorHook(str(tmp_path), {}, None, None, str(tmp_path), "wheel")


def _note(build_data: dict[str, Any]) -> str:
    [(path, name)] = build_data["extra_metadata"].items()
    assert name == hatch_build.NOTE
    return Path(path).read_text(encoding="utf-8")


@pytest.mark.parametrize("given", ["", "1"])
def test_a_failing_compile_falls_back_unless_forced(
    given: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(hatch_build.MODE_VARIABLE, given)
    monkeypatch.setattr(hatch_build, "missing_toolchain", lambda: None)
    failing = _FailingMypyc()
    hook = _hook(tmp_path)
    monkeypatch.setattr(hook, "_mypyc", lambda: failing)
    build_data: dict[str, Any] = {"artifacts": [], "force_include": {}, "pure_python": True}
    if given == "1":
        with pytest.raises(RuntimeError, match="Mypyc"):
            hook.initialize("standard", build_data)
        return
    hook.initialize("standard", build_data)
    # Nothing of the failed build in the wheel; its leftovers removed; said in one line.
    assert build_data["artifacts"] == [] and build_data["force_include"] == {}
    assert build_data["pure_python"] is True
    assert failing.cleaned == [["standard"]]
    assert _note(build_data) == (
        "evaluator in pure Python (mypyc failed: error: command 'gcc' failed)\n"
    )


def test_an_editable_install_stays_pure_python_unless_asked(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(hatch_build.MODE_VARIABLE, raising=False)
    hook = _hook(tmp_path)
    monkeypatch.setattr(hook, "_mypyc", lambda: pytest.fail("compiled an editable install"))
    build_data: dict[str, Any] = {"artifacts": [], "force_include": {}, "pure_python": True}
    hook.initialize("editable", build_data)
    assert _note(build_data).startswith("evaluator in pure Python (an editable install;")


def _wheel(tmp_path: Path, variable: str | None) -> tuple[Path, str]:
    """A wheel built from a copy of this checkout (its sources, not its build leftovers)
    with ``HATCH_BUILD_HOOK_ENABLE_MYPYC`` set to ``variable`` (``None``: unset), and
    the build's output. The copy keeps .gitignore: hatchling leaves out the files it
    ignores, *.so among them, unless the build hook names them."""
    tree = tmp_path / "tree"
    tree.mkdir()
    for name in ("pyproject.toml", "README.md", ".gitignore", "hatch_build.py"):
        shutil.copy2(REPO / name, tree / name)
    for name in ("review_app", "storage", "rubrics"):
        shutil.copytree(
            REPO / name, tree / name, ignore=shutil.ignore_patterns("*.so", "__pycache__")
        )
    environment = {k: v for k, v in os.environ.items() if k != hatch_build.MODE_VARIABLE}
    if variable is not None:
        environment[hatch_build.MODE_VARIABLE] = variable
    wheels = tmp_path / "wheels"
    built = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "-v", "--no-deps", str(tree), "-w", str(wheels)],
        env=environment,
        capture_output=True,
        text=True,
    )
    assert built.returncode == 0, built.stdout[-4000:] + built.stderr[-4000:]
    [wheel] = wheels.glob("*.whl")
    # The checkout it was built from keeps no compiled file.
    assert not list((tree / "review_app").glob("*.so"))
    return wheel, built.stdout + built.stderr


def _installed(tmp_path: Path, wheel: Path) -> Path:
    site = tmp_path / "site"
    subprocess.run(
        [sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--target", str(site), wheel],
        check=True,
        capture_output=True,
    )
    return site


PROBE = (
    "import json, sys\n"
    "import review_app.evaluator as e\n"
    "from review_app.cli.application import evaluator_build\n"
    "result = e.evaluate_case(json.loads(sys.stdin.read()))\n"
    "print(e.compiled(), e.__file__.startswith(sys.argv[1]), evaluator_build())\n"
    "print(e.diagnostic(result))\n"
)


def _probe(tmp_path: Path, site: Path) -> list[str]:
    """What the installed evaluator says in a fresh process that sees only ``site``'s
    copy of the app: compiled or not, from ``site``, the --version build text, and the
    diagnostic line of the corpus's first case (checked against the source)."""
    case = json.loads(corpus_lines(1)[0])
    source = python_build_evaluator()
    shown = subprocess.run(
        [sys.executable, "-c", PROBE, str(site)],
        input=json.dumps(case),
        env={**os.environ, "PYTHONPATH": str(site)},
        cwd=tmp_path,
        check=True,
        capture_output=True,
        text=True,
    ).stdout.splitlines()
    assert shown[1] == source.diagnostic(source.evaluate_case(case))
    return shown[0].split(" ", 2)


@pytest.mark.slow
def test_a_wheel_built_with_no_variable_holds_the_compiled_evaluator(tmp_path: Path) -> None:
    # README's own install command, here where a C compiler and Python's headers are.
    # (A wheel once held the compiled module without its support library,
    # evaluator__mypyc.*.so, and importing the evaluator from it failed.)
    missing = hatch_build.missing_toolchain()
    if missing is not None and not REQUIRED:
        pytest.skip(f"cannot compile here: {missing}")
    wheel, output = _wheel(tmp_path, None)
    assert "role-review: evaluator compiled with mypyc" in output
    with zipfile.ZipFile(wheel) as archive:
        compiled_files = sorted(n for n in archive.namelist() if n.endswith(".so"))
    assert [Path(name).name.split(".")[0] for name in compiled_files] == [
        "evaluator",
        "evaluator__mypyc",
    ], compiled_files
    assert _probe(tmp_path, _installed(tmp_path, wheel)) == [
        "True",
        "True",
        "evaluator compiled with mypyc",
    ]


@pytest.mark.slow
def test_a_wheel_built_with_the_variable_off_is_pure_python(tmp_path: Path) -> None:
    wheel, output = _wheel(tmp_path, "0")
    line = "evaluator in pure Python (HATCH_BUILD_HOOK_ENABLE_MYPYC=0)"
    assert f"role-review: {line}" in output
    assert wheel.name.endswith("-py3-none-any.whl")
    with zipfile.ZipFile(wheel) as archive:
        assert not [n for n in archive.namelist() if n.endswith(".so")]
    assert _probe(tmp_path, _installed(tmp_path, wheel)) == ["False", "True", line]
