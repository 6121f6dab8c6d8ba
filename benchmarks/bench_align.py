"""``judge align`` on the demo: requests and wall time of an align job against its budget.

Run from the repository root::

    PYTHONPATH=. python benchmarks/bench_align.py [--budgets 50,100,200] [--latency 0.05]
        [--optimiser helpful|noise]

The demo is loaded into a fresh SQLite file per budget; two loopback endpoints answer
(tests/align_support.py): a judge whose answers depend on words in its prompt (it
answers after ``--latency`` seconds) and an optimiser that proposes the helpful word
(``helpful``) or noise words (``noise``) in a fenced block. An align job from
``role-judge@v1`` is queued with ``start_align_job`` and run by ``run_worker`` (the whole
job: sets, GEPA, the confirmation, the candidates kept). Printed per budget: the
requests the judge stub received against the bound the plan states (the budget plus
twice the confirmation set), the optimiser's requests against its bound, the wall time,
the time per judge request and the verdict; then a second job on the same database
(the same confirmation set, the starting version's verdicts stored), which asks fewer.
Asserts nothing.

Measured on the project's 2-core machine shared with three other sessions (load
average 13-14), judge latency 0.05 s, the demo's 84 gold units (18 to confirm):

- helpful optimiser, budget 50 / 100 / 200: 47 / 126 / 132 judge requests against the
  bounds 86 / 136 / 236, 2 / 3 / 3 optimiser requests against 10 / 27 / 60 (most
  minibatches were perfect: GEPA skips them without a proposal), 3.0 / 4.2 / 6.4 s;
- noise optimiser, budget 100 / 300: 100 / 299 judge requests (bounds 136 / 336),
  5 / 14 optimiser requests (bounds 27 / 93), 5.7 / 15.9 s (about 50 ms a request:
  a minibatch of 3 waits one latency, so the wall time follows the requests);
- the second job on the same database: 0 judge requests (every text it tried was
  judged on its units already), 0.8-4.7 s.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--budgets", default="50,100,200")
    parser.add_argument("--latency", type=float, default=0.05)
    parser.add_argument("--optimiser", choices=("helpful", "noise"), default="helpful")
    args = parser.parse_args()

    from review_app.services.access.actors import operator_actor
    from review_app.services.exchange.demo import load_demo
    from review_app.services.jobs.runner import job_status, run_worker
    from review_app.services.judging.align import plan_align, start_align_job
    from review_app.services.judging.endpoints import ENDPOINTS_ENV
    from review_app.services.rubrics.rubric_catalog import sync_rubrics
    from storage.engine import create_database_engine
    from storage.migrations.upgrade import upgrade_database
    from tests.align_support import (
        RUBRIC,
        START,
        OptimiserStub,
        endpoints_file,
        helpful_proposals,
        noise_proposals,
        word_judge,
    )
    from tests.judge_support import FakeChatServer

    actor = operator_actor()
    propose = helpful_proposals() if args.optimiser == "helpful" else noise_proposals()
    judge = FakeChatServer(delay=args.latency, answer=word_judge).start()
    optimiser = OptimiserStub(propose).start()
    print(
        f"demo, judge latency {args.latency:g} s, {args.optimiser} optimiser, "
        f"load average {os.getloadavg()[0]:.1f}"
    )
    print(
        f"{'budget':>6} {'job':>6} {'judge req':>9} {'bound':>6} {'optim req':>9} "
        f"{'bound':>6} {'wall s':>7} {'ms/req':>7}  verdict"
    )
    try:
        with tempfile.TemporaryDirectory() as workdir:
            os.environ[ENDPOINTS_ENV] = str(
                endpoints_file(Path(workdir) / "endpoints.toml", judge, optimiser)
            )
            for budget in [int(b) for b in args.budgets.split(",")]:
                engine = create_database_engine(f"sqlite:///{Path(workdir) / f'b{budget}.db'}")
                upgrade_database(engine)
                load_demo(engine, actor)
                rubric = sync_rubrics(engine, actor).get(RUBRIC)
                for label in ("first", "second"):
                    options = {
                        "rubric": rubric,
                        "start": START,
                        "endpoint": "judge",
                        "optimizer": "optimizer",
                        "budget": budget,
                        "seed": 0,
                    }
                    plan = plan_align(engine, actor, **options)  # type: ignore[arg-type]
                    judge.reset_log()
                    optimiser.requests.clear()
                    started = time.perf_counter()
                    job = start_align_job(engine, actor, **options)  # type: ignore[arg-type]
                    run_worker(engine, until_idle=True, poll_seconds=0.05)
                    wall = time.perf_counter() - started
                    view = job_status(engine, actor, job_id=job.id)
                    result = view.result or {}
                    asked = len(judge.requests)
                    per = wall / asked * 1000 if asked else float("nan")
                    print(
                        f"{budget:>6} {label:>6} {asked:>9} {plan.judge_requests_at_most:>6} "
                        f"{len(optimiser.requests):>9} {plan.optimiser_requests_at_most:>6} "
                        f"{wall:>7.2f} {per:>7.1f}  {result.get('verdict') or view.status}"
                    )
                engine.dispose()
    finally:
        judge.stop()
        optimiser.stop()


if __name__ == "__main__":
    main()
