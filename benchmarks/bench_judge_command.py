"""``review-app judge run``, the whole command, beside a bare aiohttp client sending the
same number of requests: the run's own overhead (start-up, reading cases, rendering
prompts, parsing and storing verdicts) over what the endpoint and the client allow.

Run from the repository root::

    PYTHONPATH=. python benchmarks/bench_judge_command.py [--cases 2000] [--latency 0.1]
        [--concurrency 64] [--rounds 3]

One loopback endpoint (benchmarks/bench_judge_endpoints.py's server) answers every
chat completion with a valid verdict after ``--latency`` seconds. ``--cases``
one-turn support conversations are imported into a SQLite file once; each round
copies it and runs ``review-app judge run`` on the copy as a child process (its whole
wall time, start-up included), then a child process that is a bare aiohttp client on
uvloop sending as many requests of the same size with the same concurrency and
storing nothing (its whole wall time too). Rounds alternate the two; printed: each
round's seconds, the ratio, the median and range, and the bound (cases x latency /
concurrency). Target (issue 38): the command within 1.3x of the bare client. Asserts
nothing.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from benchmarks.bench_agreement_db import generate_cases  # noqa: E402
from benchmarks.bench_judge_endpoints import start_server  # noqa: E402
from benchmarks.summary import record_ratio  # noqa: E402

RUBRIC = "role-adherence@1"
PROMPT = "role-judge@v2"

BARE = r"""
import asyncio, sys, time
import aiohttp, orjson, uvloop
url, concurrency, requests, size = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
body = orjson.dumps({"model": "bench", "messages": [{"role": "user", "content": "x" * size}]})

async def run():
    left = requests
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=concurrency)) as s:
        async def slot():
            nonlocal left
            while left > 0:
                left -= 1
                async with s.post(url + "/chat/completions", data=body,
                                  headers={"Content-Type": "application/json"}) as r:
                    await r.read()
        await asyncio.gather(*(slot() for _ in range(concurrency)))

