"""Which key labels a turn with which code: a key map that survives new versions.

Every label of a rubric version has one key (docs/reference.md, "Label keys"): the
``key:`` written in its file, else one given by :func:`assign_keys` from the version
and its predecessor:

1. a key written in the file (``key: 3``) is the label's key;
2. a label that carries an old code (``same`` or ``reworded``, one-to-one: see
   :meth:`~review_app.rubrics.mapping.RubricMapping.carried`) keeps that code's key;
3. a label with the code of an old code whose meaning changed (narrowed, widened,
   merged, or still open) keeps that code's key too: the key keeps naming the code;
4. every other label takes the first free key of :data:`KEY_ORDER` (digits ``1``-``9``,
   then ``0``, then letters), keys of old codes that are gone last: a key that meant
   something else under the previous version is handed out only when nothing else is
   free, so a reviewer's habit does not save a wrong label.

So a code keeps its key from version to version, whatever is inserted before it.
Navigation keys of the review page (:data:`NAVIGATION_KEYS`) are never label keys.

Pure: no storage, no user interface. It takes parsed rubrics, so a draft being written
is given its keys the same way as a file.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from review_app.errors import InputError
from review_app.rubrics.mapping import map_rubrics
from review_app.rubrics.model import Rubric

NAVIGATION_KEYS: Mapping[str, str] = {
    "j": "next turn",
    "k": "previous turn",
    "n": "next case",
    "r": "rationale",
    "c": "Streamlit's clear-cache shortcut",
}
"""Single keys the review and adjudicate pages (or Streamlit under them) already use."""

KEY_ORDER: str = "1234567890" + "".join(
    letter for letter in "abcdefghijklmnopqrstuvwxyz" if letter not in NAVIGATION_KEYS
)
"""The keys a label may have, in the order free keys are handed out."""

MAX_LABELS = len(KEY_ORDER)
"""At most this many labels in a version: one key each."""

KEY_SOURCES = ("file", "carried", "kept", "free")
"""Where a label's key comes from: written in the file; the key of the old code it carries
(same, reworded); the key of the same code whose meaning changed; the first free key."""


def key_problem(key: str) -> str | None:
    """Why ``key`` cannot be a label's key, or None. ``key`` is one character already
    lowercased (see :func:`normalize_key`)."""
    if key in NAVIGATION_KEYS:
        return (
            f'"{key}" is a navigation key of the review page ({NAVIGATION_KEYS[key]}); '
            "choose a digit or another letter"
        )
    if key not in KEY_ORDER:
        return f'"{key}" is no key a label can have: one digit 0-9 or one letter a-z'
    return None


def normalize_key(value: Any) -> str | None:
    """A ``key:`` value as written in YAML (``3`` is read as a number) as one lowercase
    character, or None when it is not one digit or one letter."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return str(value) if 0 <= value <= 9 else None
    if isinstance(value, str) and len(value.strip()) == 1:
        key = value.strip().lower()
        return key if key.isascii() and key.isalnum() else None
    return None


@dataclass(frozen=True)
class KeyMap:
    """The key of every code of one rubric version, in the order of its labels."""

    ref: str
    keys: dict[str, str] = field(default_factory=dict)
    """code -> key (one character), for every label of the version."""
    sources: dict[str, str] = field(default_factory=dict)
    """code -> one of :data:`KEY_SOURCES`."""
    inherited_from: dict[str, str] = field(default_factory=dict)
    """code -> the previous version's code whose key it kept (carried or kept)."""

    def key_of(self, code: str) -> str:
        return self.keys[code]

    def code_for(self, key: str) -> str | None:
        """The code ``key`` labels with (``None``: the key labels nothing)."""
        wanted = key.lower()
        return next((code for code, own in self.keys.items() if own == wanted), None)

    def to_dict(self) -> dict[str, Any]:
        return {
            "rubric": self.ref,
            "keys": [
                {
                    "code": code,
                    "key": key,
                    "source": self.sources[code],
                    "from": self.inherited_from.get(code),
                }
                for code, key in self.keys.items()
            ],
        }


def _inheritance(rubric: Rubric, previous: Rubric) -> dict[str, tuple[str, str]]:
    """New code -> (old code, "carried" | "kept"): whose key each label may keep."""
    old_codes = set(previous.codes)
    result: dict[str, tuple[str, str]] = {}
    if rubric.id == previous.id and rubric.version == previous.version + 1:
        try:
            mapping = map_rubrics(previous, rubric)
        except InputError:
            mapping = None  # a from: the old version lacks: only the same codes keep keys
        if mapping is not None:
            for old_code, new_code in mapping.carried().items():
                result[new_code] = (old_code, "carried")
    carried_old = {old for old, _ in result.values()}
    for code in rubric.codes:
        # The same code, its meaning changed: its key keeps naming it (unless the old
        # code's labels were carried to another label, which takes the key along).
        if code not in result and code in old_codes and code not in carried_old:
            result[code] = (code, "kept")
    return result


def assign_keys(
    rubric: Rubric,
    previous: Rubric | None = None,
    *,
    previous_keys: Mapping[str, str] | None = None,
) -> KeyMap:
    """The key of every code of ``rubric``, given its predecessor (if any).

    ``previous_keys`` is the predecessor's own key map (code -> key); without it the
    predecessor's keys are worked out as if it had no predecessor itself (right for
    version 1 and for any version whose file writes every key). For a longer history
    use :func:`keys_along`. Works on any parsed rubric: a file, a stored copy, a draft.
    """
    if len(rubric.labels) > MAX_LABELS:
        raise InputError(
            f"{rubric.ref} has {len(rubric.labels)} labels; at most {MAX_LABELS} can have "
            "a key each",
            source=rubric.source,
            field="labels",
        )
    if previous is not None and previous_keys is None:
        previous_keys = assign_keys(previous).keys
    old_keys = {
        code: key for code, key in (previous_keys or {}).items() if key_problem(key) is None
    }
    keys: dict[str, str] = {}
    sources: dict[str, str] = {}
    inherited_from: dict[str, str] = {}
    for label in rubric.labels:
        if label.key is not None:
            keys[label.code] = label.key
            sources[label.code] = "file"
    taken = set(keys.values())
    inheritance = _inheritance(rubric, previous) if previous is not None else {}
    for label in rubric.labels:
        if label.code in keys or label.code not in inheritance:
            continue
        old_code, how = inheritance[label.code]
        key = old_keys.get(old_code)
        if key is not None and key not in taken:
            keys[label.code] = key
            sources[label.code] = how
            inherited_from[label.code] = old_code
            taken.add(key)
    retired = set(old_keys.values())
    free = [key for key in KEY_ORDER if key not in taken and key not in retired] + [
        key for key in KEY_ORDER if key not in taken and key in retired
    ]
    for label in rubric.labels:
        if label.code not in keys:
            keys[label.code] = free.pop(0)
            sources[label.code] = "free"
    ordered = {label.code: keys[label.code] for label in rubric.labels}
    return KeyMap(
        ref=rubric.ref,
        keys=ordered,
        sources={code: sources[code] for code in ordered},
        inherited_from=inherited_from,
    )


def keys_along(versions: Sequence[Rubric]) -> list[KeyMap]:
    """The key maps of a history of versions, oldest first: each version's keys from
    its predecessor's map. ``versions`` are the versions of one rubric in order."""
    maps: list[KeyMap] = []
    previous: Rubric | None = None
    for rubric in versions:
        maps.append(assign_keys(rubric, previous, previous_keys=maps[-1].keys if maps else None))
        previous = rubric
    return maps
