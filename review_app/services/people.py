"""Who is acting: reviewers, their roles, and the checks every service makes.

Roles are ordered: ``reviewer`` < ``policy_owner`` < ``admin``. Each service entry
point that changes something calls :func:`require_role` with the least role it
needs, so hiding a button is never the only protection.

Identities come from three sources (see ``review_app.ui.auth``): Streamlit's OIDC
sign-in, a trusted reverse-proxy header (only when explicitly enabled), or the
local single-user mode. The first time an identity is seen it becomes a reviewer;
names listed in ``REVIEW_APP_ADMINS`` (comma-separated) become admins instead.
The command line acts as the operator: whoever can run it can read the database.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from sqlalchemy import Engine
from sqlmodel import Session

from review_app import input_policy
from review_app.errors import InputError, NotFound, PermissionDenied
from storage import reviewing
from storage.engine import read_only
from storage.models import REVIEWER_ROLES, Reviewer

ROLE_RANK = {role: rank for rank, role in enumerate(REVIEWER_ROLES)}
ADMINS_ENV = "REVIEW_APP_ADMINS"


@dataclass(frozen=True)
class Actor:
    reviewer_id: int | None
    name: str
    role: str
    auth_mode: str
    """``oidc``, ``proxy``, ``local`` or ``operator`` (the command line)."""
    display_name: str | None = None

    @classmethod
    def operator(cls) -> Actor:
        return cls(reviewer_id=None, name="operator", role="admin", auth_mode="operator")

    def has_role(self, minimum: str) -> bool:
        return ROLE_RANK[self.role] >= ROLE_RANK[minimum]

    @property
    def label(self) -> str:
        return self.display_name or self.name


def require_role(actor: Actor, minimum: str) -> None:
    if minimum not in ROLE_RANK:
        raise ValueError(f"unknown role {minimum!r}")
    if not actor.has_role(minimum):
        raise PermissionDenied(
            f"{actor.name} is a {actor.role.replace('_', ' ')}; "
            f"this needs a {minimum.replace('_', ' ')}"
        )


def require_reviewer_id(actor: Actor) -> int:
    if actor.reviewer_id is None:
        raise PermissionDenied("labels are recorded by a signed-in reviewer, not the operator")
    return actor.reviewer_id


def check_role_name(role: str) -> str:
    if role not in ROLE_RANK:
        raise InputError(
            f"unknown role {role!r}; choose one of {', '.join(REVIEWER_ROLES)}", field="role"
        )
    return role


def check_reviewer_name(name: str) -> str:
    """The reviewer's identity: the name by the input policy, NFC and case-folded
    (``Ana`` and ``ana`` are one reviewer; bidi and zero-width characters are refused)."""
    return input_policy.check_identity(name, field="reviewer")


def display_of(name: str, display_name: str | None = None) -> str | None:
    """What to show for a new reviewer: the display name given, else the name as typed
    when its case differs from the identity (``Ana`` is stored as ``ana``, shown as ``Ana``)."""
    if display_name is not None:
        return input_policy.clean_display_name(display_name)
    typed = input_policy.normalise(name).strip()
    return typed if typed != input_policy.identity_key(typed) else None


def configured_admins() -> set[str]:
    return {
        input_policy.identity_key(name)
        for name in os.environ.get(ADMINS_ENV, "").split(",")
        if name.strip()
    }


def _actor(reviewer: Reviewer, auth_mode: str) -> Actor:
    assert reviewer.id is not None
    return Actor(
        reviewer_id=reviewer.id,
        name=reviewer.name,
        role=reviewer.role,
        auth_mode=auth_mode,
        display_name=reviewer.display_name,
    )


def sign_in(
    engine: Engine,
    *,
    name: str,
    auth_mode: str,
    display_name: str | None = None,
    first_role: str = "reviewer",
) -> Actor:
    """The actor for a signed-in identity, creating the reviewer on first sight."""
    display_name = display_of(name, display_name)
    name = check_reviewer_name(name)
    with Session(read_only(engine)) as session:
        existing = reviewing.get_reviewer_by_name(session, name=name)
        if existing is not None:
            if not existing.active:
                raise PermissionDenied(f"{name} has been deactivated by an admin")
            return _actor(existing, auth_mode)
    role = "admin" if name in configured_admins() else check_role_name(first_role)
    with Session(engine) as session:
        reviewer = reviewing.get_reviewer_by_name(session, name=name)
        if reviewer is None:
            reviewer = reviewing.create_reviewer(
                session, name=name, role=role, display_name=display_name
            )
        session.commit()
        session.refresh(reviewer)
        return _actor(reviewer, auth_mode)


def list_people(engine: Engine) -> list[Reviewer]:
    with Session(read_only(engine)) as session:
        people = reviewing.list_reviewers(session)
        for person in people:
            session.expunge(person)
        return people


def add_person(engine: Engine, actor: Actor, *, name: str, role: str = "reviewer") -> Reviewer:
    require_role(actor, "admin")
    display_name = display_of(name)
    name = check_reviewer_name(name)
    check_role_name(role)
    with Session(engine) as session:
        reviewer = reviewing.get_reviewer_by_name(session, name=name)
        if reviewer is None:
            reviewer = reviewing.create_reviewer(
                session, name=name, role=role, display_name=display_name
            )
        else:
            reviewer.role = role
            reviewer.active = True
            session.add(reviewer)
        session.commit()
        session.refresh(reviewer)
        session.expunge(reviewer)
        return reviewer


def set_role(engine: Engine, actor: Actor, *, name: str, role: str) -> None:
    require_role(actor, "admin")
    check_role_name(role)
    name = check_reviewer_name(name)
    with Session(engine) as session:
        reviewer = reviewing.get_reviewer_by_name(session, name=name)
        if reviewer is None:
            raise NotFound(f"no reviewer named {name!r}")
        if (
            reviewer.role == "admin"
            and role != "admin"
            and (reviewing.count_reviewers_with_role(session, role="admin") <= 1)
        ):
            raise InputError(
                "the last admin cannot be demoted; make someone else admin first", field="role"
            )
        assert reviewer.id is not None
        reviewing.set_reviewer_role(session, reviewer_id=reviewer.id, role=role)
        session.commit()
