"""Speed where it is called often: `inspect` start-up and throughput, and `import`.

    python benchmarks/bench_speed.py [--cases 20000] [--events 50] [--files 10000]
        [--rounds 2] [--postgres URL] [--skip inspect,many,import,postgres,saves]

Every figure is printed beside its baseline, measured in the same run with rounds
alternating; nothing is asserted (the machine is shared and noisy: read the ratios).
Children run with bytecode caching on, as an installed copy would.

1. ``review-app inspect one.json``: the console script's start-up and one case,
   beside the bare floor (a Python process that loads the file with orjson and runs a
   plain evaluator loop); also the Typer path (``python -m review_app.cli``).
2. ``review-app inspect DIR`` over ``--files`` one-case files in one call (cases/s),
   beside one bare process reading and evaluating the same files.
3. ``review-app import corpus.jsonl`` into SQLite, the whole command, beside a bare
   ``json.loads`` + ``sqlite3.executemany`` of the same case and event rows into the
   same (migrated, empty) schema in one transaction; peak RSS of the command.
4. The same into PostgreSQL (COPY in chunks) beside a bare psycopg ``COPY`` of the
   same rows in one transaction.
5. Label saves (UPDATE + INSERT in ``BEGIN IMMEDIATE``, as the review page saves)
   made every 20 ms during a SQLite import: p50 / p99 / max wait.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from benchmarks.corpus import generate_corpus, write_corpus  # noqa: E402
from benchmarks.summary import record, record_ratio  # noqa: E402

ENV = {**os.environ, "PYTHONPATH": str(REPO)}
ENV.pop("PYTHONDONTWRITEBYTECODE", None)  # an installed copy has its bytecode compiled

CONSOLE_SCRIPT = [
    sys.executable,
    "-c",
    "import sys\nfrom review_app.__main__ import main\n"
    "sys.argv[0] = 'review-app'\nsys.exit(main())",
]
TYPER_PATH = [sys.executable, "-m", "review_app.cli"]

PLAIN_EVALUATOR = """
def plain_evaluate(case):
    contract = case["contract"]
    roles = contract["roles"]
    vocabulary = set(contract["action_vocabulary"])
    role = contract["initial_role"]
    errors, violations = [], []
    for event in case["transcript"]:
        if event.get("set_role") is not None:
            if event["actor"] != "system" or event["set_role"] not in roles:
                errors.append(event["turn"])
            else:
                role = event["set_role"]
        allowed = set(roles[role]["allowed_actions"])
        for action in event.get("observed_actions", []):
            if action not in vocabulary:
                errors.append(event["turn"])
            elif action not in allowed:
                violations.append((event["turn"], action, role))
    return "fail" if violations else ("invalid" if errors else "pass")
"""

BARE_INSPECT_ONE = (
    "import sys, orjson\n"
    + PLAIN_EVALUATOR
    + "case = orjson.loads(open(sys.argv[1], 'rb').read())\n"
    "status = plain_evaluate(case)\n"
    "print(status, case['case_id'])\n"
    "sys.exit({'pass': 0, 'fail': 1}.get(status, 2))\n"
)

BARE_INSPECT_MANY = (
    "import sys, os, orjson\n" + PLAIN_EVALUATOR + "out = []\n"
    "for root, dirs, files in os.walk(sys.argv[1]):\n"
    "    dirs.sort()\n"
    "    for name in sorted(files):\n"
    "        case = orjson.loads(open(os.path.join(root, name), 'rb').read())\n"
    "        out.append(plain_evaluate(case) + ' ' + case['case_id'])\n"
    "print('\\n'.join(out))\n"
)

BARE_SQLITE_IMPORT = """
import json, sqlite3, sys
corpus, database = sys.argv[1], sys.argv[2]
connection = sqlite3.connect(database, isolation_level=None)
connection.execute("PRAGMA journal_mode=WAL")
connection.execute("PRAGMA synchronous=NORMAL")
connection.execute("BEGIN IMMEDIATE")
connection.execute(
    "INSERT INTO contracts (version, sha256, body_json, created_at) VALUES (?, ?, ?, ?)",
    ("bench-support-v1", "0" * 64, "{}", "2026-01-01"),
)
case_rows, event_rows = [], []
def flush():
    connection.executemany(
        "INSERT INTO cases (case_id, chatbot_role, contract_version, n_events, "
        "n_assistant_turns, content_sha256, source, source_format, extra_json, imported_at) "
        "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)", case_rows)
    connection.executemany(
        "INSERT INTO events (case_id, seq, turn, actor, text, actions_json, set_role, "
        "request_json, extra_json) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)", event_rows)
    case_rows.clear(); event_rows.clear()
