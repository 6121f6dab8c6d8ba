"""UI benchmark: server-side rerun time of the queue and review pages on a large database.

    python benchmarks/bench_ui.py [--cases 100000] [--events 8] [--reruns 10] [--db PATH]

Prints figures; asserts nothing (the machines are shared and noisy, so the pages are
measured side by side with a reference in the same run, rounds alternating).

1. Builds a SQLite database with ``--cases`` generated support conversations
   (``benchmarks/corpus.py``, written as JSONL and imported with
   ``review_app.services.cases.importing``), one of them 50 events long, all assigned to one
   reviewer who has labeled half of the long case. ``--db`` keeps the file and reuses
   it when it exists.
2. With ``streamlit.testing.v1.AppTest`` from the app's entry script: the queue page
   and the review page of the 50-event case, and beside them a bare page script that
   draws the same 50 messages from memory (``st.chat_message`` + ``st.text``). One
   warm-up run each, then ``--reruns`` rounds; each round reruns each page once.
   Reported: the median rerun time of each and the ratio to the bare page.
   The queue's progress counts are kept while the data does not change
   (``services.team.queue.ProgressCounts``), so a rerun (paging, filtering) reads
   them from memory; before every rerun of the line "queue, counts recomputed" the
   reviewer's label on one turn of the long case changes (outside the timing), so
   the page counts again, as after any label.
3. Twice: AppTest as it comes, then as served (see :func:`server_like`).

Targets: each page under 250 ms, and within 2x of the bare page.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import random
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from benchmarks.corpus import generate_case, generate_corpus  # noqa: E402

APP = REPO / "review_app" / "ui" / "app.py"
REVIEWER = "bench-reviewer"
LONG_CASE = "bench-long-50"
LONG_EVENTS = 50
RUBRIC = "role-adherence@1"
TARGET_MS = 250.0
BARE = "bare page (50 messages)"
COLD_QUEUE = "queue, counts recomputed"
TARGET_RATIO = 2.0


def build_database(path: Path, *, n_cases: int, n_events: int) -> None:
    from review_app.services.access.actors import operator_actor, sign_in
    from review_app.services.cases.importing import import_paths
    from review_app.services.labels.labeling import record_label
    from review_app.services.rubrics.rubric_catalog import sync_rubrics
    from review_app.services.team.people import add_person
    from review_app.services.team.queue import assign_cases
    from storage.engine import create_database_engine
    from storage.migrations.upgrade import upgrade_database

    engine = create_database_engine(f"sqlite:///{path}")
    upgrade_database(engine)
    with tempfile.TemporaryDirectory() as scratch:
        corpus = Path(scratch) / "corpus.jsonl"
        start = time.perf_counter()
        with corpus.open("w") as out:
            for case in generate_corpus(n_cases - 1, n_events):
                out.write(json.dumps(case) + "\n")
            long_case = generate_case(random.Random(50), n_cases, LONG_EVENTS)
            long_case["case_id"] = LONG_CASE
            out.write(json.dumps(long_case) + "\n")
        written = time.perf_counter() - start
        start = time.perf_counter()
        summary = import_paths(engine, operator_actor(), [corpus])
        imported = time.perf_counter() - start
    print(f"corpus: {n_cases:,} cases written in {written:.1f} s; import: {summary.line()}")
    print(f"  import {imported:.1f} s ({n_cases / imported:,.0f} cases/s)")

    operator = operator_actor()
    add_person(engine, operator, name=REVIEWER, role="reviewer")
    rubric = sync_rubrics(engine, operator_actor()).get(RUBRIC)
    start = time.perf_counter()
    report = assign_cases(engine, operator, rubric=rubric, reviewers=[REVIEWER], overlap=1)
    print(f"  assign {time.perf_counter() - start:.1f} s: {report.line()}")

    reviewer = sign_in(engine, name=REVIEWER, auth_mode="local")
    assistant_turns = [e["turn"] for e in long_case["transcript"] if e["actor"] == "assistant"]
    for turn in assistant_turns[: len(assistant_turns) // 2]:
        record_label(engine, reviewer, case_id=LONG_CASE, turn=turn, rubric=rubric, code="in_role")
    engine.dispose()


def long_case_messages(path: Path) -> list[tuple[str, str]]:
    """(actor, text) of the long case, read back from the database once."""
    from review_app.services.access.actors import operator_actor
    from review_app.services.cases.case_views import load_case_view
    from storage.engine import create_database_engine

    engine = create_database_engine(f"sqlite:///{path}")
    view = load_case_view(engine, operator_actor(), case_id=LONG_CASE)
    engine.dispose()
    return [(turn.actor, turn.text or "") for turn in view.turns]


BARE_PAGE = """
import streamlit as st

MESSAGES = {messages!r}
for actor, text in MESSAGES:
    with st.chat_message(actor):
        st.text(text)
