"""Judge runs at the endpoint's limit: throughput against loopback endpoints with a fixed latency.

Run from the repository root::

    PYTHONPATH=. python benchmarks/bench_judge_endpoints.py [--cases 2000] [--concurrency 64]

Each endpoint is a small OpenAI-compatible server in its own process (asyncio,
HTTP/1.1 keep-alive) that answers every chat completion with a valid verdict after a
fixed delay. ``--cases`` support conversations with 5 assistant turns each (10,000
units by default) are imported into a fresh SQLite file per measurement, then
judged with ``judge_runner.run_judge`` (rendering, HTTP, parsing, storing: the whole
run). The bound is the sum over endpoints of concurrency / latency; the figure to
read is units per second as a share of it (target at concurrency 64: >= 90%). The
client's CPU time per unit is printed too: on a shared machine it says what one
free core could reach, whatever the load.

Beside them, the same requests from a bare aiohttp client that renders and stores
nothing: the ceiling this machine and the loopback server leave any client. Measured,
after a small warm-up run that pays the process's first imports and
connections: one endpoint at 50 ms; one at 200 ms; both together (the 200 ms one must
not hold the 50 ms one back). Asserts nothing.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from benchmarks.bench_agreement_db import generate_cases  # noqa: E402
from benchmarks.summary import record  # noqa: E402

SERVER = r"""
import asyncio, json, sys
delay = float(sys.argv[2])
answer = json.dumps({"label": "in_role", "score": 0.1, "reason": "stays in role"})
body = json.dumps({
    "id": "bench", "object": "chat.completion", "model": "bench",
    "choices": [{"index": 0, "message": {"role": "assistant", "content": answer},
                 "finish_reason": "stop"}],
    "usage": {"prompt_tokens": 100, "completion_tokens": 20, "total_tokens": 120},
}).encode()
head = (b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: "
        + str(len(body)).encode() + b"\r\n\r\n")

async def handle(reader, writer):
    try:
        while True:
            headers = await reader.readuntil(b"\r\n\r\n")
            length = 0
            for line in headers.split(b"\r\n"):
                if line.lower().startswith(b"content-length:"):
                    length = int(line.split(b":", 1)[1])
            await reader.readexactly(length)
            await asyncio.sleep(delay)
            writer.write(head + body)
            await writer.drain()
    except (asyncio.IncompleteReadError, ConnectionError):
        pass
    finally:
        writer.close()

async def main():
    server = await asyncio.start_server(handle, "127.0.0.1", int(sys.argv[1]), backlog=1024)
    print("ready", flush=True)
    async with server:
        await server.serve_forever()

