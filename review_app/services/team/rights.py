"""What a change of someone's rights would do, before it is applied: the team page's
confirmation (:func:`preview_rights_change`) and the rights each role adds, in words.

The changes themselves, with the same refusals, are :mod:`review_app.services.team.people`'s.
"""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy import Engine
from sqlmodel import Session

from review_app.errors import InputError, NotFound
from review_app.services.access.actors import (
    ROLE_RANK,
    Actor,
    authorize,
    check_reviewer_name,
    check_role_name,
    is_self,
    role_with_article,
    role_words,
)
from storage import assignments, reviewers
from storage.engine import read_only
from storage.models import REVIEWER_ROLES

ROLE_RIGHTS = {
    "reviewer": "labeling the cases in their queue",
    "policy_owner": "assigning cases, drawing audits, adjudicating, importing, exporting, "
    "the agreement, judge and team pages",
    "admin": "adding people, changing roles, deactivating and reactivating",
}
"""What each role adds to the one below it, in words (what a person loses)."""


def rights_of(role: str, *, down_to: str | None = None) -> str:
    """The rights of ``role`` above ``down_to`` (all of them without), highest first."""
    floor = -1 if down_to is None else ROLE_RANK[down_to]
    kept = [r for r in reversed(REVIEWER_ROLES) if floor < ROLE_RANK[r] <= ROLE_RANK[role]]
    return "; ".join(ROLE_RIGHTS[r] for r in kept)


RIGHTS_CHANGES = ("deactivate", "reactivate", "role")


@dataclass(frozen=True)
class RightsPreview:
    """What a change of someone's rights would do, before it is applied: the page's
    confirmation (:func:`preview_rights_change`)."""

    name: str
    change: str
    """``deactivate``, ``reactivate`` or ``role``."""
    role: str
    """The person's role now."""
    new_role: str | None
    active: bool
    open_assignments: int
    """Assignments not finished yet, under any rubric version."""
    refusal: str | None
    """Why the service would refuse it (yourself, the last admin), else None."""

    @property
    def loses_rights(self) -> bool:
        """A deactivation of an active person or a demotion: needs a confirmation."""
        if self.change == "deactivate":
            return self.active
        return (
            self.change == "role"
            and self.new_role is not None
            and ROLE_RANK[self.new_role] < ROLE_RANK[self.role]
        )

    def sentence(self) -> str:
        """What applying it does, in one sentence naming the person and what they lose."""
        if self.refusal is not None:
            return f"Refused: {self.refusal}."
        count = self.open_assignments
        queued = f"{count} open assignment{'s' if count != 1 else ''}"
        if self.change == "deactivate":
            if not self.active:
                return f"{self.name} is already deactivated; nothing changes."
            left = (
                "They have no open assignment"
                if count == 0
                else f"Their {queued} {'stays' if count == 1 else 'stay'} in their queue "
                "undone (assign those cases to someone else)"
            )
            return (
                f"{self.name} ({role_words(self.role)}) loses every right from their next "
                f"action on: {rights_of(self.role)}. {left}; their labels stay."
            )
        if self.change == "reactivate":
            if self.active:
                return f"{self.name} is already active; nothing changes."
            return (
                f"{self.name} gets the rights of {role_with_article(self.role)} back ({queued} in "
                "their queue)."
            )
        assert self.new_role is not None
        if self.new_role == self.role:
            return f"{self.name} already is {role_with_article(self.role)}; nothing changes."
        if ROLE_RANK[self.new_role] > ROLE_RANK[self.role]:
            return (
                f"{self.name} becomes {role_with_article(self.new_role)}: "
                f"{rights_of(self.new_role, down_to=self.role)}."
            )
        return (
            f"{self.name} goes from {role_with_article(self.role)} "
            f"to {role_with_article(self.new_role)} and "
            f"loses {rights_of(self.role, down_to=self.new_role)}; they keep their queue "
            f"({queued})."
        )


def preview_rights_change(
    engine: Engine, actor: Actor, *, name: str, change: str, role: str | None = None
) -> RightsPreview:
    """What deactivating, reactivating or giving ``role`` to ``name`` would do, and
    whether it would be refused (admins only; nothing is written). The services check
    again when the change is applied."""
    actor = authorize(engine, actor, "admin")
    if change not in RIGHTS_CHANGES:
        raise InputError(f"choose one of {', '.join(RIGHTS_CHANGES)}", field="change")
    if change == "role":
        if role is None:
            raise InputError("choose the new role", field="role")
        check_role_name(role)
    name = check_reviewer_name(name)
    with Session(read_only(engine)) as session:
        person = reviewers.get_reviewer_by_name(session, name=name)
        if person is None:
            raise NotFound(f"no reviewer named {name!r}")
        assert person.id is not None
        open_count = assignments.open_assignment_count(session, reviewer_id=person.id)
        admins = [
            p.name for p in reviewers.list_reviewers(session, active_only=True) if p.role == "admin"
        ]
    refusal = None
    last_admin = admins == [name]
    if change == "deactivate" and person.active:
        if is_self(actor, name):
            refusal = f"{name}: you cannot deactivate yourself; another admin can"
        elif last_admin:
            refusal = f"{name} is the last active admin and cannot be deactivated"
    elif change == "role" and role is not None and ROLE_RANK[role] < ROLE_RANK[person.role]:
        if is_self(actor, name):
            refusal = f"{name}: you cannot demote yourself; another admin can"
        elif last_admin:
            refusal = f"{name} is the last active admin and cannot be demoted"
    return RightsPreview(
        name=name,
        change=change,
        role=person.role,
        new_role=role if change == "role" else None,
        active=person.active,
        open_assignments=open_count,
        refusal=refusal,
    )
