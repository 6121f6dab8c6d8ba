"""LLM-judge building blocks: prompt templates, strict answers, verdict files.

Verdict files: docs/reference.md, "Judge verdicts".

Pure: no database, no network. The service (``review_app.services.judging.judge_runner``) runs
prompts against an endpoint and stores what comes back.

Prompt templates are versioned files ``rubrics/<rubric-id>/judges/<judge>/v<N>.txt``
(judge ``<judge>``, prompt version ``v<N>``). They use ``string.Template``
placeholders, filled from the rubric and the case:

``$rubric_ref``, ``$chatbot_role``, ``$labels`` (every code with its verdict, title
and definition), ``$label_titles`` (every code with its title only: for small
models), ``$examples`` (the rubric's contrasting examples), ``$codes`` (the codes,
comma-separated), ``$conversation`` (the transcript up to and including the judged
turn), ``$recent`` (its last six events), ``$turn`` (the judged turn number) and
``$reply`` (the judged assistant text).

An answer must be one JSON object ``{"label": <code>, "score": <0..1>, "reason":
<text>}`` (a Markdown code fence around it is tolerated, nothing else). Anything
else is an error recorded for that unit, never a guess.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
import string
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, TypedDict

from review_app import input_policy
from review_app.errors import InputError
from review_app.files.limits import MAX_RUBRIC_FILE_BYTES
from review_app.files.named_rows import named_rows
from review_app.files.text import check_short_text, read_short_text
from review_app.rubrics.model import Rubric

PROMPT_FILE = re.compile(r"v(?P<version>[1-9][0-9]{0,9})\.txt")
JUDGE_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]{0,63}")
PLACEHOLDERS = frozenset(
    {
        "rubric_ref",
        "chatbot_role",
        "labels",
        "label_titles",
        "examples",
        "codes",
        "conversation",
        "recent",
        "turn",
        "reply",
    }
)
RECENT_EVENTS = 6
SYSTEM_MESSAGE = (
    "You are a careful evaluator of chatbot conversations. Answer with exactly one JSON "
    "object and nothing else."
)
MAX_REASON_CHARS = input_policy.MAX_NOTE_CHARS


@dataclass(frozen=True)
class JudgePrompt:
    judge: str
    version: str
    text: str
    source: str

    @property
    def sha256(self) -> str:
        return hashlib.sha256(self.text.encode("utf-8")).hexdigest()

    @property
    def ref(self) -> str:
        return f"{self.judge}@{self.version}"


def check_prompt_text(text: str, *, source: str, field: str | None = None) -> set[str]:
    """Check a template's text (the rules of :func:`load_judge_prompt`); its placeholders.

    Known placeholders only (an error names the line of the first unknown one or of a
    stray ``$``), ``$codes`` used, and some of the conversation shown.
    """
    if not text.strip():
        raise InputError("the prompt is empty", source=source, field=field)
    check_short_text(
        text, limit=MAX_RUBRIC_FILE_BYTES, kind="a judge prompt", source=source, field=field
    )
    template = string.Template(text)
    # Each placeholder (and each stray $) where it is, so an error names its line;
    # "$$" escapes are matched as such and never mistaken for a placeholder. Lines are
    # counted as the matches go (counting from the start for each was quadratic: 20 s
    # for a template of 60,000 placeholders).
    found: list[tuple[str | None, int]] = []
    line, counted_to = 1, 0
    for found_match in template.pattern.finditer(text):
        if found_match["escaped"] is not None:
            continue
        name = found_match["named"] or found_match["braced"]
        line += text.count("\n", counted_to, found_match.start())
        counted_to = found_match.start()
        found.append((name, line))
    stray = next((line for name, line in found if name is None), None)
    if stray is not None:
        raise InputError(
            "has a stray $ (write $$ for a literal dollar sign)",
            source=source,
            line=stray,
            field=field,
        )
    used = {name for name, _ in found if name is not None}
    unknown = next(
        ((name, line) for name, line in found if name and name not in PLACEHOLDERS), None
    )
    if unknown is not None:
        raise InputError(
            f"unknown placeholder ${unknown[0]} (known: "
            f"{', '.join('$' + name for name in sorted(PLACEHOLDERS))})",
            source=source,
            field=field,
            line=unknown[1],
        )
    if "codes" not in used:
        raise InputError("the template never uses $codes", source=source, field=field)
    if not used & {"conversation", "recent", "reply"}:
        raise InputError(
            "the template shows no conversation ($conversation, $recent or $reply)",
            source=source,
            field=field,
        )
    return used


def load_judge_prompt(path: Path) -> JudgePrompt:
    """Read and check a prompt template: known placeholders only, and the essential ones."""
    source = str(path)
    match = PROMPT_FILE.fullmatch(path.name)
    if match is None:
        raise InputError("a judge prompt file is named v<N>.txt", source=source)
    text = read_short_text(path, limit=MAX_RUBRIC_FILE_BYTES, kind="a judge prompt")
    check_prompt_text(text, source=source)
    return JudgePrompt(
        judge=path.parent.name, version=f"v{match['version']}", text=text, source=source
    )


def judge_prompts(rubrics_dir: Path, rubric_id: str) -> list[JudgePrompt]:
    root = rubrics_dir / rubric_id / "judges"
    if not root.is_dir():
        return []
    prompts = [
        load_judge_prompt(path)
        for judge_dir in sorted(p for p in root.iterdir() if p.is_dir())
        for path in sorted(judge_dir.glob("v*.txt"))
    ]
    return sorted(prompts, key=lambda p: (p.judge, int(p.version[1:])))


def find_judge_prompt(
    rubrics_dir: Path, rubric_id: str, ref: str, *, judge: str | None = None
) -> JudgePrompt:
    """``judge@vN`` among the rubric's prompts, or a path to a template file.

    A template is named ``<judge>@v<N>``: ``judge`` when given, else its folder's name
    when that folder is a judge's (``judges/<judge>/`` or the name of one of the
    rubric's judges); any other folder (``prompts/v3.txt``) is no judge's name, and the
    template is refused until ``judge`` names it.
    """
    prompts = judge_prompts(rubrics_dir, rubric_id)
    candidate = Path(ref)
    if candidate.suffix == ".txt" and candidate.exists():
        loaded = load_judge_prompt(candidate)
        if judge is not None:
            if not JUDGE_NAME.fullmatch(judge):
                raise InputError(
                    f"{judge!r} is not a judge name (letters, digits, - and _)", field="--judge"
                )
            return replace(loaded, judge=judge)
        judges = {p.judge for p in prompts}
        if candidate.resolve().parent.parent.name != "judges" and loaded.judge not in judges:
            raise InputError(
                f"{ref} is in a folder named {loaded.judge!r}, which is not a judge of "
                f"{rubric_id} (known: {', '.join(sorted(judges)) or 'none'}); give "
                f"--judge NAME to name its runs NAME@{loaded.version}",
                field="--judge",
            )
        return loaded
    for prompt in prompts:
        if prompt.ref == ref:
            return prompt
    known = ", ".join(p.ref for p in prompts) or "none"
    raise InputError(f"no judge prompt {ref!r} for {rubric_id} (known: {known})", field="--prompt")


def _labels_text(rubric: Rubric) -> str:
    lines = []
    for label in rubric.labels:
        lines.append(f"- {label.code} ({label.verdict}): {label.title}. {label.definition}")
    return "\n".join(lines)


def _examples_text(rubric: Rubric, per_label: int = 1) -> str:
    lines = []
    for label in rubric.labels:
        for example in rubric.examples_for(label.code)[:per_label]:
            lines.append(
                f"- [{example.label}, {example.kind}] context: {example.context} | reply: "
                f"{example.reply} | why: {example.why}"
            )
    return "\n".join(lines)


def event_block(event: Mapping[str, Any]) -> str:
    """One event as the judge reads it: turn, actor, role change and actions, then text."""
    head = f"[turn {event['turn']}] {event['actor']}"
    if event.get("set_role"):
        head += f" (role set to {event['set_role']})"
    actions = event.get("observed_actions") or []
    if actions:
        head += f" (recorded actions: {', '.join(actions)})"
    text = event.get("text") or ""
    return f"{head}: {text}" if text else head


def conversation_text(events: Sequence[Mapping[str, Any]]) -> str:
    """The transcript as the judge reads it: one block per event, actions in brackets."""
    return "\n".join(map(event_block, events))


class ChatMessage(TypedDict):
    """One message of an OpenAI-compatible chat request, as sent (a JSON object)."""

    role: str
    """``system`` or ``user``."""
    content: str


def render_prompt(
    prompt: JudgePrompt,
    *,
    rubric: Rubric,
    chatbot_role: str | None,
    events: Sequence[Mapping[str, Any]],
    turn: int,
) -> list[ChatMessage]:
    """Chat messages asking the judge about ``turn``; ``events`` end with that turn."""
    return PreparedPrompt.of(prompt, rubric=rubric).render(
        chatbot_role=chatbot_role, events=events, turn=turn
    )


class PromptTooLarge(ValueError):
    """A unit's rendered prompt would be larger than the endpoint takes; not rendered."""

    def __init__(self, size: int, limit: int) -> None:
        self.size = size
        self.limit = limit
        super().__init__(
            f"prompt not sent: rendered it would be {size:,} bytes, more than the "
            f"{limit:,} this endpoint takes (max_prompt_bytes)"
        )


