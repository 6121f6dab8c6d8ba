"""What changed between two versions of a rubric."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import Any

from review_app.rubrics.mapping import RubricMapping, map_rubrics
from review_app.rubrics.model import Rubric, RubricExample, RubricLabel


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
    mapping: RubricMapping | None = None
    """For consecutive versions of one rubric: how each newer label relates to the older
    codes (:mod:`review_app.rubrics.mapping`); ``None`` otherwise."""

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
            "mapping": self.mapping.to_dict() if self.mapping is not None else None,
        }


_COMPARED_LABEL_FIELDS = ("verdict", "title", "definition", "dimension", "guidance", "key")


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
    """Differences between two rubric versions, in the order of the newer file.

    For consecutive versions of one rubric the diff carries the mapping too; a ``from``
    naming a code the older version lacks raises :class:`~review_app.errors.InputError`.
    """
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
        mapping=(
            map_rubrics(old, new) if new.id == old.id and new.version == old.version + 1 else None
        ),
    )
