"""Rubric version mapping: ``from`` / ``change`` in the file, what is derived, what is refused."""

from __future__ import annotations

from pathlib import Path

import pytest

from review_app.errors import InputError
from review_app.rubrics.diff import diff_rubrics
from review_app.rubrics.mapping import map_rubrics
from review_app.rubrics.parsing import load_rubric_file, parse_rubric_text, rubric_from_dict
from tests.carry_support import V1, V2, V2_DROPPING, write_rubrics


def _pair(tmp_path: Path, v2: str = V2):  # type: ignore[no-untyped-def]
    root = write_rubrics(tmp_path, v2=v2)
    folder = root / "carry"
    return load_rubric_file(folder / "v1.yaml"), load_rubric_file(folder / "v2.yaml")


def test_mapping_derives_same_and_reads_what_the_file_says(tmp_path: Path) -> None:
    v1, v2 = _pair(tmp_path)
    mapping = map_rubrics(v1, v2)
    changes = {o.code: (o.change, o.from_codes, o.derived) for o in mapping.origins}
    assert changes == {
        "in_role": ("same", ("in_role",), True),
        "persona_swap": ("split", ("persona_break",), False),
        "prompt_leak": ("split", ("persona_break",), False),
        "scope_break": ("reworded", ("scope_break",), False),
        "authority_break": ("same", ("authority_break",), True),
        "tone_break": ("same", ("tone_break",), True),
        "privacy_break": ("new", (), False),
        "cannot_judge": ("same", ("cannot_judge",), True),
    }
    assert mapping.carried() == {
        code: code
        for code in ("in_role", "scope_break", "authority_break", "tone_break", "cannot_judge")
    }
    assert mapping.fate("persona_break") == "split"
    assert mapping.unaccounted() == ()
    mapping.check_publishable({"persona_break": 3, "in_role": 10})


def test_the_diff_json_carries_the_mapping(tmp_path: Path) -> None:
    v1, v2 = _pair(tmp_path)
    as_dict = diff_rubrics(v1, v2).to_dict()["mapping"]
    assert as_dict["carried"]["scope_break"] == "scope_break"
    assert {"code": "persona_break", "fate": "split", "carried_to": None} in as_dict["old_codes"]
    assert as_dict["unaccounted"] == [] and as_dict["open"] == []
    assert diff_rubrics(v1, v1).mapping is None  # not consecutive


def test_a_changed_definition_without_change_is_left_to_the_author(tmp_path: Path) -> None:
    silent = V2.replace("    from: [scope_break]\n    change: reworded\n", "")
    v1, v2 = _pair(tmp_path, silent)
    mapping = map_rubrics(v1, v2)
    assert mapping.open_labels() == ("scope_break",)
    assert mapping.unaccounted() == ("scope_break",)
    mapping.check_publishable({"in_role": 1})  # unused: nothing to lose
    with pytest.raises(InputError) as caught:
        mapping.check_publishable({"scope_break": 7})
    message = str(caught.value)
    assert "\n" not in message
    assert message.endswith(
        "carry@2 leaves used codes of carry@1 unaccounted for: scope_break (7 labels); "
        "add change: (reworded, narrowed or widened) to scope_break"
    )


def test_a_dropped_used_code_is_refused_in_one_line(tmp_path: Path) -> None:
    v1, v2 = _pair(tmp_path, V2_DROPPING)
    with pytest.raises(InputError) as caught:
        map_rubrics(v1, v2).check_publishable({"persona_break": 2})
    assert "persona_break (2 labels)" in str(caught.value)
    assert str(caught.value).startswith(str(tmp_path / "carry" / "v2.yaml"))


@pytest.mark.parametrize(
    ("edit", "field", "words"),
    [
        (("from: [scope_break]", "from: [nope]"), "labels[3].from", 'from names "nope"'),
        (("change: reworded", "change: same"), "labels[3].change", "change: same, but"),
    ],
)
def test_inconsistent_mappings_name_the_field(
    tmp_path: Path, edit: tuple[str, str], field: str, words: str
) -> None:
    v1, v2 = _pair(tmp_path, V2.replace(*edit))
    with pytest.raises(InputError) as caught:
        map_rubrics(v1, v2)
    assert caught.value.field == field
    assert words in caught.value.message


@pytest.mark.parametrize(
    ("text", "words"),
    [
        (V2.replace("    change: reworded\n", ""), "says where it comes from but not how"),
        (V2.replace("    from: [scope_break]\n", ""), "change: reworded needs from"),
        (V2.replace("change: new}", "change: renamed}"), 'unknown change "renamed"'),
        (
            V2.replace("from: [scope_break]", "from: [scope_break, tone_break]"),
            "comes from exactly one code",
        ),
        (V1.replace("Stays in role.}", "Stays in role., from: [x], change: same}"), "version 1"),
    ],
)
def test_bad_from_or_change_is_refused_when_parsing(text: str, words: str) -> None:
    with pytest.raises(InputError) as caught:
        parse_rubric_text(text, source="v.yaml")
    assert words in caught.value.message
    assert caught.value.line is not None


def test_from_and_change_do_not_change_the_identity_of_a_file_without_them() -> None:
    plain = parse_rubric_text(V1)
    assert "from" not in plain.labels[0].to_dict()
    annotated = parse_rubric_text(V2)
    assert annotated.labels[1].to_dict()["from"] == ["persona_break"]
    assert rubric_from_dict(annotated.to_dict()) == annotated


def test_merged_narrowed_and_widened_codes_go_to_re_review(tmp_path: Path) -> None:
    text = (
        V2.replace(
            "    from: [scope_break]\n    change: reworded\n",
            "    from: [scope_break, authority_break]\n    change: merged\n",
        )
        .replace(
            "  - {code: authority_break, verdict: fail, title: Authority, "
            "definition: Forbidden action.}\n",
            "",
        )
        .replace(
            "  - {code: tone_break, verdict: fail, title: Tone, definition: Wrong register.}",
            "  - {code: tone_break, verdict: fail, title: Tone, definition: Wrong voice.,"
            " from: [tone_break], change: widened}",
        )
        .replace(
            "  - {code: cannot_judge, verdict: abstain, title: Cannot judge, "
            "definition: Evidence missing.}",
            "  - {code: cannot_judge, verdict: abstain, title: Cannot judge, "
            "definition: Evidence missing entirely., from: [cannot_judge], change: narrowed}",
        )
    )
    v1, v2 = _pair(tmp_path, text)
    mapping = map_rubrics(v1, v2)
    assert {code: mapping.fate(code) for code in v1.codes} == {
        "in_role": "same",
        "persona_break": "split",
        "scope_break": "merged",
        "authority_break": "merged",
        "tone_break": "widened",
        "cannot_judge": "narrowed",
    }
    assert mapping.carried() == {"in_role": "in_role"}
    mapping.check_publishable({code: 1 for code in v1.codes})
