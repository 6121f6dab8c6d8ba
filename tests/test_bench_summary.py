"""benchmarks/summary.py: the figures benchmarks record for bench_targets.py's one table."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from benchmarks.summary import SUMMARY_ENV, Figure, read_figures, record, record_ratio, table

REPO = Path(__file__).resolve().parents[1]


def test_record_writes_nothing_without_a_summary_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(SUMMARY_ENV, raising=False)
    monkeypatch.chdir(tmp_path)
    record("inspect", "1.2x", target="<= 1.5x", met=True)
    assert list(tmp_path.iterdir()) == []


def test_recorded_figures_read_back_in_order(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    summary = tmp_path / "figures.jsonl"
    monkeypatch.setenv(SUMMARY_ENV, str(summary))
    record("evaluator", "2.54x", target=">= 2.5x", met=True)
    record("import", "1.41x, 1.35x", target="<= 1.3x every run", met=False)
    record("start-up", "1.2 s")
    assert read_figures(summary) == [
        Figure("evaluator", "2.54x", ">= 2.5x", True),
        Figure("import", "1.41x, 1.35x", "<= 1.3x every run", False),
        Figure("start-up", "1.2 s", "", None),
    ]


def test_a_ratio_is_held_to_its_bound(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    summary = tmp_path / "figures.jsonl"
    monkeypatch.setenv(SUMMARY_ENV, str(summary))
    record_ratio("inspect", 1.5, at_most=1.5)
    record_ratio("evaluator", 2.31, at_least=2.5, detail="2,673 against 6,189")
    assert read_figures(summary) == [
        Figure("inspect", "1.50x", "<= 1.5x", True),
        Figure("evaluator", "2.31x (2,673 against 6,189)", ">= 2.5x", False),
    ]
    with pytest.raises(ValueError, match="exactly one of at_most and at_least"):
        record_ratio("both", 1.0, at_most=2.0, at_least=0.5)


def test_the_table_says_which_targets_are_met() -> None:
    lines = table(
        [
            Figure("evaluator", "2.54x", ">= 2.5x", True),
            Figure("a much longer measure name", "1.41x", "<= 1.3x", False),
            Figure("start-up", "1.2 s", "", None),
        ]
    ).splitlines()
    assert lines[0].split() == ["measure", "figure", "target"]
    assert lines[2].endswith("met") and not lines[2].endswith("NOT met")
    assert lines[3].endswith("NOT met")
    assert lines[4].endswith("1.2 s")
    # the columns line up: each figure starts where the header's "figure" does
    column = lines[0].index("figure")
    assert lines[2][column:].startswith("2.54x")
    assert lines[3][column:].startswith("1.41x")


def test_an_unknown_part_is_refused_by_name() -> None:
    completed = subprocess.run(
        [sys.executable, str(REPO / "benchmarks" / "bench_targets.py"), "--only", "evaluatr"],
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=60,
    )
    assert completed.returncode == 2
    assert "unknown part(s): evaluatr" in completed.stderr
