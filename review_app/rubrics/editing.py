"""Writing the next version of a rubric as YAML text: a draft started from a version,
and one code's fields changed in it (the rubrics page's per-code form).

Pure text in, text out; the text is then read by :func:`~review_app.rubrics.parsing.
parse_rubric_text` like a file. Fields this module does not know (for example a code's
``key:``) are kept as they are.
"""

from __future__ import annotations

from typing import Any

import yaml

from review_app.errors import InputError
from review_app.rubrics.model import Rubric

_CARRY_FIELDS = ("from", "change")


def _dump(data: Any) -> str:
    return yaml.safe_dump(
        data, sort_keys=False, allow_unicode=True, default_flow_style=False, width=88
    )


def _load(text: str, source: str) -> dict[str, Any]:
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as error:
        mark = getattr(error, "problem_mark", None)
        raise InputError(
            f"not valid YAML: {getattr(error, 'problem', None) or error}",
            source=source,
            line=None if mark is None else mark.line + 1,
        ) from None
    if not isinstance(data, dict) or not isinstance(data.get("labels"), list):
        raise InputError("expected a rubric mapping with a labels list", source=source)
    return data


def rubric_yaml(rubric: Rubric) -> str:
    """A version's content as rubric YAML (for a version whose text was not kept); it
    reads back as the same version (same sha256)."""
    data = {
        key: value
        for key, value in rubric.to_dict().items()
        if key not in ("ref", "sha256", "source")
    }
    data["labels"] = [
        {key: value for key, value in label.items() if value is not None}
        for label in data["labels"]
    ]
    return _dump(data)


def next_version_text(current: Rubric, current_text: str | None) -> str:
    """The YAML of version N+1 started from version N (``current``): the same content
    with ``version`` raised and each code's ``from:``/``change:`` removed (they said how
    N related to N-1; in N+1 a code without them is carried unchanged, ``same``)."""
    source = f"{current.id}/v{current.version}.yaml"
    data = _load(current_text, source) if current_text else current.to_dict()
    data = {key: value for key, value in data.items() if key not in ("ref", "sha256", "source")}
    data["version"] = current.version + 1
    labels = []
    for label in data["labels"]:
        if isinstance(label, dict):
            label = {
                key: value
                for key, value in label.items()
                if key not in _CARRY_FIELDS and value is not None
            }
        labels.append(label)
    data["labels"] = labels
    return _dump(data)


def with_code(
    text: str,
    *,
    source: str,
    code: str,
    title: str,
    definition: str,
    verdict: str,
    from_codes: list[str] | None,
    change: str | None,
    example: dict[str, str] | None = None,
) -> str:
    """``text`` with code ``code``'s fields set (the code is added at the end when new),
    and ``example`` (label, kind, context, reply, why) appended to the examples when
    given. ``from_codes``/``change`` empty remove the field. The result is checked by
    the caller like any rubric text."""
    data = _load(text, source)
    found = None
    for label in data["labels"]:
        if isinstance(label, dict) and label.get("code") == code:
            found = label
            break
    if found is None:
        found = {"code": code}
        data["labels"].append(found)
    found["title"] = title
    found["definition"] = definition
    found["verdict"] = verdict
    if from_codes:
        found["from"] = list(from_codes)
    else:
        found.pop("from", None)
    if change:
        found["change"] = change
    else:
        found.pop("change", None)
    if example is not None:
        examples = data.get("examples")
        if not isinstance(examples, list):
            examples = []
        examples.append({"label": code, **example})
        data["examples"] = examples
    return _dump(data)
