"""Label keys: a code keeps its key from version to version (review_app/rubrics/keys.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from review_app.errors import InputError
from review_app.rubrics.catalog import load_rubrics
from review_app.rubrics.keys import KEY_ORDER, MAX_LABELS, NAVIGATION_KEYS, assign_keys, keys_along
from review_app.rubrics.model import Rubric
from review_app.rubrics.parsing import parse_rubric_text, rubric_from_dict
from tests.carry_support import V1, V2

REPO = Path(__file__).resolve().parents[1]


def _label(code: str, verdict: str = "fail", **extra: Any) -> dict[str, Any]:
    return {"code": code, "verdict": verdict, "title": code, "definition": f"{code}.", **extra}


def _rubric(version: int, labels: list[dict[str, Any]], rubric_id: str = "k") -> Rubric:
    return rubric_from_dict(
        {"id": rubric_id, "version": version, "title": "Keys", "labels": labels}
    )


def _bundled_v1() -> Rubric:
    return next(r for r in load_rubrics(REPO / "rubrics") if r.ref == "role-adherence@1")


def test_version_1_numbers_its_labels_in_file_order() -> None:
    v1 = _bundled_v1()
    keys = assign_keys(v1)
    assert list(keys.keys.values()) == list("123456789")
    assert set(keys.sources.values()) == {"free"}
    assert keys.code_for("3") == "scope_break"
    assert keys.code_for("j") is None


def test_a_code_inserted_before_others_moves_no_key() -> None:
    """The issue's case: v2 inserts prompt_leak before scope_break. Under v1, 3 meant
    scope_break; under v2 it still does, prompt_leak takes the free 0, and a tenth code
    (cannot_judge was the ninth) still has a key."""
    v1 = _bundled_v1()
    labels = [label.to_dict() for label in v1.labels]
    leak = _label("prompt_leak", change="new")
    v2 = rubric_from_dict(
        {
            "id": v1.id,
            "version": 2,
            "title": v1.title,
            "labels": [*labels[:2], leak, *labels[2:]],
        }
    )
    old, new = keys_along([v1, v2])
    for code in v1.codes:
        assert new.key_of(code) == old.key_of(code), code
        assert new.sources[code] == "carried" and new.inherited_from[code] == code
    assert new.key_of("prompt_leak") == "0"
    assert len(set(new.keys.values())) == len(v2.codes) == 10
    # and a v3 with two more codes goes on with letters, still keeping every key
    v3 = rubric_from_dict(
        {
            "id": v1.id,
            "version": 3,
            "title": v1.title,
            "labels": [_label("a_new", change="new"), *v2.to_dict()["labels"], _label("b_new")],
        }
    )
    third = keys_along([v1, v2, v3])[-1]
    assert third.key_of("a_new") == "a" and third.key_of("b_new") == "b"
    assert all(third.key_of(code) == new.key_of(code) for code in v2.codes)


def test_carried_codes_keep_keys_and_a_split_code_retires_its_key() -> None:
    v1, v2 = parse_rubric_text(V1), parse_rubric_text(V2)
    old, new = keys_along([v1, v2])
    carried = ("in_role", "scope_break", "authority_break", "tone_break", "cannot_judge")
    assert {code: new.key_of(code) for code in carried} == {c: old.key_of(c) for c in carried}
    assert new.sources["scope_break"] == "carried"  # reworded
    # persona_break (2) was split: its parts take keys that meant nothing under v1, so
    # a reviewer pressing 2 out of habit labels nothing instead of a wrong code
    assert old.key_of("persona_break") == "2"
    assert "2" not in new.keys.values()
    assert {new.key_of("persona_swap"), new.key_of("prompt_leak")} == {"7", "8"}
    assert new.key_of("privacy_break") == "9"


def test_a_renamed_code_takes_its_key_along_and_a_narrowed_one_keeps_it() -> None:
    v1 = _rubric(1, [_label("ok", "pass"), _label("rude"), _label("leak")])
    v2 = _rubric(
        2,
        [
            _label("new_one", change="new"),
            _label("ok", "pass"),
            _label("impolite", definition="rude.", **{"from": ["rude"], "change": "same"}),
            _label(
                "leak",
                definition="Only hidden instructions.",
                change="narrowed",
                **{"from": ["leak"]},
            ),
        ],
    )
    keys = assign_keys(v2, v1)
    assert keys.key_of("impolite") == "2" and keys.inherited_from["impolite"] == "rude"
    assert keys.key_of("leak") == "3" and keys.sources["leak"] == "kept"
    assert keys.key_of("new_one") == "4"


def test_a_key_written_in_the_file_wins_and_the_code_it_displaces_takes_a_free_one() -> None:
    v1 = _rubric(1, [_label("ok", "pass", key="a"), _label("rude"), _label("leak")])
    first = assign_keys(v1)
    assert first.keys == {"ok": "a", "rude": "1", "leak": "2"}
    assert first.sources["ok"] == "file"
    v2 = _rubric(2, [_label("ok", "pass"), _label("rude", key=2), _label("leak")])
    second = assign_keys(v2, v1, previous_keys=first.keys)
    assert second.keys == {"ok": "a", "rude": "2", "leak": "3"}
    assert second.sources == {"ok": "carried", "rude": "file", "leak": "free"}


@pytest.mark.parametrize(
    ("value", "words"),
    [
        ("j", '"j" is a navigation key of the review page (next turn)'),
        ("N", '"n" is a navigation key of the review page (next case)'),
        ("c", "Streamlit's clear-cache shortcut"),
        ("12", "expected one key (a digit 0-9 or a letter a-z), got the number 12"),
        ('"ab"', 'expected one key (a digit 0-9 or a letter a-z), got "ab"'),
        ('"é"', "expected one key"),
        ("true", "expected one key (a digit 0-9 or a letter a-z), got the boolean true"),
        ("3", 'key "3" is already the key of labels[0] (in_role)'),
    ],
)
def test_a_bad_key_in_the_file_is_one_line_naming_file_line_and_field(
    value: str, words: str
) -> None:
    text = V1.replace("definition: Stays in role.}", "definition: Stays in role., key: 3}").replace(
        "definition: Wrong register.}", f"definition: Wrong register., key: {value}}}"
    )
    with pytest.raises(InputError) as caught:
        parse_rubric_text(text, source="carry/v1.yaml")
    error = caught.value
    assert words in error.message
    assert error.field == "labels[4].key"
    assert error.line == 9  # the tone_break line
    assert error.describe().startswith("carry/v1.yaml, line 9, field labels[4].key: ")
    assert "\n" not in error.describe()


def test_keys_are_part_of_the_identity_only_when_written() -> None:
    plain = parse_rubric_text(V1)
    keyed = parse_rubric_text(
        V1.replace("definition: Stays in role.}", "definition: Stays in role., key: 1}")
    )
    assert "key" not in plain.labels[0].to_dict()
    assert keyed.labels[0].key == "1" and keyed.sha256 != plain.sha256
    assert rubric_from_dict(keyed.to_dict()) == keyed
    assert rubric_from_dict(plain.to_dict()).sha256 == plain.sha256


def test_more_labels_than_keys_is_refused() -> None:
    with pytest.raises(InputError) as caught:
        _rubric(1, [_label("ok", "pass")] + [_label(f"c{i}") for i in range(MAX_LABELS)])
    assert caught.value.field == "labels"
    assert f"at most {MAX_LABELS}, one key each" in caught.value.message


def test_no_label_key_is_a_navigation_key() -> None:
    assert not set(NAVIGATION_KEYS) & set(KEY_ORDER)
    assert {"j", "k", "n", "r"} <= set(NAVIGATION_KEYS)  # the review page's keys
    assert KEY_ORDER.startswith("1234567890")


# --------------------------------------------------------------------- property


@st.composite
def _histories(draw: st.DrawFn) -> tuple[Rubric, Rubric, set[str]]:
    """A random v1, and a v2 that keeps, renames, rewords, narrows, drops and inserts
    codes, with some keys written in the files. Returns (v1, v2, carried old codes)."""
    size = draw(st.integers(1, 20))
    codes = [f"c{i}" for i in range(size)]
    v1_labels = []
    used_keys: set[str] = set()
    for index, code in enumerate(codes):
        label = _label(code, "pass" if index == 0 else "fail")
        if draw(st.integers(0, 5)) == 0:
            key = draw(st.sampled_from([k for k in KEY_ORDER if k not in used_keys]))
            used_keys.add(key)
            label["key"] = key
        v1_labels.append(label)
    v1 = _rubric(1, v1_labels)

    v2_labels: list[dict[str, Any]] = []
    carried: set[str] = set()
    for index, code in enumerate(codes):
        fate = draw(st.sampled_from(["same", "silent", "renamed", "reworded", "narrowed", "drop"]))
        verdict = "pass" if index == 0 else "fail"
        if fate == "drop" and index > 0:
            continue
        if fate == "renamed":
            v2_labels.append(
                _label(
                    f"r{index}",
                    verdict,
                    definition=f"{code}.",
                    **{"from": [code], "change": "same"},
                )
            )
            carried.add(code)
        elif fate == "reworded":
            v2_labels.append(
                _label(
                    code,
                    verdict,
                    definition="Other words.",
                    **{"from": [code], "change": "reworded"},
                )
            )
            carried.add(code)
        elif fate == "narrowed":
            v2_labels.append(
                _label(code, verdict, definition="Less.", **{"from": [code], "change": "narrowed"})
            )
        else:
            v2_labels.append(_label(code, verdict))
            carried.add(code)
    for number in range(draw(st.integers(0, MAX_LABELS - len(v2_labels)))):
        position = draw(st.integers(0, len(v2_labels)))
        v2_labels.insert(position, _label(f"n{number}", change="new"))
    written: set[str] = set()
    for label in v2_labels:
        if draw(st.integers(0, 7)) == 0:
            key = draw(st.sampled_from([k for k in KEY_ORDER if k not in written]))
            written.add(key)
            label["key"] = key
    return v1, _rubric(2, v2_labels), carried


@settings(max_examples=300, deadline=None)
@given(_histories())
def test_every_code_has_one_key_and_carried_codes_keep_theirs(
    history: tuple[Rubric, Rubric, set[str]],
) -> None:
    v1, v2, carried = history
    old, new = keys_along([v1, v2])
    for keys, rubric in ((old, v1), (new, v2)):
        assert list(keys.keys) == list(rubric.codes)  # every code, in file order
        assert len(set(keys.keys.values())) == len(rubric.codes)  # one key each
        assert set(keys.keys.values()) <= set(KEY_ORDER)  # never a navigation key
    written = {label.key for label in v2.labels if label.key is not None}
    for label in v2.labels:
        if label.key is not None:
            assert new.key_of(label.code) == label.key
            continue
        origin = label.from_codes[0] if label.from_codes else label.code
        if origin in carried and old.key_of(origin) not in written:
            assert new.key_of(label.code) == old.key_of(origin), label.code
        elif label.change == "narrowed" and old.key_of(origin) not in written:
            assert new.key_of(label.code) == old.key_of(origin), label.code
            assert new.sources[label.code] == "kept"
        elif origin not in v1.codes:
            # a new code never takes a key that meant another code under v1 while a
            # key that meant nothing is free
            unused_before = set(KEY_ORDER) - set(old.keys.values()) - set(new.keys.values())
            if new.key_of(label.code) in old.keys.values():
                assert not unused_before


def test_every_label_key_is_a_shortcut_streamlit_accepts() -> None:
    """The adjudicate page makes each key a button shortcut: Streamlit refuses C and R
    (its own), which is why they are no label keys."""
    from streamlit.elements.lib.shortcut_utils import normalize_shortcut

    for key in KEY_ORDER:
        normalize_shortcut(key)
    for key in ("c", "r"):
        assert key in NAVIGATION_KEYS
        with pytest.raises(Exception, match="cannot use the keys 'C' or 'R'"):
            normalize_shortcut(key)
