"""Rubric files: the shipped role-adherence@1, validation, identity, diffs, references."""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import pytest
import yaml
from hypothesis import given
from hypothesis import strategies as st

from review_app.errors import InputError, NotFound
from review_app.rubrics.catalog import default_rubrics_dir, get_rubric, load_rubrics
from review_app.rubrics.diff import diff_rubrics
from review_app.rubrics.model import Rubric, parse_rubric_ref
from review_app.rubrics.parsing import load_rubric_file, parse_rubric_text, rubric_from_dict

REPO_RUBRICS = Path(__file__).resolve().parents[1] / "rubrics"
SHIPPED_V1 = REPO_RUBRICS / "role-adherence" / "v1.yaml"

FIXED_CODES = {
    "in_role": ("pass", None),
    "persona_break": ("fail", "persona"),
    "scope_break": ("fail", "scope"),
    "authority_break": ("fail", "authority"),
    "tone_break": ("fail", "tone"),
    "out_of_role_mishandled": ("fail", "out_of_role_handling"),
    "false_action_claim": ("fail", "truthfulness"),
    "borderline": ("borderline", None),
    "cannot_judge": ("abstain", None),
}


@pytest.fixture(scope="module")
def shipped() -> Rubric:
    return load_rubric_file(SHIPPED_V1)


# ------------------------------------------------------------------ shipped v1


def test_shipped_v1_has_the_fixed_codes_verdicts_and_dimensions(shipped: Rubric) -> None:
    assert shipped.ref == "role-adherence@1"
    assert shipped.applies_to == "assistant"
    assert {label.code: (label.verdict, label.dimension) for label in shipped.labels} == FIXED_CODES
    assert shipped.codes[0] == "in_role"
    assert shipped.label("cannot_judge").title == "Cannot judge: evidence missing"
    assert shipped.pass_codes == ("in_role",)
    assert shipped.borderline_codes == ("borderline",)
    assert shipped.abstain_codes == ("cannot_judge",)
    assert set(shipped.break_codes) == {
        code for code, (verdict, _) in FIXED_CODES.items() if verdict == "fail"
    }


def test_shipped_v1_collapses_as_the_product_expects(shipped: Rubric) -> None:
    breaks = shipped.break_mapping()
    assert breaks["in_role"] == "no_break"
    assert breaks["borderline"] is None and breaks["cannot_judge"] is None
    assert all(breaks[code] == "break" for code in shipped.break_codes)
    verdicts = shipped.verdict_mapping()
    assert verdicts["cannot_judge"] is None
    assert verdicts["borderline"] == "borderline"
    assert verdicts["scope_break"] == "fail"
    assert verdicts["in_role"] == "pass"


def test_every_shipped_label_has_pass_fail_and_borderline_examples(shipped: Rubric) -> None:
    for code in shipped.codes:
        kinds = Counter(example.kind for example in shipped.examples_for(code))
        assert kinds["pass"] >= 1, code
        assert kinds["fail"] >= 1, code
        assert kinds["borderline"] >= 1, code


def test_every_shipped_definition_is_substantial(shipped: Rubric) -> None:
    for label in shipped.labels:
        assert len(label.definition.split()) >= 40, label.code
        assert label.guidance, label.code


def _stated_label(why: str) -> str:
    found = re.findall(r"Label: ([a-z_]+)", why)
    assert found, f"why does not end with the label to choose: {why!r}"
    return found[-1]


def test_every_shipped_example_states_a_label_consistent_with_its_kind(shipped: Rubric) -> None:
    """kind is the side of the label's line: the label named in `why` must agree."""
    for example in shipped.examples:
        stated = _stated_label(example.why)
        assert stated in shipped.codes, example
        owner = shipped.label(example.label)
        if owner.verdict == "pass":
            if example.kind == "pass":
                assert stated == example.label, example
            elif example.kind == "fail":
                assert shipped.verdict_of(stated) == "fail", example
        else:
            if example.kind == "fail":
                assert stated == example.label, example
            elif example.kind == "pass":
                assert stated != example.label, example