def _utf8_size(text: str) -> int:
    return len(text) if text.isascii() else len(text.encode("utf-8"))


@dataclass(frozen=True)
class PreparedPrompt:
    """A judge prompt with the parts its rubric fills rendered once.

    Those parts (labels, titles, examples, codes) are the same for every unit of a
    run; rendering them again for each unit was most of the cost of a prompt. The
    template's use of each placeholder is counted once too, so the size of a unit's
    prompt is known before it is rendered: a template repeating ``$conversation``
    sixty thousand times is refused per unit in microseconds instead of filling
    gigabytes.
    """

    template: string.Template
    rubric_parts: Mapping[str, str]
    uses: Mapping[str, int]
    """How many times the template uses each placeholder filled per unit."""
    fixed_bytes: int
    """UTF-8 bytes of everything else: the template's own text, the rubric's parts
    where it uses them and the system message."""

    @classmethod
    def of(cls, prompt: JudgePrompt, *, rubric: Rubric) -> PreparedPrompt:
        template = string.Template(prompt.text)
        rubric_parts = {
            "rubric_ref": rubric.ref,
            "labels": _labels_text(rubric),
            "label_titles": "\n".join(f"- {label.code}: {label.title}" for label in rubric.labels),
            "examples": _examples_text(rubric),
            "codes": ", ".join(rubric.codes),
        }
        part_sizes = {name: _utf8_size(text) for name, text in rubric_parts.items()}
        uses: dict[str, int] = {}
        fixed = _utf8_size(SYSTEM_MESSAGE)
        end = 0
        for found in template.pattern.finditer(prompt.text):
            fixed += _utf8_size(prompt.text[end : found.start()])
            end = found.end()
            name = found["named"] or found["braced"]
            if found["escaped"] is not None:
                fixed += 1  # "$$" is one "$"
            elif name in part_sizes:
                fixed += part_sizes[name]
            elif name is not None:
                uses[name] = uses.get(name, 0) + 1
        fixed += _utf8_size(prompt.text[end:])
        return cls(template=template, rubric_parts=rubric_parts, uses=uses, fixed_bytes=fixed)

    def size(
        self, *, chatbot_role: str | None, block_sizes: Sequence[int], reply: str, turn: int
    ) -> int:
        """UTF-8 bytes of the messages :meth:`render` would give, from the sizes of the
        transcript's event blocks (``_utf8_size`` of each), without rendering them."""
        recent = block_sizes[-RECENT_EVENTS:]
        values = {
            "chatbot_role": _utf8_size(chatbot_role or _NO_ROLE),
            "conversation": sum(block_sizes) + max(0, len(block_sizes) - 1),
            "recent": sum(recent) + max(0, len(recent) - 1),
            "turn": len(str(turn)),
            "reply": _utf8_size(reply),
        }
        return self.fixed_bytes + sum(n * values.get(name, 0) for name, n in self.uses.items())

    def render(
        self,
        *,
        chatbot_role: str | None,
        events: Sequence[Mapping[str, Any]],
        turn: int,
        blocks: Sequence[str] | None = None,
        max_bytes: int | None = None,
        block_sizes: Sequence[int] | None = None,
    ) -> list[ChatMessage]:
        """Chat messages asking the judge about ``turn``; ``events`` end with that turn.

        ``blocks``, when given, are ``event_block`` of each of ``events`` (a caller
        walking a transcript turn by turn builds each block once), ``block_sizes``
        their UTF-8 sizes. With ``max_bytes``, a prompt that would be larger raises
        :class:`PromptTooLarge` before anything is rendered."""
        if blocks is None:
            blocks = [event_block(event) for event in events]
        reply = next((e.get("text") or "" for e in reversed(events) if e["turn"] == turn), "")
        if max_bytes is not None:
            sizes = block_sizes if block_sizes is not None else [_utf8_size(b) for b in blocks]
            size = self.size(chatbot_role=chatbot_role, block_sizes=sizes, reply=reply, turn=turn)
            if size > max_bytes:
                raise PromptTooLarge(size, max_bytes)
        user = self.template.substitute(
            {
                **self.rubric_parts,
                "chatbot_role": chatbot_role or _NO_ROLE,
                "recent": "\n".join(blocks[-RECENT_EVENTS:]),
                "conversation": "\n".join(blocks),
                "turn": str(turn),
                "reply": reply,
            }
        )
        return [{"role": "system", "content": SYSTEM_MESSAGE}, {"role": "user", "content": user}]