with open(corpus, "rb") as stream:
    for line in stream:
        case = json.loads(line)
        case_id = case["case_id"]
        transcript = case["transcript"]
        for seq, event in enumerate(transcript):
            actions = event.get("observed_actions")
            event_rows.append((case_id, seq, event["turn"], event["actor"], event.get("text"),
                None if actions is None else json.dumps(actions), event.get("set_role"),
                None, None))
        case_rows.append((case_id, case.get("chatbot_role"), "bench-support-v1",
            len(transcript), 0, "0" * 64, None, "native", None, "2026-01-01"))
        if len(case_rows) >= 1000:
            flush()
flush()
connection.execute("COMMIT")
connection.close()
"""

BARE_COPY_IMPORT = """
import json, sys, psycopg
corpus, conninfo, schema = sys.argv[1], sys.argv[2], sys.argv[3]
with psycopg.connect(conninfo, options=f"-csearch_path={schema}") as connection:
    with connection.cursor() as cursor:
        cursor.execute(
            "INSERT INTO contracts (version, sha256, body_json, created_at) "
            "VALUES ('bench-support-v1', %s, '{}', now())", ("0" * 64,))
        case_rows, event_rows = [], []
        def flush():
            with cursor.copy("COPY cases (case_id, chatbot_role, contract_version, n_events, "
                    "n_assistant_turns, content_sha256, source, source_format, extra_json, "
                    "imported_at) FROM STDIN") as copy:
                for row in case_rows:
                    copy.write_row(row)
            with cursor.copy("COPY events (case_id, seq, turn, actor, text, actions_json, "
                    "set_role, request_json, extra_json) FROM STDIN") as copy:
                for row in event_rows:
                    copy.write_row(row)
            case_rows.clear(); event_rows.clear()
        with open(corpus, "rb") as stream:
            for line in stream:
                case = json.loads(line)
                case_id = case["case_id"]
                transcript = case["transcript"]
                for seq, event in enumerate(transcript):
                    actions = event.get("observed_actions")
                    event_rows.append((case_id, seq, event["turn"], event["actor"],
                        event.get("text"), None if actions is None else json.dumps(actions),
                        event.get("set_role"), None, None))
                case_rows.append((case_id, case.get("chatbot_role"), "bench-support-v1",
                    len(transcript), 0, "0" * 64, None, "native", None, "2026-01-01"))
                if len(case_rows) >= 1000:
                    flush()
        flush()
