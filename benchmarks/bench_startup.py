"""Each command's start-up: the whole process on the demo, and the heavy modules it loads.

Run from the repository root::

    PYTHONPATH=. python benchmarks/bench_startup.py [--rounds 5]

Every command runs on its own copy of the demo (17 conversations) as a fresh process,
rounds alternating with a bare ``python -c pass`` and with ``python -c "import typer"``
and ``python -c "import sqlmodel, typer"`` (the floor every command but ``inspect``
stands on: the CLI and the ORM). For each command the median wall
and CPU time, and which of scipy, pandas, scikit-learn, statsmodels, Streamlit,
Altair and krippendorff it had loaded when it exited (tests/test_command_imports.py
fails when one slips into a command that does not use it). Prints figures; asserts
nothing.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from benchmarks.large_db import load_demo_database  # noqa: E402
from benchmarks.summary import record, record_ratio  # noqa: E402
from tests.command_probe import HEAVY, LOADED_OUT_ENV, probe_command  # noqa: E402

RUBRIC = "role-adherence@1"
ORM_FLOOR = "bare: python -c 'import sqlmodel, typer'"

COMMANDS: tuple[tuple[str, ...], ...] = (
    ("inspect", "{case}"),
    ("cases", "list"),
    ("cases", "show", "{case_id}"),
    ("reviewers", "list"),
    ("rubrics", "list"),
    ("judge", "runs"),
    ("judge", "runs", "--json"),
    ("cases", "list", "--json"),
    ("audit",),
    ("labels", "export", "--rubric", RUBRIC),
    ("agreement", "--rubric", RUBRIC, "--json"),
    ("export", "--rubric", RUBRIC, "--out", "{out}"),
    ("judge", "report", "--rubric", RUBRIC, "--json"),
    ("judge", "estimate", "--rubric", RUBRIC, "--run", "1", "--json"),
)


def run(command: list[str], env: dict[str, str], cwd: Path) -> tuple[float, float]:
    """(wall seconds, CPU seconds) of one child process."""
    start = time.perf_counter()
    process = subprocess.Popen(
        command, env=env, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
    )
    _, status, usage = os.wait4(process.pid, 0)
    wall = time.perf_counter() - start
    stderr = process.stderr.read().decode(errors="replace") if process.stderr else ""
    if os.waitstatus_to_exitcode(status) not in (0, 1) or "Traceback" in stderr:
        raise RuntimeError(f"{command[3:6]} failed: {stderr[-1500:]}")
    return wall, usage.ru_utime + usage.ru_stime


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    print(f"python {sys.version.split()[0]}, load average {os.getloadavg()[0]:.2f}")
    cases = sorted((REPO / "review_app" / "demo_data" / "cases").glob("*.json"))
    if not cases:
        sys.exit("the demo cases were not found")
    with tempfile.TemporaryDirectory(prefix="role-review-startup-") as tmp:
        workdir = Path(tmp)
        database = workdir / "demo.db"
        load_demo_database(database)
        env = dict(os.environ)
        # An installed copy has its bytecode compiled (pip compiles it, a checkout writes
        # __pycache__ on first use); without this the project's modules were compiled from
        # source on every run while the floor's (site-packages) were not.
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        env.update(
            HOME=str(workdir / "home"),
            REVIEW_APP_DATABASE_URL=f"sqlite:///{database}",
            **{LOADED_OUT_ENV: str(workdir / "loaded.json")},
            PYTHONPATH=str(REPO),
        )
        named: dict[str, list[str]] = {
            "bare: python -c pass": [sys.executable, "-c", "pass"],
            "bare: python -c 'import typer'": [sys.executable, "-c", "import typer"],
            "bare: python -c 'import sqlmodel, typer'": [
                sys.executable,
                "-c",
                "import sqlmodel, typer",
            ],
        }
        for command in COMMANDS:
            filled = [
                part.format(case=cases[0], case_id=cases[0].stem, out=workdir / "export")
                for part in command
            ]
            named[" ".join(command[:3] if command[2:3] == ("--json",) else command[:2])] = (
                probe_command(filled)
            )
        loaded: dict[str, list[str]] = {}
        for argv in named.values():  # bytecode caches written, page cache warm
            run(argv, env, workdir)
        walls: dict[str, list[float]] = {name: [] for name in named}
        cpus: dict[str, list[float]] = {name: [] for name in named}
        for _ in range(args.rounds):
            for name, argv in named.items():
                wall, cpu = run(argv, env, workdir)
                walls[name].append(wall)
                cpus[name].append(cpu)
                if not name.startswith("bare"):
                    out = workdir / "loaded.json"
                    loaded[name] = [m for m in json.loads(out.read_text()) if m in HEAVY]
                    out.unlink()
        bare = statistics.median(walls["bare: python -c pass"])
        print(
            f"\n[start-up] {args.rounds} alternating rounds, whole processes on the demo; "
            "median wall and CPU seconds"
        )
        print(f"  {'command':<42} {'wall':>6} {'cpu':>6} {'x bare':>7}  heavy modules loaded")
        slowest = ("", 0.0)
        for name in named:
            wall, cpu = statistics.median(walls[name]), statistics.median(cpus[name])
            heavy = ", ".join(loaded.get(name, [])) or "-"
            print(f"  {name:<42} {wall:6.2f} {cpu:6.2f} {wall / bare:6.1f}x  {heavy}")
            if not name.startswith("bare") and wall > slowest[1]:
                slowest = (name, wall)
        light = [n for n in loaded if not loaded[n]]
        orm = statistics.median(walls[ORM_FLOOR])
        record(
            "command start-up on the demo, slowest command (whole process)",
            f"{slowest[0]}: {slowest[1]:.2f} s (python -c pass {bare:.2f} s, "
            f"import sqlmodel, typer {orm:.2f} s)",
        )
        # Issue 38: a command that reads the database within 1.3x of the floor it stands
        # on (the CLI and the ORM imported), whole processes side by side.
        for name in ("reviewers list", "judge runs --json", "cases list --json"):
            command_wall = statistics.median(walls[name])
            spread = sorted(w / o for w, o in zip(walls[name], walls[ORM_FLOOR], strict=True))
            record_ratio(
                f"review-app {name} vs python -c 'import sqlmodel, typer' (whole processes)",
                command_wall / orm,
                at_most=1.3,
                detail=(
                    f"{command_wall:.2f} s vs {orm:.2f} s; per round "
                    f"{spread[0]:.2f}x-{spread[-1]:.2f}x"
                ),
            )
        record(
            "commands that load none of scipy, pandas, sklearn, statsmodels, streamlit",
            f"{len(light)} of {len(loaded)} (the rest: only what tests/test_command_imports.py "
            "allows them)",
        )
    print(f"load average at the end {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
