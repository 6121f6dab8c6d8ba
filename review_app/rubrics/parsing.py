"""Reading rubric YAML: parsing with line numbers, validation, and one ``v<N>.yaml`` file.

Errors are :class:`~review_app.errors.InputError` naming the source, the line and the field.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from review_app import input_policy
from review_app.errors import InputError
from review_app.files.limits import MAX_RUBRIC_FILE_BYTES, MAX_YAML_DEPTH
from review_app.files.text import check_short_text, read_short_text
from review_app.rubrics.keys import MAX_LABELS, key_problem, normalize_key
from review_app.rubrics.model import (
    APPLIES_TO,
    CHANGES,
    EXAMPLE_KINDS,
    RUBRIC_ID_PATTERN,
    VERDICTS,
    Rubric,
    RubricExample,
    RubricLabel,
    content_sha256,
)

_CODE_PATTERN = re.compile(r"[a-z][a-z0-9_]*")
_FILE_NAME_PATTERN = re.compile(r"v([1-9][0-9]{0,9})\.yaml")

_TOP_KEYS = ("id", "version", "title", "applies_to", "labels", "examples")
_TOP_REQUIRED = ("id", "version", "title", "labels")
_LABEL_KEYS = (
    "code",
    "verdict",
    "title",
    "definition",
    "dimension",
    "guidance",
    "from",
    "change",
    "key",
)
_LABEL_REQUIRED = ("code", "verdict", "title", "definition")
_EXAMPLE_KEYS = ("label", "kind", "context", "reply", "why")


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


def _too_deep(event: yaml.Event, source: str, field: str | None) -> InputError:
    return InputError(
        f"nested more than {MAX_YAML_DEPTH} levels deep (a rubric needs 4)",
        source=source,
        line=event.start_mark.line + 1 if event.start_mark else None,
        field=field,
    )


_FAST_LOADER: Any = getattr(yaml, "CSafeLoader", None)
"""libyaml's safe loader where PyYAML was built with it (its wheels are): reading the
two bundled rubrics in Python took a command a fifth of its start-up."""


def _read_yaml(text: str, source: str) -> tuple[Any, _Locations]:
    """The document's node tree and where its keys and values are, read with libyaml; a
    file it refuses is read again in Python, whose errors (and limits) are the ones
    a rubric's author is told."""
    check_short_text(text, limit=MAX_RUBRIC_FILE_BYTES, kind="a rubric", source=source)
    if _FAST_LOADER is not None:
        try:
            return _read_yaml_with(text, source, _FAST_LOADER)
        except (InputError, yaml.YAMLError, ValueError, RecursionError):
            pass
    return _read_yaml_with(text, source, yaml.SafeLoader)