"""


CPU_SECONDS: dict[str, list[float]] = {}
"""CPU time (user + system) of each timed child, by benchmark name (see :func:`alternate`)."""
_current: list[str] = [""]


def timed(command: list[str], *, stdout: Any = subprocess.DEVNULL) -> tuple[float, float, int]:
    """Run a child: (wall seconds, peak RSS in MB, exit code); its CPU time is recorded."""
    start = time.perf_counter()
    process = subprocess.Popen(
        command, env=ENV, cwd=REPO, stdout=stdout, stderr=subprocess.PIPE, text=True
    )
    _, status, usage = os.wait4(process.pid, 0)
    elapsed = time.perf_counter() - start
    CPU_SECONDS.setdefault(_current[0], []).append(usage.ru_utime + usage.ru_stime)
    process.returncode = os.waitstatus_to_exitcode(status)
    stderr = process.stderr.read() if process.stderr else ""
    if process.returncode not in (0, 1, 2) or "Traceback" in stderr:
        raise RuntimeError(f"{command[:4]} failed: {stderr[-2000:]}")
    return elapsed, usage.ru_maxrss / 1024, process.returncode


def alternate(named: dict[str, Callable[[], float]], rounds: int) -> dict[str, list[float]]:
    times: dict[str, list[float]] = {name: [] for name in named}
    for _ in range(rounds):
        for name, run in named.items():
            _current[0] = name
            CPU_SECONDS.pop(name, None) if not times[name] else None
            times[name].append(run())
    _current[0] = ""
    return times


def show(times: dict[str, list[float]], baseline: str, unit: str = "ms") -> None:
    scale = 1000 if unit == "ms" else 1
    base = statistics.median(times[baseline])
    for name, values in times.items():
        median = statistics.median(values)
        ratio = "" if name == baseline else f"   {median / base:5.2f}x the bare"
        print(
            f"  {name:<44} median {median * scale:8.1f} {unit}  "
            f"best {min(values) * scale:8.1f} {unit}{ratio}"
        )
    # CPU time is steadier than wall time on a shared machine: the same comparison in it
    cpu_base = statistics.median(CPU_SECONDS[baseline])
    for name in times:
        cpu = statistics.median(CPU_SECONDS[name])
        ratio = "" if name == baseline else f"   {cpu / cpu_base:5.2f}x the bare"
        print(f"    CPU {name:<40} median {cpu * scale:8.1f} {unit}{ratio}")


def migrated_sqlite(path: Path) -> str:
    from storage.engine import create_database_engine
    from storage.migrations.upgrade import upgrade_database

    url = f"sqlite:///{path}"
    engine = create_database_engine(url)
    upgrade_database(engine)
    engine.dispose()
    return url


def bench_inspect_one(workdir: Path, rounds: int) -> None:
    case = next(generate_corpus(1, 50))
    path = workdir / "one.json"
    path.write_text(json.dumps(case))
    timed([*CONSOLE_SCRIPT, "inspect", str(path)])  # writes the bytecode caches
    timed([*TYPER_PATH, "inspect", str(path)])
    timed([sys.executable, "-c", BARE_INSPECT_ONE, str(path)])
    print(f"\n[inspect one case] {rounds} alternating rounds, whole process each")
    times = alternate(
        {
            "bare: python + orjson + plain evaluator": lambda: timed(
                [sys.executable, "-c", BARE_INSPECT_ONE, str(path)]
            )[0],
            "review-app inspect one.json": lambda: timed([*CONSOLE_SCRIPT, "inspect", str(path)])[
                0
            ],
            "python -m review_app.cli inspect (Typer)": lambda: timed(
                [*TYPER_PATH, "inspect", str(path)]
            )[0],
        },
        rounds,
    )
    show(times, "bare: python + orjson + plain evaluator")
    base = statistics.median(times["bare: python + orjson + plain evaluator"])
    record_ratio(
        f"inspect one.json vs bare python + orjson + the seed's evaluator (median of {rounds})",
        statistics.median(times["review-app inspect one.json"]) / base,
        at_most=1.5,
    )


def bench_inspect_many(workdir: Path, n_files: int, rounds: int) -> None:
    root = workdir / "fixtures"
    for index, case in enumerate(generate_corpus(n_files, 50, seed=11)):
        folder = root / f"{index // 1000:03d}"
        folder.mkdir(parents=True, exist_ok=True)
        (folder / f"{case['case_id']}.json").write_text(json.dumps(case))
    timed([*CONSOLE_SCRIPT, "inspect", str(root)])
    print(f"\n[inspect {n_files:,} files in one call] {rounds} alternating rounds")
    times = alternate(
        {
            "bare: one process, orjson + plain evaluator": lambda: timed(
                [sys.executable, "-c", BARE_INSPECT_MANY, str(root)]
            )[0],
            "review-app inspect --summary DIR": lambda: timed(
                [*CONSOLE_SCRIPT, "inspect", "--summary", str(root)]
            )[0],
        },
        rounds,
    )
    show(times, "bare: one process, orjson + plain evaluator", unit="s")
    for name, values in times.items():
        print(f"  {name:<44} {n_files / statistics.median(values):10,.0f} cases/s")
    shutil.rmtree(root)


def bench_import_sqlite(corpus: Path, workdir: Path, rounds: int) -> None:
    print(f"\n[import into SQLite] {corpus.stat().st_size / 1e6:,.0f} MB JSONL, whole commands")
    peaks: list[float] = []

    def bare() -> float:
        database = workdir / "bare.db"
        migrated_sqlite(database)
        seconds = timed([sys.executable, "-c", BARE_SQLITE_IMPORT, str(corpus), str(database)])[0]
        for leftover in workdir.glob("bare.db*"):
            leftover.unlink()
        return seconds

    def ours() -> float:
        database = workdir / "ours.db"
        url = migrated_sqlite(database)
        seconds, peak, code = timed([*CONSOLE_SCRIPT, "import", str(corpus), "--db", url])
        assert code == 0
        peaks.append(peak)
        for leftover in workdir.glob("ours.db*"):
            leftover.unlink()
        return seconds

    times = alternate(
        {"bare: json.loads + sqlite3.executemany": bare, "review-app import": ours}, rounds
    )
    show(times, "bare: json.loads + sqlite3.executemany", unit="s")
    best = min(times["review-app import"]) / min(times["bare: json.loads + sqlite3.executemany"])
    print(f"  best to best {best:.2f}x; review-app import peak RSS {max(peaks):,.0f} MB")
    ratios = [
        ours / bare
        for ours, bare in zip(
            times["review-app import"], times["bare: json.loads + sqlite3.executemany"], strict=True
        )
    ]
    record(
        f"import into SQLite vs bare json + executemany, each of {rounds} rounds",
        ", ".join(f"{r:.2f}x" for r in ratios),
        target="<= 1.3x every run",
        met=max(ratios) <= 1.3,
    )


def bench_import_postgres(corpus: Path, url: str, rounds: int) -> None:
    from sqlalchemy import create_engine, text
    from sqlalchemy.engine import make_url

    from storage.engine import create_database_engine
    from storage.migrations.upgrade import upgrade_database

    admin = create_engine(url)
    parsed = make_url(url)
    conninfo = (
        f"host={parsed.host} port={parsed.port or 5432} dbname={parsed.database} "
        f"user={parsed.username}" + (f" password={parsed.password}" if parsed.password else "")
    )
    print(f"\n[import into PostgreSQL] {corpus.stat().st_size / 1e6:,.0f} MB JSONL, whole commands")

    def fresh_schema() -> tuple[str, str]:
        schema = f"bench_{uuid.uuid4().hex[:8]}"
        with admin.begin() as connection:
            connection.execute(text(f"CREATE SCHEMA {schema}"))
        schema_url = f"{url}?options=-csearch_path%3D{schema}"
        engine = create_database_engine(schema_url)
        upgrade_database(engine)
        engine.dispose()
        return schema, schema_url

    def drop(schema: str) -> None:
        with admin.begin() as connection:
            connection.execute(text(f"DROP SCHEMA {schema} CASCADE"))

    def bare() -> float:
        schema, _ = fresh_schema()
        try:
            return timed([sys.executable, "-c", BARE_COPY_IMPORT, str(corpus), conninfo, schema])[0]
        finally:
            drop(schema)

    def ours() -> float:
        schema, schema_url = fresh_schema()
        try:
            seconds, _, code = timed([*CONSOLE_SCRIPT, "import", str(corpus), "--db", schema_url])
            assert code == 0
            return seconds
        finally:
            drop(schema)

    times = alternate({"bare: json.loads + psycopg COPY": bare, "review-app import": ours}, rounds)
    show(times, "bare: json.loads + psycopg COPY", unit="s")
    admin.dispose()


def bench_saves_during_import(corpus: Path, workdir: Path) -> None:
    database = workdir / "saves.db"
    url = migrated_sqlite(database)
    demo = REPO / "review_app" / "demo_data" / "cases" / "support-clean-late-parcel.json"
    timed([*CONSOLE_SCRIPT, "import", str(demo), "--db", url])
    setup = sqlite3.connect(database, isolation_level=None)
    setup.execute(
        "INSERT INTO reviewers (name, role, active, created_at) "
        "VALUES ('bench-saver', 'reviewer', 1, '2026-01-01 00:00:00')"
    )
    reviewer_id = setup.execute("SELECT id FROM reviewers WHERE name = 'bench-saver'").fetchone()[0]
    setup.close()
    waits: list[float] = []
    errors: list[str] = []
    done = threading.Event()

    def saver() -> None:
        connection = sqlite3.connect(database, timeout=30, isolation_level=None)
        code = 0
        while not done.is_set():
            start = time.perf_counter()
            try:
                connection.execute("BEGIN IMMEDIATE")
                connection.execute(
                    "UPDATE labels SET current = 0 WHERE case_id = ? AND turn = 2 AND "
                    "reviewer_id = ? AND rubric_id = 'bench' AND rubric_version = 1 "
                    "AND current = 1",
                    ("support-clean-late-parcel", reviewer_id),
                )
                connection.execute(
                    "INSERT INTO labels (case_id, turn, rubric_id, rubric_version, code, "
                    "rationale, reviewer_id, current, source, created_at) VALUES "
                    "(?, 2, 'bench', 1, ?, NULL, ?, 1, 'app', '2026-01-01 00:00:00')",
                    ("support-clean-late-parcel", f"code-{code % 3}", reviewer_id),
                )
                connection.execute("COMMIT")
                waits.append(time.perf_counter() - start)
            except sqlite3.Error as error:
                errors.append(str(error))
                connection.execute("ROLLBACK") if connection.in_transaction else None
            code += 1
            time.sleep(0.02)
        connection.close()

    thread = threading.Thread(target=saver)
    thread.start()
    try:
        seconds = timed([*CONSOLE_SCRIPT, "import", str(corpus), "--db", url])[0]
    finally:
        done.set()
        thread.join()
    print(f"\n[label saves during a SQLite import] import took {seconds:.1f} s")
    if waits:
        ordered = sorted(waits)
        p99 = ordered[min(len(ordered) - 1, int(0.99 * len(ordered)))]
        print(
            f"  {len(waits)} saves: p50 {statistics.median(ordered) * 1000:.0f} ms, "
            f"p99 {p99 * 1000:.0f} ms, max {ordered[-1] * 1000:.0f} ms; "
            f"errors {len(errors)}{' (' + errors[0] + ')' if errors else ''}"
        )
    else:
        print(f"  no save completed; errors {len(errors)}")


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--cases", type=int, default=20_000)
    parser.add_argument("--events", type=int, default=50)
    parser.add_argument("--files", type=int, default=10_000)
    parser.add_argument("--rounds", type=int, default=2, help="import rounds (inspect: x5)")
    parser.add_argument(
        "--postgres",
        default="postgresql+psycopg://postgres@127.0.0.1:5432/test",
        help="PostgreSQL URL ('' to skip)",
    )
    parser.add_argument("--skip", default="", help="comma-separated parts to skip")
    args = parser.parse_args()
    skip = set(filter(None, args.skip.split(",")))
    print(f"python {sys.version.split()[0]}, load average {os.getloadavg()[0]:.2f}")
    with tempfile.TemporaryDirectory(prefix="role-review-speed-") as tmp:
        workdir = Path(tmp)
        if "inspect" not in skip:
            bench_inspect_one(workdir, args.rounds * 5)
        if "many" not in skip:
            bench_inspect_many(workdir, args.files, args.rounds)
        if not {"import", "postgres", "saves"} <= skip:
            corpus = workdir / "corpus.jsonl"
            write_corpus(corpus, args.cases, args.events)
            print(
                f"\ncorpus: {args.cases:,} cases x {args.events} events "
                f"({corpus.stat().st_size / 1e6:,.0f} MB)"
            )
            if "import" not in skip:
                bench_import_sqlite(corpus, workdir, args.rounds)
            if "postgres" not in skip and args.postgres:
                bench_import_postgres(corpus, args.postgres, args.rounds)
            if "saves" not in skip:
                bench_saves_during_import(corpus, workdir)
    print(f"\nload average at the end {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