uvloop.run(run())
"""


def one_turn_cases(n_cases: int) -> list[dict[str, object]]:
    """Support conversations cut to their first user turn and assistant answer."""
    cases = []
    for case in generate_cases(n_cases, seed=5):
        transcript = case["transcript"]
        assert isinstance(transcript, list)
        cases.append({**case, "transcript": transcript[:2]})
    return cases


def prompt_bytes(case: dict[str, object]) -> int:
    """The size of the prompt's text for the case's assistant turn (the bare client sends
    as many bytes a request)."""
    from review_app.judging import find_judge_prompt, render_prompt
    from review_app.rubrics.catalog import get_rubric, load_rubrics

    rubric = get_rubric(load_rubrics(REPO / "rubrics"), RUBRIC)
    prompt = find_judge_prompt(REPO / "rubrics", rubric.id, PROMPT)
    events = case["transcript"]
    assert isinstance(events, list)
    messages = render_prompt(
        prompt, rubric=rubric, chatbot_role=str(case["chatbot_role"]), events=events, turn=2
    )
    return len(json.dumps(messages).encode())


def timed(argv: list[str], env: dict[str, str], cwd: Path) -> float:
    began = time.perf_counter()
    done = subprocess.run(argv, env=env, cwd=cwd, capture_output=True, text=True)
    took = time.perf_counter() - began
    if done.returncode != 0:
        raise RuntimeError(f"{argv[:4]} failed: {done.stderr[-2000:]}")
    return took


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--cases", type=int, default=2000)
    parser.add_argument("--latency", type=float, default=0.1)
    parser.add_argument("--concurrency", type=int, default=64)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument(
        "--before", type=Path, help="another checkout whose judge run is timed beside"
    )
    args = parser.parse_args()
    print(f"python {sys.version.split()[0]}, load average {os.getloadavg()[0]:.2f}")
    server, url = start_server(args.latency)
    try:
        with tempfile.TemporaryDirectory(prefix="role-review-judge-command-") as tmp:
            workdir = Path(tmp)
            corpus = workdir / "cases.jsonl"
            corpus.write_text(
                "".join(json.dumps(case) + "\n" for case in one_turn_cases(args.cases)),
                encoding="utf-8",
            )
            template = workdir / "template.db"
            env = dict(
                os.environ,
                PYTHONPATH=str(REPO),
                HOME=str(workdir / "home"),
                REVIEW_APP_DATABASE_URL=f"sqlite:///{template}",
            )
            env.pop("PYTHONDONTWRITEBYTECODE", None)  # an installed copy has its bytecode
            timed([sys.executable, "-m", "review_app", "import", str(corpus)], env, workdir)
            size = prompt_bytes(one_turn_cases(1)[0])
            command = [
                sys.executable, "-m", "review_app", "judge", "run", "--rubric", RUBRIC,
                "--prompt", PROMPT, "--base-url", url, "--model", "bench",
                "--concurrency", str(args.concurrency), "--retries", "2",
            ]  # fmt: skip
            bare = [
                sys.executable, "-c", BARE, url, str(args.concurrency), str(args.cases),
                str(size),
            ]  # fmt: skip
            bound = args.cases * args.latency / args.concurrency
            print(
                f"{args.cases:,} one-turn cases, {args.latency * 1000:.0f} ms endpoint, "
                f"{args.concurrency} in flight: the bound {bound:.2f} s; prompts of "
                f"{size:,} bytes"
            )
            ratios: list[float] = []
            runs: list[float] = []
            bares: list[float] = []
            before: list[float] = []
            for round_ in range(args.rounds):
                database = workdir / f"round-{round_}.db"
                shutil.copyfile(template, database)
                round_env = dict(env, REVIEW_APP_DATABASE_URL=f"sqlite:///{database}")
                if args.before is not None:
                    shutil.copyfile(template, database.with_suffix(".before.db"))
                    before_env = dict(
                        env,
                        PYTHONPATH=str(args.before.resolve()),
                        REVIEW_APP_DATABASE_URL=f"sqlite:///{database.with_suffix('.before.db')}",
                    )
                    before.append(timed(command, before_env, workdir))
                    print(f"  round {round_ + 1}: before's judge run {before[-1]:.2f} s")
                run = timed(command, round_env, workdir)
                client = timed(bare, env, workdir)
                runs.append(run)
                bares.append(client)
                ratios.append(run / client)
                print(
                    f"  round {round_ + 1}: judge run {run:.2f} s, bare client {client:.2f} s: "
                    f"{run / client:.2f}x",
                    flush=True,
                )
                database.unlink()
            ratio = statistics.median(ratios)
            if before:
                old = [b / c for b, c in zip(before, bares, strict=True)]
                print(
                    f"before ({args.before}): judge run {statistics.median(before):.2f} s, "
                    f"{statistics.median(old):.2f}x the bare client [{min(old):.2f}x-"
                    f"{max(old):.2f}x]"
                )
            print(
                f"judge run {statistics.median(runs):.2f} s vs a bare aiohttp client "
                f"{statistics.median(bares):.2f} s (median), {ratio:.2f}x "
                f"[{min(ratios):.2f}x-{max(ratios):.2f}x]; the bound {bound:.2f} s"
            )
            record_ratio(
                f"judge run (whole command), {args.cases:,} one-turn cases, "
                f"{args.latency * 1000:.0f} ms endpoint, {args.concurrency} in flight, vs a "
                "bare aiohttp client",
                ratio,
                at_most=1.3,
                detail=(
                    f"{statistics.median(runs):.2f} s vs {statistics.median(bares):.2f} s, "
                    f"range {min(ratios):.2f}x-{max(ratios):.2f}x, bound {bound:.2f} s"
                ),
            )
    finally:
        server.kill()
        server.wait()


if __name__ == "__main__":
    main()