def _read_yaml_with(text: str, source: str, loader_class: Any) -> tuple[Any, _Locations]:
    # The events are read one by one (no recursion) and the nesting checked before
    # anything recursive (composing, indexing, constructing) sees the document.
    depth = 0
    top_key: str | None = None
    expect_top_key = top_is_mapping = False
    try:
        for event in yaml.parse(text, Loader=loader_class):
            if isinstance(event, yaml.MappingStartEvent | yaml.SequenceStartEvent):
                depth += 1
                if depth > MAX_YAML_DEPTH:
                    raise _too_deep(event, source, top_key)
                if depth == 1:
                    top_is_mapping = expect_top_key = isinstance(event, yaml.MappingStartEvent)
                continue
            if isinstance(event, yaml.MappingEndEvent | yaml.SequenceEndEvent):
                depth -= 1
                expect_top_key = depth == 1 and top_is_mapping
                continue
            if depth == 1 and top_is_mapping and isinstance(event, yaml.ScalarEvent):
                if expect_top_key:
                    top_key = event.value
                expect_top_key = not expect_top_key
            if isinstance(event, yaml.AliasEvent):
                # Aliases would make one value appear under several fields (and can nest
                # exponentially); a rubric spells every value out where it applies.
                raise InputError(
                    "YAML aliases (*name) are not allowed in rubric files; write the value out",
                    source=source,
                    line=event.start_mark.line + 1 if event.start_mark else None,
                )
        node = yaml.compose(text, Loader=loader_class)
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
        if not RUBRIC_ID_PATTERN.fullmatch(rubric_id):
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

        labels = self._labels(top["labels"], version=version)
        examples = self._examples(top.get("examples", []), {label.code for label in labels})

        return Rubric(
            id=rubric_id,
            version=version,
            title=title,
            applies_to=applies_to,
            labels=labels,
            examples=examples,
            sha256=content_sha256(
                rubric_id=rubric_id,
                version=version,
                title=title,
                applies_to=applies_to,
                labels=labels,
                examples=examples,
            ),
            source=self.source,
        )

    def _origin(
        self, item: Mapping[str, Any], path: str, *, version: int
    ) -> tuple[tuple[str, ...] | None, str | None]:
        """``from`` and ``change`` of one label, checked against each other (not yet
        against the previous version: :func:`review_app.rubrics.mapping.map_rubrics`)."""
        from_codes: tuple[str, ...] | None = None
        if "from" in item:
            raw = item["from"]
            field = f"{path}.from"
            if version == 1:
                raise self.error("version 1 has no previous version to come from", field)
            if not isinstance(raw, list):
                raise self.error(
                    f"expected a list of codes of version {version - 1}, e.g. [in_role], "
                    f"got {_describe(raw)}",
                    field,
                )
            codes: list[str] = []
            for index, entry in enumerate(raw):
                code = self.text(entry, f"{field}[{index}]")
                if code in codes:
                    raise self.error(f'"{code}" is named twice', f"{field}[{index}]")
                codes.append(code)
            from_codes = tuple(codes)
        change: str | None = None
        if "change" in item:
            change = self.choice(item["change"], f"{path}.change", CHANGES, "change")
        if from_codes is not None and change is None:
            raise self.error(
                f"says where it comes from but not how it changed; add change: "
                f"one of {', '.join(CHANGES[:-1])}",
                f"{path}.change",
                at_key=False,
            )
        if change == "new" and from_codes:
            raise self.error("a new label comes from no earlier code; drop from", f"{path}.from")
        if change is not None and change != "new" and not from_codes:
            raise self.error(
                f"change: {change} needs from: [<codes of version {version - 1}>]",
                f"{path}.change",
            )
        single = ("same", "reworded", "narrowed", "widened", "split")
        if change in single and from_codes and len(from_codes) != 1:
            raise self.error(
                f"change: {change} comes from exactly one code, got {len(from_codes)} "
                "(several codes becoming one is change: merged)",
                f"{path}.from",
            )
        return from_codes, change

    def _key(
        self, item: Mapping[str, Any], index: int, owners: dict[str, int], raw_labels: list[Any]
    ) -> str | None:
        """``key:`` of one label: one digit or letter, no navigation key, no key twice."""
        if "key" not in item:
            return None
        field = f"labels[{index}].key"
        key = normalize_key(item["key"])
        if key is None:
            raise self.error(
                f"expected one key (a digit 0-9 or a letter a-z), got {_describe(item['key'])}",
                field,
            )
        problem = key_problem(key)
        if problem is not None:
            raise self.error(problem, field)
        if key in owners:
            other = owners[key]
            raw = raw_labels[other]
            code = raw.get("code") if isinstance(raw, dict) else None
            raise self.error(
                f'key "{key}" is already the key of labels[{other}]'
                + (f" ({code})" if isinstance(code, str) else "")
                + "; each label needs a key of its own",
                field,
            )
        owners[key] = index
        return key

    def _labels(self, value: Any, *, version: int) -> tuple[RubricLabel, ...]:
        if not isinstance(value, list):
            raise self.error(f"expected a list of labels, got {_describe(value)}", "labels")
        if not value:
            raise self.error("a rubric needs at least one label", "labels")
        if len(value) > MAX_LABELS:
            raise self.error(
                f"{len(value)} labels; a rubric has at most {MAX_LABELS}, one key each",
                "labels",
            )
        labels: list[RubricLabel] = []
        first_index: dict[str, int] = {}
        key_owner: dict[str, int] = {}
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
            from_codes, change = self._origin(item, path, version=version)
            key = self._key(item, index, key_owner, value)
            labels.append(
                RubricLabel(
                    code=code,
                    verdict=self.choice(item["verdict"], f"{path}.verdict", VERDICTS, "verdict"),
                    title=self.text(item["title"], f"{path}.title"),
                    definition=self.text(item["definition"], f"{path}.definition"),
                    dimension=self.optional_text(item, "dimension", path),
                    guidance=self.optional_text(item, "guidance", path),
                    from_codes=from_codes,
                    change=change,
                    key=key,
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
                if not (key in ("dimension", "guidance", "from", "change", "key") and value is None)
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
    return read_rubric_file(path)[0]


def read_rubric_file(path: str | os.PathLike[str]) -> tuple[Rubric, str]:
    """:func:`load_rubric_file`, with the file's text as read (once, through
    :func:`review_app.files.text.read_short_text`)."""
    file_path = Path(path)
    source = str(path)
    name_match = _FILE_NAME_PATTERN.fullmatch(file_path.name)
    if name_match is None:
        raise InputError(
            f"rubric files are named v<N>.yaml with N the version (no leading zeros), "
            f'got "{file_path.name}"',
            source=source,
        )
    text = read_short_text(file_path, limit=MAX_RUBRIC_FILE_BYTES, kind="a rubric")
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
    return rubric, text