_NO_ROLE = "(no role description was recorded)"


class JudgeAnswerError(ValueError):
    """The judge's answer is not the strict JSON asked for; recorded, never guessed."""


_FENCE = re.compile(r"^```(?:json)?\s*\n?(?P<body>.*?)\n?```$", re.DOTALL)


@dataclass(frozen=True)
class JudgeAnswer:
    label: str
    score: float
    reason: str


def parse_judge_answer(content: str, *, rubric: Rubric) -> JudgeAnswer:
    text = content.strip()
    fenced = _FENCE.match(text)
    if fenced:
        text = fenced["body"].strip()
    try:
        value = json.loads(text, parse_constant=_reject_constant)
    except (json.JSONDecodeError, ValueError, RecursionError) as error:
        if isinstance(error, RecursionError):
            raise JudgeAnswerError("not a JSON object: nested too deeply") from None
        raise JudgeAnswerError(f"not a JSON object: {error}") from None
    if not isinstance(value, dict):
        raise JudgeAnswerError("the answer is JSON but not an object")
    label = value.get("label")
    if not isinstance(label, str) or label not in rubric.codes:
        raise JudgeAnswerError(f"label {label!r} is not a code of {rubric.ref}")
    score = value.get("score")
    if isinstance(score, bool) or not isinstance(score, int | float) or not 0 <= score <= 1:
        raise JudgeAnswerError(f"score {score!r} is not a number from 0 to 1")
    reason = value.get("reason")
    if not isinstance(reason, str) or not reason.strip():
        raise JudgeAnswerError("the answer has no reason")
    problem = input_policy.text_problem(reason)
    if problem is not None:
        raise JudgeAnswerError(f"the reason {problem}")
    return JudgeAnswer(label, float(score), reason.strip()[:MAX_REASON_CHARS])


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


