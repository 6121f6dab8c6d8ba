"""Malformed case files through the real command line.

Every file here is one a user could plausibly hand to ``review-app import``. Each must
be refused with exit code 2 and ONE line on stderr naming the file (and the line of a
JSONL file, and the field where there is one), without a traceback, and must leave
the database exactly as it was.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import Engine

from review_app.services.access.actors import operator_actor
from review_app.services.cases.importing import import_paths
from storage.engine import create_database_engine
from storage.migrations.upgrade import upgrade_database
from tests.conftest import DEMO_CASES, CliResult, Database, row_counts

CONTRACT: dict[str, Any] = {
    "version": "bad-input-v1",
    "initial_role": "support_triage",
    "action_vocabulary": ["collect_order_id", "lookup_order", "refund_order"],
    "roles": {
        "support_triage": {"allowed_actions": ["collect_order_id", "lookup_order"]},
        "billing_specialist": {
            "allowed_actions": ["collect_order_id", "lookup_order", "refund_order"]
        },
    },
}


def good_case(case_id: str = "good-case", **changes: Any) -> dict[str, Any]:
    case: dict[str, Any] = {
        "case_id": case_id,
        "contract": copy.deepcopy(CONTRACT),
        "transcript": [
            {"turn": 1, "actor": "user", "text": "Where is my parcel?"},
            {
                "turn": 2,
                "actor": "assistant",
                "text": "What is the order number?",
                "observed_actions": ["collect_order_id"],
            },
            {"turn": 3, "actor": "system", "set_role": "billing_specialist"},
            {
                "turn": 4,
                "actor": "assistant",
                "text": "Refunded.",
                "observed_actions": ["refund_order"],
            },
        ],
    }
    case.update(changes)
    return case


def edited(edit: Callable[[dict[str, Any]], None], case_id: str = "edited") -> dict[str, Any]:
    case = good_case(case_id)
    edit(case)
    return case


def dump(value: Any) -> bytes:
    return json.dumps(value).encode()


def jsonl(*records: Any) -> bytes:
    return b"".join(dump(record) + b"\n" for record in records)


def write_huge_line(path: Path) -> None:
    """One 50 MB JSONL record: a case whose text field is a long string, streamed out."""
    head, tail = dump(good_case("huge")).split(b'"Where is my parcel?"')
    chunk = b"x" * (1 << 20)
    with path.open("wb") as handle:
        handle.write(head + b'"')
        for _ in range(50):
            handle.write(chunk)
        handle.write(b'"' + tail + b"\n")


def _delete(*keys: str) -> Callable[[dict[str, Any]], None]:
    def edit(case: dict[str, Any]) -> None:
        target = case
        for key in keys[:-1]:
            target = target[key]
        del target[keys[-1]]

    return edit


def _set(path: tuple[Any, ...], value: Any) -> Callable[[dict[str, Any]], None]:
    def edit(case: dict[str, Any]) -> None:
        target: Any = case
        for key in path[:-1]:
            target = target[key]
        target[path[-1]] = value

    return edit


@dataclass(frozen=True)
class BadFile:
    name: str
    content: bytes | Callable[[Path], None]
    line: int | None = None
    field: str | None = None
    says: str = ""
    """A fragment the message must contain (what is wrong)."""


TRUNCATED = dump(good_case("truncated"))
DEEP = b'{"case_id": "deep", "transcript": ' + b"[" * 5000 + b"]" * 5000 + b"}"

CORPUS: list[BadFile] = [
    BadFile("bad-json.json", b'{"case_id": "x",, "transcript": []}', line=1, says="not valid JSON"),
    BadFile("truncated.json", TRUNCATED[: len(TRUNCATED) // 2], line=1, says="not valid JSON"),
    BadFile(
        "truncated-line.jsonl",
        jsonl(good_case("a")) + TRUNCATED[:-40] + b"\n",
        line=2,
        says="not valid JSON",
    ),
    BadFile("case-id-number.json", dump(good_case(17)), field="case_id"),  # type: ignore[arg-type]
    BadFile(
        "transcript-object.json",
        dump(good_case(transcript={"turn": 1})),
        field="transcript",
        says="expected a list",
    ),
    BadFile(
        "turn-string.jsonl",
        jsonl(good_case("a"), edited(_set(("transcript", 2, "turn"), "3"))),
        line=2,
        field="transcript[2].turn",
        says="expected an integer turn",
    ),
    BadFile(
        "actor-unknown.json",
        dump(edited(_set(("transcript", 1, "actor"), "bot"))),
        field="transcript[1].actor",
    ),
    BadFile(
        "observed-actions-string.json",
        dump(edited(_set(("transcript", 1, "observed_actions"), "collect_order_id"))),
        field="transcript[1].observed_actions",
    ),
    BadFile(
        "set-role-number.json",
        dump(edited(_set(("transcript", 2, "set_role"), 2))),
        field="transcript[2].set_role",
    ),
    BadFile(
        "request-list.json",
        dump(edited(_set(("transcript", 1, "request"), ["r-1"]))),
        field="transcript[1].request",
    ),
    BadFile(
        "text-number.json",
        dump(edited(_set(("transcript", 0, "text"), 42))),
        field="transcript[0].text",
        says="expected a string",
    ),
    BadFile(
        "contract-missing-version.json",
        dump(edited(_delete("contract", "version"))),
        field="contract.version",
    ),
    BadFile(
        "roles-not-object.json",
        dump(edited(_set(("contract", "roles"), ["support_triage"]))),
        field="contract.roles",
    ),
    BadFile(
        "allowed-actions-non-strings.json",
        dump(edited(_set(("contract", "roles", "support_triage", "allowed_actions"), ["a", 7]))),
        field="contract.roles.support_triage.allowed_actions",
        says="item 1 is an integer",
    ),
    BadFile("missing-case-id.json", dump(edited(_delete("case_id"))), field="case_id"),
    BadFile("missing-transcript.json", dump(edited(_delete("transcript"))), field="transcript"),
    BadFile(
        "missing-turn.jsonl",
        jsonl(good_case("a"), good_case("b"), edited(_delete("transcript", 1, "turn"))),
        line=3,
        field="transcript[1].turn",
        says="missing turn",
    ),
    BadFile(
        "duplicate-turns.json",
        dump(edited(_set(("transcript", 2, "turn"), 2))),
        field="transcript[2].turn",
        says="turn 2 is used twice",
    ),
    BadFile("huge-line.jsonl", write_huge_line, line=1, says="longer than"),
    BadFile(
        "invalid-utf8.json",
        dump(good_case("utf8")).replace(b"Where", b"Wh\xff\xfere"),
        says="not valid UTF-8",
    ),
    BadFile("bom.json", b"\xef\xbb\xbf" + dump(good_case("bom")), line=1, says="byte-order mark"),
    BadFile("bom.jsonl", b"\xef\xbb\xbf" + jsonl(good_case("bom")), line=1, says="byte-order mark"),
    BadFile(
        "nan.json",
        dump(good_case("nan")).replace(b'"turn": 1', b'"turn": NaN'),
        line=1,
        says="NaN and Infinity are not JSON numbers",
    ),
    BadFile(
        "infinity.jsonl",
        jsonl(good_case("a")) + dump(good_case("inf")).replace(b'"turn": 4', b'"turn": Infinity'),
        line=2,
        says="NaN and Infinity are not JSON numbers",
    ),
    BadFile("deep.json", DEEP, says="nested too deeply"),
    BadFile("empty.json", b"", says="the file is empty"),
    BadFile("empty.jsonl", b"", says="the file is empty"),
    BadFile("blank-lines.jsonl", b"\n   \n\t\n\n", says="no records"),
    BadFile("empty-list.json", b"[]", says="empty list"),
    BadFile(
        "list-with-bad-item.json",
        dump([good_case("a"), edited(_set(("transcript", 0, "actor"), None))]),
        field="[1].transcript[0].actor",
    ),
    BadFile(
        "duplicate-case-id.jsonl",
        jsonl(good_case("same"), good_case("other"), good_case("same")),
        line=3,
        field="case_id",
        says="appears twice in this file (first at line 1)",
    ),
    BadFile(
        "duplicate-case-id-in-list.json",
        dump([good_case("same"), good_case("same")]),
        field="[1].case_id",
        says="appears twice",
    ),
    BadFile("case-id-spaces.json", dump(good_case("my case")), field="case_id"),
    BadFile("record-not-object.jsonl", jsonl(good_case("a"), [1, 2]), line=2, says="object"),
    BadFile("number.json", b"42", says="expected a JSON object"),
    BadFile(
        "nul-in-text.json",
        dump(edited(_set(("transcript", 0, "text"), "a\u0000b"))),
        field="transcript[0].text",
        says="NUL",
    ),
    BadFile(
        "turn-out-of-range.json",
        dump(edited(_set(("transcript", 3, "turn"), 2**40))),
        field="transcript[3].turn",
        says="outside the storable range",
    ),
    BadFile(
        "first-turn-below-range.json",
        dump(edited(_set(("transcript", 0, "turn"), -(2**40)))),
        field="transcript[0].turn",
        says="outside the storable range",
    ),
    BadFile(
        "contract-version-too-long.json",
        dump(edited(_set(("contract", "version"), "v" * 201))),
        field="contract.version",
    ),
]


def test_the_corpus_is_large_and_names_are_unique() -> None:
    assert len(CORPUS) >= 22
    assert len({bad.name for bad in CORPUS}) == len(CORPUS)


def write(directory: Path, bad: BadFile) -> Path:
    path = directory / bad.name
    if callable(bad.content):
        bad.content(path)
    else:
        path.write_bytes(bad.content)
    return path


@dataclass(frozen=True)
class Seeded:
    url: str
    engine: Engine


@pytest.fixture(scope="module")
def seeded(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Seeded]:
    """One SQLite database holding the demo cases, shared by the refusal tests.

    A refused import changes nothing, which each test checks; so sharing is safe.
    """
    path = tmp_path_factory.mktemp("seeded") / "review.db"
    url = f"sqlite:///{path}"
    engine = create_database_engine(url)
    upgrade_database(engine)
    import_paths(engine, operator_actor(), [DEMO_CASES])
    yield Seeded(url, engine)
    engine.dispose()


def assert_refused(result: CliResult, *, name: str, line: int | None, field: str | None) -> str:
    assert result.returncode == 2, (result.stdout, result.stderr)
    assert "Traceback" not in result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    message = lines[0]
    assert message.startswith("error: ")
    assert name in message
    if line is not None:
        assert f", line {line}" in message, message
    if field is not None:
        assert f"field {field}:" in message, message
    assert result.stdout == ""
    return message


@pytest.mark.parametrize("bad", CORPUS, ids=lambda bad: bad.name)
def test_malformed_file_is_refused_with_one_line_and_stores_nothing(
    bad: BadFile, seeded: Seeded, run_cli: Any, tmp_path: Path
) -> None:
    path = write(tmp_path, bad)
    before = row_counts(seeded.engine)
    assert before["cases"] == 17

    result = run_cli("import", str(path), db=seeded.url)

    message = assert_refused(result, name=bad.name, line=bad.line, field=bad.field)
    assert bad.says in message
    assert row_counts(seeded.engine) == before


@pytest.mark.slow
def test_huge_record_is_accepted_when_the_limit_is_raised(
    run_cli: Any, sqlite_database: Database, tmp_path: Path
) -> None:
    path = tmp_path / "huge.jsonl"
    write_huge_line(path)
    result = run_cli(
        "import", str(path), "--max-record-bytes", str(60 << 20), db=sqlite_database.url
    )
    assert result.returncode == 0, result.stderr
    assert row_counts(sqlite_database.engine)["cases"] == 1


# --- one file, one transaction -------------------------------------------------------


def three_good_then_bad(directory: Path) -> Path:
    path = directory / "mid-file.jsonl"
    bad = edited(_set(("transcript", 1, "observed_actions"), "lookup_order"), case_id="d")
    path.write_bytes(jsonl(good_case("a"), good_case("b"), good_case("c"), bad))
    return path


def test_a_file_failing_at_line_4_stores_nothing(
    run_cli: Any, database: Database, tmp_path: Path
) -> None:
    import_paths(database.engine, operator_actor(), [DEMO_CASES])
    before = row_counts(database.engine)
    path = three_good_then_bad(tmp_path)

    # Through the real entry point, in its own process (most tests here run in-process).
    result = run_cli("import", str(path), db=database.url, subprocess=True)

    assert_refused(result, name="mid-file.jsonl", line=4, field="transcript[1].observed_actions")
    assert row_counts(database.engine) == before


def test_a_changed_contract_body_under_a_stored_version_is_refused(
    run_cli: Any, database: Database, tmp_path: Path
) -> None:
    first = tmp_path / "first.json"
    first.write_bytes(dump(good_case("first")))
    assert run_cli("import", str(first), db=database.url).returncode == 0
    before = row_counts(database.engine)

    changed = good_case("second")
    changed["contract"]["roles"]["support_triage"]["allowed_actions"].append("refund_order")
    path = tmp_path / "conflict.jsonl"
    path.write_bytes(jsonl(good_case("other"), changed))

    result = run_cli("import", str(path), db=database.url)
    message = assert_refused(result, name="conflict.jsonl", line=2, field="contract")
    assert "bad-input-v1" in message
    assert "already stored with a different body" in message
    assert row_counts(database.engine) == before
    # Not even with --replace: --replace is about cases; contracts never change.
    result = run_cli("import", "--replace", str(path), db=database.url)
    assert_refused(result, name="conflict.jsonl", line=2, field="contract")
    assert row_counts(database.engine) == before


STORAGE_LIMITS = ("nul-in-text.json", "turn-out-of-range.json", "contract-version-too-long.json")


@pytest.mark.postgres
@pytest.mark.parametrize(
    "bad", [bad for bad in CORPUS if bad.name in STORAGE_LIMITS], ids=lambda bad: bad.name
)
def test_values_postgres_cannot_hold_are_refused_before_reaching_it(
    bad: BadFile, run_cli: Any, postgres_database: Database, tmp_path: Path
) -> None:
    """These once died inside PostgreSQL's COPY with a traceback (SQLite took them)."""
    path = write(tmp_path, bad)
    before = row_counts(postgres_database.engine)
    result = run_cli("import", str(path), db=postgres_database.url)
    assert_refused(result, name=bad.name, line=bad.line, field=bad.field)
    assert row_counts(postgres_database.engine) == before


