"""The team's people: listing, adding, roles, deactivation and the rights forms' previews.

Who is acting and the checks every service makes live in
:mod:`review_app.services.access.actors`; this module changes who is on the team, with
the guards that keep someone able to administer it (no self-demotion, no removing the
last admin).
"""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy import Engine
from sqlmodel import Session

from review_app import input_policy
from review_app.errors import InputError, NotFound
from review_app.services.access.actors import (
    ROLE_RANK,
    Actor,
    authorize,
    check_new_person_name,
    check_reviewer_name,
    check_role_name,
    display_of,
    role_with_article,
)
from storage import assignments, audit, reviewers
from storage.engine import read_only
from storage.models import REVIEWER_ROLES, Reviewer, ReviewerPublic


def _public(reviewer: Reviewer) -> ReviewerPublic:
    """A reviewer's row as a frozen value (what services return, never the row)."""
    return ReviewerPublic.model_validate(reviewer)


def list_people(engine: Engine, *, include_inactive: bool = False) -> list[ReviewerPublic]:
    """The active people (with ``include_inactive``, the deactivated ones too)."""
    with Session(read_only(engine)) as session:
        return [
            _public(person)
            for person in reviewers.list_reviewers(session, active_only=not include_inactive)
        ]


def _refuse_removing_the_last_admin(
    session: Session, *, name: str, stays_admin: bool, refusal: InputError
) -> None:
    """Raise ``refusal`` for a change that leaves no active admin: ``name`` is the only
    one and will not stay an active admin. Call it before reading ``name``'s row: it
    takes the admin row locks (:func:`storage.reviewers.lock_active_admins`)."""
    if stays_admin:
        return
    if reviewers.lock_active_admins(session) == [name]:
        raise refusal


def _last_admin_demoted() -> InputError:
    return InputError(
        "the last admin cannot be demoted; make someone else admin first", field="role"
    )


def _is_self(actor: Actor, name: str) -> bool:
    """Whether ``name`` is the signed-in person acting (the command line's operator is
    nobody's name: ``operator`` is reserved)."""
    return actor.reviewer_id is not None and actor.name == name


def _refuse_self_demotion(actor: Actor, *, name: str, current: str, role: str) -> None:
    """Nobody lowers their own role: a mistake would lock them out of the very form that
    would undo it."""
    if _is_self(actor, name) and ROLE_RANK[role] < ROLE_RANK[current]:
        raise InputError(
            f"{name}: you cannot demote yourself (from {_role_words(current)} to "
            f"{_role_words(role)}); another admin can",
            field="role",
        )


def _refuse_self_deactivation(actor: Actor, *, name: str) -> None:
    if _is_self(actor, name):
        raise InputError(
            f"{name}: you cannot deactivate yourself; another admin can", field="reviewer"
        )


def _role_words(role: str) -> str:
    return role.replace("_", " ")


def add_person(
    engine: Engine, actor: Actor, *, name: str, role: str = "reviewer"
) -> ReviewerPublic:
    """Add ``name`` in ``role``, or give an existing person that role and reactivate them
    (admins only); the person as they are now."""
    actor = authorize(engine, actor, "admin")
    display_name = display_of(name)
    name = check_new_person_name(name)
    check_role_name(role)
    with Session(engine) as session:
        _refuse_removing_the_last_admin(
            session, name=name, stays_admin=role == "admin", refusal=_last_admin_demoted()
        )
        # INSERT ... ON CONFLICT DO NOTHING: the person signing in at this moment (or an
        # admin adding the same name) makes this an update, never an IntegrityError.
        created = reviewers.insert_reviewer_if_absent(
            session, name=name, role=role, display_name=display_name
        )
        reviewer = reviewers.get_reviewer_by_name(session, name=name)
        assert reviewer is not None
        before = None if created else {"role": reviewer.role, "active": reviewer.active}
        if not created:
            _refuse_self_demotion(actor, name=name, current=reviewer.role, role=role)
            reviewer.role = role
            reviewer.active = True
            session.add(reviewer)
        audit.add_entry(
            session,
            actor=actor.name,
            action="person_add" if before is None else "role_change",
            object_type="reviewer",
            object_key=name,
            summary={"before": before, "after": {"role": role, "active": True}},
        )
        session.commit()
        session.refresh(reviewer)
        return _public(reviewer)


