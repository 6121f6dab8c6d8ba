"""The input policy on its own: text, names, identities, numbers; and the rules files are
read by (review_app.files): JSON, CSV, limits."""

from __future__ import annotations

import csv
import io
import json
import unicodedata
from pathlib import Path

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from review_app import input_policy as policy
from review_app.errors import InputError
from review_app.files import csv_rows, json_records, limits
from tests.conftest import REPO

# --- text ---------------------------------------------------------------------------------


@pytest.mark.parametrize("ch", [chr(c) for c in range(32) if chr(c) not in "\t\n\r"])
def test_every_c0_control_but_tab_and_newlines_is_refused_in_typed_text(ch: str) -> None:
    with pytest.raises(InputError) as raised:
        policy.check_text(f"a{ch}b", field="note")
    assert raised.value.field == "note"
    assert f"U+{ord(ch):04X}" in raised.value.message


def test_tab_newlines_and_any_other_character_are_text() -> None:
    value = "a\tb\r\nc\u2028d\u202ee\u0085 \U0001f600"
    assert policy.check_text(value, field="note") == value
    assert policy.check_text(None, field="note") is None


def test_recorded_transcript_text_keeps_control_characters_but_not_nul() -> None:
    assert policy.text_problem("\x1b[31mred\x07", recorded=True) is None
    problem = policy.text_problem("a\x00b", recorded=True)
    assert problem is not None and "U+0000" in problem
    problem = policy.text_problem("a\ud800b", recorded=True)
    assert problem is not None and "surrogate" in problem


def test_text_over_the_limit_is_refused_with_its_length() -> None:
    assert policy.check_text("x" * policy.MAX_NOTE_CHARS, field="note")
    with pytest.raises(InputError, match=r"at most 4000 characters \(this has 4001\)"):
        policy.check_text("x" * 4001, field="note", source="f.csv", line=3)


# --- names, ids, identities -----------------------------------------------------------------

SPOOFERS = [
    "\u202a",
    "\u202b",
    "\u202c",
    "\u202d",
    "\u202e",
    "\u2066",
    "\u2067",
    "\u2068",
    "\u2069",
    "\u200e",
    "\u200f",
    "\u061c",
    "\u200b",
    "\u200c",
    "\u200d",
    "\u2060",
    "\ufeff",
]


@pytest.mark.parametrize("ch", SPOOFERS, ids=lambda ch: f"U+{ord(ch):04X}")
def test_bidi_and_zero_width_characters_are_refused_in_names_and_ids(ch: str) -> None:
    with pytest.raises(InputError, match=f"U\\+{ord(ch):04X}"):
        policy.check_identity(f"ana{ch}")
    with pytest.raises(InputError, match=f"U\\+{ord(ch):04X}"):
        policy.check_case_id(f"case{ch}1")
    with pytest.raises(InputError):
        policy.check_name(f"{ch}judge", field="judge")


@pytest.mark.parametrize("ch", ["\x00", "\x07", "\x1b", "\x7f", "\x85", "\x9b"])
def test_control_characters_are_refused_in_names(ch: str) -> None:
    with pytest.raises(InputError, match="control character"):
        policy.check_name(f"a{ch}b", field="reviewer")


def test_names_are_stripped_nfc_and_at_most_200_characters() -> None:
    assert policy.check_name("  Zoe\u0308 ", field="reviewer") == "Zo\u00eb"
    assert policy.check_name("j" * 200, field="judge") == "j" * 200
    with pytest.raises(InputError, match=r"at most 200 characters \(this has 201\)"):
        policy.check_name("j" * 201, field="judge")
    with pytest.raises(InputError, match="empty"):
        policy.check_name("   ", field="judge")
    with pytest.raises(InputError, match="must be text"):
        policy.check_name(7, field="judge")


def test_case_ids_refuse_spaces_and_are_nfc() -> None:
    assert policy.check_case_id("support-refund-1") == "support-refund-1"
    assert policy.check_case_id("cafe\u0301") == "caf\u00e9"
    with pytest.raises(InputError, match="space"):
        policy.check_case_id("my case")
    with pytest.raises(InputError, match="space"):
        policy.check_case_id("my\u00a0case")


@pytest.mark.parametrize(
    ("a", "b"),
    [("Ana", "ana"), ("ANA", "ana"), ("Stra\u00dfe", "STRASSE"), ("Zo\u00eb", "ZOE\u0308")],
)
def test_identity_is_nfc_and_case_folded(a: str, b: str) -> None:
    assert policy.identity_key(a) == policy.identity_key(b)
    assert unicodedata.is_normalized("NFC", policy.identity_key(a))


