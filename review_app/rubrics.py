"""Versioned review rubrics: loading, validation, identity and differences.

A rubric lives in ``<root>/<id>/v<N>.yaml`` (docs/reference.md, "Rubric files") and is referred
to as ``<id>@<N>``. Once labels refer to a version it is immutable; a change of
content is a new file ``v<N+1>.yaml``.

Identity. :attr:`Rubric.sha256` is the SHA-256 of a canonical JSON form of the
*parsed* content (keys sorted, defaults filled in, text stripped of leading and
trailing whitespace). Comments, indentation, quoting style and blank lines therefore
do not change it; any change to a value, to the order of labels or examples, or to
the text a reviewer reads does.

Examples. Every example belongs to one label; its ``kind`` says on which side of that
label's line the example falls: ``pass`` the good side, ``fail`` the bad side,
``borderline`` on the line. For a fail label, ``fail`` means the label applies and
``pass`` shows a nearby turn it does not apply to; for a pass label, ``pass`` means
the label applies; for borderline and abstain labels the line is whether the turn
can be decided at all, so ``fail`` means that label applies.

Rubric references accept ``role-adherence@1`` and, because the files are named
``v1.yaml``, also ``role-adherence@v1``; both mean version 1. The canonical form
(:attr:`Rubric.ref`) is the one without ``v``.

This module reads files and nothing else: no storage, no user interface.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from review_app import input_policy
from review_app.errors import InputError, NotFound
from review_app.stats.codes import break_mapping_from_verdicts

__all__ = [
    "APPLIES_TO",
    "EXAMPLE_KINDS",
    "VERDICTS",
    "FieldChange",
    "LabelChange",
    "Rubric",
    "RubricDiff",
    "RubricExample",
    "RubricLabel",
    "default_rubrics_dir",
    "diff_rubrics",
    "get_rubric",
    "load_rubric_file",
    "load_rubrics",
    "parse_rubric_ref",
    "parse_rubric_text",
    "rubric_from_dict",
]

VERDICTS: tuple[str, ...] = ("pass", "fail", "borderline", "abstain")
EXAMPLE_KINDS: tuple[str, ...] = ("pass", "fail", "borderline")
APPLIES_TO: tuple[str, ...] = ("assistant", "user", "system", "tool")

RUBRICS_DIR_ENV = "REVIEW_APP_RUBRICS_DIR"

_ID_PATTERN = re.compile(r"[a-z0-9][a-z0-9-]*")
_CODE_PATTERN = re.compile(r"[a-z][a-z0-9_]*")
_FILE_NAME_PATTERN = re.compile(r"v([1-9][0-9]{0,9})\.yaml")
_REF_PATTERN = re.compile(r"(?P<id>[^@\s]+)@(?P<v>v?)(?P<version>[0-9]+)")

_TOP_KEYS = ("id", "version", "title", "applies_to", "labels", "examples")
_TOP_REQUIRED = ("id", "version", "title", "labels")
_LABEL_KEYS = ("code", "verdict", "title", "definition", "dimension", "guidance")
_LABEL_REQUIRED = ("code", "verdict", "title", "definition")
_EXAMPLE_KEYS = ("label", "kind", "context", "reply", "why")


# --------------------------------------------------------------------------- model


@dataclass(frozen=True)
class RubricLabel:
    """One label a reviewer can give a turn."""

    code: str
    verdict: str
    title: str
    definition: str
    dimension: str | None = None
    guidance: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "code": self.code,
            "verdict": self.verdict,
            "title": self.title,
            "definition": self.definition,
            "dimension": self.dimension,
            "guidance": self.guidance,
        }


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
        """Plain JSON-ready form; :func:`rubric_from_dict` reads it back."""
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


def _content_sha256(
    *,
    rubric_id: str,
    version: int,
    title: str,
    applies_to: str,
    labels: tuple[RubricLabel, ...],
    examples: tuple[RubricExample, ...],
) -> str:
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
    if not _ID_PATTERN.fullmatch(rubric_id):
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


# ------------------------------------------------------------------------- YAML


@dataclass
class _Locations:
    """YAML line numbers (1-based) of values and keys, by field path."""

    value_lines: dict[str, int]
    key_lines: dict[str, int]

    def line_of(self, field: str) -> int | None:
        """Line of a field's value, or of the nearest enclosing field that has one."""
        path = field
        while path:
            if path in self.value_lines:
                return self.value_lines[path]
            path = _parent_path(path)
        return self.value_lines.get("")


