"""The rubric model: labels, examples, one immutable version, its identity and its reference.

See :mod:`review_app.rubrics` for what the identity hash covers and how references are
written.
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass
from typing import Any

from review_app import input_policy
from review_app.errors import InputError
from review_app.stats.codes import break_mapping_from_verdicts

VERDICTS: tuple[str, ...] = ("pass", "fail", "borderline", "abstain")
EXAMPLE_KINDS: tuple[str, ...] = ("pass", "fail", "borderline")
APPLIES_TO: tuple[str, ...] = ("assistant", "user", "system", "tool")
CHANGES: tuple[str, ...] = ("same", "reworded", "narrowed", "widened", "split", "merged", "new")
"""How a label of version N+1 relates to the codes of version N it names in ``from``."""

RUBRIC_ID_PATTERN = re.compile(r"[a-z0-9][a-z0-9-]*")
"""A rubric id: lowercase letters, digits and hyphens, starting with a letter or digit."""
_REF_PATTERN = re.compile(r"(?P<id>[^@\s]+)@(?P<v>v?)(?P<version>[0-9]+)")


@dataclass(frozen=True)
class RubricLabel:
    """One label a reviewer can give a turn."""

    code: str
    verdict: str
    title: str
    definition: str
    dimension: str | None = None
    guidance: str | None = None
    from_codes: tuple[str, ...] | None = None
    """``from:`` in the file: the codes of the previous version this label comes from."""
    change: str | None = None
    """``change:`` in the file: one of :data:`CHANGES`, or ``None`` when the file is silent."""
    key: str | None = None
    """``key:`` in the file: the one key that labels with this code, or ``None`` when the
    file leaves it to :func:`review_app.rubrics.keys.assign_keys`."""

    def to_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = {
            "code": self.code,
            "verdict": self.verdict,
            "title": self.title,
            "definition": self.definition,
            "dimension": self.dimension,
            "guidance": self.guidance,
        }
        # Only when written: a file without them keeps the identity it always had.
        if self.from_codes is not None:
            data["from"] = list(self.from_codes)
        if self.change is not None:
            data["change"] = self.change
        if self.key is not None:
            data["key"] = self.key
        return data


@dataclass(frozen=True)
class RubricExample:
    """A reviewed example for one label; ``kind`` is pass, fail or borderline."""

    label: str
    kind: str
    context: str
    reply: str
    why: str

    def to_dict(self) -> dict[str, Any]:
        return {
            "label": self.label,
            "kind": self.kind,
            "context": self.context,
            "reply": self.reply,
            "why": self.why,
        }


@dataclass(frozen=True)
class Rubric:
    """One immutable version of a rubric."""

    id: str
    version: int
    title: str
    applies_to: str
    labels: tuple[RubricLabel, ...]
    examples: tuple[RubricExample, ...]
    sha256: str
    source: str

    @property
    def ref(self) -> str:
        """``"<id>@<version>"``, e.g. ``"role-adherence@1"``."""
        return f"{self.id}@{self.version}"

    @property
    def codes(self) -> tuple[str, ...]:
        """Label codes in the order of the file."""
        return tuple(label.code for label in self.labels)

    def label(self, code: str) -> RubricLabel:
        """The label with this code; ``KeyError`` naming the rubric if there is none."""
        for label in self.labels:
            if label.code == code:
                return label
        raise KeyError(f"{self.ref} has no label {code!r}; its labels are {', '.join(self.codes)}")

    def verdict_of(self, code: str) -> str:
        """The verdict (pass, fail, borderline or abstain) of a label code."""
        return self.label(code).verdict

    def _codes_with(self, verdict: str) -> tuple[str, ...]:
        return tuple(label.code for label in self.labels if label.verdict == verdict)

    @property
    def pass_codes(self) -> tuple[str, ...]:
        return self._codes_with("pass")

    @property
    def break_codes(self) -> tuple[str, ...]:
        """Codes whose verdict is ``fail``: the ways a turn can break the role."""
        return self._codes_with("fail")

    @property
    def borderline_codes(self) -> tuple[str, ...]:
        return self._codes_with("borderline")

    @property
    def abstain_codes(self) -> tuple[str, ...]:
        return self._codes_with("abstain")

    def examples_for(self, code: str) -> tuple[RubricExample, ...]:
        """The examples of one label, in file order (empty if it has none)."""
        self.label(code)  # unknown codes are a caller error, not "no examples"
        return tuple(example for example in self.examples if example.label == code)

    def break_mapping(self) -> dict[str, str | None]:
        """Collapse to break / no break: fail -> "break", pass -> "no_break", else None.

        ``None`` means the label is not counted (borderline and abstain are missing
        values in a break / no-break analysis).
        """
        return break_mapping_from_verdicts({label.code: label.verdict for label in self.labels})

    def verdict_mapping(self) -> dict[str, str | None]:
        """Collapse to the verdict: pass / fail / borderline, abstain -> None (missing)."""
        return {
            label.code: None if label.verdict == "abstain" else label.verdict
            for label in self.labels
        }

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON-ready form; :func:`~review_app.rubrics.parsing.rubric_from_dict` reads it
        back."""
        return {
            "id": self.id,
            "version": self.version,
            "ref": self.ref,
            "title": self.title,
            "applies_to": self.applies_to,
            "labels": [label.to_dict() for label in self.labels],
            "examples": [example.to_dict() for example in self.examples],
            "sha256": self.sha256,
            "source": self.source,
        }


def content_sha256(
    *,
    rubric_id: str,
    version: int,
    title: str,
    applies_to: str,
    labels: tuple[RubricLabel, ...],
    examples: tuple[RubricExample, ...],
) -> str:
    """The SHA-256 (hex) of a rubric's content as canonical JSON (sorted keys, no spaces):
    the ``sha256`` a :class:`Rubric` carries, the same for the same content wherever read."""
    content = {
        "id": rubric_id,
        "version": version,
        "title": title,
        "applies_to": applies_to,
        "labels": [label.to_dict() for label in labels],
        "examples": [example.to_dict() for example in examples],
    }
    canonical = json.dumps(content, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()


# ------------------------------------------------------------------- references


def parse_rubric_ref(text: str) -> tuple[str, int]:
    """Split ``"role-adherence@1"`` (or ``"role-adherence@v1"``) into ``(id, version)``.

    Surrounding whitespace is ignored; anything else malformed raises
    :class:`InputError` saying what is wrong.
    """
    if not isinstance(text, str):
        raise InputError(f"a rubric reference must be text like role-adherence@1, got {text!r}")
    stripped = text.strip()
    match = _REF_PATTERN.fullmatch(stripped)
    if match is None:
        raise InputError(
            f'rubric reference "{stripped}" is not of the form <id>@<version>, '
            "for example role-adherence@1"
        )
    rubric_id = match["id"]
    if not RUBRIC_ID_PATTERN.fullmatch(rubric_id):
        raise InputError(
            f'rubric reference "{stripped}": the id "{rubric_id}" must use lowercase '
            "letters, digits and hyphens, starting with a letter or digit"
        )
    version_text = match["version"]
    try:
        return rubric_id, input_policy.parse_rubric_version(version_text)
    except InputError as error:
        shown = stripped if len(stripped) <= 120 else f"{rubric_id}@{version_text[:12]}..."
        raise InputError(f'rubric reference "{shown}": {error.message}') from None
