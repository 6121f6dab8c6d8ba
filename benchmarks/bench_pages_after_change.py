"""The agreement and judge pages' first load after a change of the data, on the large
database, with the code of another checkout ("before") and of this one ("after").

    PYTHONPATH=. python benchmarks/bench_pages_after_change.py [--before /work/main]
        [--cases 100000] [--rounds 3] [--keep DIR]

Prints figures; asserts nothing (the machine is shared and noisy: both servers are
measured in one run, their visits alternating).

A ``review-app serve`` server per checkout (this one, "after"; with ``--before``, one
more running that checkout's code, e.g. a worktree of main), signed in through local
mode as ``lee`` (an admin), each on its own copy of the demo grown to ``--cases``
conversations by ``benchmarks/large_db.py`` (built by the checkout that serves it).

First every server shows both pages once (each report computed once), and its report
jobs are waited for. Then the servers are restarted (every report stored for the data
as it is), and once each has imported its pages' modules (review_app/ui/launch.py), the
first visit of each page is timed ("restart"). Then per round, for each server in turn:
the reviewer ana relabels one turn (a new label: every report's token changes), the
agreement page and then the judge page are opened ("after change": what the next
policy owner waits for), then, once no report job is queued or running (every report
current again, intervals included: printed as seconds after the label), both again
("warm"). Each visit is in a new browser context (a new session) and timed until the
page is drawn: its content there, the script idle, no skeleton placeholder left
(benchmarks/bench_pages_large.py). Targets (issue 38): "restart" and "after change"
within 2x of "warm" for each page.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from benchmarks.bench_pages_large import PAGES, Page, open_page  # noqa: E402
from benchmarks.large_db import LOCAL_USER, build_large_database  # noqa: E402
from benchmarks.summary import record_ratio  # noqa: E402

PAGE_NAMES = ("agreement", "judge")
RUBRIC = "role-adherence@1"
TIMEOUT_MS = 900_000


def build(path: Path, *, repo: Path, n_cases: int) -> None:
    """The large database at ``path``, built by the checkout at ``repo``."""
    if path.exists():
        return
    if repo == REPO:
        print(f"building {path.name}: {build_large_database(path, n_cases=n_cases).line()}")
        return
    subprocess.run(
        [sys.executable, "benchmarks/large_db.py", str(path), "--cases", str(n_cases)],
        cwd=repo,
        env={"PYTHONPATH": str(repo), "PATH": "/usr/bin:/bin"},
        check=True,
    )


WARMED = "review-app: the pages' modules are imported"
"""What a server of this checkout writes once it has imported what the pages import
(review_app/ui/launch.py); a checkout without the line is not waited for."""


def warmed(log: Path, *, timeout: float = 120.0) -> float | None:
    """Seconds until the server's log says it imported the pages' modules (``None``: it
    never says so, as servers of older checkouts)."""
    started = time.perf_counter()
    while time.perf_counter() - started < timeout:
        if WARMED in log.read_text(errors="replace"):
            return time.perf_counter() - started
        time.sleep(0.1)
    return None


@contextmanager
def servers(
    root: Path, plan: dict[str, tuple[Path, Path]], *, wait_warm: bool = False
) -> Iterator[dict[str, str]]:
    """Per name: the address of a local-mode server running ``repo`` on ``database``,
    healthy (and, with ``wait_warm``, done importing the pages' modules, or 5 s later for
    a checkout that does not say so: a restart, before the first user arrives)."""
    from tests.served import free_port, serving, wait_healthy

    found = {}
    with ExitStack() as stack:
        for name, (repo, database) in plan.items():
            port = free_port()
            directory = root / f"server-{name}"
            directory.mkdir(exist_ok=True)
            process, log = stack.enter_context(
                serving(f"sqlite:///{database}", directory, port=port, user=LOCAL_USER, repo=repo)
            )
            address = f"http://127.0.0.1:{port}"
            wait_healthy(address, process, log)
            if wait_warm:
                took = warmed(log, timeout=5.0 if repo != REPO else 120.0)
                said = "no warm-up line" if took is None else f"{took:.1f} s"
                print(f"{name}: healthy; pages' modules imported after {said}", flush=True)
            found[name] = address
        yield found


class Relabel:
    """ana's label on one turn she labeled, switched between two codes: a new label row."""

    def __init__(self, database: Path) -> None:
        from review_app.services.access.actors import sign_in
        from review_app.services.labels.labeling import case_labels
        from review_app.services.rubrics.rubric_catalog import sync_rubrics
        from storage.engine import create_database_engine

        self.engine = create_database_engine(f"sqlite:///{database}")
        self.ana = sign_in(self.engine, name="ana", auth_mode="local")
        self.rubric = sync_rubrics(self.engine, self.ana).get(RUBRIC)
        self.case = "support-delayed-refund-violation"
        mine = case_labels(self.engine, self.ana, case_id=self.case, rubric=self.rubric).mine
        self.turn, row = min(mine.items())
        self.codes = [row.code, next(c for c in self.rubric.codes if c != row.code)]

    def __call__(self, round_: int) -> None:
        from review_app.services.labels.labeling import record_label

        code = self.codes[(round_ + 1) % 2]
        saved = record_label(
            self.engine, self.ana, case_id=self.case, turn=self.turn, rubric=self.rubric, code=code
        )
        assert saved.changed


