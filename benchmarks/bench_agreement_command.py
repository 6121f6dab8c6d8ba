"""``review-app agreement --json``, the whole command, beside pandas + krippendorff.

Run from the repository root::

    PYTHONPATH=. python benchmarks/bench_agreement_command.py [--cases 40000]
        [--rounds 3] [--db PATH]

The data is :mod:`benchmarks.bench_agreement_db`'s: ``--cases`` conversations with 5
assistant turns, 5 reviewers, 20% of the slots empty, about 800,000 labels by
default, in one SQLite file (kept with ``--db PATH`` to reuse it next time). The
labels are also written as the label CSV ``review-app labels export`` prints.

In alternating rounds, each a fresh process with its bytecode cached:

* ``review-app agreement --rubric role-adherence@1 --json`` (every coefficient, the
  1,000-resample bootstrap interval, pairwise kappas, gold counts), and the same
  with ``--resamples 0``;
* the baseline a data scientist would write: ``pandas.read_csv`` of the label CSV,
  ``pivot`` to reviewers x units, ``krippendorff.alpha`` (nominal), one number.

Prints the median wall time of each and the ratio to the baseline (target for the
whole command with intervals: <= 2.5x). Asserts nothing.
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

from benchmarks.bench_agreement_db import generate_cases, populate  # noqa: E402
from benchmarks.summary import record, record_ratio  # noqa: E402

ENV = {**os.environ, "PYTHONPATH": str(REPO)}
ENV.pop("PYTHONDONTWRITEBYTECODE", None)

BASELINE = """
import sys
import krippendorff
import pandas as pd
labels = pd.read_csv(sys.argv[1], usecols=["case_id", "turn", "reviewer", "label"])
labels["code"], _ = pd.factorize(labels["label"], sort=True)
matrix = labels.pivot(index="reviewer", columns=["case_id", "turn"], values="code")
print(krippendorff.alpha(reliability_data=matrix.to_numpy(dtype=float),
                         level_of_measurement="nominal"))
"""


def timed_run(command: list[str]) -> tuple[float, str]:
    began = time.perf_counter()
    completed = subprocess.run(command, capture_output=True, text=True, env=ENV, check=False)
    elapsed = time.perf_counter() - began
    if completed.returncode != 0:
        raise SystemExit(f"{' '.join(command[:4])} failed: {completed.stderr[-500:]}")
    return elapsed, completed.stdout


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--cases", type=int, default=40_000)
    parser.add_argument("--reviewers", type=int, default=5)
    parser.add_argument("--missing", type=float, default=0.2)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--db", type=Path, help="keep the SQLite file here (reused if present)")
    args = parser.parse_args()
    print(f"python {sys.version.split()[0]}, load average {os.getloadavg()[0]:.2f}")
    with tempfile.TemporaryDirectory(prefix="role-review-agreement-cmd-") as tmp:
        workdir = Path(tmp)
        database = args.db or workdir / "review.db"
        url = f"sqlite:///{database}"
        if not database.exists():
            corpus = workdir / "cases.jsonl"
            with corpus.open("w", encoding="utf-8") as out:
                for case in generate_cases(args.cases, seed=args.seed):
                    out.write(json.dumps(case) + "\n")
            populate(url, corpus, args)
        csv_path = workdir / "labels.csv"
        cli = [sys.executable, "-m", "review_app"]
        _, csv_text = timed_run(
            [*cli, "labels", "export", "--rubric", "role-adherence@1", "--db", url]
        )
        csv_path.write_text(csv_text, encoding="utf-8")
        n_labels = csv_text.count("\n") - 1
        print(f"{n_labels:,} labels")
        commands = {
            "review-app agreement --json": [
                *cli,
                "agreement",
                "--rubric",
                "role-adherence@1",
                "--json",
                "--db",
                url,
            ],
            "  ... --resamples 0": [
                *cli,
                "agreement",
                "--rubric",
                "role-adherence@1",
                "--json",
                "--resamples",
                "0",
                "--db",
                url,
            ],
            "pandas read_csv + pivot + krippendorff": [
                sys.executable,
                "-c",
                BASELINE,
                str(csv_path),
            ],
        }
        times: dict[str, list[float]] = {name: [] for name in commands}
        outputs: dict[str, str] = {}
        timed_run(commands["pandas read_csv + pivot + krippendorff"])  # warm the page cache
        for _ in range(args.rounds):
            for name, command in commands.items():
                elapsed, outputs[name] = timed_run(command)
                times[name].append(elapsed)
        baseline = statistics.median(times["pandas read_csv + pivot + krippendorff"])
        ours = json.loads(outputs["review-app agreement --json"])
        alpha = ours.get("coefficients", ours).get("krippendorff_alpha", {})
        print(
            f"alpha: ours {alpha.get('value') if isinstance(alpha, dict) else alpha}, "
            f"krippendorff {outputs['pandas read_csv + pivot + krippendorff'].strip()}"
        )
        for name, values in times.items():
            median = statistics.median(values)
            print(
                f"  {name:<42} median {median:6.2f} s  best {min(values):6.2f} s  "
                f"{median / baseline:5.2f}x the baseline"
            )
        with_intervals = statistics.median(times["review-app agreement --json"])
        record_ratio(
            f"agreement --json (intervals included), {n_labels:,} labels, vs pandas + krippendorff",
            with_intervals / baseline,
            at_most=2.5,
        )
        without = statistics.median(times["  ... --resamples 0"])
        record(
            "agreement --resamples 0 vs the default 1,000 resamples",
            f"{without:.1f} s vs {with_intervals:.1f} s",
        )
    print(f"load average at the end {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