def _parent_path(path: str) -> str:
    if path.endswith("]"):
        return path[: path.rindex("[")]
    if "." in path:
        return path[: path.rindex(".")]
    return ""


def _child_path(parent: str, key: str) -> str:
    return f"{parent}.{key}" if parent else key


def _index_nodes(node: yaml.Node, path: str, locations: _Locations, source: str) -> None:
    """Record line numbers for every field and reject duplicate or non-text keys."""
    locations.value_lines[path] = node.start_mark.line + 1
    if isinstance(node, yaml.MappingNode):
        seen: set[str] = set()
        for key_node, value_node in node.value:
            line = key_node.start_mark.line + 1
            if key_node.tag == "tag:yaml.org,2002:merge":
                continue  # "<<: *anchor"; the merged keys are checked after construction
            if not isinstance(key_node, yaml.ScalarNode):
                raise InputError(
                    "keys must be plain names, not lists or mappings",
                    source=source,
                    line=line,
                    field=path or None,
                )
            key = str(key_node.value)
            child = _child_path(path, key)
            if key in seen:
                raise InputError(
                    f'duplicate key "{key}"; YAML would silently keep only the last value',
                    source=source,
                    line=line,
                    field=child,
                )
            seen.add(key)
            locations.key_lines[child] = line
            _index_nodes(value_node, child, locations, source)
    elif isinstance(node, yaml.SequenceNode):
        for index, item in enumerate(node.value):
            _index_nodes(item, f"{path}[{index}]", locations, source)


def _read_yaml(text: str, source: str) -> tuple[Any, _Locations]:
    try:
        for event in yaml.parse(text, Loader=yaml.SafeLoader):
            if isinstance(event, yaml.AliasEvent):
                # Aliases would make one value appear under several fields (and can nest
                # exponentially); a rubric spells every value out where it applies.
                raise InputError(
                    "YAML aliases (*name) are not allowed in rubric files; write the value out",
                    source=source,
                    line=event.start_mark.line + 1 if event.start_mark else None,
                )
        node = yaml.compose(text, Loader=yaml.SafeLoader)
    except yaml.MarkedYAMLError as error:
        mark = error.problem_mark or error.context_mark
        problem = error.problem or error.context or "cannot be parsed"
        raise InputError(
            f"invalid YAML: {problem}",
            source=source,
            line=mark.line + 1 if mark is not None else None,
        ) from None
    except yaml.YAMLError as error:
        raise InputError(f"invalid YAML: {error}", source=source) from None
    if node is None:
        raise InputError(
            "the file is empty; a rubric needs id, version, title and labels", source=source
        )
    locations = _Locations(value_lines={}, key_lines={})
    _index_nodes(node, "", locations, source)
    loader = yaml.SafeLoader("")
    try:
        data = loader.construct_document(node)
    except yaml.MarkedYAMLError as error:
        mark = error.problem_mark or error.context_mark
        raise InputError(
            f"invalid YAML: {error.problem or error.context}",
            source=source,
            line=mark.line + 1 if mark is not None else None,
        ) from None
    except ValueError:  # an integer of thousands of digits (Python refuses to convert it)
        raise InputError(
            "invalid YAML: a number has too many digits to be a version, turn or count",
            source=source,
        ) from None
    finally:
        loader.dispose()
    return data, locations


# ------------------------------------------------------------------- validation


def _describe(value: Any) -> str:
    if value is None:
        return "nothing"
    if isinstance(value, bool):
        return (
            f"the boolean {str(value).lower()} "
            "(YAML reads yes, no, on, off, true and false as booleans; put the word in quotes)"
        )
    if isinstance(value, int | float):
        return f"the number {value}"
    if isinstance(value, str):
        return f'"{value}"' if len(value) <= 40 else f'"{value[:37]}..."'
    if isinstance(value, list):
        return "a list"
    if isinstance(value, dict):
        return "a mapping"
    return f"a {type(value).__name__} ({value})"