def test_distinct_people_keep_distinct_identities() -> None:
    assert policy.identity_key("ana") != policy.identity_key("anna")
    assert policy.identity_key("jose") != policy.identity_key("jos\u00e9")


def test_a_display_name_loses_spoofing_characters_instead_of_refusing_a_sign_in() -> None:
    assert policy.clean_display_name("Ana\u202e Lopez\u200b") == "Ana Lopez"
    assert policy.clean_display_name("\u200b") is None
    assert policy.clean_display_name(None) is None


# --- numbers --------------------------------------------------------------------------------


def test_rubric_versions_are_bounded_without_pythons_digit_limit_message() -> None:
    assert policy.parse_rubric_version("1") == 1
    assert policy.parse_rubric_version("2147483647") == 2**31 - 1
    for bad in ["0", "01", "2147483648", "9" * 5000, "", "1.0"]:
        with pytest.raises(InputError) as raised:
            policy.parse_rubric_version(bad)
        assert "positive whole number" in raised.value.message
        assert "4300" not in raised.value.message
        assert len(raised.value.message) < 200


def test_turn_text_is_a_32_bit_integer_or_nothing() -> None:
    assert policy.parse_turn_text(" 12 ") == 12
    assert policy.parse_turn_text("-3") == -3
    assert policy.parse_turn_text(str(2**31 - 1)) == 2**31 - 1
    for bad in [str(2**31), "7" * 5000, "1.5", "", "x"]:
        assert policy.parse_turn_text(bad) is None


# --- JSON -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("data", "field", "key"),
    [
        (b'{"a": 1, "a": 2}', "a", "a"),
        (b'{"t": [{"turn": 1}, {"turn": 2, "x": 0, "turn": 3}]}', "t[1].turn", "turn"),
        (b'[{"k": 1}, {"k": {"in": 1, "in": 1}}]', "[1].k.in", "in"),
        # A string spelling a colon as \u003a hides one colon of the count: still found.
        (b'{"a": "\\u003a", "a": 1}', "a", "a"),
        (b'{"a:b": 1, "a:b": 1}', "a:b", "a:b"),
    ],
)
def test_a_duplicate_key_is_refused_with_its_field(data: bytes, field: str, key: str) -> None:
    with pytest.raises(InputError) as raised:
        json_records.parse_json(data, source="f.jsonl", line=7)
    error = raised.value
    assert (error.source, error.line, error.field) == ("f.jsonl", 7, field)
    assert f"{key!r} appears twice" in error.message


@pytest.mark.parametrize(
    "data",
    [
        b'{"a": "x:y", "b": {"c": ":::"}, "d": [":"]}',
        b'{"a": "\\u003a", "b": "\\u003A:"}',
        b'{"a:": 1, "b": {"a:": 2}}',
        b"[]",
        b'"just: a string"',
    ],
)
def test_colons_inside_strings_are_not_mistaken_for_duplicates(data: bytes) -> None:
    assert json_records.parse_json(data, source="f") == json.loads(data)


@settings(max_examples=300, deadline=None)
@given(
    st.recursive(
        st.none() | st.booleans() | st.integers(-(2**53), 2**53) | st.text(),
        lambda children: (
            st.lists(children, max_size=4)
            | st.dictionaries(st.text(max_size=6), children, max_size=4)
        ),
        max_leaves=20,
    )
)
def test_any_json_without_duplicates_parses_as_the_standard_library_does(value: object) -> None:
    for data in (json.dumps(value).encode(), json.dumps(value, ensure_ascii=False).encode()):
        assert json_records.parse_json(data, source="f") == json.loads(data)


@settings(max_examples=200, deadline=None)
@given(
    st.dictionaries(st.text(max_size=4), st.text(max_size=4), min_size=1, max_size=4),
    st.data(),
)
def test_any_repeated_key_is_found(pairs: dict[str, str], data: st.DataObject) -> None:
    key = data.draw(st.sampled_from(sorted(pairs)))
    body = ", ".join(f"{json.dumps(k)}: {json.dumps(v)}" for k, v in pairs.items())
    raw = f"{{{body}, {json.dumps(key)}: {json.dumps(data.draw(st.text(max_size=4)))}}}"
    with pytest.raises(InputError) as raised:
        json_records.parse_json(raw.encode(), source="f", line=1)
    assert raised.value.field == key


