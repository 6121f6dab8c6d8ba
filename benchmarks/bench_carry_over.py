"""Publishing rubric version 2 over a large version 1 on SQLite and PostgreSQL, side by
side, while reviewers save labels.

Run from the repository root::

    PYTHONPATH=. python benchmarks/bench_carry_over.py [--labels 1000000] [--gold 100000]
        [--writers 4] [--databases sqlite,postgresql] [--postgres-url URL]

Data (written in bulk into a migrated database: a SQLite file, or a schema of its own on
the PostgreSQL server, dropped afterwards): cases of 5 assistant turns, each unit labeled
by 2 of 20 reviewers, ``--labels`` labels in all (1,000,000 by default: 100,000 cases,
500,000 units), ``--gold`` gold labels and as many judge verdicts of one run, one queue
entry per (case, reviewer). Codes of a small version 1 with six codes; version 2 keeps
four, rewords one and splits one (about 8% of the labels), so most labels are carried
and the split ones go to re-review. The planner's statistics are refreshed after the
build, as a server's autovacuum would.

Measured, on each database: the seconds of
:func:`review_app.services.rubrics.rubric_carry.publish_rubric` (one write transaction of
bulk ``INSERT ... SELECT`` statements), while ``--writers`` reviewers save labels one after
another through :func:`review_app.services.labels.labeling.record_label` in threads, each
on cases of its own queue: how long the saves overlapping the publication waited, how
many were refused as busy or failed (none may fail), and whether every acknowledged save
is stored. Then PostgreSQL's time against SQLite's. Asserts the carried counts add up.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from sqlalchemy import Engine, text  # noqa: E402

from benchmarks.schemas import schema_of_its_own  # noqa: E402
from benchmarks.summary import record_ratio  # noqa: E402
from review_app.errors import DatabaseBusy  # noqa: E402
from review_app.services.access.actors import operator_actor, sign_in  # noqa: E402
from review_app.services.labels.labeling import record_label  # noqa: E402
from review_app.services.rubrics.rubric_carry import publish_rubric  # noqa: E402
from review_app.services.rubrics.rubric_catalog import RubricCatalog, sync_rubrics  # noqa: E402
from review_app.services.team.people import add_person  # noqa: E402
from storage.bulk import insert_rows, timestamp_param  # noqa: E402
from storage.engine import create_database_engine  # noqa: E402
from storage.migrations.upgrade import upgrade_database  # noqa: E402

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
"""Cases each saving reviewer labels in turn (its own, so no save is refused as outside
its queue)."""
WRITERS_AT_MOST = 8


def build(url: str, root: Path, *, n_labels: int, n_gold: int) -> tuple[Engine, str]:
    """A migrated database at ``url`` holding the data described above; returns its engine
    and the shape in words. Rows are written in bulk (``COPY`` on PostgreSQL, multi-row
    ``INSERT`` on SQLite), then the planner's statistics are refreshed."""
    engine = create_database_engine(url)
    upgrade_database(engine)
    operator = operator_actor()
    for index in range(REVIEWERS):
        add_person(engine, operator, name=f"r{index:02d}", role="reviewer")
    for index in range(WRITERS_AT_MOST):
        add_person(engine, operator, name=f"live{index}", role="reviewer")
    (root / "bench").mkdir(parents=True)
    (root / "bench" / "v1.yaml").write_text(V1, encoding="utf-8")
    sync_rubrics(engine, operator, directory=root)
    n_units = n_labels // 2
    n_cases = -(-n_units // len(TURNS))
    now = datetime.now(UTC).replace(tzinfo=None)
    with engine.begin() as connection:
        stamp = timestamp_param(connection, now)
        ids = dict(connection.execute(text("SELECT name, id FROM reviewers")).all())
        reviewer_ids = [ids[f"r{index:02d}"] for index in range(REVIEWERS)]
        insert_rows(
            connection,
            table="cases",
            columns=(
                "case_id",
                "n_events",
                "n_assistant_turns",
                "content_sha256",
                "source_format",
                "imported_at",
            ),
            rows=[(f"c{index:07d}", 11, 5, "0", "native", stamp) for index in range(n_cases)],
        )
        insert_rows(
            connection,
            table="events",
            columns=("case_id", "seq", "turn", "actor", "text"),
            rows=[
                (
                    f"c{index:07d}",
                    turn,
                    turn,
                    "assistant" if turn in TURNS else "user",
                    f"line {turn}",
                )
                for index in range(min(n_cases, LIVE_CASES * WRITERS_AT_MOST))
                for turn in range(1, 12)
            ],
        )
        labels = []
        for unit in range(n_units):
            case_id, turn = f"c{unit // len(TURNS):07d}", TURNS[unit % len(TURNS)]
            for offset in (0, 1):
                reviewer = reviewer_ids[(unit // len(TURNS) + offset * 7) % REVIEWERS]
                code = CODE_CYCLE[(unit * 7 + offset) % len(CODE_CYCLE)]
                labels.append(
                    (case_id, turn, "bench", 1, code, reviewer, True, "import", stamp, False)
                )
        insert_rows(
            connection,
            table="labels",
            columns=(
                "case_id",
                "turn",
                "rubric_id",
                "rubric_version",
                "code",
                "reviewer_id",
                "current",
                "source",
                "created_at",
                "stale",
            ),
            rows=labels,
        )
        del labels
        insert_rows(
            connection,
            table="gold_labels",
            columns=(
                "case_id",
                "turn",
                "rubric_id",
                "rubric_version",
                "code",
                "calibration_item",
                "current",
                "created_at",
                "stale",
            ),
            rows=[
                (
                    f"c{unit // len(TURNS):07d}",
                    TURNS[unit % len(TURNS)],
                    "bench",
                    1,
                    CODE_CYCLE[unit % len(CODE_CYCLE)],
                    False,
                    True,
                    stamp,
                    False,
                )
                for unit in range(min(n_gold, n_units))
            ],
        )
        run_id = connection.execute(
            text(
                "INSERT INTO judge_runs (judge, prompt_version, model, rubric_id, "
                "rubric_version, source, status, created_at, updated_at) VALUES "
                "('bench-judge', 'v1', 'm', 'bench', 1, 'import', 'complete', :at, :at) "
                "RETURNING id"
            ),
            {"at": stamp},
        ).scalar_one()
        insert_rows(
            connection,
            table="judge_verdicts",
            columns=("run_id", "case_id", "turn", "label", "score", "created_at"),
            rows=[
                (
                    run_id,
                    f"c{unit // len(TURNS):07d}",
                    TURNS[unit % len(TURNS)],
                    CODE_CYCLE[(unit * 3) % len(CODE_CYCLE)],
                    0.5,
                    stamp,
                )
                for unit in range(min(n_gold, n_units))
            ],
        )
        insert_rows(
            connection,
            table="assignments",
            columns=(
                "case_id",
                "reviewer_id",
                "rubric_id",
                "rubric_version",
                "created_at",
                "labeled_turns",
                "completed_at",
            ),
            rows=[
                (
                    f"c{case:07d}",
                    reviewer_ids[(case + offset * 7) % REVIEWERS],
                    "bench",
                    1,
                    stamp,
                    5,
                    stamp,
                )
                for case in range(n_cases)
                for offset in (0, 1)
            ]
            + [
                (
                    f"c{number * LIVE_CASES + case:07d}",
                    ids[f"live{number}"],
                    "bench",
                    1,
                    stamp,
                    0,
                    None,
                )
                for number in range(WRITERS_AT_MOST)
                for case in range(LIVE_CASES)
                if number * LIVE_CASES + case < n_cases
            ],
        )
    with engine.connect() as connection:
        connection.execute(text("ANALYZE"))
        connection.commit()
    (root / "bench" / "v2.yaml").write_text(V2, encoding="utf-8")
    return engine, f"{n_cases} cases, {n_units} units"


@contextmanager
def database_url(kind: str, scratch: Path, postgres_url: str) -> Iterator[str]:
    """A new, empty database of ``kind``: a SQLite file in ``scratch``, or a schema of its
    own on the PostgreSQL server at ``postgres_url`` (dropped afterwards)."""
    if kind == "sqlite":
        yield f"sqlite:///{scratch / 'bench.db'}"
        return
    with schema_of_its_own(postgres_url, prefix="bench_carry_") as url:
        yield url


@dataclass
class Saves:
    """What the writers saw: each save's start (seconds from the origin) and duration."""

    waits: list[tuple[float, float]] = field(default_factory=list)
    busy: int = 0
    failed: list[str] = field(default_factory=list)
    acknowledged: dict[str, int] = field(default_factory=dict)
    """Saves that stored a new label, per writer."""


def run_writers(
    engine: Engine, catalog: RubricCatalog, *, writers: int, stop: threading.Event, origin: float
) -> tuple[list[threading.Thread], Saves]:
    """``writers`` reviewers saving labels on version 1 in a loop, each on cases of its own
    queue, about 20 saves a second each."""
    v1 = catalog.get("bench@1")
    saves = Saves()
    lock = threading.Lock()

    def saver(number: int) -> None:
        actor = sign_in(engine, name=f"live{number}", auth_mode="local")
        index = 0
        while not stop.is_set():
            case_id = f"c{number * LIVE_CASES + index % LIVE_CASES:07d}"
            turn = TURNS[(index // LIVE_CASES) % len(TURNS)]
            began = time.perf_counter()
            try:
                saved = record_label(
                    engine,
                    actor,
                    case_id=case_id,
                    turn=turn,
                    rubric=v1,
                    code=CODES[index % len(CODES)],
                )
                if saved.changed:
                    with lock:
                        saves.acknowledged[actor.name] = saves.acknowledged.get(actor.name, 0) + 1
            except DatabaseBusy:
                with lock:
                    saves.busy += 1
            except Exception as error:  # counted and shown: a save must never fail so
                with lock:
                    saves.failed.append(f"{type(error).__name__}: {str(error)[:200]}")
            with lock:
                saves.waits.append((began - origin, time.perf_counter() - began))
            index += 1
            time.sleep(0.05)  # a fast reviewer: about 20 saves a second

    threads = [threading.Thread(target=saver, args=(n,)) for n in range(writers)]
    for thread in threads:
        thread.start()
    return threads, saves


def stored_saves(engine: Engine) -> dict[str, int]:
    """Labels the live reviewers stored (history included), per reviewer."""
    with engine.connect() as connection:
        return {
            str(name): int(n)
            for name, n in connection.execute(
                text(
                    "SELECT r.name, count(*) FROM labels l JOIN reviewers r "
                    "ON r.id = l.reviewer_id WHERE r.name LIKE 'live%' "
                    "AND l.rubric_version = 1 AND l.carried_from_id IS NULL GROUP BY r.name"
                )
            )
        }


def bench(kind: str, url: str, root: Path, options: argparse.Namespace) -> float:
    started = time.perf_counter()
    engine, shape = build(url, root, n_labels=options.labels, n_gold=options.gold)
    print(
        f"[{kind}] built {options.labels:,} labels, {options.gold:,} gold labels and judge "
        f"verdicts ({shape}) in {time.perf_counter() - started:.1f} s"
    )
    catalog = sync_rubrics(engine, operator_actor(), directory=root)
    stop = threading.Event()
    origin = time.perf_counter()
    threads, saves = run_writers(engine, catalog, writers=options.writers, stop=stop, origin=origin)
    time.sleep(1.0)  # saves before the publication, for comparison
    publish_start = time.perf_counter() - origin
    report = publish_rubric(engine, operator_actor(), catalog=catalog, ref="bench@2")
    publish_end = time.perf_counter() - origin
    time.sleep(1.0)
    stop.set()
    for thread in threads:
        thread.join()
    seconds = publish_end - publish_start
    carried = sum(report.carried.values())
    print(
        f"[{kind}] publish bench@2 with {options.writers} reviewers saving: {seconds:.2f} s; "
        f"carried {carried:,} labels, {sum(report.gold_carried.values()):,} gold labels, "
        f"{sum(report.judge_carried.values()):,} judge verdicts; "
        f"{report.re_review_units:,} units to re-review "
        f"({sum(report.not_carried.values()):,} labels not carried)"
    )
    assert carried + sum(report.not_carried.values()) >= options.labels
    before = [w for s, w in saves.waits if s + w < publish_start]
    during = [w for s, w in saves.waits if s < publish_end and s + w > publish_start]
    print(
        f"[{kind}] label saves before: {len(before)}, median "
        f"{statistics.median(before) * 1000:.0f} ms"
    )
    if during:
        print(
            f"[{kind}] label saves overlapping the publication: {len(during)}, longest wait "
            f"{max(during):.2f} s, median {statistics.median(during):.2f} s; "
            f"refused as busy: {saves.busy}; failed: {len(saves.failed)}"
        )
    for failure in saves.failed[:3]:
        print(f"[{kind}]   failed save: {failure}")
    stored = stored_saves(engine)
    lost = {name: n - stored.get(name, 0) for name, n in saves.acknowledged.items()}
    print(
        f"[{kind}] acknowledged saves {sum(saves.acknowledged.values())}, stored "
        f"{sum(stored.values())}, lost {sum(n for n in lost.values() if n > 0)}"
    )
    again_start = time.perf_counter()
    again = publish_rubric(engine, operator_actor(), catalog=catalog, ref="bench@2")
    print(
        f"[{kind}] publishing again: {time.perf_counter() - again_start:.2f} s, carried "
        f"{sum(again.carried.values())} (labels saved under version 1 since the first "
        "publication, where version 2 has none; nothing twice)"
    )
    engine.dispose()
    return seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--labels", type=int, default=1_000_000)
    parser.add_argument("--gold", type=int, default=100_000)
    parser.add_argument("--writers", type=int, default=4, help="reviewers saving meanwhile")
    parser.add_argument(
        "--databases", default="sqlite,postgresql", help="sqlite, postgresql or both"
    )
    parser.add_argument(
        "--postgres-url",
        default=os.environ.get(
            "REVIEW_APP_TEST_POSTGRES_URL", "postgresql+psycopg://postgres@127.0.0.1:5432/test"
        ),
    )
    options = parser.parse_args()
    if not 0 <= options.writers <= WRITERS_AT_MOST:
        parser.error(f"--writers is 0 to {WRITERS_AT_MOST}")
    seconds: dict[str, float] = {}
    for kind in options.databases.split(","):
        with tempfile.TemporaryDirectory() as scratch:
            directory = Path(scratch)
            with database_url(kind, directory, options.postgres_url) as url:
                seconds[kind] = bench(kind, url, directory / "rubrics", options)
    if len(seconds) == 2:
        ratio = seconds["postgresql"] / seconds["sqlite"]
        print(
            f"publish: PostgreSQL {seconds['postgresql']:.2f} s, SQLite "
            f"{seconds['sqlite']:.2f} s: {ratio:.2f}x"
        )
        record_ratio(
            "publish on PostgreSQL vs SQLite",
            ratio,
            at_most=1.5,
            detail=f"{options.labels:,} labels, {options.writers} reviewers saving",
        )


if __name__ == "__main__":
    main()
