"""Two judge runs compared on gold: ``stats.paired.compare_two_runs`` beside a direct loop.

Run from the repository root::

    PYTHONPATH=. python benchmarks/bench_judge_compare.py [--units 10000] [--resamples 1000]

Synthetic gold and two runs' codes (7 codes, ~5 turns per conversation). Measured side
by side in one run: ``compare_two_runs`` (both runs' kappa and accuracy intervals, the
paired difference on the same cluster resamples, McNemar, the differing units) and a
direct baseline that draws the same conversations per resample and computes the two
kappas with ``sklearn.metrics.cohen_kappa_score`` (kappa difference only), on fewer
resamples and scaled to the same count. Prints seconds and the ratio; asserts nothing.
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from review_app.stats.paired import compare_two_runs  # noqa: E402

CODES = ["in_role", "scope_break", "tone_break", "persona_break", "authority_break", "x", "y"]
MAPPING = {c: ("no_break" if c in ("in_role", "x") else "break") for c in CODES}


def world(n_units: int, seed: int = 0) -> tuple[dict, dict, dict]:
    rng = random.Random(seed)
    gold, first, second = {}, {}, {}
    case = 0
    while len(gold) < n_units:
        for turn in range(1, rng.randint(2, 9)):
            unit = (f"c{case:06d}", turn)
            truth = rng.choice(CODES)
            gold[unit] = truth
            first[unit] = rng.choice(CODES) if rng.random() < 0.3 else truth
            second[unit] = rng.choice(CODES) if rng.random() < 0.25 else truth
        case += 1
    return gold, first, second


def baseline(gold: dict, first: dict, second: dict, n_resamples: int, seed: int) -> float:
    from sklearn.metrics import cohen_kappa_score

    units = sorted(gold)
    cases = sorted({u[0] for u in units})
    rows_of: dict[str, list[int]] = {c: [] for c in cases}
    for i, unit in enumerate(units):
        rows_of[unit[0]].append(i)
    g = np.array([gold[u] for u in units])
    a = np.array([first[u] for u in units])
    b = np.array([second[u] for u in units])
    rng = np.random.default_rng(seed)
    start = time.perf_counter()
    for _ in range(n_resamples):
        drawn = rng.integers(0, len(cases), size=len(cases))
        rows = np.concatenate([rows_of[cases[d]] for d in drawn])
        cohen_kappa_score(g[rows], b[rows]) - cohen_kappa_score(g[rows], a[rows])
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--units", type=int, default=10_000)
    parser.add_argument("--resamples", type=int, default=1000)
    parser.add_argument("--baseline-resamples", type=int, default=50)
    options = parser.parse_args()
    gold, first, second = world(options.units)
    start = time.perf_counter()
    result = compare_two_runs(
        gold=gold,
        first=first,
        second=second,
        break_mapping=MAPPING,
        names=("v1", "v2"),
        cluster_of=lambda unit: unit[0],
        n_resamples=options.resamples,
    )
    ours = time.perf_counter() - start
    direct = baseline(gold, first, second, options.baseline_resamples, 0)
    scaled = direct * options.resamples / options.baseline_resamples
    print(f"units {result.n_units}, conversations {result.n_conversations}")
    print(f"verdict: {result.verdict}")
    print(f"compare_two_runs, {options.resamples} resamples: {ours:.2f} s")
    print(
        f"direct loop with sklearn: {direct:.2f} s for {options.baseline_resamples} resamples, "
        f"{scaled:.1f} s scaled to {options.resamples}"
    )
    print(f"ratio direct / compare_two_runs: {scaled / ours:.1f}x")


if __name__ == "__main__":
    main()
