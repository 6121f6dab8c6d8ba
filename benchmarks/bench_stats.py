"""Judge statistics at scale: `judge report` and `judge estimate`, alt-test share, bootstraps.

Run from the repository root::

    PYTHONPATH=. python benchmarks/bench_stats.py [--turns 200000] [--audited 2000]
        [--resamples 1000] [--db-turns 200000]

Two parts, figures only (nothing asserted):

1. The statistics core on generated data: ``--turns`` judged turns (10 per
   conversation), ``--audited`` of them labeled by three reviewers; the alternative
   annotator test, compare_to_reference with the cluster bootstrap, like-for-like
   kappas and the PPI++ estimate; the cluster bootstrap beside the unit bootstrap of a
   kappa at ``--resamples`` resamples (and how much wider the cluster interval is).
2. End to end on a database (SQLite, or the ``--db`` URL): ``--db-turns`` judged turns
   imported as cases and verdicts, an audit sample of ``--audited`` turns labeled by
   three reviewers, then the services behind ``review-app judge report`` and ``judge
   estimate``: seconds, peak traced memory, and the alt-test's share of the report.
   ``--db-turns 0`` skips it.

Peak RSS is the process's (``ru_maxrss``), printed after each part.
"""

from __future__ import annotations

import argparse
import resource
import tempfile
import time
import tracemalloc
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from review_app.calibration.like_for_like import kappa_estimate, like_for_like
from review_app.calibration.reference import compare_to_reference
from review_app.stats.alt_test import alt_test
from review_app.stats.ppi import ppi_mean

CODES = ("in_role", "scope_break", "tone_break", "persona_break", "borderline")
SHARES = (0.85, 0.05, 0.04, 0.03, 0.03)
BREAK_MAPPING = {
    "in_role": "no_break",
    "scope_break": "break",
    "tone_break": "break",
    "persona_break": "break",
    "borderline": None,
}
TURNS_PER_CONVERSATION = 10


TRACE = True  # --untraced: tracemalloc slows object-heavy code and adds to its RSS


def measured(label: str, function: Callable[[], Any]) -> tuple[Any, float, float]:
    """Run once: result, seconds, peak traced MiB (0 when untraced)."""
    if TRACE:
        tracemalloc.start()
    start = time.perf_counter()
    result = function()
    seconds = time.perf_counter() - start
    peak = tracemalloc.get_traced_memory()[1] / 2**20 if TRACE else 0.0
    tracemalloc.stop()
    print(f"{label:<62} {seconds:8.3f} s  " + (f"peak {peak:8.1f} MiB" if TRACE else "untraced"))
    return result, seconds, peak


def rss() -> str:
    return f"peak RSS so far: {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MiB"


