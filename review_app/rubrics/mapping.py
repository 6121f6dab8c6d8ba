"""How each label of version N+1 relates to the codes of version N (docs/reference.md,
"Rubric versions: mapping and carry-over").

A label of version N+1 says where it comes from with ``from: [code, ...]`` (codes of
version N) and ``change:`` (one of :data:`~review_app.rubrics.model.CHANGES`). When the
file is silent the mapping is derived where it is certain and left open otherwise:

* the same code with the same definition and verdict is ``same`` (from that code);
* the same code whose definition or verdict changed is *open*: only the author can
  say whether it was reworded, narrowed or widened;
* a code version N did not have is ``new``.

An old code is *carried* (its labels keep meaning the same thing under N+1) when
exactly one label of N+1 names it, with ``same`` or ``reworded``, and no other label
names it. An old code nobody names is *unaccounted for*; a version that leaves a used
code unaccounted for cannot be published (:meth:`RubricMapping.check_publishable`).

Pure: no storage, no user interface.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from review_app.errors import InputError
from review_app.rubrics.model import Rubric

CARRIED_CHANGES = ("same", "reworded")
RE_REVIEW_CHANGES = ("narrowed", "widened", "split", "merged")


@dataclass(frozen=True)
class LabelOrigin:
    """Where one label of the newer version comes from."""

    code: str
    change: str | None
    """``None``: open, the author must say (``change:`` in the file)."""
    from_codes: tuple[str, ...]
    derived: bool
    """True when the file was silent and the app derived ``change``."""

    def to_dict(self) -> dict[str, Any]:
        return {
            "code": self.code,
            "change": self.change,
            "from": list(self.from_codes),
            "derived": self.derived,
        }


@dataclass(frozen=True)
class RubricMapping:
    old: Rubric
    new: Rubric
    origins: tuple[LabelOrigin, ...]

    def successors(self, old_code: str) -> tuple[LabelOrigin, ...]:
        """The labels of the newer version that name ``old_code``."""
        return tuple(o for o in self.origins if old_code in o.from_codes)

    def carried(self) -> dict[str, str]:
        """Old code -> new code, for the codes whose labels are carried one-to-one."""
        result: dict[str, str] = {}
        for code in self.old.codes:
            named = self.successors(code)
            if (
                len(named) == 1
                and named[0].change in CARRIED_CHANGES
                and named[0].from_codes == (code,)
            ):
                result[code] = named[0].code
        return result

    def fate(self, old_code: str) -> str:
        """``same``/``reworded`` (carried), a re-review change, or ``unaccounted``."""
        named = [o for o in self.successors(old_code) if o.change is not None]
        if not named:
            return "unaccounted"
        if old_code in self.carried():
            return str(named[0].change)
        if any(o.change == "merged" for o in named):
            return "merged"
        if len(named) > 1:
            return "split"
        return str(named[0].change)

    def unaccounted(self) -> tuple[str, ...]:
        return tuple(code for code in self.old.codes if self.fate(code) == "unaccounted")

    def open_labels(self) -> tuple[str, ...]:
        """Labels of the newer version whose change the author must still state."""
        return tuple(o.code for o in self.origins if o.change is None)

    def check_publishable(self, used: dict[str, int]) -> None:
        """Refuse, in one line, a version that leaves a used code unaccounted for.

        ``used`` is old code -> number of labels (reviewer and gold) recorded with it.
        """
        missing = [code for code in self.unaccounted() if used.get(code)]
        if not missing:
            return
        shown = ", ".join(f"{code} ({used[code]} labels)" for code in missing)
        open_same_code = [code for code in missing if code in self.new.codes]
        hint = (
            f"add change: (reworded, narrowed or widened) to {', '.join(open_same_code)}"
            if open_same_code
            else "name it in from: [...] of the label that replaces it, with a change:"
        )
        raise InputError(
            f"{self.new.ref} leaves used codes of {self.old.ref} unaccounted for: {shown}; {hint}",
            source=self.new.source,
        )

    def to_dict(self) -> dict[str, Any]:
        carried = self.carried()
        return {
            "labels": [origin.to_dict() for origin in self.origins],
            "old_codes": [
                {"code": code, "fate": self.fate(code), "carried_to": carried.get(code)}
                for code in self.old.codes
            ],
            "carried": carried,
            "unaccounted": list(self.unaccounted()),
            "open": list(self.open_labels()),
        }


def map_rubrics(old: Rubric, new: Rubric) -> RubricMapping:
    """The mapping of ``new`` (version N+1) onto ``old`` (version N).

    Raises :class:`InputError` naming the newer file and the label's field when a
    ``from`` names a code version N does not have, or ``same``/``reworded`` do not
    hold (``same`` keeps definition and verdict; ``reworded`` keeps the verdict).
    """
    if new.id != old.id or new.version != old.version + 1:
        raise InputError(
            f"a mapping is between consecutive versions of one rubric, not {old.ref} and {new.ref}"
        )
    old_labels = {label.code: label for label in old.labels}
    origins: list[LabelOrigin] = []
    for index, label in enumerate(new.labels):
        path = f"labels[{index}]"
        if label.change is not None:
            for code in label.from_codes or ():
                if code not in old_labels:
                    raise InputError(
                        f'from names "{code}", which {old.ref} does not define '
                        f"(its codes: {', '.join(old.codes)})",
                        source=new.source,
                        field=f"{path}.from",
                    )
            single = old_labels[label.from_codes[0]] if label.from_codes else None
            if (
                label.change == "same"
                and single is not None
                and (single.definition != label.definition or single.verdict != label.verdict)
            ):
                raise InputError(
                    f"change: same, but the definition or verdict differs from "
                    f"{single.code} in {old.ref}; say reworded, narrowed or widened",
                    source=new.source,
                    field=f"{path}.change",
                )
            if (
                label.change == "reworded"
                and single is not None
                and (single.verdict != label.verdict)
            ):
                raise InputError(
                    f"change: reworded, but the verdict changed from {single.verdict} to "
                    f"{label.verdict}; a changed verdict is narrowed, widened or new",
                    source=new.source,
                    field=f"{path}.change",
                )
            origins.append(
                LabelOrigin(label.code, label.change, label.from_codes or (), derived=False)
            )
            continue
        before = old_labels.get(label.code)
        if before is None:
            origins.append(LabelOrigin(label.code, "new", (), derived=True))
        elif before.definition == label.definition and before.verdict == label.verdict:
            origins.append(LabelOrigin(label.code, "same", (label.code,), derived=True))
        else:
            origins.append(LabelOrigin(label.code, None, (label.code,), derived=True))
    return RubricMapping(old=old, new=new, origins=tuple(origins))