class _Validator:
    def __init__(self, source: str, locations: _Locations | None) -> None:
        self.source = source
        self.locations = locations or _Locations(value_lines={}, key_lines={})

    def error(self, message: str, field: str | None, *, at_key: bool = False) -> InputError:
        line: int | None = None
        if field is not None:
            if at_key:
                line = self.locations.key_lines.get(field)
            if line is None:
                line = self.locations.line_of(field)
        else:
            line = self.locations.value_lines.get("")
        return InputError(message, source=self.source, line=line, field=field)

    def mapping(
        self,
        value: Any,
        path: str,
        *,
        allowed: tuple[str, ...],
        required: tuple[str, ...],
        what: str,
    ) -> dict[str, Any]:
        if not isinstance(value, dict):
            raise self.error(
                f"expected {what} (a mapping of keys), got {_describe(value)}", path or None
            )
        for key in value:
            if not isinstance(key, str) or key not in allowed:
                raise self.error(
                    f'unknown key "{key}"; allowed keys are {", ".join(allowed)}',
                    _child_path(path, str(key)),
                    at_key=True,
                )
        for key in required:
            if key not in value:
                raise self.error(f'missing required key "{key}" in {what}', _child_path(path, key))
        return value

    def text(self, value: Any, field: str) -> str:
        if not isinstance(value, str):
            raise self.error(f"expected text, got {_describe(value)}", field)
        stripped = value.strip()
        if not stripped:
            raise self.error("must not be empty", field)
        return stripped

    def optional_text(self, mapping: Mapping[str, Any], key: str, path: str) -> str | None:
        if key not in mapping:
            return None
        return self.text(mapping[key], _child_path(path, key))

    def choice(self, value: Any, field: str, choices: tuple[str, ...], what: str) -> str:
        if not isinstance(value, str):
            raise self.error(
                f"expected a {what} (one of {', '.join(choices)}), got {_describe(value)}", field
            )
        if value not in choices:
            raise self.error(
                f"unknown {what} {_describe(value)}; expected one of {', '.join(choices)}", field
            )
        return value

    def rubric(self, data: Any) -> Rubric:
        top = self.mapping(data, "", allowed=_TOP_KEYS, required=_TOP_REQUIRED, what="a rubric")

        rubric_id = self.text(top["id"], "id")
        if not _ID_PATTERN.fullmatch(rubric_id):
            raise self.error(
                f'id "{rubric_id}" must use lowercase letters, digits and hyphens, '
                "starting with a letter or digit",
                "id",
            )

        version = top["version"]
        if type(version) is not int or not 1 <= version <= input_policy.MAX_RUBRIC_VERSION:
            big = type(version) is int and version.bit_length() > 64
            shown = "a longer number" if big else _describe(version)
            raise self.error(
                "version must be a positive whole number (at most "
                f"{input_policy.MAX_RUBRIC_VERSION}), got {shown}",
                "version",
            )

        title = self.text(top["title"], "title")
        applies_to = "assistant"
        if "applies_to" in top:
            applies_to = self.choice(top["applies_to"], "applies_to", APPLIES_TO, "actor")

        labels = self._labels(top["labels"])
        examples = self._examples(top.get("examples", []), {label.code for label in labels})

        return Rubric(
            id=rubric_id,
            version=version,
            title=title,
            applies_to=applies_to,
            labels=labels,
            examples=examples,
            sha256=_content_sha256(
                rubric_id=rubric_id,
                version=version,
                title=title,
                applies_to=applies_to,
                labels=labels,
                examples=examples,
            ),
            source=self.source,
        )

    def _labels(self, value: Any) -> tuple[RubricLabel, ...]:
        if not isinstance(value, list):
            raise self.error(f"expected a list of labels, got {_describe(value)}", "labels")
        if not value:
            raise self.error("a rubric needs at least one label", "labels")
        labels: list[RubricLabel] = []
        first_index: dict[str, int] = {}
        for index, raw in enumerate(value):
            path = f"labels[{index}]"
            item = self.mapping(
                raw, path, allowed=_LABEL_KEYS, required=_LABEL_REQUIRED, what="a label"
            )
            code = self.text(item["code"], f"{path}.code")
            if not _CODE_PATTERN.fullmatch(code):
                raise self.error(
                    f'code "{code}" must use lowercase letters, digits and underscores, '
                    "starting with a letter",
                    f"{path}.code",
                )
            if code in first_index:
                raise self.error(
                    f'duplicate code "{code}"; labels[{first_index[code]}] already uses it',
                    f"{path}.code",
                )
            first_index[code] = index
            labels.append(
                RubricLabel(
                    code=code,
                    verdict=self.choice(item["verdict"], f"{path}.verdict", VERDICTS, "verdict"),
                    title=self.text(item["title"], f"{path}.title"),
                    definition=self.text(item["definition"], f"{path}.definition"),
                    dimension=self.optional_text(item, "dimension", path),
                    guidance=self.optional_text(item, "guidance", path),
                )
            )
        if not any(label.verdict == "pass" for label in labels):
            raise self.error(
                "a rubric needs at least one label with verdict pass, "
                "otherwise no turn could ever pass",
                "labels",
            )
        return tuple(labels)

    def _examples(self, value: Any, codes: set[str]) -> tuple[RubricExample, ...]:
        if not isinstance(value, list):
            raise self.error(f"expected a list of examples, got {_describe(value)}", "examples")
        examples: list[RubricExample] = []
        first_index: dict[RubricExample, int] = {}
        for index, raw in enumerate(value):
            path = f"examples[{index}]"
            item = self.mapping(
                raw, path, allowed=_EXAMPLE_KEYS, required=_EXAMPLE_KEYS, what="an example"
            )
            label = self.text(item["label"], f"{path}.label")
            if label not in codes:
                raise self.error(
                    f'example refers to label "{label}", which this rubric does not define',
                    f"{path}.label",
                )
            example = RubricExample(
                label=label,
                kind=self.choice(item["kind"], f"{path}.kind", EXAMPLE_KINDS, "example kind"),
                context=self.text(item["context"], f"{path}.context"),
                reply=self.text(item["reply"], f"{path}.reply"),
                why=self.text(item["why"], f"{path}.why"),
            )
            if example in first_index:
                raise self.error(
                    f"this example repeats examples[{first_index[example]}] word for word",
                    path,
                )
            first_index[example] = index
            examples.append(example)
        return tuple(examples)


