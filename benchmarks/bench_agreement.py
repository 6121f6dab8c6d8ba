"""Timings of review_app.agreement on a large generated rating table.

Run from the repository root::

    PYTHONPATH=. python benchmarks/bench_agreement.py [--units 200000] [--raters 5]

Prints figures; asserts nothing except that our alpha equals the krippendorff
package's on the same data. The data: every unit has a "true" code drawn from a
skewed distribution over 6 codes, each rater gives it with probability 0.8 and
a uniformly random code otherwise, and each rating is missing with probability
0.2. Units are ``(conversation, turn)`` tuples, 10 turns per conversation.
"""

from __future__ import annotations

import argparse
import gc
import resource
import time
import tracemalloc
from collections.abc import Callable
from typing import Any

import krippendorff
import numpy as np

from benchmarks.corpus import generate_ratings
from review_app.agreement.bootstrap import (
    _bootstrap_alphas,
    alpha_bootstrap_ci,
    kappa_pairs_bootstrap_ci,
)
from review_app.agreement.coefficients import krippendorff_alpha
from review_app.agreement.summary import agreement_summary
from review_app.stats.table import RatingTable

CODES = ("in_role", "persona_break", "scope_break", "tone_break", "borderline", "cannot_judge")
CODE_SHARES = (0.55, 0.12, 0.1, 0.08, 0.1, 0.05)
BREAK_MAPPING = {
    "in_role": "no_break",
    "persona_break": "break",
    "scope_break": "break",
    "tone_break": "break",
    "borderline": None,
    "cannot_judge": None,
}
VERDICT_MAPPING = {
    "in_role": "pass",
    "persona_break": "fail",
    "scope_break": "fail",
    "tone_break": "fail",
    "borderline": "borderline",
    "cannot_judge": None,
}
TURNS_PER_CONVERSATION = 10