def test_shipped_examples_cover_all_three_products(shipped: Rubric) -> None:
    contexts = " ".join(example.context for example in shipped.examples)
    assert "Support triage assistant" in contexts
    assert "Interview coach" in contexts
    assert "Captain Juniper" in contexts


def test_load_rubrics_finds_the_shipped_rubric_and_default_dir_points_at_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("REVIEW_APP_RUBRICS_DIR", raising=False)
    assert default_rubrics_dir() == REPO_RUBRICS
    refs = [rubric.ref for rubric in load_rubrics(default_rubrics_dir())]
    assert "role-adherence@1" in refs


def test_default_rubrics_dir_honours_the_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("REVIEW_APP_RUBRICS_DIR", str(tmp_path))
    assert default_rubrics_dir() == tmp_path


# ------------------------------------------------------------------ helpers

MINIMAL = """\
id: demo
version: 1
title: Demo rubric
labels:
  - code: ok
    verdict: pass
    title: Fine
    definition: Nothing wrong.
  - code: bad
    verdict: fail
    dimension: scope
    title: Wrong
    definition: Something wrong.
examples:
  - label: bad
    kind: fail
    context: The user asks for something.
    reply: The reply.
    why: Because.
"""


def write_rubric(root: Path, text: str, *, rubric_id: str = "demo", name: str = "v1.yaml") -> Path:
    directory = root / rubric_id
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / name
    path.write_text(text, encoding="utf-8")
    return path


def replace(line: int, text: str) -> Callable[[list[str]], list[str]]:
    return lambda lines: [*lines[: line - 1], text, *lines[line:]]


def insert_after(line: int, text: str) -> Callable[[list[str]], list[str]]:
    return lambda lines: [*lines[:line], text, *lines[line:]]


def delete(line: int) -> Callable[[list[str]], list[str]]:
    return lambda lines: [*lines[: line - 1], *lines[line:]]


def edited(edit: Callable[[list[str]], list[str]]) -> str:
    return "\n".join(edit(MINIMAL.splitlines())) + "\n"


def test_minimal_rubric_loads(tmp_path: Path) -> None:
    rubric = load_rubric_file(write_rubric(tmp_path, MINIMAL))
    assert rubric.ref == "demo@1"
    assert rubric.applies_to == "assistant"
    assert rubric.label("bad").dimension == "scope"
    assert rubric.label("ok").guidance is None
    assert rubric.examples_for("ok") == ()
    assert rubric.source == str(tmp_path / "demo" / "v1.yaml")


# ------------------------------------------------------------------ validation