# ---------------------------------------------------------------------- loading


def parse_rubric_text(text: str, *, source: str = "<rubric>") -> Rubric:
    """Parse and validate rubric YAML; errors name ``source``, the line and the field."""
    data, locations = _read_yaml(text, source)
    return _Validator(source, locations).rubric(data)


def rubric_from_dict(data: Mapping[str, Any], *, source: str = "<rubric>") -> Rubric:
    """Rebuild a rubric from :meth:`Rubric.to_dict` output (for example a stored copy).

    The same rules as for files apply. ``ref`` and ``sha256`` are checked against the
    content when present, so a stored copy that was altered is refused.
    """
    if not isinstance(data, Mapping):
        raise InputError(f"expected a rubric mapping, got {_describe(data)}", source=source)
    content = {key: value for key, value in data.items() if key not in ("ref", "sha256", "source")}
    labels = content.get("labels")
    if isinstance(labels, list):
        # to_dict writes absent optional fields as null; a file would simply omit them
        content["labels"] = [
            {
                key: value
                for key, value in label.items()
                if not (key in ("dimension", "guidance") and value is None)
            }
            if isinstance(label, dict)
            else label
            for label in labels
        ]
    rubric = _Validator(source, None).rubric(content)
    if "ref" in data and data["ref"] != rubric.ref:
        raise InputError(
            f'ref "{data["ref"]}" does not match id and version ({rubric.ref})',
            source=source,
            field="ref",
        )
    if "sha256" in data and data["sha256"] != rubric.sha256:
        raise InputError(
            "sha256 does not match the content; the rubric was changed after it was hashed",
            source=source,
            field="sha256",
        )
    return rubric


