"""Publishing rubric version 2 over a large version 1 on SQLite, while reviewers save labels.

Run from the repository root::

    PYTHONPATH=. python benchmarks/bench_carry_over.py [--labels 1000000] [--gold 100000]

Data (written straight into a migrated SQLite file, so building it is quick): cases of
5 assistant turns, each unit labeled by 2 of 20 reviewers, ``--labels`` labels in all
(1,000,000 by default: 100,000 cases, 500,000 units), ``--gold`` gold labels, one queue
entry per (case, reviewer). Codes of a small version 1 with six codes; version 2 keeps
four, rewords one and splits one (about 8% of the labels), so most labels are carried
and the split ones go to re-review.

Measured: the seconds of :func:`review_app.services.rubrics.rubric_carry.publish_rubric` (one
write transaction of bulk ``INSERT ... SELECT`` statements), and, meanwhile, a
reviewer saving labels one after another through
:func:`review_app.services.labels.labeling.record_label` in another thread: how long each
save took (a save waits for the publication's write lock; none may fail with
"database busy" unless the publication outlasts the 30 s busy timeout). Prints figures;
asserts the carried counts add up.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import threading
import time
from datetime import UTC, datetime
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from sqlalchemy import Engine  # noqa: E402

from review_app.errors import DatabaseBusy  # noqa: E402
from review_app.services.labels.labeling import record_label  # noqa: E402
from review_app.services.rubrics.rubric_carry import publish_rubric  # noqa: E402
from review_app.services.rubrics.rubric_catalog import sync_rubrics  # noqa: E402
from review_app.services.team.people import add_person, operator_actor, sign_in  # noqa: E402
from storage.engine import create_database_engine  # noqa: E402
from storage.migrations import upgrade_database  # noqa: E402

V1 = """\
id: bench
version: 1
title: Carry benchmark
labels:
  - {code: in_role, verdict: pass, title: In role, definition: Stays in role.}
  - {code: persona_break, verdict: fail, title: Persona, definition: Drops the persona.}
  - {code: scope_break, verdict: fail, title: Scope, definition: Does other work.}
  - {code: authority_break, verdict: fail, title: Authority, definition: Forbidden action.}
  - {code: tone_break, verdict: fail, title: Tone, definition: Wrong register.}
  - {code: cannot_judge, verdict: abstain, title: Cannot judge, definition: Evidence missing.}
"""
V2 = """\
id: bench
version: 2
title: Carry benchmark
labels:
  - {code: in_role, verdict: pass, title: In role, definition: Stays in role.}
  - {code: persona_swap, verdict: fail, title: Swap, definition: Another identity.,
     from: [persona_break], change: split}
  - {code: prompt_leak, verdict: fail, title: Leak, definition: Shows its instructions.,
     from: [persona_break], change: split}
  - {code: scope_break, verdict: fail, title: Scope, definition: Does another role's work.,
     from: [scope_break], change: reworded}
  - {code: authority_break, verdict: fail, title: Authority, definition: Forbidden action.}
  - {code: tone_break, verdict: fail, title: Tone, definition: Wrong register.}
  - {code: cannot_judge, verdict: abstain, title: Cannot judge, definition: Evidence missing.}
