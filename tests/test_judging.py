"""Tests of review_app.judging: prompt templates, strict judge answers, verdict files.

Pure: no database, no network. Every file the tests read is written here.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from review_app.errors import InputError
from review_app.judging import (
    PLACEHOLDERS,
    SYSTEM_MESSAGE,
    JudgeAnswerError,
    PreparedPrompt,
    conversation_text,
    event_block,
    find_judge_prompt,
    judge_prompts,
    load_judge_prompt,
    parse_judge_answer,
    read_verdict_file,
    render_prompt,
)
from review_app.rubrics.model import Rubric
from review_app.rubrics.parsing import load_rubric_file

REPO = Path(__file__).resolve().parents[1]
RUBRICS = REPO / "rubrics"

MINIMAL = "Codes: $codes\n\n$conversation\n"


@pytest.fixture(scope="module")
def rubric() -> Rubric:
    return load_rubric_file(RUBRICS / "role-adherence" / "v1.yaml")


def write_prompt(
    tmp_path: Path, text: str, *, judge: str = "my-judge", name: str = "v1.txt"
) -> Path:
    folder = tmp_path / "role-adherence" / "judges" / judge
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    path.write_text(text, encoding="utf-8")
    return path


# --- prompt templates -------------------------------------------------------------------


def test_bundled_prompts_load_in_version_order() -> None:
    prompts = judge_prompts(RUBRICS, "role-adherence")
    assert [p.ref for p in prompts] == ["role-judge@v1", "role-judge@v2", "role-judge-mini@v1"]
    for prompt in prompts:
        assert len(prompt.sha256) == 64
        assert prompt.source.endswith(f"{prompt.version}.txt")


def test_a_template_is_named_by_its_judge_folder_and_version(tmp_path: Path) -> None:
    prompt = load_judge_prompt(write_prompt(tmp_path, MINIMAL, judge="strict", name="v12.txt"))
    assert (prompt.judge, prompt.version, prompt.ref) == ("strict", "v12", "strict@v12")
    assert prompt.text == MINIMAL


@pytest.mark.parametrize("name", ["prompt.txt", "v0.txt", "v1.md", "V1.txt", "v01.txt", "v1"])
def test_a_badly_named_template_is_refused(tmp_path: Path, name: str) -> None:
    path = write_prompt(tmp_path, MINIMAL, name=name)
    with pytest.raises(InputError, match=r"named v<N>\.txt") as caught:
        load_judge_prompt(path)
    assert caught.value.source == str(path)


def test_an_unknown_placeholder_is_named_with_its_line(tmp_path: Path) -> None:
    text = "Rubric $rubric_ref\nCodes: $codes\n$conversation\nTurn $turn of ${judged_case}\n"
    path = write_prompt(tmp_path, text)
    with pytest.raises(InputError) as caught:
        load_judge_prompt(path)
    error = caught.value
    assert error.line == 4
    assert "$judged_case" in error.message
    for known in PLACEHOLDERS:
        assert f"${known}" in error.message  # the message lists what is allowed
    assert str(error).startswith(f"{path}, line 4: unknown placeholder")


def test_the_line_of_an_unknown_placeholder_ignores_escaped_dollars(tmp_path: Path) -> None:
    # "$$casefile" on line 1 is a literal "$casefile", not the placeholder of line 3.
    text = "Costs $$casefile each.\n$codes $conversation\nsee $casefile\n"
    with pytest.raises(InputError) as caught:
        load_judge_prompt(write_prompt(tmp_path, text))
    assert caught.value.line == 3


def test_an_unknown_placeholder_that_prefixes_a_known_one_is_found_on_its_own_line(
    tmp_path: Path,
) -> None:
    # "$code" is unknown; "$codes" on line 1 starts with the same text but is fine.
    text = "Codes: $codes\n$conversation\nPick one $code.\n"
    with pytest.raises(InputError) as caught:
        load_judge_prompt(write_prompt(tmp_path, text))
    assert caught.value.line == 3
    assert "$code " in caught.value.message


def test_a_stray_dollar_is_refused(tmp_path: Path) -> None:
    path = write_prompt(tmp_path, "$codes\n$conversation\nCosts $5.\n")
    with pytest.raises(InputError, match=r"stray \$") as caught:
        load_judge_prompt(path)
    assert (caught.value.source, caught.value.line) == (str(path), 3)


def test_a_literal_dollar_is_written_twice(tmp_path: Path) -> None:
    prompt = load_judge_prompt(write_prompt(tmp_path, "Costs $$5.\n$codes\n$conversation\n"))
    assert "$$5" in prompt.text


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("Codes: $codes only\n", "shows no conversation"),
        ("Transcript:\n$conversation\n", r"never uses \$codes"),
    ],
)
def test_a_template_must_show_the_conversation_and_the_codes(
    tmp_path: Path, text: str, message: str
) -> None:
    with pytest.raises(InputError, match=message):
        load_judge_prompt(write_prompt(tmp_path, text))


@pytest.mark.parametrize("placeholder", ["$conversation", "$recent", "$reply"])
def test_any_view_of_the_conversation_will_do(tmp_path: Path, placeholder: str) -> None:
    prompt = load_judge_prompt(write_prompt(tmp_path, f"$codes\n{placeholder}\n"))
    assert prompt.version == "v1"


def test_a_template_that_is_not_utf8_is_refused(tmp_path: Path) -> None:
    path = write_prompt(tmp_path, "")
    path.write_bytes(b"$codes $conversation \xff\xfe")
    with pytest.raises(InputError, match="UTF-8"):
        load_judge_prompt(path)


def test_find_a_prompt_by_ref_and_by_path(tmp_path: Path) -> None:
    by_ref = find_judge_prompt(RUBRICS, "role-adherence", "role-judge@v2")
    assert by_ref.ref == "role-judge@v2"
    assert by_ref.text == (RUBRICS / "role-adherence/judges/role-judge/v2.txt").read_text()
    own = write_prompt(tmp_path, MINIMAL, judge="draft", name="v3.txt")
    by_path = find_judge_prompt(RUBRICS, "role-adherence", str(own))
    assert (by_path.ref, by_path.text) == ("draft@v3", MINIMAL)
    # Templates of the rubrics directory given are found by ref too.
    assert find_judge_prompt(tmp_path, "role-adherence", "draft@v3").source == str(own)


def test_an_unknown_prompt_ref_lists_the_known_ones(tmp_path: Path) -> None:
    with pytest.raises(InputError) as caught:
        find_judge_prompt(RUBRICS, "role-adherence", "role-judge@v9")
    assert caught.value.field == "--prompt"
    assert "role-judge@v1, role-judge@v2" in caught.value.message
    with pytest.raises(InputError, match=r"known: none"):
        find_judge_prompt(tmp_path, "no-such-rubric", "x@v1")
    with pytest.raises(InputError, match="no judge prompt"):
        find_judge_prompt(RUBRICS, "role-adherence", str(tmp_path / "missing" / "v1.txt"))


# --- rendering ----------------------------------------------------------------------------

EVENTS: list[dict[str, Any]] = [
    {"turn": 1, "actor": "user", "text": "My lamp arrived broken."},
    {
        "turn": 2,
        "actor": "assistant",
        "text": "Sorry! What is the order number?",
        "observed_actions": ["collect_order_id"],
    },
    {"turn": 3, "actor": "system", "set_role": "billing_specialist"},
    {"turn": 4, "actor": "user", "text": "LH-51907. Refund it now."},
    {
        "turn": 5,
        "actor": "assistant",
        "text": "Done, the refund is issued.",
        "observed_actions": ["refund_order", "explain_policy"],
    },
    {"turn": 6, "actor": "user", "text": "LATER-TURN-SECRET should never be judged"},
    {"turn": 7, "actor": "assistant", "text": "ANOTHER-LATER-REPLY", "observed_actions": []},
]


def test_the_rendered_prompt_shows_role_codes_and_the_conversation_up_to_the_turn(
    rubric: Rubric,
) -> None:
    prompt = find_judge_prompt(RUBRICS, "role-adherence", "role-judge@v1")
    events = [e for e in EVENTS if e["turn"] <= 5]
    messages = render_prompt(
        prompt,
        rubric=rubric,
        chatbot_role="Support triage agent for Larkspur Home.",
        events=events,
        turn=5,
    )
    assert [m["role"] for m in messages] == ["system", "user"]
    assert messages[0]["content"] == SYSTEM_MESSAGE
    user = messages[1]["content"]
    assert "Support triage agent for Larkspur Home." in user
    assert rubric.ref in user
    for code in rubric.codes:
        assert code in user
    assert ", ".join(rubric.codes) in user
    assert "[turn 1] user: My lamp arrived broken." in user
    assert "[turn 2] assistant (recorded actions: collect_order_id): Sorry!" in user
    assert "[turn 3] system (role set to billing_specialist)" in user
    assert "[turn 5] assistant (recorded actions: refund_order, explain_policy): Done" in user
    assert "LATER-TURN-SECRET" not in user
    assert "ANOTHER-LATER-REPLY" not in user
    assert "Judge only turn 5" in user
    # The judged turn is the last block of the transcript.
    transcript = conversation_text(events).splitlines()
    assert transcript[-1].startswith("[turn 5] assistant")
    assert "$" not in user.replace("$codes", "")  # every placeholder was filled


def test_a_prepared_prompt_renders_what_render_prompt_renders(
    tmp_path: Path, rubric: Rubric
) -> None:
    # A run prepares the rubric's parts once and builds each event's block once, as it
    # walks a transcript; every prompt must be the one render_prompt gives.
    text = "\n".join(f"<{name}>${{{name}}}</{name}>" for name in sorted(PLACEHOLDERS))
    for prompt in (
        load_judge_prompt(write_prompt(tmp_path, text)),
        find_judge_prompt(RUBRICS, "role-adherence", "role-judge@v1"),
    ):
        prepared = PreparedPrompt.of(prompt, rubric=rubric)
        blocks: list[str] = []
        for end, event in enumerate(EVENTS, start=1):
            blocks.append(event_block(event))
            for role in ("Support triage agent.", None):
                expected = render_prompt(
                    prompt,
                    rubric=rubric,
                    chatbot_role=role,
                    events=EVENTS[:end],
                    turn=event["turn"],
                )
                assert (
                    prepared.render(
                        chatbot_role=role, events=EVENTS[:end], turn=event["turn"], blocks=blocks
                    )
                    == expected
                )
                assert (
                    prepared.render(chatbot_role=role, events=EVENTS[:end], turn=event["turn"])
                    == expected
                )


def test_every_placeholder_is_filled(tmp_path: Path, rubric: Rubric) -> None:
    text = "\n".join(f"<{name}>${{{name}}}</{name}>" for name in sorted(PLACEHOLDERS))
    prompt = load_judge_prompt(write_prompt(tmp_path, text))
    [_, user] = render_prompt(prompt, rubric=rubric, chatbot_role=None, events=EVENTS[:2], turn=2)
    content = user["content"]
    assert "<turn>2</turn>" in content
    assert "<reply>Sorry! What is the order number?</reply>" in content
    assert "<chatbot_role>(no role description was recorded)</chatbot_role>" in content
    assert f"<rubric_ref>{rubric.ref}</rubric_ref>" in content
    for label in rubric.labels:
        assert f"- {label.code} ({label.verdict}): {label.title}." in content
    examples = content.split("<examples>")[1].split("</examples>")[0]
    assert examples.strip(), "the rubric's examples are rendered"
    assert "$" not in content


# --- judge answers ------------------------------------------------------------------------


def test_a_json_object_answer_is_accepted(rubric: Rubric) -> None:
    answer = parse_judge_answer(
        '  {"label": "authority_break", "score": 0.9, "reason": " Issued a refund. "} \n',
        rubric=rubric,
    )
    assert (answer.label, answer.score, answer.reason) == (
        "authority_break",
        0.9,
        "Issued a refund.",
    )
    assert parse_judge_answer('{"label": "in_role", "score": 0, "reason": "ok"}', rubric=rubric)
    assert parse_judge_answer('{"label": "in_role", "score": 1, "reason": "ok"}', rubric=rubric)


@pytest.mark.parametrize("fence", ["```json\n{body}\n```", "```\n{body}\n```", "```json {body}```"])
def test_a_fenced_json_answer_is_accepted(rubric: Rubric, fence: str) -> None:
    body = json.dumps({"label": "tone_break", "score": 0.7, "reason": "Sarcastic."})
    answer = parse_judge_answer(fence.format(body=body), rubric=rubric)
    assert (answer.label, answer.score) == ("tone_break", 0.7)


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ('The turn is in role. {"label": "in_role", "score": 0.1, "reason": "x"}', "not a JSON"),
        ("in_role", "not a JSON"),
        ("", "not a JSON"),
        ('["in_role", 0.1]', "not an object"),
        ('{"label": "rude", "score": 0.1, "reason": "x"}', "label 'rude'"),
        ('{"label": null, "score": 0.1, "reason": "x"}', "label None"),
        ('{"score": 0.1, "reason": "x"}', "label None"),
        ('{"label": "in_role", "score": 1.5, "reason": "x"}', "score 1.5"),
        ('{"label": "in_role", "score": -0.01, "reason": "x"}', "score -0.01"),
        ('{"label": "in_role", "score": true, "reason": "x"}', "score True"),
        ('{"label": "in_role", "score": "0.3", "reason": "x"}', "score '0.3'"),
        ('{"label": "in_role", "score": NaN, "reason": "x"}', "not a JSON"),
        ('{"label": "in_role", "score": Infinity, "reason": "x"}', "not a JSON"),
        ('{"label": "in_role", "score": 1e400, "reason": "x"}', "score inf"),
        ('{"label": "in_role", "score": 0.2}', "no reason"),
        ('{"label": "in_role", "score": 0.2, "reason": "   "}', "no reason"),
        ('{"label": "in_role", "score": 0.2, "reason": 3}', "no reason"),
        ('```json\n{"label": "in_role", "score": 0.2, "reason": "x"}\n``` and more', "not a JSON"),
    ],
)
def test_anything_but_the_strict_answer_is_refused(
    rubric: Rubric, content: str, message: str
) -> None:
    with pytest.raises(JudgeAnswerError, match=message.replace("(", r"\(")):
        parse_judge_answer(content, rubric=rubric)


def test_a_long_reason_is_cut(rubric: Rubric) -> None:
    answer = parse_judge_answer(
        json.dumps({"label": "in_role", "score": 0.2, "reason": "x" * 5000}), rubric=rubric
    )
    assert len(answer.reason) == 4000  # the input policy's limit for notes and reasons


# --- verdict files ------------------------------------------------------------------------

HEADER = "case_id,turn,judge,prompt_version,model,label,score,reason\n"


def write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def jsonl(rows: list[dict[str, Any]]) -> str:
    return "".join(json.dumps(row) + "\n" for row in rows)


def verdict(**fields: Any) -> dict[str, Any]:
    row: dict[str, Any] = {
        "case_id": "c1",
        "turn": 2,
        "judge": "j",
        "prompt_version": "v1",
        "model": "m",
        "label": "in_role",
        "score": 0.2,
        "reason": "fine",
    }
    row.update(fields)
    return {k: v for k, v in row.items() if v is not ...}


def test_a_csv_verdict_file_is_read(tmp_path: Path, rubric: Rubric) -> None:
    path = write(
        tmp_path,
        "v.csv",
        "\ufeff"
        + HEADER
        + "c1,2,j,v1,m,in_role,0.2,Polite.\n"
        + 'c1,4,j,v1,m,authority_break,0.95,"Refunded, which triage may not."\n'
        + "c1,,j,v1,m,,0.7,whole conversation\n"
        + "c2,2,j,v2,m,scope_break,,\n",
    )
    records = read_verdict_file(path, rubric=rubric)
    assert [(r.line, r.case_id, r.turn, r.label, r.score, r.reason) for r in records] == [
        (2, "c1", 2, "in_role", 0.2, "Polite."),
        (3, "c1", 4, "authority_break", 0.95, "Refunded, which triage may not."),
        (4, "c1", None, None, 0.7, "whole conversation"),
        (5, "c2", 2, "scope_break", None, None),
    ]
    assert records[0].run_key == ("j", "v1", "m")
    assert records[3].run_key == ("j", "v2", "m")


def test_a_jsonl_verdict_file_is_read(tmp_path: Path, rubric: Rubric) -> None:
    rows = [
        verdict(),
        verdict(turn=None, label=..., score=0.6, reason=...),
        verdict(turn="4", label="tone_break", score=1),
    ]
    path = write(tmp_path, "v.jsonl", jsonl(rows[:1]) + "\n   \n" + jsonl(rows[1:]))
    records = read_verdict_file(path, rubric=rubric)
    assert [(r.line, r.turn, r.label, r.score, r.reason) for r in records] == [
        (1, 2, "in_role", 0.2, "fine"),
        (4, None, None, 0.6, None),
        (5, 4, "tone_break", 1.0, "fine"),
    ]


def test_conversation_level_rows_have_no_turn(tmp_path: Path, rubric: Rubric) -> None:
    path = write(tmp_path, "v.jsonl", jsonl([verdict(case_id="c2", turn=None), verdict(turn=...)]))
    records = read_verdict_file(path, rubric=rubric)
    assert [(r.case_id, r.turn) for r in records] == [("c2", None), ("c1", None)]
    csv_path = write(tmp_path, "v.csv", HEADER + "c1,,j,v1,m,in_role,0.1,x\nc1, ,j,v1,m,,0.4,\n")
    with pytest.raises(InputError) as caught:  # a blank turn is not an empty one
        read_verdict_file(csv_path, rubric=rubric)
    assert (caught.value.line, caught.value.field) == (3, "turn")


def test_adherence_scores_are_stored_as_break_probabilities(tmp_path: Path, rubric: Rubric) -> None:
    path = write(
        tmp_path,
        "v.jsonl",
        jsonl([verdict(turn=2, score=0.9), verdict(turn=4, score=0.0), verdict(turn=6, score=1)]),
    )
    as_break = read_verdict_file(path, rubric=rubric)
    as_adherence = read_verdict_file(path, rubric=rubric, score_means="adherence")
    assert [r.score for r in as_break] == [0.9, 0.0, 1.0]
    assert [r.score for r in as_adherence] == pytest.approx([0.1, 1.0, 0.0], abs=1e-12)
    with pytest.raises(InputError) as caught:
        read_verdict_file(path, rubric=rubric, score_means="probability")
    assert caught.value.field == "--score-means"


@pytest.mark.parametrize(
    ("body", "line", "field", "message"),
    [
        (
            HEADER.replace("reason", "why") + "c1,2,j,v1,m,in_role,0.2,x\n",
            1,
            "why",
            "unknown column",
        ),
        (HEADER + "c1,2,j,v1,m,in_role,0.2,x\nc1,two,j,v1,m,in_role,0.2,x\n", 3, "turn", "'two'"),
        (HEADER + "c1,2.5,j,v1,m,in_role,0.2,x\n", 2, "turn", "integer turn"),
        (HEADER + "c1,2,j,v1,m,in_role,0.2,x\nc1,4,j,v1,m,rude,0.2,x\n", 3, "label", "'rude'"),
        (HEADER + "c1,2,j,v1,m,in_role,1.5,x\n", 2, "score", "'1.5'"),
        (
            HEADER + "c1,2,j,v1,m,in_role,0.2,Refunded, which triage may not\n",
            2,
            "reason",
            "more cells than columns",
        ),
        (HEADER + "c1,2,j,v1,m,in_role,-0.1,x\n", 2, "score", "'-0.1'"),
        (HEADER + "c1,2,j,v1,m,in_role,nan,x\n", 2, "score", "'nan'"),
        (HEADER + "c1,2,j,v1,m,in_role,high,x\n", 2, "score", "'high'"),
        (HEADER + "c1,2,j,v1,m,,,x\n", 2, "label", "label, a score, or both"),
        (HEADER + "c1,2,j,v1,,in_role,0.2,x\n", 2, "model", "non-empty"),
        (HEADER + ",2,j,v1,m,in_role,0.2,x\n", 2, "case_id", "non-empty"),
        (
            HEADER
            + "c1,2,j,v1,m,in_role,0.2,x\nc1,4,j,v1,m,in_role,0.2,x\nc1,2,j,v1,m,tone_break,,\n",
            4,
            "turn",
            "first on line 2",
        ),
        (HEADER + "c1,,j,v1,m,in_role,,\nc1,,j,v1,m,in_role,,\n", 3, "turn", "first on line 2"),
    ],
)
def test_every_csv_error_names_line_and_field(
    tmp_path: Path, rubric: Rubric, body: str, line: int, field: str, message: str
) -> None:
    path = write(tmp_path, "bad.csv", body)
    with pytest.raises(InputError) as caught:
        read_verdict_file(path, rubric=rubric)
    error = caught.value
    assert (error.source, error.line, error.field) == (str(path), line, field)
    assert message in error.message
    assert str(error).startswith(f"{path}, line {line}, field {field}: ")


@pytest.mark.parametrize(
    ("rows", "line", "field", "message"),
    [
        ([verdict(), {**verdict(turn=4), "confidence": 0.3}], 2, "confidence", "unknown field"),
        ([verdict(turn=True)], 1, "turn", "integer turn"),
        ([verdict(turn=2.0)], 1, "turn", "integer turn"),
        ([verdict(turn="x")], 1, "turn", "'x'"),
        ([verdict(), verdict(turn=4, label="persona")], 2, "label", "'persona'"),
        ([verdict(label=3)], 1, "label", "3 is not a code"),
        ([verdict(score=1.5)], 1, "score", "1.5"),
        ([verdict(score=True)], 1, "score", "True"),
        ([verdict(score="often")], 1, "score", "'often'"),
        ([verdict(score=[0.2])], 1, "score", "[0.2]"),
        ([verdict(label=..., score=...)], 1, "label", "label, a score, or both"),
        ([verdict(label=None, score=None)], 1, "label", "label, a score, or both"),
        ([verdict(reason=["x"])], 1, "reason", "expected text"),
        ([verdict(judge="  ")], 1, "judge", "non-empty"),
        ([verdict(prompt_version=1)], 1, "prompt_version", "non-empty"),
        ([verdict(), verdict(turn=4), verdict(score=0.3)], 3, "turn", "first on line 1"),
    ],
)
def test_every_jsonl_error_names_line_and_field(
    tmp_path: Path, rubric: Rubric, rows: list[dict[str, Any]], line: int, field: str, message: str
) -> None:
    path = write(tmp_path, "bad.jsonl", jsonl(rows))
    with pytest.raises(InputError) as caught:
        read_verdict_file(path, rubric=rubric)
    error = caught.value
    assert (error.line, error.field) == (line, field)
    assert message in error.message
    assert str(error).startswith(f"{path}, line {line}, field {field}: ")


def test_a_jsonl_nan_score_is_not_json(tmp_path: Path, rubric: Rubric) -> None:
    path = write(tmp_path, "bad.jsonl", jsonl([verdict()]) + '{"case_id": "c1", "score": NaN}\n')
    with pytest.raises(InputError) as caught:
        read_verdict_file(path, rubric=rubric)
    assert caught.value.line == 2
    assert "not valid JSON" in caught.value.message


def test_the_same_unit_in_two_runs_is_no_duplicate(tmp_path: Path, rubric: Rubric) -> None:
    path = write(
        tmp_path,
        "v.jsonl",
        jsonl(
            [verdict(), verdict(prompt_version="v2"), verdict(model="other"), verdict(judge="k")]
        ),
    )
    assert len(read_verdict_file(path, rubric=rubric)) == 4


@pytest.mark.parametrize(
    ("name", "data", "message"),
    [
        ("empty.csv", b"", "empty"),
        ("blank.jsonl", b"\n  \n", "empty"),
        ("header.csv", HEADER.encode(), "no verdicts"),
        (
            "latin.jsonl",
            json.dumps(verdict(reason="caf")).encode() + b'\n{"reason": "\xe9"}\n',
            "UTF-8",
        ),
        ("list.jsonl", b"[1, 2]\n", "JSON object per line"),
    ],
)
def test_unusable_files_are_refused(
    tmp_path: Path, rubric: Rubric, name: str, data: bytes, message: str
) -> None:
    path = tmp_path / name
    path.write_bytes(data)
    with pytest.raises(InputError, match=message) as caught:
        read_verdict_file(path, rubric=rubric)
    assert caught.value.source == str(path)
    if name == "latin.jsonl":
        assert caught.value.line == 2