def test_files_before_the_bad_one_stay_imported_and_the_error_says_so(
    run_cli: Any, sqlite_database: Database, tmp_path: Path
) -> None:
    good = tmp_path / "a-good.jsonl"
    good.write_bytes(jsonl(good_case("a"), good_case("b")))
    three_good_then_bad(tmp_path)
    result = run_cli("import", str(good), str(tmp_path / "mid-file.jsonl"), db=sqlite_database.url)

    assert result.returncode == 2
    assert "Traceback" not in result.stderr
    error, before_error = result.stderr.strip().splitlines()
    assert "mid-file.jsonl, line 4" in error
    assert before_error.startswith("stored from the files before it: imported 2,")
    assert row_counts(sqlite_database.engine)["cases"] == 2


# --- replacing cases ----------------------------------------------------------------


def test_a_changed_case_is_refused_without_replace_and_replaced_with_it(
    run_cli: Any, sqlite_database: Database, tmp_path: Path
) -> None:
    original = tmp_path / "original.jsonl"
    original.write_bytes(jsonl(good_case("keep"), good_case("target")))
    assert run_cli("import", str(original), db=sqlite_database.url).returncode == 0
    before = row_counts(sqlite_database.engine)

    changed_case = good_case("target")
    changed_case["transcript"].append({"turn": 5, "actor": "user", "text": "One more thing."})
    changed = tmp_path / "changed.jsonl"
    changed.write_bytes(jsonl(good_case("keep"), changed_case))

    refused = run_cli("import", str(changed), db=sqlite_database.url)
    message = assert_refused(refused, name="changed.jsonl", line=2, field="case_id")
    assert "--replace" in message
    assert row_counts(sqlite_database.engine) == before

    replaced = run_cli("import", "--replace", str(changed), db=sqlite_database.url)
    assert replaced.returncode == 0, replaced.stderr
    assert replaced.stdout.startswith(
        "imported 1 (1 replaced: 0 labels and 0 gold labels went stale), unchanged 1,"
    )
    after = row_counts(sqlite_database.engine)
    assert after["cases"] == before["cases"]
    assert after["events"] == before["events"] + 1
    assert after["evaluations"] == before["evaluations"]


# --- inspect ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "content", "says"),
    [
        ("missing.json", None, "cannot be read"),
        ("bad.json", b"{not json", "not valid JSON"),
        ("empty.json", b"", "the file is empty"),
        ("bom.json", b"\xef\xbb\xbf{}", "byte-order mark"),
        ("binary.json", bytes(range(256)), "not valid"),
        ("nan.json", b'{"case_id": NaN}', "NaN"),
        ("number.json", b"42", "expected an object"),
    ],
)
def test_inspect_on_unreadable_input_exits_2_with_one_line(
    name: str, content: bytes | str | None, says: str, run_cli: Any, tmp_path: Path
) -> None:
    path = tmp_path / name
    if content == "dir":
        path.mkdir()
    elif isinstance(content, bytes):
        path.write_bytes(content)

    result = run_cli("inspect", str(path), subprocess=True)

    assert result.returncode == 2
    assert "Traceback" not in result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert name in lines[0]
    assert says in lines[0]