def set_role(engine: Engine, actor: Actor, *, name: str, role: str) -> None:
    actor = authorize(engine, actor, "admin")
    check_role_name(role)
    name = check_reviewer_name(name)
    with Session(engine) as session:
        _refuse_removing_the_last_admin(
            session, name=name, stays_admin=role == "admin", refusal=_last_admin_demoted()
        )
        reviewer = reviewers.get_reviewer_by_name(session, name=name)
        if reviewer is None:
            raise NotFound(f"no reviewer named {name!r}")
        assert reviewer.id is not None
        _refuse_self_demotion(actor, name=name, current=reviewer.role, role=role)
        before = reviewer.role
        reviewers.set_reviewer_role(session, reviewer_id=reviewer.id, role=role)
        audit.add_entry(
            session,
            actor=actor.name,
            action="role_change",
            object_type="reviewer",
            object_key=name,
            summary={"before": {"role": before}, "after": {"role": role}},
        )
        session.commit()


@dataclass(frozen=True)
class ActiveChange:
    """What :func:`deactivate_person` or :func:`reactivate_person` did."""

    name: str
    active: bool
    changed: bool
    """False when the person already was in that state (nothing was written)."""

    def line(self) -> str:
        if self.changed:
            return f"{self.name}: {'reactivated' if self.active else 'deactivated'}"
        return f"{self.name}: already {'active' if self.active else 'deactivated'}, nothing changed"


def deactivate_person(engine: Engine, actor: Actor, *, name: str) -> ActiveChange:
    """Take every right away from ``name`` from their next call on (admins only); their
    labels stay. Refuses the last active admin (the command line's operator is not a
    person and always remains) and the acting admin themselves."""
    return _set_active(engine, actor, name=name, active=False)


def reactivate_person(engine: Engine, actor: Actor, *, name: str) -> ActiveChange:
    """Give a deactivated ``name`` their role's rights back (admins only)."""
    return _set_active(engine, actor, name=name, active=True)


def _set_active(engine: Engine, actor: Actor, *, name: str, active: bool) -> ActiveChange:
    actor = authorize(engine, actor, "admin")
    name = check_reviewer_name(name)
    if not active:
        _refuse_self_deactivation(actor, name=name)
    with Session(engine) as session:
        _refuse_removing_the_last_admin(
            session,
            name=name,
            stays_admin=active,
            refusal=InputError(
                f"{name} is the last active admin and cannot be deactivated; "
                "make someone else admin first"
            ),
        )
        reviewer = reviewers.get_reviewer_by_name(session, name=name)
        if reviewer is None:
            raise NotFound(f"no reviewer named {name!r}")
        if reviewer.active == active:
            return ActiveChange(name=name, active=active, changed=False)
        assert reviewer.id is not None
        reviewers.set_reviewer_active(session, reviewer_id=reviewer.id, active=active)
        audit.add_entry(
            session,
            actor=actor.name,
            action="person_reactivate" if active else "person_deactivate",
            object_type="reviewer",
            object_key=name,
            summary={"before": {"active": not active}, "after": {"active": active}},
        )
        session.commit()
    return ActiveChange(name=name, active=active, changed=True)


def assignable_people(session: Session, *, names: list[str]) -> dict[str, ReviewerPublic]:
    """The named people, by case-folded name: each must exist and be active.

    Callers are services that already authorized their actor (assignment, audit
    samples); a deactivated person keeps their history but gets no new cases.
    """
    keys = [input_policy.identity_key(name) for name in names]
    people = reviewers.reviewers_by_name(session, names=keys)
    unknown = sorted(set(keys) - set(people))
    if unknown:
        raise InputError(f"no reviewer named {', '.join(unknown)}", field="reviewers")
    inactive = sorted(name for name, person in people.items() if not person.active)
    if inactive:
        raise InputError(
            f"{', '.join(inactive)}: deactivated, so given no cases "
            "(review-app reviewers reactivate NAME first)",
            field="reviewers",
        )
    return {name: _public(person) for name, person in people.items()}


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
                f"{self.name} ({_role_words(self.role)}) loses every right from their next "
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
        if _is_self(actor, name):
            refusal = f"{name}: you cannot deactivate yourself; another admin can"
        elif last_admin:
            refusal = f"{name} is the last active admin and cannot be deactivated"
    elif change == "role" and role is not None and ROLE_RANK[role] < ROLE_RANK[person.role]:
        if _is_self(actor, name):
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