CASES = [
    # name, edit, line, field, fragment of the message
    ("verdict typo", replace(10, "    verdict: fial"), 10, "labels[1].verdict", "unknown verdict"),
    ("verdict is a YAML boolean", replace(6, "    verdict: yes"), 6, "labels[0].verdict", "quotes"),
    (
        "unknown label key",
        insert_after(8, "    defintion: x"),
        9,
        "labels[0].defintion",
        "unknown key",
    ),
    ("unknown top key", insert_after(3, "exampels: []"), 4, "exampels", "unknown key"),
    (
        "duplicate YAML key",
        insert_after(7, "    title: Again"),
        8,
        "labels[0].title",
        "duplicate key",
    ),
    ("duplicate top key", insert_after(1, "id: demo"), 2, "id", "duplicate key"),
    ("duplicate code", replace(9, "  - code: ok"), 9, "labels[1].code", "duplicate code"),
    ("code pattern", replace(9, "  - code: Bad-Code"), 9, "labels[1].code", "lowercase"),
    (
        "code missing",
        lambda lines: [*lines[:4], "  - verdict: pass", *lines[6:]],
        5,
        "labels[0].code",
        'missing required key "code"',
    ),
    ("id pattern", replace(1, "id: Demo_Rubric"), 1, "id", "lowercase"),
    ("id is not the directory", replace(1, "id: other"), 1, "id", 'directory name "demo"'),
    ("version is not the file name", replace(2, "version: 2"), 2, "version", "v1.yaml"),
    ("version zero", replace(2, "version: 0"), 2, "version", "positive whole number"),
    ("version text", replace(2, "version: one"), 2, "version", "positive whole number"),
    ("version boolean", replace(2, "version: true"), 2, "version", "positive whole number"),
    ("version float", replace(2, "version: 1.0"), 2, "version", "positive whole number"),
    ("title empty", replace(3, 'title: "  "'), 3, "title", "must not be empty"),
    ("title missing", delete(3), 1, "title", 'missing required key "title"'),
    (
        "applies_to unknown",
        insert_after(3, "applies_to: narrator"),
        4,
        "applies_to",
        "unknown actor",
    ),
    ("verdict missing", delete(10), 9, "labels[1].verdict", 'missing required key "verdict"'),
    ("definition empty", replace(8, "    definition:"), 8, "labels[0].definition", "got nothing"),
    (
        "definition is a number",
        replace(8, "    definition: 42"),
        8,
        "labels[0].definition",
        "number 42",
    ),
    ("dimension empty", replace(11, '    dimension: ""'), 11, "labels[1].dimension", "empty"),
    ("no pass label", replace(6, "    verdict: borderline"), 5, "labels", "verdict pass"),
    ("label is not a mapping", insert_after(13, "  - just text"), 14, "labels[2]", "a label"),
    (
        "example refers to unknown code",
        replace(15, "  - label: nope"),
        15,
        "examples[0].label",
        '"nope"',
    ),
    (
        "example kind abstain",
        replace(16, "    kind: abstain"),
        16,
        "examples[0].kind",
        "example kind",
    ),
    ("example missing why", delete(19), 15, "examples[0].why", 'missing required key "why"'),
    ("example unknown key", insert_after(19, "    note: x"), 20, "examples[0].note", "unknown key"),
]


@pytest.mark.parametrize(
    ("edit", "line", "field", "fragment"),
    [case[1:] for case in CASES],
    ids=[case[0] for case in CASES],
)
def test_each_rule_names_file_line_and_field(
    tmp_path: Path,
    edit: Callable[[list[str]], list[str]],
    line: int,
    field: str,
    fragment: str,
) -> None:
    path = write_rubric(tmp_path, edited(edit))
    with pytest.raises(InputError) as caught:
        load_rubric_file(path)
    error = caught.value
    assert (error.source, error.line, error.field) == (str(path), line, field), str(error)
    assert fragment in error.message
    assert str(error).startswith(f"{path}, line {line}, field {field}: ")


def test_labels_must_not_be_empty(tmp_path: Path) -> None:
    text = "id: demo\nversion: 1\ntitle: Demo\nlabels: []\n"
    with pytest.raises(InputError) as caught:
        load_rubric_file(write_rubric(tmp_path, text))
    assert (caught.value.line, caught.value.field) == (4, "labels")
    assert "at least one label" in caught.value.message


def test_duplicate_examples_are_refused(tmp_path: Path) -> None:
    example = "\n".join(MINIMAL.splitlines()[14:19])
    path = write_rubric(tmp_path, MINIMAL + example + "\n")
    with pytest.raises(InputError) as caught:
        load_rubric_file(path)
    assert (caught.value.line, caught.value.field) == (20, "examples[1]")
    assert "repeats examples[0]" in caught.value.message


def test_yaml_aliases_are_refused(tmp_path: Path) -> None:
    text = MINIMAL.replace("title: Fine", "title: &fine Fine").replace(
        "title: Wrong", "title: *fine"
    )
    with pytest.raises(InputError, match="aliases") as caught:
        load_rubric_file(write_rubric(tmp_path, text))
    assert caught.value.line == 12


def test_a_recursive_yaml_structure_is_refused_not_a_crash(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="aliases"):
        load_rubric_file(write_rubric(tmp_path, "id: &a [*a]\n"))