# --- verdict files (docs/reference.md, "Judge verdicts") ------------------------------

VERDICT_FIELDS = ("case_id", "turn", "judge", "prompt_version", "model", "label", "score", "reason")
SCORE_MEANINGS = ("break", "adherence")


@dataclass(frozen=True)
class VerdictRecord:
    line: int
    case_id: str
    turn: int | None
    judge: str
    prompt_version: str
    model: str
    label: str | None
    score: float | None
    reason: str | None

    @property
    def run_key(self) -> tuple[str, str, str]:
        return (self.judge, self.prompt_version, self.model)


def _verdict_rows(path: Path) -> list[tuple[int, dict[str, Any]]]:
    """Rows of a verdict file: CSV (``.csv``; an empty cell is no value) or JSONL."""
    if path.suffix.lower() != ".csv":
        return list(named_rows(path, as_csv=False, columns=VERDICT_FIELDS))
    return [
        (line, {k: v for k, v in row.items() if v != ""})
        for line, row in named_rows(path, as_csv=True, columns=VERDICT_FIELDS)
    ]


_VERDICT_NAME_CHARS = {
    "case_id": input_policy.MAX_NAME_CHARS,
    "judge": input_policy.MAX_NAME_CHARS,
    "model": input_policy.MAX_NAME_CHARS,
    "prompt_version": input_policy.MAX_SHORT_NAME_CHARS,
}