"""
CODES = ("in_role", "persona_break", "scope_break", "authority_break", "tone_break")
# in_role most of the time; persona_break (split, so re-reviewed) about 8%
CODE_CYCLE = ("in_role",) * 8 + ("persona_break", "scope_break", "authority_break", "tone_break")
TURNS = (2, 4, 6, 8, 10)
REVIEWERS = 20
LIVE_CASES = 50


def build(path: Path, root: Path, *, n_labels: int, n_gold: int) -> tuple[Engine, str]:
    engine = create_database_engine(f"sqlite:///{path}")
    upgrade_database(engine)
    operator = operator_actor()
    for index in range(REVIEWERS):
        add_person(engine, operator, name=f"r{index:02d}", role="reviewer")
    add_person(engine, operator, name="live", role="reviewer")
    (root / "bench").mkdir(parents=True)
    (root / "bench" / "v1.yaml").write_text(V1, encoding="utf-8")
    sync_rubrics(engine, operator, directory=root)
    n_units = n_labels // 2
    n_cases = -(-n_units // len(TURNS))
    now = datetime.now(UTC).replace(tzinfo=None).isoformat(sep=" ")
    raw = engine.raw_connection()
    try:
        cursor = raw.cursor()
        cursor.execute("BEGIN IMMEDIATE")
        ids = dict(cursor.execute("SELECT name, id FROM reviewers").fetchall())
        reviewer_ids = [ids[f"r{index:02d}"] for index in range(REVIEWERS)]
        cursor.executemany(
            "INSERT INTO cases (case_id, n_events, n_assistant_turns, content_sha256, "
            "source_format, imported_at) VALUES (?, 11, 5, '0', 'native', ?)",
            ((f"c{index:07d}", now) for index in range(n_cases)),
        )
        events = []
        for index in range(LIVE_CASES):
            for turn in range(1, 12):
                actor = "assistant" if turn in TURNS else "user"
                events.append((f"c{index:07d}", turn, turn, actor, f"{actor} line {turn}"))
        cursor.executemany(
            "INSERT INTO events (case_id, seq, turn, actor, text) VALUES (?, ?, ?, ?, ?)",
            events,
        )

        def labels():  # type: ignore[no-untyped-def]
            for unit in range(n_units):
                case_id, turn = f"c{unit // len(TURNS):07d}", TURNS[unit % len(TURNS)]
                for offset in (0, 1):
                    reviewer = reviewer_ids[(unit // len(TURNS) + offset * 7) % REVIEWERS]
                    code = CODE_CYCLE[(unit * 7 + offset) % len(CODE_CYCLE)]
                    yield (case_id, turn, "bench", 1, code, None, reviewer, 1, "import", now, 0)

        cursor.executemany(
            "INSERT INTO labels (case_id, turn, rubric_id, rubric_version, code, rationale, "
            "reviewer_id, current, source, created_at, stale) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            labels(),
        )
        cursor.executemany(
            "INSERT INTO gold_labels (case_id, turn, rubric_id, rubric_version, code, "
            "calibration_item, current, created_at, stale) "
            "VALUES (?, ?, 'bench', 1, ?, 0, 1, ?, 0)",
            (
                (
                    f"c{unit // len(TURNS):07d}",
                    TURNS[unit % len(TURNS)],
                    CODE_CYCLE[unit % len(CODE_CYCLE)],
                    now,
                )
                for unit in range(min(n_gold, n_units))
            ),
        )
        cursor.executemany(
            "INSERT INTO assignments (case_id, reviewer_id, rubric_id, rubric_version, "
            "created_at, labeled_turns, completed_at) VALUES (?, ?, 'bench', 1, ?, 5, ?)",
            (
                (f"c{case:07d}", reviewer_ids[(case + offset * 7) % REVIEWERS], now, now)
                for case in range(n_cases)
                for offset in (0, 1)
            ),
        )
        cursor.execute("COMMIT")
        cursor.execute("ANALYZE")
    finally:
        raw.close()
    (root / "bench" / "v2.yaml").write_text(V2, encoding="utf-8")
    return engine, f"{n_cases} cases, {n_units} units"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--labels", type=int, default=1_000_000)
    parser.add_argument("--gold", type=int, default=100_000)
    options = parser.parse_args()
    with tempfile.TemporaryDirectory() as scratch:
        directory = Path(scratch)
        started = time.perf_counter()
        engine, shape = build(
            directory / "bench.db",
            directory / "rubrics",
            n_labels=options.labels,
            n_gold=options.gold,
        )
        print(
            f"built {options.labels:,} labels, {options.gold:,} gold labels ({shape}) "
            f"in {time.perf_counter() - started:.1f} s"
        )
        catalog = sync_rubrics(engine, operator_actor(), directory=directory / "rubrics")
        live = sign_in(engine, name="live", auth_mode="local")
        v1 = catalog.get("bench@1")

        waits: list[tuple[float, float]] = []  # (start offset, seconds)
        busy = 0
        stop = threading.Event()
        origin = time.perf_counter()

        def saver() -> None:
            nonlocal busy
            index = 0
            while not stop.is_set():
                case_id = f"c{index % LIVE_CASES:07d}"
                turn = TURNS[(index // LIVE_CASES) % len(TURNS)]
                began = time.perf_counter()
                try:
                    record_label(
                        engine,
                        live,
                        case_id=case_id,
                        turn=turn,
                        rubric=v1,
                        code=CODES[index % len(CODES)],
                    )
                except DatabaseBusy:
                    busy += 1
                waits.append((began - origin, time.perf_counter() - began))
                index += 1
                time.sleep(0.05)  # a fast reviewer: about 20 saves a second

        thread = threading.Thread(target=saver)
        thread.start()
        time.sleep(1.0)  # saves before the publication, for comparison
        publish_start = time.perf_counter() - origin
        report = publish_rubric(engine, operator_actor(), catalog=catalog, ref="bench@2")
        publish_end = time.perf_counter() - origin
        time.sleep(1.0)
        stop.set()
        thread.join()

        seconds = publish_end - publish_start
        carried = sum(report.carried.values())
        print(
            f"publish bench@2: {seconds:.2f} s; carried {carried:,} labels, "
            f"{sum(report.gold_carried.values()):,} gold labels; "
            f"{report.re_review_units:,} units to re-review "
            f"({sum(report.not_carried.values()):,} labels not carried)"
        )
        assert carried + sum(report.not_carried.values()) >= options.labels
        before = [w for s, w in waits if s + w < publish_start]
        during = [w for s, w in waits if s < publish_end and s + w > publish_start]
        print(
            f"label saves before: {len(before)}, median {statistics.median(before) * 1000:.0f} ms"
        )
        if during:
            print(
                f"label saves overlapping the publication: {len(during)}, longest wait "
                f"{max(during):.2f} s, median {statistics.median(during):.2f} s; "
                f"refused as busy: {busy}"
            )
        again_start = time.perf_counter()
        again = publish_rubric(engine, operator_actor(), catalog=catalog, ref="bench@2")
        print(
            f"publishing again: {time.perf_counter() - again_start:.2f} s, "
            f"carried {sum(again.carried.values())} (labels saved under version 1 since the "
            "first publication, where version 2 has none; nothing twice)"
        )
        engine.dispose()


if __name__ == "__main__":
    main()
