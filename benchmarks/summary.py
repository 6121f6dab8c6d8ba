"""Headline figures of several benchmarks gathered into one table (bench_targets.py).

A benchmark calls :func:`record` where it prints a figure that has a target. When the
environment names a summary file (``ROLE_REVIEW_BENCH_SUMMARY``, set by
``benchmarks/bench_targets.py``), the figure is appended to it as one JSON line;
otherwise :func:`record` does nothing, and the benchmark prints as before.
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass
from pathlib import Path

SUMMARY_ENV = "ROLE_REVIEW_BENCH_SUMMARY"


@dataclass(frozen=True)
class Figure:
    """One measured figure beside its target.

    ``met`` is ``None`` when the figure has no pass mark of its own (a baseline, say).
    """

    measure: str
    figure: str
    target: str
    met: bool | None


def record(measure: str, figure: str, *, target: str = "", met: bool | None = None) -> None:
    """Append a figure to the summary file named by the environment, if any."""
    path = os.environ.get(SUMMARY_ENV)
    if not path:
        return
    line = json.dumps(asdict(Figure(measure, figure, target, met)))
    with open(path, "a", encoding="utf-8") as out:
        out.write(line + "\n")


def record_ratio(
    measure: str,
    ratio: float,
    *,
    at_most: float | None = None,
    at_least: float | None = None,
    detail: str = "",
) -> None:
    """:func:`record` a ratio against a bound (``at_most`` or ``at_least``): the target's
    text and whether it is met both come from the bound."""
    if (at_most is None) == (at_least is None):
        raise ValueError("give exactly one of at_most and at_least")
    if at_most is not None:
        target, met = f"<= {at_most:g}x", ratio <= at_most
    else:
        assert at_least is not None
        target, met = f">= {at_least:g}x", ratio >= at_least
    figure = f"{ratio:.2f}x" + (f" ({detail})" if detail else "")
    record(measure, figure, target=target, met=met)


def read_figures(path: Path) -> list[Figure]:
    """The figures recorded in ``path``, in the order they were recorded."""
    if not path.exists():
        return []
    return [
        Figure(**json.loads(line))
        for line in path.read_text(encoding="utf-8").splitlines()
        if line.strip()
    ]


def table(figures: list[Figure]) -> str:
    """The figures as one plain-text table: measure, figure, target and whether it is met."""
    verdicts = {True: "met", False: "NOT met", None: ""}
    rows = [("measure", "figure", "target", "")] + [
        (f.measure, f.figure, f.target, verdicts[f.met]) for f in figures
    ]
    widths = [max(len(row[i]) for row in rows) for i in range(3)]
    lines = []
    for index, row in enumerate(rows):
        lines.append(
            "  ".join(cell.ljust(width) for cell, width in zip(row[:3], widths, strict=True))
            + "  "
            + row[3]
        )
        if index == 0:
            lines.append("  ".join("-" * width for width in widths) + "  -------")
    return "\n".join(line.rstrip() for line in lines)