def load_rubric_file(path: str | os.PathLike[str]) -> Rubric:
    """Load ``<root>/<id>/v<N>.yaml``: content rules plus id = directory, version = N."""
    file_path = Path(path)
    source = str(path)
    name_match = _FILE_NAME_PATTERN.fullmatch(file_path.name)
    if name_match is None:
        raise InputError(
            f"rubric files are named v<N>.yaml with N the version (no leading zeros), "
            f'got "{file_path.name}"',
            source=source,
        )
    try:
        raw = file_path.read_bytes()
    except OSError as error:
        raise InputError(
            f"cannot read the file: {error.strerror or error}", source=source
        ) from None
    text = input_policy.decode_utf8(raw, source=source)

    data, locations = _read_yaml(text, source)
    validator = _Validator(source, locations)
    rubric = validator.rubric(data)

    directory = file_path.resolve().parent.name
    if rubric.id != directory:
        raise validator.error(
            f'id "{rubric.id}" does not match the directory name "{directory}"', "id"
        )
    file_version = int(name_match.group(1))
    if rubric.version != file_version:
        raise validator.error(
            f"version {rubric.version} does not match the file name {file_path.name}", "version"
        )
    return rubric


def load_rubrics(root: str | os.PathLike[str]) -> list[Rubric]:
    """Every ``<root>/<id>/v<N>.yaml``, sorted by (id, version).

    Subdirectories of a rubric directory (such as ``judges/``) and files that are not
    YAML are ignored. A YAML file that is not named ``v<N>.yaml``, or that sits
    directly in ``root``, is an error: a misnamed rubric must not vanish silently.
    """
    root_path = Path(root)
    if not root_path.is_dir():
        raise InputError("the rubrics directory does not exist", source=str(root_path))
    rubrics: list[Rubric] = []
    for entry in sorted(root_path.iterdir()):
        if entry.name.startswith((".", "_")):
            continue
        if entry.is_file():
            if entry.suffix in (".yaml", ".yml"):
                raise InputError(
                    "rubric files belong in <rubrics dir>/<id>/v<N>.yaml, "
                    "not directly in the rubrics directory",
                    source=str(entry),
                )
            continue
        for candidate in sorted(entry.iterdir()):
            if candidate.is_file() and candidate.suffix in (".yaml", ".yml"):
                rubrics.append(load_rubric_file(candidate))
    rubrics.sort(key=lambda rubric: (rubric.id, rubric.version))
    return rubrics


def get_rubric(rubrics: Iterable[Rubric], ref: str) -> Rubric:
    """The rubric ``ref`` names among ``rubrics``; :class:`NotFound` if it is not there."""
    rubric_id, version = parse_rubric_ref(ref)
    available = list(rubrics)
    for rubric in available:
        if rubric.id == rubric_id and rubric.version == version:
            return rubric
    known = ", ".join(rubric.ref for rubric in available) or "none"
    raise NotFound(f"no rubric {rubric_id}@{version}; available: {known}")


def default_rubrics_dir() -> Path:
    """Where rubrics are read from by default.

    ``$REVIEW_APP_RUBRICS_DIR`` if set; otherwise the repository's ``rubrics/``
    directory when running from a checkout; otherwise the copy bundled in the wheel.
    """
    configured = os.environ.get(RUBRICS_DIR_ENV, "").strip()
    if configured:
        return Path(configured).expanduser()
    checkout = Path(__file__).resolve().parents[1] / "rubrics"
    if checkout.is_dir():
        return checkout
    return Path(__file__).parent / "_bundled_rubrics"


# ------------------------------------------------------------------------- diff


@dataclass(frozen=True)
class FieldChange:
    """One field whose value differs between two versions."""

    field: str
    old: Any
    new: Any

    def to_dict(self) -> dict[str, Any]:
        return {"field": self.field, "old": self.old, "new": self.new}


@dataclass(frozen=True)
class LabelChange:
    """A label present in both versions whose fields differ."""

    code: str
    changes: tuple[FieldChange, ...]

    @property
    def fields(self) -> tuple[str, ...]:
        return tuple(change.field for change in self.changes)

    def to_dict(self) -> dict[str, Any]:
        return {"code": self.code, "changes": [change.to_dict() for change in self.changes]}