"""


def timed_run(app: Any) -> float:
    start = time.perf_counter()
    app.run()
    elapsed = time.perf_counter() - start
    if app.exception:
        raise RuntimeError(app.exception[0].value)
    return elapsed * 1000


def server_like() -> None:
    """Make AppTest rerun the way ``review-app serve`` does.

    The server compiles each page script once and keeps the bytecode in one
    ``ScriptCache``; AppTest makes a new cache for every run, so every rerun would
    also parse, rewrite ("magic") and compile the scripts (a third of a rerun for a
    300-line page). ``review-app serve`` also turns usage statistics off, which skips
    the per-command telemetry. Both the app and the bare page get the same treatment.
    """
    from streamlit import config
    from streamlit.runtime.scriptrunner.script_cache import ScriptCache
    from streamlit.testing.v1 import app_test, local_script_runner

    shared = ScriptCache()
    app_test.ScriptCache = lambda: shared  # type: ignore[assignment,misc]
    local_script_runner.ScriptCache = lambda: shared  # type: ignore[assignment,misc]
    config.set_option("browser.gatherUsageStats", False)


def measure(path: Path, reruns: int) -> dict[str, list[float]]:
    from streamlit.logger import set_log_level
    from streamlit.testing.v1 import AppTest

    set_log_level("error")  # AppTest's "missing ScriptRunContext" chatter

    os.environ["REVIEW_APP_DATABASE_URL"] = f"sqlite:///{path}"
    os.environ["REVIEW_APP_AUTH"] = "local"
    os.environ["REVIEW_APP_LOCAL_USER"] = REVIEWER

    queue = AppTest.from_file(str(APP), default_timeout=120)
    queue_cold = AppTest.from_file(str(APP), default_timeout=120)
    review = AppTest.from_file(str(APP), default_timeout=120)
    messages = long_case_messages(path)
    assert len(messages) == LONG_EVENTS
    bare = AppTest.from_string(BARE_PAGE.format(messages=messages), default_timeout=120)

    start = time.perf_counter()
    queue.run()
    first = time.perf_counter() - start
    print(f"first run (engine, migrations check, rubric sync): {first:.2f} s")
    assert len(queue.get("page_link")) == 25, "the queue shows a full page"
    review.run()
    review.switch_page("views/review.py")
    review.query_params["case"] = LONG_CASE
    pages = {
        "queue": queue,
        COLD_QUEUE: queue_cold,
        "review (50 events)": review,
        BARE: bare,
    }
    for app in pages.values():
        timed_run(app)  # warm-up
    assert len(review.chat_message) == LONG_EVENTS
    assert len(bare.chat_message) == LONG_EVENTS

    relabel = relabeling(path)
    timings: dict[str, list[float]] = {name: [] for name in pages}
    for _ in range(reruns):
        for name, app in pages.items():
            if name == COLD_QUEUE:
                relabel()
            timings[name].append(timed_run(app))
    return timings


def relabeling(path: Path) -> Callable[[], None]:
    """A call that changes the reviewer's label on the long case's first assistant turn
    (one code, then the other): a new label row, so the queue's counts are read again."""
    from review_app.services.access.actors import operator_actor, sign_in
    from review_app.services.cases.case_views import load_case_view
    from review_app.services.labels.labeling import record_label
    from review_app.services.rubrics.rubric_catalog import sync_rubrics
    from storage.engine import shared_engine

    engine = shared_engine(f"sqlite:///{path}")
    rubric = sync_rubrics(engine, operator_actor()).get(RUBRIC)
    reviewer = sign_in(engine, name=REVIEWER, auth_mode="local")
    view = load_case_view(engine, operator_actor(), case_id=LONG_CASE)
    turn = min(turn.turn for turn in view.turns if turn.actor == "assistant")
    codes = itertools.cycle(("scope_break", "in_role"))

    def relabel() -> None:
        code = next(codes)
        record_label(engine, reviewer, case_id=LONG_CASE, turn=turn, rubric=rubric, code=code)

    return relabel


def report(timings: dict[str, list[float]]) -> None:
    bare = statistics.median(timings[BARE])
    print(f"\n[rerun time, ms: median of {len(next(iter(timings.values())))}, min, max]")
    for name, values in timings.items():
        median = statistics.median(values)
        line = f"  {name:<26} median {median:7.1f}   min {min(values):7.1f}"
        line += f"   max {max(values):7.1f}"
        if name != BARE:
            line += f"   {median / bare:4.2f}x bare"
            met = median < TARGET_MS and median / bare <= TARGET_RATIO
            line += "   target met" if met else "   TARGET MISSED"
        print(line)
    print(f"  targets: < {TARGET_MS:.0f} ms and <= {TARGET_RATIO:.0f}x the bare page")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cases", type=int, default=100_000)
    parser.add_argument("--events", type=int, default=8, help="events per generated case")
    parser.add_argument("--reruns", type=int, default=10)
    parser.add_argument("--db", type=Path, help="keep the database here (reused if present)")
    args = parser.parse_args()

    with tempfile.TemporaryDirectory() as scratch:
        path = args.db or Path(scratch) / "bench.db"
        if path.exists():
            print(f"reusing {path}")
        else:
            build_database(path, n_cases=args.cases, n_events=args.events)
        print("\nAppTest as it comes (compiles the scripts at every run; usage statistics on):")
        report(measure(path, args.reruns))
        server_like()
        print("\nAs served (bytecode cached across reruns; usage statistics off):")
        report(measure(path, args.reruns))


if __name__ == "__main__":
    main()
