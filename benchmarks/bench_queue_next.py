"""The queue's "Open my next case" in the informative order, on a large database.

    PYTHONPATH=. python benchmarks/bench_queue_next.py [--cases 20000] [--rounds 7]
        [--db PATH] [--code OTHER_CHECKOUT ...]

Prints figures; asserts nothing.

The database is ``benchmarks/large_db.py``'s (``--cases`` conversations; the demo's
reviewers and the admin ``lee`` each hold the same 2,000-odd cases in their queue,
``lee`` has labeled none of them, judge run v1 answered every assistant turn). For
``lee`` it times, in a fresh child process per checkout (this one, and each
``--code`` checkout, e.g. the main branch, so a before and an after are measured side
by side on one database), rounds alternating between checkouts:

* ``next_case(order="informative")`` with no current case (the queue page) and after
  the first one (the review page's N key): the first call of the process (cold) and
  the median of the rest;
* ``informative_queue`` page 1 (the queue page in that order);
* ``next_case(order="oldest")`` for scale.

Wall-clock times and, beside them, the process's CPU time per call (less sensitive to
other work on a shared machine).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

_CHILD = """
import json, sys, time
from review_app.rubrics.catalog import default_rubrics_dir, get_rubric, load_rubrics
from review_app.services.exchange.demo import DEMO_RUBRIC
from review_app.services.access.actors import sign_in
from review_app.services.team.queue import informative_queue, next_case, queue_page
from storage.engine import create_database_engine

engine = create_database_engine(sys.argv[1])
rubric = get_rubric(load_rubrics(default_rubrics_dir()), DEMO_RUBRIC)
lee = sign_in(engine, name="lee", auth_mode="local")
rounds = int(sys.argv[2])
times = {}
answers = {}

def timed(name, call):
    wall, cpu = time.perf_counter(), time.process_time()
    result = call()
    times.setdefault(name, []).append((time.perf_counter() - wall, time.process_time() - cpu))
    return result

for _ in range(rounds):
    first = timed(
        "next informative (first)",
        lambda: next_case(engine, lee, rubric=rubric, after=None, order="informative"),
    )
    following = timed(
        "next informative (after)",
        lambda: next_case(engine, lee, rubric=rubric, after=first, order="informative"),
    )
    page, _ = timed("informative page 1", lambda: informative_queue(engine, lee, rubric=rubric))
    timed("next oldest", lambda: next_case(engine, lee, rubric=rubric, after=None, order="oldest"))
queue = queue_page(engine, lee, rubric=rubric, page_size=1)
print(json.dumps({"times": times, "first": first, "following": following,
                  "assigned": queue.assigned, "completed": queue.completed,
                  "page": [row.case_id for row in page.rows]}))
"""


def _measure(code: Path, url: str, rounds: int) -> dict[str, object]:
    output = subprocess.run(
        [sys.executable, "-c", _CHILD, url, str(rounds)],
        check=True,
        capture_output=True,
        text=True,
        cwd=code,
        env={**os.environ, "PYTHONPATH": str(code)},
    ).stdout
    result: dict[str, object] = json.loads(output)
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", type=int, default=20_000)
    parser.add_argument("--rounds", type=int, default=7, help="calls per child process")
    parser.add_argument("--repeats", type=int, default=2, help="child processes per checkout")
    parser.add_argument("--db", type=Path, help="reuse this database (built if missing)")
    parser.add_argument("--code", type=Path, action="append", default=[])
    args = parser.parse_args()
    from benchmarks.large_db import build_large_database

    print(f"python {sys.version.split()[0]}, load average {os.getloadavg()[0]:.2f}")
    checkouts = [REPO, *(path.resolve() for path in args.code)]
    with tempfile.TemporaryDirectory(prefix="role-review-queue-") as tmp:
        db = args.db or Path(tmp) / "large.db"
        if not db.exists():
            print(f"large database: {build_large_database(db, n_cases=args.cases).line()}")
        url = f"sqlite:///{db}"
        results: dict[Path, list[dict[str, object]]] = {code: [] for code in checkouts}
        for _ in range(args.repeats):
            for code in checkouts:
                results[code].append(_measure(code, url, args.rounds))
    answers: set[object] = set()
    for code, runs in results.items():
        first = runs[0]
        print(
            f"\n[{code}] lee's queue: {first['assigned']:,} cases, {first['completed']:,} done; "
            f"next (informative) {first['first']}, then {first['following']}"
        )
        answers.add((first["first"], first["following"], tuple(first["page"])))  # type: ignore[arg-type]
        names = list(first["times"])  # type: ignore[call-overload]
        for name in names:
            cold = [run["times"][name][0] for run in runs]  # type: ignore[index]
            warm = [t for run in runs for t in run["times"][name][1:]]  # type: ignore[index]
            print(
                f"  {name:<26} cold {statistics.median(w for w, _ in cold) * 1000:6.0f} ms   "
                f"warm median {statistics.median(w for w, _ in warm) * 1000:6.0f} ms "
                f"(best {min(w for w, _ in warm) * 1000:4.0f})   "
                f"CPU warm median {statistics.median(c for _, c in warm) * 1000:6.0f} ms"
            )
    if len(checkouts) > 1:
        print(f"\nsame next cases and page in every checkout: {len(answers) == 1}")


if __name__ == "__main__":
    main()