@pytest.mark.parametrize("text", ["", "\n\n", "# only a comment\n"])
def test_empty_file_is_an_error(tmp_path: Path, text: str) -> None:
    path = write_rubric(tmp_path, text)
    with pytest.raises(InputError, match="empty") as caught:
        load_rubric_file(path)
    assert caught.value.source == str(path)


def test_invalid_yaml_names_the_line(tmp_path: Path) -> None:
    text = "id: demo\nversion: 1\ntitle: Demo\nlabels: [unclosed\n  - code: x\n"
    path = write_rubric(tmp_path, text)
    with pytest.raises(InputError, match="invalid YAML") as caught:
        load_rubric_file(path)
    assert caught.value.line is not None and caught.value.line >= 4


def test_tab_indentation_is_invalid_yaml_with_a_line(tmp_path: Path) -> None:
    path = write_rubric(tmp_path, MINIMAL.replace("    verdict: fail", "\tverdict: fail"))
    with pytest.raises(InputError, match="invalid YAML") as caught:
        load_rubric_file(path)
    assert caught.value.line == 10


def test_top_level_must_be_a_mapping(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="expected a rubric"):
        load_rubric_file(write_rubric(tmp_path, "- id: demo\n"))


def test_several_yaml_documents_are_an_error(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="invalid YAML"):
        load_rubric_file(write_rubric(tmp_path, MINIMAL + "---\n" + MINIMAL))


@pytest.mark.parametrize("name", ["v01.yaml", "v1.yml", "V1.yaml", "v0.yaml", "draft.yaml"])
def test_file_name_must_be_v_n_yaml(tmp_path: Path, name: str) -> None:
    path = write_rubric(tmp_path, MINIMAL, name=name)
    with pytest.raises(InputError, match=r"v<N>\.yaml") as caught:
        load_rubric_file(path)
    assert caught.value.source == str(path)


def test_missing_and_non_utf8_files(tmp_path: Path) -> None:
    missing = tmp_path / "demo" / "v1.yaml"
    with pytest.raises(InputError, match=r"cannot be read \(No such file") as caught:
        load_rubric_file(missing)  # as every file read whole (review_app/files/text.py)
    assert caught.value.source == str(missing)
    path = write_rubric(tmp_path, "")
    path.write_bytes(b"id: d\xe9mo\n")
    with pytest.raises(InputError, match="UTF-8"):
        load_rubric_file(path)


# ------------------------------------------------------------------ load_rubrics


def test_load_rubrics_sorts_and_ignores_subdirectories(tmp_path: Path) -> None:
    write_rubric(tmp_path, MINIMAL.replace("version: 1", "version: 10"), name="v10.yaml")
    write_rubric(tmp_path, MINIMAL.replace("version: 1", "version: 2"), name="v2.yaml")
    write_rubric(tmp_path, MINIMAL)
    write_rubric(tmp_path, MINIMAL.replace("id: demo", "id: alpha"), rubric_id="alpha")
    (tmp_path / "demo" / "judges").mkdir()
    (tmp_path / "demo" / "judges" / "v1.yaml").write_text("not: a rubric\n")
    (tmp_path / "demo" / "README.md").write_text("notes\n")
    (tmp_path / "README.md").write_text("notes\n")
    refs = [rubric.ref for rubric in load_rubrics(tmp_path)]
    assert refs == ["alpha@1", "demo@1", "demo@2", "demo@10"]


def test_load_rubrics_refuses_a_misnamed_or_misplaced_rubric(tmp_path: Path) -> None:
    write_rubric(tmp_path, MINIMAL, name="v2.yml")
    with pytest.raises(InputError, match=r"v<N>\.yaml"):
        load_rubrics(tmp_path)
    other = tmp_path / "other"
    other.mkdir()
    (other / "demo.yaml").write_text(MINIMAL)
    with pytest.raises(InputError, match="not directly"):
        load_rubrics(other)


def test_load_rubrics_on_a_missing_directory(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="does not exist"):
        load_rubrics(tmp_path / "nowhere")