def test_deep_nesting_is_a_clean_error_on_both_parsers() -> None:
    with pytest.raises(InputError, match="nested too deeply"):
        json_records.parse_json(b"[" * 100_000, source="f", line=1)
    # The slow path never runs on text orjson refused, and survives what it accepts.
    deepest = b"[" * 1024 + b"]" * 1024
    assert json_records.find_duplicate_key(deepest) is None
    assert json_records.parse_json(deepest, source="f") is not None


def test_nan_and_a_bom_are_not_json() -> None:
    with pytest.raises(InputError, match="NaN and Infinity"):
        json_records.parse_json(b'{"a": NaN}', source="f")
    with pytest.raises(InputError):
        json_records.parse_json(b'\xef\xbb\xbf{"a": 1}', source="f")


def test_jsonl_is_split_on_line_feed_only(tmp_path: Path) -> None:
    record = {"reason": "a\u2028b\u2029c\x85d"}
    raw = json.dumps(record, ensure_ascii=False).encode()
    data = raw + b"\r\n" + json.dumps(record).encode() + b"\n"
    assert len(data.decode().splitlines()) > 2  # what str.splitlines would have done
    path = tmp_path / "reasons.jsonl"
    path.write_bytes(data)
    assert list(json_records.iter_jsonl_records(path)) == [(1, record), (2, record)]


def test_the_duplicate_check_is_exercised_by_the_fast_path() -> None:
    # orjson keeps the last value: without the policy this would silently be 2.
    assert orjson.loads(b'{"a": 1, "a": 2}') == {"a": 2}
    with pytest.raises(InputError):
        json_records.parse_json(b'{"a": 1, "a": 2}', source="f")


# --- CSV ------------------------------------------------------------------------------------


def rows_of(text: str) -> list[tuple[int, dict[str, str]]]:
    reader = csv.DictReader(io.StringIO(text, newline=""), strict=True)
    assert reader.fieldnames
    return list(csv_rows.csv_dict_rows(reader, source="f.csv"))


def test_an_unclosed_quote_is_reported_on_the_line_its_row_starts() -> None:
    with pytest.raises(InputError) as raised:
        rows_of('a,b\n1,2\n3,"never closed\n4,5\n6,7\n')
    assert raised.value.line == 3
    assert "never closed" in raised.value.message


def test_good_rows_carry_their_line() -> None:
    assert [line for line, _ in rows_of('a,b\n1,2\n3,"two\nlines"\n5,6\n')] == [2, 4, 5]


# The rows of docs/reference.md, "Input limits", that state a limit of this module:
# (how the row's first cell begins, how its limit cell begins).
DOCUMENTED_LIMITS = (
    ("one record", f"{limits.MAX_RECORD_BYTES // 2**20} MiB"),
    ("a file read whole", f"{limits.MAX_WHOLE_FILE_BYTES // 2**30} GiB"),
    ("events in one case", f"{policy.MAX_EVENTS_PER_CASE:,}"),
    ("turn numbers", f"{policy.TURN_MIN:,} to {policy.TURN_MAX:,}"),
    ("JSON nesting", f"{limits.MAX_JSON_DEPTH:,} levels"),
    ("rationale, gold note", f"{policy.MAX_NOTE_CHARS:,} characters"),
    ("case id, contract version", f"{policy.MAX_NAME_CHARS:,} characters"),
    ("judge prompt version", f"{policy.MAX_SHORT_NAME_CHARS:,} characters"),
    ("rubric version", f"a whole number from 1 to {policy.MAX_RUBRIC_VERSION:,}"),
)


def test_the_reference_states_every_limit() -> None:
    reference = (REPO / "docs" / "reference.md").read_text(encoding="utf-8")
    section = reference.split("\n## Input limits\n", 1)[1].split("\n## ", 1)[0]
    rows = [
        [cell.strip() for cell in line.strip("|").split("|")]
        for line in section.splitlines()
        if line.startswith("| ")
    ]
    assert limits.MAX_RECORD_BYTES % 2**20 == 0 and limits.MAX_WHOLE_FILE_BYTES % 2**30 == 0
    for what, limit in DOCUMENTED_LIMITS:
        found = [row for row in rows if row[0].startswith(what)]
        assert len(found) == 1, what
        assert found[0][1].startswith(limit), (what, found[0][1])