def timed(label: str, function: Callable[[], Any], *, repeat: int = 1) -> tuple[Any, float]:
    best = float("inf")
    result: Any = None
    for _ in range(repeat):
        gc.collect()
        start = time.perf_counter()
        result = function()
        best = min(best, time.perf_counter() - start)
    print(f"{label:<62} {best:8.3f} s")
    return result, best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--units", type=int, default=200_000)
    parser.add_argument("--raters", type=int, default=5)
    parser.add_argument("--missing", type=float, default=0.2)
    parser.add_argument("--resamples", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=7)
    arguments = parser.parse_args()

    unit_ids, rater_ids, code_ids = generate_ratings(
        arguments.units,
        arguments.raters,
        shares=CODE_SHARES,
        missing=arguments.missing,
        seed=arguments.seed,
    )
    n_ratings = len(unit_ids)
    print(
        f"{arguments.units:,} units x {arguments.raters} raters, {arguments.missing:.0%} missing: "
        f"{n_ratings:,} ratings, {len(CODES)} codes"
    )

    rater_names = np.array([f"reviewer-{i}" for i in range(arguments.raters)], dtype=object)
    code_names = np.array(CODES, dtype=object)
    unit_tuples = np.empty(arguments.units, dtype=object)
    unit_tuples[:] = [
        (f"case-{u // TURNS_PER_CONVERSATION:06d}", u % TURNS_PER_CONVERSATION)
        for u in range(arguments.units)
    ]
    rating_units = unit_tuples[unit_ids]
    rating_raters = rater_names[rater_ids]
    rating_codes = code_names[code_ids]

    print("\n-- building the table")
    timed(
        "RatingTable.from_arrays (int units, str raters, str codes)",
        lambda: RatingTable.from_arrays(units=unit_ids, raters=rating_raters, values=rating_codes),
        repeat=3,
    )
    table, _ = timed(
        "RatingTable.from_arrays ((case, turn) units, str raters+codes)",
        lambda: RatingTable.from_arrays(
            units=rating_units, raters=rating_raters, values=rating_codes
        ),
        repeat=3,
    )

    print("\n-- nominal alpha, same data")
    reliability_data = np.full((arguments.raters, arguments.units), np.nan)
    reliability_data[rater_ids, unit_ids] = code_ids
    ours, ours_seconds = timed(
        "ours: krippendorff_alpha(table)", lambda: krippendorff_alpha(table), repeat=5
    )
    _, ours_with_build = timed(
        "ours from the matrix: RatingTable.from_arrays + alpha",
        lambda: krippendorff_alpha(_table_from_matrix(reliability_data)),
        repeat=5,
    )
    theirs, theirs_seconds = timed(
        "krippendorff.alpha(reliability_data, 'nominal')",
        lambda: krippendorff.alpha(
            reliability_data=reliability_data, level_of_measurement="nominal"
        ),
        repeat=5,
    )
    assert ours.value is not None and abs(ours.value - theirs) < 1e-9, (ours.value, theirs)
    print(f"alpha = {ours.value:.6f} (krippendorff package: {theirs:.6f})")
    print(
        f"ratio krippendorff / ours: {theirs_seconds / ours_seconds:.1f}x on the built table, "
        f"{theirs_seconds / ours_with_build:.1f}x including building it from the matrix"
    )

    print("\n-- the full summary")
    summary_arguments: dict[str, Any] = {
        "break_mapping": BREAK_MAPPING,
        "verdict_mapping": VERDICT_MAPPING,
        "conversation_of": lambda unit: unit[0],
        "turn_of": lambda unit: unit[1],
        "n_resamples": arguments.resamples,
        "seed": 0,
    }
    summary, _ = timed(
        f"agreement_summary ({arguments.resamples} bootstrap resamples)",
        lambda: agreement_summary(table, **summary_arguments),
        repeat=3,
    )
    print(
        f"alpha {summary['krippendorff_alpha']['value']:.4f}, 95% CI {summary['alpha_ci95']}, "
        f"first-break match {summary['conversation']['first_break_agreement']['value']:.4f}"
    )
    timed(
        f"  of which kappa_pairs_bootstrap_ci ({table.n_raters} raters' pairs, conversations)",
        lambda: kappa_pairs_bootstrap_ci(
            table, n_resamples=arguments.resamples, seed=0, cluster_of=lambda unit: unit[0]
        ),
        repeat=3,
    )
    tracemalloc.start()
    agreement_summary(table, **summary_arguments)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    print(f"peak traced memory during agreement_summary: {peak / 2**20:.1f} MiB")

    print("\n-- bootstrap on 10,000 units")
    small = table.restrict_units(table.units[:10_000])
    timed(
        f"alpha_bootstrap_ci, 1000 resamples, {small.n_units:,} units (auto)",
        lambda: alpha_bootstrap_ci(small, n_resamples=1000, seed=0),
        repeat=3,
    )
    counts = small.value_counts()
    pairable = counts[counts.sum(axis=1) >= 2]
    timed(
        "  the same, forced to draw units (no profile grouping)",
        lambda: _bootstrap_alphas(
            pairable, pairable.sum(axis=1), n_resamples=1000, seed=0, draw="units"
        ),
        repeat=3,
    )
    many_ids, many_raters, many_codes = generate_ratings(
        10_000, 40, shares=CODE_SHARES, missing=0.5, seed=1
    )
    many = RatingTable.from_arrays(units=many_ids, raters=many_raters, values=many_codes)
    timed(
        "alpha_bootstrap_ci, 1000 resamples, 10,000 units x 40 raters",
        lambda: alpha_bootstrap_ci(many, n_resamples=1000, seed=0),
        repeat=3,
    )

    print("\n-- one million ratings")
    million_ids, million_raters, million_codes = generate_ratings(
        250_000, 5, shares=CODE_SHARES, missing=0.2, seed=arguments.seed
    )
    million_rater_names = rater_names[million_raters]
    million_code_names = code_names[million_codes]
    million, _ = timed(
        f"RatingTable.from_arrays, {len(million_ids):,} ratings (int units, str raters+codes)",
        lambda: RatingTable.from_arrays(
            units=million_ids, raters=million_rater_names, values=million_code_names
        ),
        repeat=3,
    )
    timed("krippendorff_alpha on it", lambda: krippendorff_alpha(million), repeat=3)
    max_rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    print(f"\nprocess peak resident memory (whole run): {max_rss / 1024:.0f} MiB")


def _table_from_matrix(reliability_data: np.ndarray) -> RatingTable:
    rated = ~np.isnan(reliability_data)
    rater_ids, unit_ids = np.nonzero(rated)
    return RatingTable.from_arrays(
        units=unit_ids, raters=rater_ids, values=reliability_data[rated].astype(np.int64)
    )


if __name__ == "__main__":
    main()
