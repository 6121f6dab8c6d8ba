"""Agreement read from the database, end to end, beside ``krippendorff.alpha`` alone.

Run from the repository root::

    PYTHONPATH=. python benchmarks/bench_agreement_db.py [--cases 40000] [--missing 0.2]
        [--postgres URL] [--repeat 3]

Prints figures; asserts only that the service's alpha equals the krippendorff
package's on the same labels.

Data: ``--cases`` support conversations of 10 events each (5 user turns, 5
assistant turns), imported with :func:`review_app.services.cases.importing.import_paths`,
so 200,000 units (assistant turns) by default. ``--reviewers`` 5 reviewers give
every unit a label in 1,000,000 (unit, reviewer) slots, of which ``--missing``
(20%) are dropped at random: about 800,000 labels by default; ``--missing 0``
keeps all 1,000,000. Each unit has a "true" code of role-adherence@1 drawn from a
skewed distribution; a reviewer gives it with probability 0.8, else a random code.
Labels go in with :func:`storage.labels.insert_labels` (executemany on
SQLite, COPY on PostgreSQL).

Measured, each in a fresh child process (time of the call; peak resident memory
of the whole child, with the interpreter and imports):

1. ``agreement_report(engine, actor, rubric=..., n_resamples=1000)``: reading the labels,
   every coefficient, the bootstrap interval and the gold counts (targets: < 5 s,
   < 1 GB, within 3x of 2).
2. ``krippendorff.alpha`` alone on the reviewers x units matrix of the same labels,
   already in memory.
3. A 1,000-resample bootstrap of alpha over 10,000 units (target: < 3 s).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TypeVar

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from benchmarks.corpus import SUPPORT_CONTRACT, generate_ratings  # noqa: E402
from benchmarks.reliability import postgres_reachable  # noqa: E402

T = TypeVar("T")
RUBRIC = "role-adherence@1"
CODES = (
    "in_role",
    "persona_break",
    "scope_break",
    "authority_break",
    "tone_break",
    "out_of_role_mishandled",
    "false_action_claim",
    "borderline",
    "cannot_judge",
)
CODE_SHARES = (0.6, 0.05, 0.06, 0.05, 0.05, 0.04, 0.03, 0.08, 0.04)
ASSISTANT_TURNS = 5
_TRIAGE_ACTIONS = SUPPORT_CONTRACT["roles"]["support_triage"]["allowed_actions"]


# --- data -------------------------------------------------------------------------------


def case_id_of(index: int) -> str:
    return f"agree-{index:06d}"


def assistant_turn(position: int) -> int:
    """Turn number of the ``position``-th assistant event (user 1, assistant 2, ...)."""
    return 2 * (position + 1)


def generate_cases(n_cases: int, *, seed: int) -> Iterator[dict[str, Any]]:
    rng = np.random.default_rng(seed)
    for index in range(n_cases):
        violation_at = int(rng.integers(ASSISTANT_TURNS)) if rng.random() < 0.1 else -1
        transcript: list[dict[str, Any]] = []
        for position in range(ASSISTANT_TURNS):
            transcript.append(
                {"turn": 2 * position + 1, "actor": "user", "text": "Where is my parcel?"}
            )
            actions = [_TRIAGE_ACTIONS[int(rng.integers(len(_TRIAGE_ACTIONS)))]]
            if position == violation_at:
                actions.append("refund_order")
            transcript.append(
                {
                    "turn": assistant_turn(position),
                    "actor": "assistant",
                    "text": "Let me look that up for you.",
                    "observed_actions": actions,
                }
            )
        yield {
            "case_id": case_id_of(index),
            "chatbot_role": "Support triage agent for an online shop.",
            "contract": SUPPORT_CONTRACT,
            "transcript": transcript,
        }


def reliability_matrix(
    unit_ids: np.ndarray, reviewer_ids: np.ndarray, code_ids: np.ndarray, n_units: int
) -> np.ndarray:
    """Reviewers x units, NaN where a reviewer gave no label (krippendorff's layout)."""
    matrix = np.full((int(reviewer_ids.max()) + 1, n_units), np.nan)
    matrix[reviewer_ids, unit_ids] = code_ids
    return matrix


# --- populating a database -------------------------------------------------------------------


def populate(url: str, corpus: Path, args: argparse.Namespace) -> None:
    from sqlmodel import Session

    from review_app.services.access.actors import operator_actor
    from review_app.services.cases.importing import import_paths
    from review_app.services.rubrics.rubric_catalog import sync_rubrics
    from storage import labels, reviewers
    from storage.engine import create_database_engine
    from storage.migrations.upgrade import upgrade_database

    engine = create_database_engine(url)
    upgrade_database(engine)
    start = time.perf_counter()
    summary = import_paths(engine, operator_actor(), [corpus])
    print(
        f"  import_paths: {summary.totals.imported:,} cases "
        f"({summary.totals.with_violations:,} with a violation) in "
        f"{time.perf_counter() - start:.1f} s"
    )
    rubric = sync_rubrics(engine, operator_actor()).get(RUBRIC)
    n_units = args.cases * ASSISTANT_TURNS
    unit_ids, reviewer_ids, code_ids = generate_ratings(
        n_units, args.reviewers, shares=CODE_SHARES, missing=args.missing, seed=args.seed
    )
    start = time.perf_counter()
    with Session(engine) as session:
        ids = [
            reviewers.create_reviewer(session, name=f"reviewer-{i}").id
            for i in range(args.reviewers)
        ]
        now = datetime.now(UTC)
        chunk = 100_000
        for begin in range(0, len(unit_ids), chunk):
            rows = [
                (
                    case_id_of(int(u) // ASSISTANT_TURNS),
                    assistant_turn(int(u) % ASSISTANT_TURNS),
                    ids[int(r)],
                    rubric.id,
                    rubric.version,
                    CODES[int(c)],
                    None,
                    True,
                    "import",
                    now,
                )
                for u, r, c in zip(
                    unit_ids[begin : begin + chunk],
                    reviewer_ids[begin : begin + chunk],
                    code_ids[begin : begin + chunk],
                    strict=True,
                )
            ]
            labels.insert_labels(session, rows=rows)
        session.commit()
    if engine.dialect.name == "postgresql":
        with engine.begin() as connection:
            connection.exec_driver_sql("ANALYZE")
    print(
        f"  insert_labels: {len(unit_ids):,} labels by {args.reviewers} reviewers in "
        f"{time.perf_counter() - start:.1f} s"
    )
    engine.dispose()


# --- measurements in child processes -------------------------------------------------------


def peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def timed(call: Callable[[], T]) -> tuple[T, dict[str, float]]:
    """``call()`` and its wall and CPU seconds, and the peak RSS (MB) after it."""
    start, cpu_start = time.perf_counter(), time.process_time()
    result = call()
    seconds, cpu = time.perf_counter() - start, time.process_time() - cpu_start
    return result, {"seconds": seconds, "cpu": cpu, "peak_mb": peak_rss_mb()}


def child_report(url: str, resamples: int) -> dict[str, Any]:
    from review_app.services.access.actors import operator_actor
    from review_app.services.review.agreement_reports import agreement_report
    from review_app.services.rubrics.rubric_catalog import sync_rubrics
    from storage.engine import create_database_engine

    engine = create_database_engine(url)
    rubric = sync_rubrics(engine, operator_actor()).for_reports(RUBRIC)
    before = peak_rss_mb()
    report, figures = timed(
        lambda: agreement_report(engine, operator_actor(), rubric=rubric, n_resamples=resamples)
    )
    return {
        **figures,
        "before_mb": before,
        "alpha": report["krippendorff_alpha"]["value"],
        "ci95": report["alpha_ci95"],
        "ratings": report["ratings"],
        "units": report["units"],
    }


def child_queue(url: str) -> dict[str, Any]:
    from review_app.services.access.actors import operator_actor
    from review_app.services.labels.adjudication import disagreement_queue
    from review_app.services.rubrics.rubric_catalog import sync_rubrics
    from storage.engine import create_database_engine

    engine = create_database_engine(url)
    rubric = sync_rubrics(engine, operator_actor()).for_reports(RUBRIC)
    queue, figures = timed(lambda: disagreement_queue(engine, operator_actor(), rubric=rubric))
    return {**figures, "units": len(queue)}


def child_krippendorff(args: argparse.Namespace) -> dict[str, Any]:
    import krippendorff

    n_units = args.cases * ASSISTANT_TURNS
    matrix = reliability_matrix(
        *generate_ratings(
            n_units, args.reviewers, shares=CODE_SHARES, missing=args.missing, seed=args.seed
        ),
        n_units,
    )
    before = peak_rss_mb()
    alpha, figures = timed(
        lambda: krippendorff.alpha(reliability_data=matrix, level_of_measurement="nominal")
    )
    return {**figures, "before_mb": before, "alpha": alpha}


def child_bootstrap(args: argparse.Namespace) -> dict[str, Any]:
    from review_app.agreement.bootstrap import alpha_bootstrap_ci
    from review_app.stats.table import RatingTable

    unit_ids, reviewer_ids, code_ids = generate_ratings(
        10_000, args.reviewers, shares=CODE_SHARES, missing=args.missing, seed=args.seed
    )
    table = RatingTable.from_arrays(units=unit_ids, raters=reviewer_ids, values=code_ids)
    alpha, figures = timed(lambda: alpha_bootstrap_ci(table, n_resamples=1000, seed=0))
    return {**figures, "units": table.n_units, "ci95": alpha.ci95}


def in_child(*child_args: str) -> dict[str, Any]:
    completed = subprocess.run(
        [sys.executable, __file__, "--child", *child_args],
        check=True,
        capture_output=True,
        text=True,
        cwd=REPO,
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )
    result: dict[str, Any] = json.loads(completed.stdout.strip().splitlines()[-1])
    return result


def runs_line(runs: list[dict[str, Any]], key: str) -> str:
    return ", ".join(f"{run[key]:.2f}" for run in runs)


def measure(label: str, url: str, args: argparse.Namespace, *, server_side: bool) -> None:
    """Report and krippendorff children taken in turn, so both see the same machine load."""
    reports: list[dict[str, Any]] = []
    references: list[dict[str, Any]] = []
    for _ in range(args.repeat):
        references.append(in_child("krippendorff", *forwarded(args)))
        reports.append(in_child("report", url, *forwarded(args)))
    first = reports[0]
    assert abs(first["alpha"] - references[0]["alpha"]) < 1e-9, (first, references[0])
    wall = statistics.median(run["seconds"] for run in reports)
    cpu = statistics.median(run["cpu"] for run in reports)
    alone_wall = statistics.median(run["seconds"] for run in references)
    alone_cpu = statistics.median(run["cpu"] for run in references)
    peak = max(run["peak_mb"] for run in reports)
    print(
        f"  agreement_report, {args.resamples} resamples, from {label}: median {wall:.2f} s wall "
        f"(runs {runs_line(reports, 'seconds')}), {cpu:.2f} s CPU "
        f"(runs {runs_line(reports, 'cpu')})"
    )
    print(
        f"    peak RSS {peak:,.0f} MB ({first['before_mb']:,.0f} MB before the call); "
        f"{first['ratings']:,} labels on {first['units']:,} units; alpha {first['alpha']:.6f}, "
        f"95% CI [{first['ci95'][0]:.4f}, {first['ci95'][1]:.4f}]"
    )
    print(
        f"  krippendorff.alpha alone, same labels as a matrix in memory: median {alone_wall:.2f} s "
        f"wall (runs {runs_line(references, 'seconds')}), {alone_cpu:.2f} s CPU; peak RSS "
        f"{max(run['peak_mb'] for run in references):,.0f} MB"
    )
    cpu_note = " (CPU of this process only: the server's work is not in it)" if server_side else ""
    queue = in_child("queue", url, *forwarded(args))
    print(
        f"  disagreement_queue: {queue['units']:,} units in {queue['seconds']:.2f} s wall, "
        f"{queue['cpu']:.2f} s CPU, peak RSS {queue['peak_mb']:,.0f} MB"
    )
    print(
        f"  ratio end to end / alpha alone: {wall / alone_wall:.1f}x wall, "
        f"{cpu / alone_cpu:.1f}x CPU{cpu_note}   (targets: < 5 s, < 1024 MB, <= 3x)"
    )


def forwarded(args: argparse.Namespace) -> list[str]:
    return [
        f"--cases={args.cases}",
        f"--reviewers={args.reviewers}",
        f"--missing={args.missing}",
        f"--seed={args.seed}",
        f"--resamples={args.resamples}",
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", type=int, default=40_000)
    parser.add_argument("--reviewers", type=int, default=5)
    parser.add_argument("--missing", type=float, default=0.2)
    parser.add_argument("--resamples", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument(
        "--postgres",
        default=os.environ.get(
            "REVIEW_APP_TEST_POSTGRES_URL", "postgresql+psycopg://postgres@127.0.0.1:5432/test"
        ),
        help="PostgreSQL URL ('' to skip)",
    )
    parser.add_argument("--child", nargs="+", help=argparse.SUPPRESS)
    args = parser.parse_args()

    if args.child:
        kind = args.child[0]
        if kind == "report":
            result = child_report(args.child[1], args.resamples)
        elif kind == "queue":
            result = child_queue(args.child[1])
        elif kind == "krippendorff":
            result = child_krippendorff(args)
        else:
            result = child_bootstrap(args)
        print(json.dumps(result))
        return

    n_units = args.cases * ASSISTANT_TURNS
    slots = n_units * args.reviewers
    print(
        f"{args.cases:,} cases x {ASSISTANT_TURNS} assistant turns = {n_units:,} units; "
        f"{args.reviewers} reviewers: {slots:,} slots, {args.missing:.0%} dropped "
        f"-> about {round(slots * (1 - args.missing)):,} labels"
    )
    print(f"python {sys.version.split()[0]}, load average {os.getloadavg()[0]:.2f}")

    with tempfile.TemporaryDirectory(prefix="role-review-agreement-") as tmp:
        workdir = Path(tmp)
        corpus = workdir / "cases.jsonl"
        with corpus.open("w", encoding="utf-8") as out:
            for case in generate_cases(args.cases, seed=args.seed):
                out.write(json.dumps(case) + "\n")

        print("\n[SQLite]")
        sqlite_url = f"sqlite:///{workdir / 'agreement.db'}"
        populate(sqlite_url, corpus, args)
        measure("SQLite", sqlite_url, args, server_side=False)

        if args.postgres:
            reason = postgres_reachable(args.postgres)
            if reason:
                print(f"\n[PostgreSQL] skipped: {reason}")
            else:
                print("\n[PostgreSQL]")
                from sqlalchemy import create_engine, text

                schema = f"bench_{uuid.uuid4().hex[:8]}"
                admin = create_engine(args.postgres)
                with admin.begin() as connection:
                    connection.execute(text(f"CREATE SCHEMA {schema}"))
                separator = "&" if "?" in args.postgres else "?"
                url = f"{args.postgres}{separator}options=-csearch_path%3D{schema}"
                try:
                    populate(url, corpus, args)
                    measure("PostgreSQL", url, args, server_side=True)
                finally:
                    with admin.begin() as connection:
                        connection.execute(text(f"DROP SCHEMA {schema} CASCADE"))
                    admin.dispose()

    print("\n[bootstrap of alpha, 1,000 resamples, 10,000 units]")
    boots = [in_child("bootstrap", *forwarded(args)) for _ in range(args.repeat)]
    print(
        f"  alpha_bootstrap_ci: median {statistics.median(r['seconds'] for r in boots):.3f} s wall "
        f"(runs {runs_line(boots, 'seconds')}), "
        f"{statistics.median(r['cpu'] for r in boots):.3f} s CPU, on {boots[0]['units']:,} "
        "pairable units (target < 3 s)"
    )


if __name__ == "__main__":
    main()