@dataclass(frozen=True)
class RubricDiff:
    """What changed from ``old_ref`` to ``new_ref``.

    Examples are compared whole: an edited example appears as one removed and one
    added. ``labels_reordered`` / ``examples_reordered`` report a changed order of the
    items both versions share.
    """

    old_ref: str
    new_ref: str
    title: FieldChange | None
    applies_to: FieldChange | None
    labels_added: tuple[RubricLabel, ...]
    labels_removed: tuple[RubricLabel, ...]
    labels_changed: tuple[LabelChange, ...]
    labels_reordered: bool
    examples_added: tuple[RubricExample, ...]
    examples_removed: tuple[RubricExample, ...]
    examples_reordered: bool

    @property
    def is_empty(self) -> bool:
        return not (
            self.title
            or self.applies_to
            or self.labels_added
            or self.labels_removed
            or self.labels_changed
            or self.labels_reordered
            or self.examples_added
            or self.examples_removed
            or self.examples_reordered
        )

    @property
    def verdict_changes(self) -> tuple[LabelChange, ...]:
        """Labels whose verdict changed: these change how existing labels count."""
        return tuple(change for change in self.labels_changed if "verdict" in change.fields)

    def to_dict(self) -> dict[str, Any]:
        return {
            "old": self.old_ref,
            "new": self.new_ref,
            "is_empty": self.is_empty,
            "title": self.title.to_dict() if self.title else None,
            "applies_to": self.applies_to.to_dict() if self.applies_to else None,
            "labels_added": [label.to_dict() for label in self.labels_added],
            "labels_removed": [label.to_dict() for label in self.labels_removed],
            "labels_changed": [change.to_dict() for change in self.labels_changed],
            "labels_reordered": self.labels_reordered,
            "examples_added": [example.to_dict() for example in self.examples_added],
            "examples_removed": [example.to_dict() for example in self.examples_removed],
            "examples_reordered": self.examples_reordered,
        }


_COMPARED_LABEL_FIELDS = ("verdict", "title", "definition", "dimension", "guidance")


def _multiset_difference(
    left: tuple[RubricExample, ...], right: tuple[RubricExample, ...]
) -> tuple[RubricExample, ...]:
    remaining = Counter(right)
    result: list[RubricExample] = []
    for example in left:
        if remaining[example]:
            remaining[example] -= 1
        else:
            result.append(example)
    return tuple(result)


def diff_rubrics(old: Rubric, new: Rubric) -> RubricDiff:
    """Differences between two rubric versions, in the order of the newer file."""
    old_labels = {label.code: label for label in old.labels}
    new_labels = {label.code: label for label in new.labels}

    changed: list[LabelChange] = []
    for label in new.labels:
        before = old_labels.get(label.code)
        if before is None:
            continue
        changes = tuple(
            FieldChange(name, getattr(before, name), getattr(label, name))
            for name in _COMPARED_LABEL_FIELDS
            if getattr(before, name) != getattr(label, name)
        )
        if changes:
            changed.append(LabelChange(label.code, changes))

    shared_old_order = [code for code in old.codes if code in new_labels]
    shared_new_order = [code for code in new.codes if code in old_labels]

    examples_added = _multiset_difference(new.examples, old.examples)
    examples_removed = _multiset_difference(old.examples, new.examples)
    kept_old = list(_multiset_difference(old.examples, examples_removed))
    kept_new = list(_multiset_difference(new.examples, examples_added))

    return RubricDiff(
        old_ref=old.ref,
        new_ref=new.ref,
        title=FieldChange("title", old.title, new.title) if old.title != new.title else None,
        applies_to=(
            FieldChange("applies_to", old.applies_to, new.applies_to)
            if old.applies_to != new.applies_to
            else None
        ),
        labels_added=tuple(label for label in new.labels if label.code not in old_labels),
        labels_removed=tuple(label for label in old.labels if label.code not in new_labels),
        labels_changed=tuple(changed),
        labels_reordered=shared_old_order != shared_new_order,
        examples_added=examples_added,
        examples_removed=examples_removed,
        examples_reordered=kept_old != kept_new,
    )
