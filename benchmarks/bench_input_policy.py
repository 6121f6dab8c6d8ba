"""What the duplicate-key check of the input policy costs on a large JSONL file.

Prints, for one generated JSONL corpus of about ``--mb`` megabytes, the time to parse
every line with orjson alone, with the policy's :func:`parse_json` (orjson plus the
colon-count check), and with the standard library's ``json.loads`` and an
``object_pairs_hook`` (the slow path that names a duplicate), side by side; then the
whole reading of the file as ``review-app import`` does it (parse, validate, evaluate:
:func:`review_app.case_records.read_case_file`) with and without the duplicate-key check.
Rounds are interleaved and the best of each is shown, so a busy machine skews both alike.

    python -m benchmarks.bench_input_policy --mb 120
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson

from benchmarks.corpus import generate_corpus
from review_app.case_records import read_case_file
from review_app.errors import InputError
from review_app.files import json_records
from review_app.files.json_records import _pairs, parse_json


def write_corpus(path: Path, megabytes: float) -> int:
    target = int(megabytes * 1_000_000)
    written = 0
    with path.open("wb") as handle:
        for case in generate_corpus(10_000_000, 40, seed=11):
            line = orjson.dumps(case) + b"\n"
            handle.write(line)
            written += len(line)
            if written >= target:
                break
    return written


def timed(lines: list[bytes], parse: Callable[[bytes], Any]) -> float:
    start = time.perf_counter()
    for line in lines:
        parse(line)
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--mb", type=float, default=120.0)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as scratch:
        path = Path(scratch) / "corpus.jsonl"
        size = write_corpus(path, args.mb)
        lines = path.read_bytes().splitlines()
        print(f"corpus: {size / 1e6:.1f} MB, {len(lines)} JSONL records")
        reading = compare_reading(path, args.rounds)
    variants: dict[str, Callable[[bytes], Any]] = {
        "orjson.loads": orjson.loads,
        "policy parse_json (orjson + colon check)": lambda b: parse_json(b, source="x", line=1),
        "json.loads + object_pairs_hook": lambda b: json.loads(b, object_pairs_hook=_pairs),
    }
    best = {name: min(timed(lines, f) for _ in range(args.rounds)) for name, f in variants.items()}
    base = best["orjson.loads"]
    for name, seconds in best.items():
        print(
            f"{name:45s} {seconds:7.3f} s  {size / 1e6 / seconds:7.0f} MB/s  {seconds / base:5.2f}x"
        )
    without, with_check = reading
    print(
        f"read_case_file without the duplicate check {without:7.3f} s\n"
        f"read_case_file with it (as shipped)         {with_check:7.3f} s  "
        f"{with_check / without:5.2f}x"
    )


def _orjson_only(data: bytes | str, *, source: str, line: int | None = None) -> Any:
    try:
        return orjson.loads(data)
    except orjson.JSONDecodeError as error:
        raise InputError(str(error), source=source, line=line) from None


def compare_reading(path: Path, rounds: int) -> tuple[float, float]:
    """Best time of reading ``path`` whole, without and with the duplicate-key check."""
    shipped = json_records.parse_json
    best = [float("inf"), float("inf")]
    for _ in range(rounds):
        for index, parser in enumerate((_orjson_only, shipped)):
            json_records.parse_json = parser  # type: ignore[assignment]
            try:
                start = time.perf_counter()
                for _record in read_case_file(path):
                    pass
                best[index] = min(best[index], time.perf_counter() - start)
            finally:
                json_records.parse_json = shipped
    return best[0], best[1]


if __name__ == "__main__":
    main()
