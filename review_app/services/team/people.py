"""The team's people: listing, adding, roles, deactivation and reactivation.

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
    is_self,
    role_words,
)
from storage import audit, reviewers
from storage.engine import read_only
from storage.models import Reviewer, ReviewerPublic


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


def _refuse_self_demotion(actor: Actor, *, name: str, current: str, role: str) -> None:
    """Nobody lowers their own role: a mistake would lock them out of the very form that
    would undo it."""
    if is_self(actor, name) and ROLE_RANK[role] < ROLE_RANK[current]:
        raise InputError(
            f"{name}: you cannot demote yourself (from {role_words(current)} to "
            f"{role_words(role)}); another admin can",
            field="role",
        )


def _refuse_self_deactivation(actor: Actor, *, name: str) -> None:
    if is_self(actor, name):
        raise InputError(
            f"{name}: you cannot deactivate yourself; another admin can", field="reviewer"
        )


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
