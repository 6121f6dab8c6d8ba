"""Certified selective judging, uncertainty audits and drift at scale (statistics core).

Run from the repository root::

    PYTHONPATH=. python benchmarks/bench_selective.py [--turns 200000] [--gold 5000]
        [--draw-turns 1000000] [--drift-turns 200000] [--resamples 1000]

Three parts, each in a fresh child process (so each peak resident memory, the
child's ``ru_maxrss``, is its own), figures only (nothing asserted):

1. ``route``: ``judge route`` over ``--turns`` judged turns with ``--gold`` gold units
   and a three-run cascade (scores to confidences, the fixed-sequence certification of
   each run on the gold the earlier runs left, the decided masks).
2. ``draw``: an uncertainty draw over ``--draw-turns`` judged turns (the probabilities
   and one uniform per turn), then the active estimate and the uniform-width budget
   line with every drawn turn labeled.
3. ``drift``: ``drift`` over ``--drift-turns`` turns (10 to 30 per conversation, three
   roles): the position bins, rates by position and by role with ``--resamples``
   conversation-bootstrap resamples, the first breaks and the logistic slope.
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import time
from typing import Any

import numpy as np

from review_app.stats.active import active_mean, draw_by_uncertainty, uniform_width
from review_app.stats.drift import (
    bin_of_positions,
    first_break_positions,
    grouped_rates,
    position_bins,
    position_slope,
)
from review_app.stats.selective import route_cascade, verdict_confidence


def _route(args: argparse.Namespace) -> dict[str, Any]:
    rng = np.random.default_rng(1)
    n = args.turns
    truth = rng.random(n) < 0.1
    gold = np.zeros(n, dtype=bool)
    gold[rng.choice(n, size=args.gold, replace=False)] = True
    runs = []
    for sharp in (0.7, 0.85, 0.95):  # cheap first
        confidence = rng.uniform(0.5, 1.0, n)
        wrong = rng.random(n) < (1 - confidence) * (1.2 - sharp)
        said = truth != wrong
        scores = np.where(said, confidence, 1 - confidence)
        runs.append((scores, said, wrong))
    start = time.perf_counter()
    confidences = [verdict_confidence(s, b) for s, b, _ in runs]
    steps = route_cascade(
        confidences, [w for _, _, w in runs], gold, alpha=0.1, delta=0.1, min_units=30
    )
    seconds = time.perf_counter() - start
    decided = int(sum(step.decides.sum() for step in steps))
    return {
        "part": f"judge route: {n} turns, {args.gold} gold, 3-run cascade",
        "seconds": seconds,
        "detail": f"coverage {decided / n:.3f}; thresholds "
        + ", ".join(str(s.certification.threshold) for s in steps),
    }


def _draw(args: argparse.Namespace) -> dict[str, Any]:
    rng = np.random.default_rng(2)
    n = args.draw_turns
    scores = np.clip(rng.beta(0.4, 2.0, n), 0, 1)
    y = (rng.random(n) < scores).astype(float)
    start = time.perf_counter()
    pi, drawn = draw_by_uncertainty(scores, budget=5000, mix=0.5, seed=3)
    drew = time.perf_counter() - start
    estimate = active_mean(scores, y, drawn, np.where(drawn, pi, 1.0))
    width = uniform_width(scores, y, drawn, np.where(drawn, pi, 1.0), labels=int(drawn.sum()))
    seconds = time.perf_counter() - start
    return {
        "part": f"uncertainty draw: {n} turns, budget 5000",
        "seconds": seconds,
        "detail": f"draw alone {drew:.3f} s; drew {int(drawn.sum())}; active width "
        f"{estimate.ci95[1] - estimate.ci95[0]:.4f} vs uniform {width:.4f}",
    }


def _drift(args: argparse.Namespace) -> dict[str, Any]:
    rng = np.random.default_rng(4)
    lengths = []
    total = 0
    while total < args.drift_turns:
        k = int(rng.integers(10, 31))
        lengths.append(min(k, args.drift_turns - total))
        total += lengths[-1]
    clusters = np.repeat(np.arange(len(lengths)), lengths)
    positions = np.concatenate([np.arange(1, k + 1) for k in lengths])
    roles = rng.integers(0, 3, size=total)
    breaks = rng.random(total) < np.where(positions >= 6, 0.2, 0.05)
    start = time.perf_counter()
    bins = position_bins(positions)
    groups = bin_of_positions(positions, bins)
    grouped_rates(groups, breaks, clusters, n_groups=len(bins), n_resamples=args.resamples)
    grouped_rates(roles, breaks, clusters, n_groups=3, n_resamples=args.resamples)
    first_break_positions(clusters, positions, breaks)
    slope = position_slope(positions, breaks, clusters)
    seconds = time.perf_counter() - start
    return {
        "part": f"drift: {total} turns in {len(lengths)} conversations, {args.resamples} resamples",
        "seconds": seconds,
        "detail": f"{len(bins)} bins; odds x{slope['odds_ratio']:.3f} per later answer",
    }


PARTS = {"route": _route, "draw": _draw, "drift": _drift}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=200_000)
    parser.add_argument("--gold", type=int, default=5_000)
    parser.add_argument("--draw-turns", type=int, default=1_000_000)
    parser.add_argument("--drift-turns", type=int, default=200_000)
    parser.add_argument("--resamples", type=int, default=1000)
    parser.add_argument("--part", choices=sorted(PARTS), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.part:
        result = PARTS[args.part](args)
        result["peak_rss_mib"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        print(json.dumps(result))
        return
    for part in PARTS:
        done = subprocess.run(
            [sys.executable, __file__, *sys.argv[1:], "--part", part],
            capture_output=True,
            text=True,
            check=True,
        )
        result = json.loads(done.stdout.strip().splitlines()[-1])
        print(
            f"{result['part']}: {result['seconds']:.2f} s, peak RSS "
            f"{result['peak_rss_mib']:.0f} MiB ({result['detail']})"
        )


if __name__ == "__main__":
    main()