def generate(n_turns: int, n_audited: int, seed: int) -> dict[str, Any]:
    """True codes with a per-conversation persona slip, a noisy judge, three reviewers."""
    rng = np.random.default_rng(seed)
    units = [(f"c{i // TURNS_PER_CONVERSATION:06d}", i % TURNS_PER_CONVERSATION + 1)
             for i in range(n_turns)]  # fmt: skip
    truth = rng.choice(len(CODES), size=n_turns, p=SHARES)
    # Turns of one conversation are alike: a slipped persona stays slipped.
    slipped = np.repeat(rng.random(n_turns // TURNS_PER_CONVERSATION + 1) < 0.1,
                        TURNS_PER_CONVERSATION)[:n_turns]  # fmt: skip
    truth = np.where(slipped & (rng.random(n_turns) < 0.7), 3, truth)
    noise = rng.random(n_turns) < 0.15
    judge = np.where(noise, rng.choice(len(CODES), size=n_turns), truth)
    audited = np.sort(rng.choice(n_turns, size=n_audited, replace=False))
    reviewers: dict[str, dict[tuple[str, int], str]] = {}
    for name in ("ana", "ben", "cy"):
        slip = rng.random(n_audited) < 0.1
        codes = np.where(slip, rng.choice(len(CODES), size=n_audited), truth[audited])
        reviewers[name] = {
            units[int(i)]: CODES[int(c)] for i, c in zip(audited, codes, strict=True)
        }
    return {
        "units": units,
        "truth": truth,
        "judge": {u: CODES[int(c)] for u, c in zip(units, judge, strict=True)},
        "judge_codes": judge,
        "audited": audited,
        "reviewers": reviewers,
    }


def core_part(arguments: argparse.Namespace) -> None:
    print(
        f"\n-- statistics core: {arguments.turns} judged turns, {arguments.audited} audited, "
        "3 reviewers"
    )
    data, _, _ = measured("generate", lambda: generate(arguments.turns, arguments.audited, 1))
    reviewers, judged = data["reviewers"], data["judge"]
    result, alt_seconds, _ = measured(
        "alt_test (3 reviewers, accuracy)", lambda: alt_test(reviewers, judged)
    )
    print(f"   winning rate {result.winning_rate}, advantage {result.advantage_probability:.3f}")
    gold = reviewers["ana"]
    _, compare_seconds, _ = measured(
        f"compare_to_reference, cluster bootstrap x{arguments.resamples}",
        lambda: compare_to_reference(
            reference=gold, judged=judged, break_mapping=BREAK_MAPPING,
            n_resamples=arguments.resamples, cluster_of=lambda u: u[0],
        ),
    )  # fmt: skip
    _, like_seconds, _ = measured(
        f"like_for_like (3 pairs + 3 leave-one-out), x{min(arguments.resamples, 500)}",
        lambda: like_for_like(reviewers, judged, cluster_of=lambda u: u[0],
                              n_resamples=min(arguments.resamples, 500)),
    )  # fmt: skip
    is_break = np.isin(data["judge_codes"], [1, 2, 3]).astype(float)
    true_break = np.isin(data["truth"], [1, 2, 3]).astype(float)
    audited = data["audited"]
    rest = np.setdiff1d(np.arange(arguments.turns), audited)
    estimate, ppi_seconds, _ = measured(
        "ppi_mean (PPI++, power tuned)",
        lambda: ppi_mean(true_break[audited], is_break[audited], is_break[rest]),
    )
    print(
        f"   break rate {estimate.value:.4f} [{estimate.ci95[0]:.4f}, {estimate.ci95[1]:.4f}], "
        f"true {true_break.mean():.4f}, judge alone {is_break.mean():.4f}, "
        f"lambda {estimate.lam:.3f}"
    )
    total = alt_seconds + compare_seconds + like_seconds + ppi_seconds
    print(f"   alt-test share of these four: {alt_seconds / total:.1%}")

    print(f"\n-- cluster vs unit bootstrap of a kappa at {arguments.resamples} resamples "
          f"({arguments.audited} audited turns, {TURNS_PER_CONVERSATION} per "
          "conversation)")  # fmt: skip
    units = sorted(gold)
    first = [gold[u] for u in units]
    second = [judged[u] for u in units]
    unit, unit_seconds, _ = measured(
        "unit bootstrap",
        lambda: kappa_estimate(first, second, n_resamples=arguments.resamples, seed=0),
    )
    cluster, cluster_seconds, _ = measured(
        "cluster bootstrap (resample conversations)",
        lambda: kappa_estimate(first, second, n_resamples=arguments.resamples, seed=0,
                               clusters=[u[0] for u in units]),
    )  # fmt: skip
    assert unit.ci95 is not None and cluster.ci95 is not None
    print(
        f"   kappa {unit.value:.4f}: unit CI [{unit.ci95[0]:.4f}, {unit.ci95[1]:.4f}], cluster CI "
        f"[{cluster.ci95[0]:.4f}, {cluster.ci95[1]:.4f}]; time ratio cluster/unit "
        f"{cluster_seconds / unit_seconds:.2f}x"
    )
    # The same turns grouped into whole conversations of 10 (perfectly alike turns).
    conversations = sorted({u[0] for u in data["units"]})[: max(1, arguments.audited // 10)]
    whole = [(c, t) for c in conversations for t in range(1, TURNS_PER_CONVERSATION + 1)]
    a = [judged[u] for u in whole]
    b = [
        CODES[int(data["truth"][int(u[0][1:]) * TURNS_PER_CONVERSATION + u[1] - 1])] for u in whole
    ]
    unit_w = kappa_estimate(a, b, n_resamples=arguments.resamples, seed=0)
    cluster_w = kappa_estimate(
        a, b, n_resamples=arguments.resamples, seed=0, clusters=[u[0] for u in whole]
    )
    if unit_w.ci95 and cluster_w.ci95:
        ratio = (cluster_w.ci95[1] - cluster_w.ci95[0]) / (unit_w.ci95[1] - unit_w.ci95[0])
        print(
            f"   whole conversations ({len(whole)} turns): cluster CI {ratio:.2f}x as wide "
            "as unit CI"
        )
    print(rss())


def build_database(engine: Any, operator: Any, tmp: Path, arguments: argparse.Namespace) -> None:
    """Cases, one judge run over every assistant turn, an audit sample labeled by three."""
    from benchmarks.corpus import generate_corpus
    from review_app.services.cases.importing import import_paths
    from review_app.services.exchange.labels_io import import_labels
    from review_app.services.judging.judge_import import import_verdicts
    from review_app.services.rubrics.rubric_catalog import sync_rubrics
    from review_app.services.team.audit_samples import draw_audit_sample
    from storage.migrations.upgrade import upgrade_database
    from tests.judge_support import write_jsonl

    upgrade_database(engine)
    cases = list(generate_corpus(arguments.db_turns // 10, 20, seed=3))
    import_paths(engine, operator, [write_jsonl(tmp / "cases.jsonl", cases)])
    catalog = sync_rubrics(engine, operator)
    rubric = catalog.get("role-adherence@1")
    units = [
        (c["case_id"], e["turn"])
        for c in cases
        for e in c["transcript"]
        if e["actor"] == "assistant"
    ]
    del cases
    rng = np.random.default_rng(4)
    truth = {u: str(rng.choice(CODES, p=SHARES)) for u in units}
    rows = [
        {"case_id": c, "turn": t, "judge": "bench", "prompt_version": "v1", "model": "m",
         "label": code if rng.random() > 0.15 else str(rng.choice(CODES)),
         "score": float(rng.random())}
        for (c, t), code in truth.items()
    ]  # fmt: skip
    import_verdicts(engine, operator, write_jsonl(tmp / "verdicts.jsonl", rows), rubric=rubric)
    del rows
    lines = ["case_id,turn,reviewer,label,rubric,rationale"]
    seed_lines = [
        f"{units[0][0]},{units[0][1]},{name},in_role,role-adherence@1,"
        for name in ("ana", "ben", "cy")
    ]
    (tmp / "seed.csv").write_text("\n".join([lines[0], *seed_lines]) + "\n")
    import_labels(engine, operator, tmp / "seed.csv", catalog=catalog)
    draw_audit_sample(engine, operator, rubric=rubric, size=arguments.audited, seed=1,
                      reviewers=["ana", "ben", "cy"], overlap=3)  # fmt: skip
    from sqlmodel import Session, select

    from storage.models import AuditUnit

    with Session(engine) as session:
        drawn = [(u.case_id, u.turn) for u in session.exec(select(AuditUnit)).all()]
    for c, t in drawn:
        for name in ("ana", "ben", "cy"):
            code = truth[(c, t)] if rng.random() > 0.1 else str(rng.choice(CODES))
            lines.append(f"{c},{t},{name},{code},role-adherence@1,")
    (tmp / "labels.csv").write_text("\n".join(lines) + "\n")
    import_labels(engine, operator, tmp / "labels.csv", catalog=catalog)


def alt_test_share(
    engine: Any, operator: Any, rubric: Any, run_id: int, report_seconds: float
) -> None:
    """The alt-test inside the report, timed alone on the same inputs."""
    from sqlmodel import Session

    from review_app.services.review.agreement_reports import load_label_columns
    from storage import judging

    columns = load_label_columns(engine, operator, rubric=rubric)
    by_reviewer: dict[str, dict[tuple[str, int], str]] = {}
    for c, t, r, code in zip(
        columns.case_ids, columns.turns, columns.reviewers, columns.codes, strict=True
    ):
        by_reviewer.setdefault(r, {})[(c, t)] = code
    with Session(engine) as session:
        judged = {
            (v.case_id, v.turn): v.label
            for v in judging.verdicts(session, run_id=run_id)
            if v.turn is not None and v.label
        }
    _, alt_seconds, _ = measured(
        "  alt_test alone on the same data", lambda: alt_test(by_reviewer, judged)
    )
    print(f"   alt-test share of judge report: {alt_seconds / report_seconds:.1%}")


def db_part(arguments: argparse.Namespace) -> None:
    from sqlalchemy import inspect

    from review_app.services.access.actors import Actor
    from review_app.services.judging.estimate import break_rate_estimate
    from review_app.services.judging.judge_report import calibration_report
    from review_app.services.judging.runs import list_judge_runs
    from review_app.services.rubrics.rubric_catalog import sync_rubrics
    from storage.engine import create_database_engine

    operator = Actor.operator()
    with tempfile.TemporaryDirectory() as folder:
        tmp = Path(folder)
        url = arguments.db or f"sqlite:///{tmp / 'bench.db'}"
        if "://" not in url:
            url = f"sqlite:///{url}"
        engine = create_database_engine(url)
        print(
            f"\n-- end to end ({engine.dialect.name}): {arguments.db_turns // 10} cases, about "
            f"{arguments.db_turns} judged turns"
        )
        if arguments.db and inspect(engine).has_table("judge_runs"):
            print(f"reusing {arguments.db}")
        else:
            start = time.perf_counter()
            build_database(engine, operator, tmp, arguments)
            print(
                f"{'setup (import cases, verdicts, labels; draw the audit)':<62} "
                f"{time.perf_counter() - start:8.3f} s"
            )
        rubric = sync_rubrics(engine, operator).get("role-adherence@1")
        run_id = list_judge_runs(engine, operator, rubric=rubric)[0].id
        if arguments.only != "estimate":
            report, report_seconds, _ = measured(
                f"judge report (calibration_report, {arguments.resamples} resamples)",
                lambda: calibration_report(
                    engine, operator, rubric=rubric, n_resamples=arguments.resamples
                ),
            )
            print(f"   verdict: {report['runs'][0]['alt_test']['verdict']}")
            print(rss())
            alt_test_share(engine, operator, rubric, run_id, report_seconds)
        if arguments.only != "report":
            estimate, _, _ = measured(
                "judge estimate (break_rate_estimate, turn level)",
                lambda: break_rate_estimate(engine, operator, rubric=rubric, run_id=run_id),
            )
            print(
                f"   {estimate['ppi']} from {estimate['n_gold']} gold / {estimate['n_judged']} "
                f"judged ({estimate['gold_source']})"
            )
        engine.dispose()
    print(rss())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--turns", type=int, default=200_000)
    parser.add_argument("--audited", type=int, default=2_000)
    parser.add_argument("--resamples", type=int, default=1_000)
    parser.add_argument("--db-turns", type=int, default=200_000)
    parser.add_argument(
        "--db",
        help="SQLite file or database URL: built there when empty, reused (not rebuilt) "
        "once it holds the tables",
    )
    parser.add_argument(
        "--only", choices=("report", "estimate"), help="time one service (its own peak RSS)"
    )
    parser.add_argument(
        "--untraced", action="store_true", help="time without tracemalloc (no traced peak)"
    )
    parser.add_argument("--skip-core", action="store_true", help="only the end-to-end part")
    arguments = parser.parse_args()
    global TRACE
    TRACE = not arguments.untraced
    if not arguments.skip_core:
        core_part(arguments)
    if arguments.db_turns:
        db_part(arguments)


if __name__ == "__main__":
    main()