asyncio.run(main())
"""


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def start_server(delay: float) -> tuple[subprocess.Popen[str], str]:
    port = free_port()
    process = subprocess.Popen(
        [sys.executable, "-c", SERVER, str(port), str(delay)], stdout=subprocess.PIPE, text=True
    )
    assert process.stdout is not None and process.stdout.readline().strip() == "ready"
    return process, f"http://127.0.0.1:{port}/v1"


def judged(
    corpus: Path, workdir: Path, endpoints: list[tuple[str, int]]
) -> tuple[int, float, float]:
    from review_app.judging import find_judge_prompt
    from review_app.services.access.actors import operator_actor
    from review_app.services.cases.importing import import_paths
    from review_app.services.judging.judge_runner import run_judge, select_case_ids
    from review_app.services.judging.transport import EndpointSettings
    from review_app.services.rubrics.rubric_catalog import sync_rubrics
    from storage.engine import create_database_engine
    from storage.migrations.upgrade import upgrade_database

    database = workdir / f"judge-{time.monotonic_ns()}.db"
    engine = create_database_engine(f"sqlite:///{database}")
    upgrade_database(engine)
    import_paths(engine, operator_actor(), [corpus])
    rubric = sync_rubrics(engine, operator_actor()).get("role-adherence@1")
    prompt = find_judge_prompt(REPO / "rubrics", rubric.id, "role-judge@v2")
    settings = [
        EndpointSettings(base_url=url, model="bench", concurrency=concurrency, retries=2)
        for url, concurrency in endpoints
    ]
    case_ids = select_case_ids(engine)
    began, cpu = time.perf_counter(), time.process_time()
    summary = run_judge(
        engine,
        operator_actor(),
        rubric=rubric,
        prompt=prompt,
        settings=settings,
        case_ids=case_ids,
    )
    elapsed, cpu = time.perf_counter() - began, time.process_time() - cpu
    engine.dispose()
    database.unlink()
    return summary.answered, elapsed, cpu


def bare_client(url: str, concurrency: int, requests: int, body_bytes: int) -> float:
    """Requests a second from a bare aiohttp client on uvloop, nothing rendered or stored:
    what the loopback server and this machine allow any client."""
    import asyncio

    import aiohttp
    import orjson
    import uvloop

    body = orjson.dumps(
        {"model": "bench", "messages": [{"role": "user", "content": "x" * body_bytes}]}
    )

    async def run() -> float:
        left = requests
        async with aiohttp.ClientSession(
            connector=aiohttp.TCPConnector(limit=concurrency)
        ) as session:

            async def slot() -> None:
                nonlocal left
                while left > 0:
                    left -= 1
                    async with session.post(
                        f"{url}/chat/completions",
                        data=body,
                        headers={"Content-Type": "application/json"},
                    ) as response:
                        await response.read()

            began = time.perf_counter()
            await asyncio.gather(*(slot() for _ in range(concurrency)))
            return requests / (time.perf_counter() - began)

    return uvloop.run(run())


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--cases", type=int, default=2000)
    parser.add_argument("--concurrency", type=int, default=64)
    args = parser.parse_args()
    print(f"python {sys.version.split()[0]}, load average {os.getloadavg()[0]:.2f}")
    servers = []
    try:
        fast, fast_url = start_server(0.05)
        slow, slow_url = start_server(0.2)
        servers = [fast, slow]
        with tempfile.TemporaryDirectory(prefix="role-review-judge-") as tmp:
            workdir = Path(tmp)
            corpus = workdir / "cases.jsonl"
            with corpus.open("w", encoding="utf-8") as out:
                for case in generate_cases(args.cases, seed=3):
                    out.write(json.dumps(case) + "\n")
            c = args.concurrency
            # A first run pays for imports (aiohttp, uvloop), the CA bundle and SQLite's
            # first statements: a fraction of a second once a process, not throughput.
            warm = workdir / "warm-up.jsonl"
            with warm.open("w", encoding="utf-8") as out:
                for case in generate_cases(100, seed=4):
                    out.write(json.dumps(case) + "\n")
            answered, elapsed, _ = judged(warm, workdir, [(fast_url, c)])
            print(f"  warm-up: {answered:,} units in {elapsed:.2f} s (not counted)")
            setups = {
                f"one endpoint, 50 ms, concurrency {c}": [(fast_url, c)],
                f"one endpoint, 200 ms, concurrency {c}": [(slow_url, c)],
                f"50 ms + 200 ms, concurrency {c} each": [(fast_url, c), (slow_url, c)],
            }
            latency = {fast_url: 0.05, slow_url: 0.2}
            print(f"{args.cases * 5:,} units per run")
            # The ceiling any client reaches here: the server and the client share two
            # cores, and the loopback round trip adds to the 50 ms.
            floor = bare_client(fast_url, c, args.cases * 5, body_bytes=14_000)
            print(
                f"  {'bare client, 50 ms, concurrency ' + str(c):<40} {'':26}"
                f"{floor:7.0f}/s of a bound  {c / 0.05:4.0f}/s ({floor / (c / 0.05):5.1%}): "
                "aiohttp alone, nothing rendered or stored"
            )
            record(
                f"bare aiohttp client (no rendering or storing), 50 ms, concurrency {c}: "
                "share of the bound, this machine's ceiling for the rows below",
                f"{floor / (c / 0.05):.1%} ({floor:,.0f} units/s)",
            )
            for name, endpoints in setups.items():
                bound = sum(conc / latency[url] for url, conc in endpoints)
                answered, elapsed, cpu = judged(corpus, workdir, endpoints)
                rate = answered / elapsed
                print(
                    f"  {name:<40} {answered:,} units in {elapsed:6.1f} s: "
                    f"{rate:7.0f}/s of a bound {bound:5.0f}/s ({rate / bound:5.1%}); "
                    f"CPU {1000 * cpu / max(answered, 1):.2f} ms a unit "
                    f"(one free core: at most {answered / cpu if cpu else 0:,.0f}/s)"
                )
                record(
                    f"judge run, {name}: share of the bound (concurrency / latency)",
                    f"{rate / bound:.1%} ({rate:,.0f} of {bound:,.0f} units/s)",
                    target=">= 90%",
                    met=rate / bound >= 0.9,
                )
    finally:
        for server in servers:
            server.kill()
            server.wait()
    print(f"load average at the end {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
