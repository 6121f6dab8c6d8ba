"""ruff (lint and format) and mypy stay clean (the project's own configuration).

The format check covers the Python sources only: newer ruff releases also format
code blocks in Markdown, which would make the check depend on the ruff version.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
PYTHON_SOURCES = ("review_app", "storage", "tests", "benchmarks", ".ci")


def _tool(name: str) -> list[str]:
    beside = Path(sys.executable).with_name(name)
    if beside.exists():
        return [str(beside)]
    found = shutil.which(name)
    if found is None:
        pytest.skip(f"{name} is not installed (pip install -e '.[test]')")
    return [found]


def test_ruff_finds_nothing() -> None:
    result = subprocess.run(
        [*_tool("ruff"), "check", "."], cwd=REPO, capture_output=True, text=True, timeout=300
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_ruff_format_would_change_nothing() -> None:
    result = subprocess.run(
        [*_tool("ruff"), "format", "--check", *PYTHON_SOURCES],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.slow
def test_mypy_finds_nothing() -> None:
    result = subprocess.run([*_tool("mypy")], cwd=REPO, capture_output=True, text=True, timeout=900)
    assert result.returncode == 0, result.stdout + result.stderr
