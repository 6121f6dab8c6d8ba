"""The speed targets in one table: runs the benchmarks that measure them, one after another.

Run from the repository root::

    PYTHONPATH=. python benchmarks/bench_targets.py [--quick] [--skip NAMES] [--only NAMES]

Each part is one of the benchmark scripts beside this one, run as a child process
with ``ROLE_REVIEW_BENCH_SUMMARY`` naming a file where it records its headline figures
(benchmarks/summary.py); the children's own output streams through as they run, and
at the end the recorded figures are printed as one table: measure, figure, target,
met or not. Parts run one at a time so that no part measures beside another; within
a part, every ratio is measured side by side in one run, as each script says.

Parts (``--skip``/``--only`` take these names, comma-separated):

- ``evaluator-instructions``: bench_evaluator_instructions.py (needs valgrind)
- ``evaluator``: bench_foundation.py, the evaluator only, CPU and wall time
- ``evaluator-installed``: bench_installed_evaluator.py, the evaluator as ``pip install .``
  installs it (a wheel built here with no variable set: compiled where it can be)
- ``inspect-import``: bench_speed.py, ``inspect one.json`` and import into SQLite
- ``startup``: bench_startup.py, every command's start-up and heavy imports, and the
  commands that read the database beside ``python -c "import sqlmodel, typer"``
- ``agreement``: bench_agreement_command.py, 800,000 labels (``--quick``: 100,000)
- ``judge-endpoints``: bench_judge_endpoints.py, 50 ms and 200 ms loopback servers,
  beside a bare client's ceiling
- ``judge-command``: bench_judge_command.py, the whole ``judge run`` command on 2,000
  one-turn cases at a 100 ms endpoint, 64 in flight, beside a bare aiohttp client
- ``writers``: bench_writers.py, 16 SQLite writer processes, with and without the queue
- ``pages-warm``: bench_pages_warm.py, the policy pages on the demo in Chromium
- ``pages-large``: bench_pages_large.py, the policy pages on 50,000 conversations beside
  the demo (``--quick``: 5,000); building the large database takes minutes
- ``pages-after-change``: bench_pages_after_change.py, the agreement and judge pages on
  50,000 conversations (``--quick``: 5,000): the first visit after a restart and after
  one new label, beside warm visits

The rows of issue 38 (the installed evaluator, ``inspect``, ``judge run`` beside a bare
client, the database commands' start-up, the pages after a restart and after a change)
print beside the earlier ones in the one table.

Prints figures; asserts nothing (the machine is shared and noisy: read the ratios).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from benchmarks.summary import SUMMARY_ENV, read_figures, table  # noqa: E402


def parts(quick: bool) -> dict[str, list[str]]:
    """Each part's script and arguments, full size or ``quick``."""
    return {
        "evaluator-instructions": [
            "bench_evaluator_instructions.py",
            "--cases",
            "300" if quick else "1000",
        ],
        "evaluator": [
            "bench_foundation.py",
            "--skip-import",
            "--cases",
            "5000" if quick else "20000",
            "--rounds",
            "3" if quick else "5",
        ],
        "evaluator-installed": [
            "bench_installed_evaluator.py",
            "--cases",
            "5000" if quick else "20000",
            "--rounds",
            "3" if quick else "5",
        ],
        "inspect-import": [
            "bench_speed.py",
            "--skip",
            "many,postgres,saves",
            "--cases",
            "4000" if quick else "20000",
            "--rounds",
            "2" if quick else "3",
        ],
        "startup": ["bench_startup.py", "--rounds", "2" if quick else "5"],
        "agreement": [
            "bench_agreement_command.py",
            "--cases",
            "5000" if quick else "40000",
            "--rounds",
            "2" if quick else "3",
        ],
        "judge-endpoints": [
            "bench_judge_endpoints.py",
            "--cases",
            "400" if quick else "2000",
        ],
        "judge-command": [
            "bench_judge_command.py",
            "--cases",
            "500" if quick else "2000",
            "--rounds",
            "2" if quick else "5",
        ],
        "writers": [
            "bench_writers.py",
            "--seconds",
            "8" if quick else "20",
            "--modes",
            "fifo,sqlite",
        ],
        "pages-warm": ["bench_pages_warm.py", "--rounds", "2" if quick else "3"],
        "pages-large": [
            "bench_pages_large.py",
            "--cases",
            "5000" if quick else "50000",
            "--rounds",
            "2" if quick else "3",
        ],
        "pages-after-change": [
            "bench_pages_after_change.py",
            "--cases",
            "5000" if quick else "50000",
            "--rounds",
            "2" if quick else "3",
        ],
    }


def _names(value: str) -> set[str]:
    return {name.strip() for name in value.split(",") if name.strip()}


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="smaller sizes, fewer rounds")
    parser.add_argument("--skip", default="", help="parts to leave out, comma-separated")
    parser.add_argument("--only", default="", help="run only these parts, comma-separated")
    args = parser.parse_args()
    chosen = parts(args.quick)
    unknown = (_names(args.skip) | _names(args.only)) - set(chosen)
    if unknown:
        parser.error(f"unknown part(s): {', '.join(sorted(unknown))}; known: {', '.join(chosen)}")
    if args.only:
        chosen = {name: part for name, part in chosen.items() if name in _names(args.only)}
    for name in _names(args.skip):
        chosen.pop(name, None)

    with tempfile.TemporaryDirectory(prefix="role-review-targets-") as tmp:
        summary = Path(tmp) / "figures.jsonl"
        env = dict(os.environ, PYTHONPATH=str(REPO))
        env[SUMMARY_ENV] = str(summary)
        timings: list[tuple[str, float, int]] = []
        for name, (script, *script_args) in chosen.items():
            print(f"\n===== {name}: {script} {' '.join(script_args)}", flush=True)
            start = time.perf_counter()
            completed = subprocess.run(
                [sys.executable, str(REPO / "benchmarks" / script), *script_args],
                env=env,
                cwd=REPO,
            )
            timings.append((name, time.perf_counter() - start, completed.returncode))
        figures = read_figures(summary)

    print("\n===== the speed targets (docs: README.md, Benchmarks)")
    print(f"python {sys.version.split()[0]}, load average at the end {os.getloadavg()[0]:.2f}")
    print(table(figures) if figures else "no figures were recorded")
    failed = [name for name, _, code in timings if code != 0]
    print(
        "parts: "
        + ", ".join(f"{name} {seconds:.0f} s" for name, seconds, _ in timings)
        + (f"; FAILED (no figures, or some): {', '.join(failed)}" if failed else "")
    )


if __name__ == "__main__":
    main()
