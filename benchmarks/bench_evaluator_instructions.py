"""Evaluator instructions per event, ``evaluate_case`` beside the baseline, under cachegrind.

    python benchmarks/bench_evaluator_instructions.py [--cases 1000] [--events 50]

Instruction counts do not move with the load of a shared machine the way wall and CPU
time do, so this is the repeatable figure for the evaluator's speed-up
(benchmarks/bench_foundation.py prints the timed one). Each evaluator runs in a child
process under ``valgrind --tool=cachegrind --cache-sim=no``, once with one round over
the corpus and once with three; the difference, over two rounds' events, is the cost
of one warm round per event, with parsing the corpus and starting Python cancelled
out. Prints figures; asserts nothing. Needs valgrind.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

_CHILD = """
import json, sys
sys.path.insert(0, sys.argv[1])
from benchmarks.bench_foundation import baseline_evaluate
from review_app.evaluator import evaluate_case
function = {"baseline": baseline_evaluate, "evaluate_case": evaluate_case}[sys.argv[2]]
cases = [json.loads(line) for line in open(sys.argv[3], "rb")]
for _ in range(int(sys.argv[4])):
    for case in cases:
        function(case)
"""


def instructions(corpus: Path, name: str, rounds: int, workdir: Path) -> int:
    """The instructions a child executes evaluating the corpus ``rounds`` times."""
    out = workdir / f"cachegrind.{name}.{rounds}"
    subprocess.run(
        [
            "valgrind",
            "--tool=cachegrind",
            "--cache-sim=no",
            f"--cachegrind-out-file={out}",
            sys.executable,
            "-c",
            _CHILD,
            str(REPO),
            name,
            str(corpus),
            str(rounds),
        ],
        check=True,
        capture_output=True,
        # One OpenBLAS thread (numpy comes with benchmarks.corpus): its idle worker
        # threads spin, and valgrind counts their instructions too.
        env={
            **os.environ,
            "PYTHONPATH": str(REPO),
            "PYTHONHASHSEED": "0",
            "OPENBLAS_NUM_THREADS": "1",
            "OMP_NUM_THREADS": "1",
        },
    )
    summary = re.search(r"^summary: (\d+)", out.read_text(), re.MULTILINE)
    assert summary is not None, out
    return int(summary.group(1))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", type=int, default=1000)
    parser.add_argument("--events", type=int, default=50)
    args = parser.parse_args()
    if shutil.which("valgrind") is None:
        sys.exit("valgrind is not installed")
    sys.path.insert(0, str(REPO))
    from benchmarks.corpus import generate_corpus
    from benchmarks.summary import record_ratio

    with tempfile.TemporaryDirectory(prefix="role-review-instr-") as tmp:
        workdir = Path(tmp)
        corpus = workdir / "corpus.jsonl"
        n_events = 0
        with corpus.open("w", encoding="utf-8") as handle:
            for case in generate_corpus(args.cases, args.events):
                n_events += len(case["transcript"])
                handle.write(json.dumps(case) + "\n")
        print(
            f"[evaluator instructions] {args.cases:,} cases, {n_events:,} events, "
            f"python {sys.version.split()[0]}, load average {os.getloadavg()[0]:.2f}"
        )
        per_event: dict[str, float] = {}
        for name in ("baseline", "evaluate_case"):
            one = instructions(corpus, name, 1, workdir)
            three = instructions(corpus, name, 3, workdir)
            per_event[name] = (three - one) / (2 * n_events)
        baseline, ours = per_event["baseline"], per_event["evaluate_case"]
        print(f"  {'':<14} {'instructions/event':>18}")
        print(f"  {'baseline':<14} {baseline:>18,.0f}")
        print(f"  {'evaluate_case':<14} {ours:>18,.0f}")
        print(
            f"  speed-up over baseline (instructions): {baseline / ours:.3f}x "
            f"(target >= 2.5x, i.e. <= {baseline / 2.5:,.0f} per event)"
        )
        record_ratio(
            "evaluator vs the seed's evaluator, instructions per event (cachegrind)",
            baseline / ours,
            at_least=2.5,
            detail=f"{ours:,.0f} against {baseline:,.0f}",
        )


if __name__ == "__main__":
    main()