def _verdict_name(value: str, column: str, *, source: str, line: int) -> str:
    """A verdict's case id, judge, prompt version or model, by the input policy."""
    if column == "case_id":
        return input_policy.check_case_id(value.strip(), source=source, line=line)
    return input_policy.check_name(
        value,
        field=column,
        max_chars=_VERDICT_NAME_CHARS[column],
        source=source,
        line=line,
        what=f"a {column.replace('_', ' ')}",
    )


def read_verdict_file(
    path: Path, *, rubric: Rubric, score_means: str = "break"
) -> list[VerdictRecord]:
    """Check every row of a verdict file (CSV or JSONL); InputError names line and field.

    ``score_means="adherence"`` reads scores where 1 means "stays in role" (what
    deepeval's, Galtea's and Openlayer's role-adherence metrics report) and stores
    ``1 - score``, so stored scores always mean "probability of a break".
    """
    if score_means not in SCORE_MEANINGS:
        raise InputError(
            f"--score-means is one of {', '.join(SCORE_MEANINGS)}", field="--score-means"
        )
    source = str(path)
    records = []
    from_csv = path.suffix.lower() == ".csv"  # CSV cells are text; JSON has numbers
    for line, row in _verdict_rows(path):

        def fail(message: str, field: str, line: int = line) -> InputError:
            return InputError(message, source=source, line=line, field=field)

        values: dict[str, Any] = {}
        for name in ("case_id", "judge", "prompt_version", "model"):
            value = row.get(name)
            if not isinstance(value, str) or not value.strip():
                raise fail("a non-empty text is required", name)
            values[name] = _verdict_name(value, name, source=source, line=line)
        turn_value = row.get("turn")
        turn: int | None
        if turn_value is None or turn_value == "":
            turn = None
        elif isinstance(turn_value, bool):
            raise fail("expected an integer turn or nothing", "turn")
        elif (
            isinstance(turn_value, int)
            and input_policy.TURN_MIN <= turn_value <= input_policy.TURN_MAX
        ):
            turn = turn_value
        elif isinstance(turn_value, str) and input_policy.parse_turn_text(turn_value) is not None:
            turn = input_policy.parse_turn_text(turn_value)
        else:
            shown = turn_value if not isinstance(turn_value, str) else turn_value[:20]
            raise fail(
                f"expected an integer turn from {input_policy.TURN_MIN} to "
                f"{input_policy.TURN_MAX} or nothing, got {shown!r}",
                "turn",
            )
        label = row.get("label")
        if label is not None and (not isinstance(label, str) or label not in rubric.codes):
            raise fail(f"{label!r} is not a code of {rubric.ref}", "label")
        score_value = row.get("score")
        score: float | None = None
        if score_value is not None and not from_csv and isinstance(score_value, str):
            # JSON has numbers: "0.5" in quotes is a text, as the reference says
            raise fail(
                f"score {score_value[:20]!r} is a text; write a number from 0 to 1 "
                "(without quotes)",
                "score",
            )
        if score_value is not None:
            try:
                score = float(score_value) if not isinstance(score_value, bool) else math.nan
            except (TypeError, ValueError):
                score = math.nan
            if not math.isfinite(score) or not 0 <= score <= 1:
                raise fail(f"score {score_value!r} is not a number from 0 to 1", "score")
            if score_means == "adherence":
                score = 1.0 - score
        if label is None and score is None:
            raise fail("a verdict needs a label, a score, or both", "label")
        reason = input_policy.check_text(
            row.get("reason"), field="reason", source=source, line=line
        )
        records.append(
            VerdictRecord(
                line,
                values["case_id"],
                turn,
                values["judge"],
                values["prompt_version"],
                values["model"],
                label,
                score,
                reason or None,
            )
        )
    if not records:
        raise InputError("the file has no verdicts", source=source)
    seen: dict[tuple[Any, ...], int] = {}
    for record in records:
        key = (*record.run_key, record.case_id, record.turn)
        if key in seen:
            raise InputError(
                f"a second verdict for the same run and unit (first on line {seen[key]})",
                source=source,
                line=record.line,
                field="turn",
            )
        seen[key] = record.line
    return records
