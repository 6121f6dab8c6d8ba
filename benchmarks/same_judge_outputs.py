"""Do two checkouts print the same `judge report`, `judge estimate` and `judge few-shot`?

For a change meant to be invisible (a faster loader, say): run every command below with
each checkout's code on the same databases and compare stdout, stderr and exit code
byte for byte. Run from anywhere::

    git archive <commit> | tar -x -C /tmp/old
    python benchmarks/same_judge_outputs.py --old /tmp/old --new . \\
        --db sqlite:////tmp/bench.db [--db postgresql+psycopg://...] [--resamples 200]

Databases: any with judge runs of role-adherence@1, e.g. those ``bench_stats.py --db``
builds. Exit code 1 when an output differs (the first differing command is printed).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
from pathlib import Path

RUBRIC = ["--rubric", "role-adherence@1"]


def commands(db: str, resamples: int, run_ids: list[int]) -> list[list[str]]:
    base = ["--db", db]
    report = ["judge", "report", *RUBRIC, *base, "--resamples", str(resamples)]
    found = [[*report, "--json"], report, [*report, "--epsilon", "0.05", "--seed", "3"]]
    found.append(["judge", "report", *RUBRIC, *base, "--run", "999999"])
    for run in run_ids:
        found.append([*report, "--run", str(run), "--json"])
        for level in ("turn", "conversation"):
            estimate = ["judge", "estimate", *RUBRIC, *base, "--run", str(run), "--level", level]
            found += [estimate, [*estimate, "--json"]]
        found.append(["judge", "few-shot", *RUBRIC, *base, "--run", str(run)])
    found.append(["judge", "estimate", *RUBRIC, *base, "--run", "1", "--level", "case"])
    return found


def run(root: Path, command: list[str]) -> tuple[int, str, str]:
    # Outside any checkout, so the current directory does not shadow PYTHONPATH.
    with tempfile.TemporaryDirectory() as empty:
        done = subprocess.run(
            [sys.executable, "-m", "review_app", *command],
            cwd=empty,
            env={**os.environ, "PYTHONPATH": str(root.resolve())},
            capture_output=True,
            text=True,
            check=False,
        )
    return done.returncode, done.stdout, done.stderr


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--old", type=Path, required=True)
    parser.add_argument("--new", type=Path, required=True)
    parser.add_argument("--db", action="append", required=True, help="database URL (repeatable)")
    parser.add_argument("--runs", type=int, nargs="+", default=[1, 2], help="run ids to check")
    parser.add_argument("--resamples", type=int, default=200)
    arguments = parser.parse_args()
    checked = 0
    for db in arguments.db:
        for command in commands(db, arguments.resamples, arguments.runs):
            old, new = run(arguments.old, command), run(arguments.new, command)
            checked += 1
            if old != new:
                print(f"DIFFERENT: review-app {' '.join(command)}")
                return 1
    print(f"same output for all {checked} commands")
    return 0


if __name__ == "__main__":
    sys.exit(main())