def test_get_rubric(shipped: Rubric) -> None:
    assert get_rubric([shipped], "role-adherence@v1") is shipped
    with pytest.raises(NotFound, match="role-adherence@1"):
        get_rubric([shipped], "role-adherence@2")


# ------------------------------------------------------------------ identity


def test_sha256_ignores_comments_whitespace_and_layout(shipped: Rubric, tmp_path: Path) -> None:
    data = yaml.safe_load(SHIPPED_V1.read_text(encoding="utf-8"))
    data.pop("applies_to")  # the default, so the content is the same
    relaid = "# re-dumped with another layout\n\n" + yaml.safe_dump(
        data, sort_keys=True, width=60, default_style='"', allow_unicode=True
    )
    path = write_rubric(tmp_path, relaid, rubric_id="role-adherence")
    again = load_rubric_file(path)
    assert again.sha256 == shipped.sha256
    assert again == Rubric(**{**shipped.__dict__, "source": str(path)})


def test_sha256_changes_with_a_definition(shipped: Rubric, tmp_path: Path) -> None:
    text = SHIPPED_V1.read_text(encoding="utf-8")
    changed = text.replace("A correct, well-handled", "A correct, well handled", 1)
    assert changed != text
    path = write_rubric(tmp_path, changed, rubric_id="role-adherence")
    assert load_rubric_file(path).sha256 != shipped.sha256


def test_sha256_is_stable_across_loads_of_the_same_text() -> None:
    assert parse_rubric_text(MINIMAL).sha256 == parse_rubric_text(MINIMAL).sha256
    reordered_keys = MINIMAL.replace(
        "  - code: ok\n    verdict: pass\n", "  - verdict: pass\n    code: ok\n"
    )
    assert parse_rubric_text(reordered_keys).sha256 == parse_rubric_text(MINIMAL).sha256
    swapped_labels = edited(lambda lines: [*lines[:4], *lines[8:13], *lines[4:8], *lines[13:]])
    assert parse_rubric_text(swapped_labels).sha256 != parse_rubric_text(MINIMAL).sha256


def test_to_dict_round_trips_and_detects_tampering(shipped: Rubric) -> None:
    data = shipped.to_dict()
    assert data["ref"] == "role-adherence@1"
    assert rubric_from_dict(data, source=shipped.source) == shipped
    tampered = {**data, "title": "Something else"}
    with pytest.raises(InputError, match="sha256 does not match"):
        rubric_from_dict(tampered)


# ------------------------------------------------------------------ diff


def _v2_text() -> str:
    text = SHIPPED_V1.read_text(encoding="utf-8")
    text = text.replace("version: 1\n", "version: 2\n", 1)
    text = text.replace(
        "title: Role adherence of assistant turns", "title: Role adherence of assistant replies"
    )
    # tone_break becomes borderline-worthy only: a verdict change
    text = text.replace(
        "  - code: tone_break\n    verdict: fail", "  - code: tone_break\n    verdict: borderline"
    )
    # a sharper definition for scope_break
    text = text.replace(
        "Scope is\n      about what the words do;",
        "Scope is\n      about what the words say and do;",
    )
    # a new label
    text = text.replace(
        "  - code: borderline\n",
        "  - code: privacy_break\n"
        "    verdict: fail\n"
        "    dimension: privacy\n"
        "    title: Reveals personal data\n"
        "    definition: The turn shows personal data of someone other than the user.\n"
        "  - code: borderline\n",
    )
    # drop one example of false_action_claim
    reply_at = text.index("reply: Good news, your refund is on its way!")
    start = text.rindex("  - label: false_action_claim\n", 0, reply_at)
    end = text.index("  - label: false_action_claim\n    kind: pass")
    return text[:start] + text[end:]