def reports_settled(database: Path, *, timeout: float = 1800.0) -> float:
    """Seconds until no report job is queued or running on ``database`` (this checkout)."""
    from review_app.services.access.actors import operator_actor
    from review_app.services.jobs.runner import list_jobs
    from review_app.services.reports.report_jobs import REPORT_JOB
    from storage.engine import create_database_engine

    engine = create_database_engine(f"sqlite:///{database}")
    started = time.perf_counter()
    try:
        while time.perf_counter() - started < timeout:
            jobs = list_jobs(engine, operator_actor(), kinds=[REPORT_JOB], limit=200)
            if not any(not job.finished for job in jobs):
                return time.perf_counter() - started
            time.sleep(0.5)
    finally:
        engine.dispose()
    raise TimeoutError("report jobs still running")


def visit(browser: Any, address: str, page: Page, viewport: dict[str, int]) -> float:
    context = browser.new_context(viewport=viewport)
    try:
        _, took = open_page(context, address, page, timeout_ms=TIMEOUT_MS)
    finally:
        context.close()
    return took


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--before", type=Path, help="the checkout to compare (default: none)")
    parser.add_argument("--cases", type=int, default=100_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--keep", type=Path, help="keep the databases here (reused)")
    args = parser.parse_args()
    before = args.before.resolve() if args.before is not None else None
    pages = [page for page in PAGES if page.name in PAGE_NAMES]
    viewport = {"width": 1920, "height": 1080}
    seconds: dict[tuple[str, str, str], list[float]] = {}
    settled: list[float] = []
    with tempfile.TemporaryDirectory() as scratch:
        directory = args.keep or Path(scratch)
        directory.mkdir(parents=True, exist_ok=True)
        repos = {"after": REPO} if before is None else {"before": before, "after": REPO}
        databases = {name: directory / f"{name}-{args.cases}.db" for name in repos}
        for name, repo in repos.items():
            build(databases[name], repo=repo, n_cases=args.cases)
        plan = {name: (repo, databases[name]) for name, repo in repos.items()}
        relabel = {name: Relabel(path) for name, path in databases.items()}
        from tests.served import chromium

        with chromium() as browser:
            with servers(Path(scratch), plan) as addresses:
                for name, address in addresses.items():
                    for page in pages:
                        took = visit(browser, address, page, viewport)
                        print(f"{name}: first visit of {page.name}: {took:.1f} s", flush=True)
                for name, path in databases.items():
                    print(f"{name}: reports settled {reports_settled(path):.1f} s later")
            # A restart: every report is stored for the data as it is; the first visit of
            # each page on a fresh server process, once it has started.
            with servers(Path(scratch), plan, wait_warm=True) as addresses:
                for name, address in addresses.items():
                    for page in pages:
                        took = visit(browser, address, page, viewport)
                        seconds.setdefault((page.name, "restart", name), []).append(took)
                        print(f"{name}: {page.name} after restart: {took:.1f} s", flush=True)
                for round_ in range(args.rounds):
                    for name, address in addresses.items():
                        relabel[name](round_)
                        changed = time.perf_counter()
                        for when in ("after change", "warm"):
                            if when == "warm":
                                reports_settled(databases[name])
                                if name == "after":
                                    settled.append(time.perf_counter() - changed)
                                    print(
                                        f"round {round_ + 1} after: reports current "
                                        f"{settled[-1]:.1f} s"
                                    )
                            for page in pages:
                                took = visit(browser, address, page, viewport)
                                seconds.setdefault((page.name, when, name), []).append(took)
                                print(
                                    f"round {round_ + 1} {name}: {page.name} {when}: {took:.1f} s",
                                    flush=True,
                                )
    print(f"\n{args.cases:,} conversations, {args.rounds} rounds, medians (seconds)")
    sides = list(repos)
    print(
        f"{'page':<10} {'visit':<13} "
        + " ".join(f"{side:>8}" for side in sides)
        + " ".join(f" {side + '/warm':>12}" for side in sides)
        + "  (target: after/warm <= 2)"
    )
    for page in pages:
        warm = {side: statistics.median(seconds[(page.name, "warm", side)]) for side in sides}
        for when in ("restart", "after change", "warm"):
            found = {side: statistics.median(seconds[(page.name, when, side)]) for side in sides}
            print(
                f"{page.name:<10} {when:<13} "
                + " ".join(f"{found[side]:8.2f}" for side in sides)
                + " ".join(f" {found[side] / warm[side]:11.2f}x" for side in sides)
            )
            if when != "warm":
                event = "after a restart" if when == "restart" else "after one new label"
                each = sorted(x / warm["after"] for x in seconds[(page.name, when, "after")])
                record_ratio(
                    f"{page.name} page, first visit {event} at {args.cases:,} conversations "
                    "vs warm (until drawn)",
                    found["after"] / warm["after"],
                    at_most=2.0,
                    detail=(
                        f"{found['after']:.2f} s vs {warm['after']:.2f} s; visits "
                        f"{each[0]:.2f}x-{each[-1]:.2f}x"
                    ),
                )
    if settled:
        print(
            f"after: every report current (intervals included) {statistics.median(settled):.1f} s "
            "after the label (median), computed by the server's report worker process"
        )


if __name__ == "__main__":
    main()