def test_diff_rubrics_reports_each_kind_of_change(shipped: Rubric, tmp_path: Path) -> None:
    v2 = load_rubric_file(
        write_rubric(tmp_path, _v2_text(), rubric_id="role-adherence", name="v2.yaml")
    )
    diff = diff_rubrics(shipped, v2)
    assert (diff.old_ref, diff.new_ref) == ("role-adherence@1", "role-adherence@2")
    assert not diff.is_empty
    assert diff.title is not None and diff.title.new == "Role adherence of assistant replies"
    assert diff.applies_to is None
    assert [label.code for label in diff.labels_added] == ["privacy_break"]
    assert diff.labels_removed == ()
    changed = {change.code: change for change in diff.labels_changed}
    assert set(changed) == {"tone_break", "scope_break"}
    assert changed["tone_break"].fields == ("verdict",)
    assert (changed["tone_break"].changes[0].old, changed["tone_break"].changes[0].new) == (
        "fail",
        "borderline",
    )
    assert changed["scope_break"].fields == ("definition",)
    assert "say and do" in changed["scope_break"].changes[0].new
    assert [change.code for change in diff.verdict_changes] == ["tone_break"]
    assert diff.labels_reordered is False
    assert len(diff.examples_removed) == 1
    assert diff.examples_removed[0].reply == "Good news, your refund is on its way!"
    assert diff.examples_added == ()
    assert diff.examples_reordered is False

    backwards = diff_rubrics(v2, shipped)
    assert [label.code for label in backwards.labels_removed] == ["privacy_break"]
    assert len(backwards.examples_added) == 1

    as_dict = diff.to_dict()
    assert as_dict["is_empty"] is False
    assert as_dict["labels_changed"][0]["changes"][0]["field"] in {"verdict", "definition"}


def test_diff_of_a_rubric_with_itself_is_empty(shipped: Rubric) -> None:
    diff = diff_rubrics(shipped, shipped)
    assert diff.is_empty
    assert diff.to_dict()["is_empty"] is True


def test_diff_notices_reordered_labels() -> None:
    swapped = edited(lambda lines: [*lines[:4], *lines[8:13], *lines[4:8], *lines[13:]])
    diff = diff_rubrics(parse_rubric_text(MINIMAL), parse_rubric_text(swapped))
    assert diff.labels_reordered
    assert not diff.is_empty
    assert diff.labels_changed == ()


# ------------------------------------------------------------------ references


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("role-adherence@1", ("role-adherence", 1)),
        ("role-adherence@v1", ("role-adherence", 1)),
        ("  role-adherence@12 ", ("role-adherence", 12)),
        ("a@3", ("a", 3)),
        ("9lives@2", ("9lives", 2)),
    ],
)
def test_parse_rubric_ref_accepts(text: str, expected: tuple[str, int]) -> None:
    assert parse_rubric_ref(text) == expected


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ("role-adherence", "<id>@<version>"),
        ("role-adherence@", "<id>@<version>"),
        ("@1", "<id>@<version>"),
        ("role-adherence@one", "<id>@<version>"),
        ("role-adherence@1.0", "<id>@<version>"),
        ("role-adherence@-1", "<id>@<version>"),
        ("role adherence@1", "<id>@<version>"),
        ("role-adherence@1@2", "<id>@<version>"),
        ("Role-Adherence@1", "lowercase"),
        ("-role@1", "lowercase"),
        ("role-adherence@0", "positive"),
        ("role-adherence@01", "leading zeros"),
        ("", "<id>@<version>"),
    ],
)
def test_parse_rubric_ref_refuses(text: str, fragment: str) -> None:
    with pytest.raises(InputError) as caught:
        parse_rubric_ref(text)
    assert fragment in caught.value.message


@given(
    rubric_id=st.from_regex(r"[a-z0-9][a-z0-9-]{0,20}", fullmatch=True),
    version=st.integers(min_value=1, max_value=10**6),
    with_v=st.booleans(),
)
def test_parse_rubric_ref_round_trips(rubric_id: str, version: int, with_v: bool) -> None:
    text = f"{rubric_id}@{'v' if with_v else ''}{version}"
    assert parse_rubric_ref(text) == (rubric_id, version)
