"""Who is acting: reviewers, their roles, and the checks every service makes.

Roles are ordered: ``reviewer`` < ``policy_owner`` < ``admin``. Every service entry
point that reads or changes labels, gold, verdicts, exports or agreement calls
:func:`authorize` with the least role it needs, so hiding a button is never the only
protection.

An :class:`Actor` is issued, never built: :func:`sign_in` and :func:`operator_actor`
seal it with an HMAC under a secret held by this process only, and :func:`authorize`
refuses an actor without a valid seal (``Actor(reviewer_id=..., role="admin")`` built
by hand). :func:`authorize` also reads the person's current role and active flag from
the database on every call, so a demoted or deactivated person loses rights at once.

Identities come from three sources (see ``review_app.ui.auth``): Streamlit's OIDC
sign-in, a trusted reverse-proxy header (only when explicitly enabled), or the
local single-user mode. The first time an identity is seen it becomes a reviewer;
names listed in ``REVIEW_APP_ADMINS`` (comma-separated) become admins instead.
The command line acts as the operator: whoever can run it can read the database.
"""

from __future__ import annotations

import getpass
import hashlib
import hmac
import os
import secrets
import tomllib
import unicodedata
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field, replace
from pathlib import Path

from sqlalchemy import Engine
from sqlmodel import Session

from review_app import input_policy
from review_app.errors import InputError, NotFound, PermissionDenied
from storage import assignments, audit, reviewers
from storage.engine import read_only
from storage.models import REVIEWER_ROLES, Reviewer, ReviewerPublic

ROLES = REVIEWER_ROLES
"""The roles, lowest first."""
ROLE_RANK = {role: rank for rank, role in enumerate(REVIEWER_ROLES)}
ADMINS_ENV = "REVIEW_APP_ADMINS"
OPERATOR_NAME = "operator"
LOCAL_USER_ENV = "REVIEW_APP_LOCAL_USER"
AUTH_ENV = "REVIEW_APP_AUTH"

# Never leaves this process: an actor sealed by another process (or by hand) is refused.
_SECRET = secrets.token_bytes(32)


def local_user_name() -> str:
    """The one person of local single-user mode: ``REVIEW_APP_LOCAL_USER``, else the OS user."""
    configured = os.environ.get(LOCAL_USER_ENV, "").strip()
    if configured:
        return configured
    try:
        return getpass.getuser()
    except Exception:
        return "local"


def sign_in_configured() -> bool:
    """Whether the app signs people in (``REVIEW_APP_AUTH`` is ``oidc`` or ``proxy``, or
    unset with an ``[auth]`` section in ``.streamlit/secrets.toml`` of the working
    directory or the home directory, which makes OIDC the default): then nobody is the
    operating-system user, and ``demo`` creates no person for them."""
    chosen = os.environ.get(AUTH_ENV, "").strip().lower()
    if chosen:
        return chosen != "local"
    for folder in (Path.cwd(), Path.home()):
        secrets_file = folder / ".streamlit" / "secrets.toml"
        try:
            with secrets_file.open("rb") as handle:
                if "auth" in tomllib.load(handle):
                    return True
        except (OSError, tomllib.TOMLDecodeError):
            continue
    return False


def _seal(reviewer_id: int | None, name: str, auth_mode: str) -> str:
    message = f"{reviewer_id}\x1f{name}\x1f{auth_mode}".encode()
    return hmac.new(_SECRET, message, hashlib.sha256).hexdigest()


@dataclass(frozen=True)
class Actor:
    """Who is calling a service. Get one from :func:`sign_in` or :func:`operator_actor`."""

    reviewer_id: int | None
    name: str
    role: str
    auth_mode: str
    """``oidc``, ``proxy``, ``local`` or ``operator`` (the command line)."""
    display_name: str | None = None
    seal: str = field(default="", repr=False)
    """Issued by this module; an actor built by hand has none and is refused."""

    @classmethod
    def operator(cls) -> Actor:
        """The command line's actor (an admin); the same as :func:`operator_actor`."""
        return operator_actor()

    def has_role(self, minimum: str) -> bool:
        return ROLE_RANK[self.role] >= ROLE_RANK[minimum]

    @property
    def label(self) -> str:
        return self.display_name or self.name

    @property
    def is_operator(self) -> bool:
        return self.auth_mode == "operator" and self.reviewer_id is None


def _issue(
    *, reviewer_id: int | None, name: str, role: str, auth_mode: str, display_name: str | None
) -> Actor:
    return Actor(
        reviewer_id=reviewer_id,
        name=name,
        role=role,
        auth_mode=auth_mode,
        display_name=display_name,
        seal=_seal(reviewer_id, name, auth_mode),
    )


def operator_actor() -> Actor:
    """The actor of the command line: whoever can run it can read the database, an admin."""
    return _issue(
        reviewer_id=None,
        name=OPERATOR_NAME,
        role="admin",
        auth_mode="operator",
        display_name=None,
    )


def actor_for_job(engine: Engine, *, reviewer_id: int) -> Actor:
    """The actor a background job runs as: the person who started it (services/jobs.py).

    Only the worker of this process calls it, for the ``created_by_id`` stored with a
    job; every service the job calls still checks that person's current role and
    active flag (:func:`authorize`), so a demoted or deactivated person's job fails.
    """
    with Session(read_only(engine)) as session:
        person = reviewers.get_reviewer(session, reviewer_id=reviewer_id)
    if person is None:
        raise PermissionDenied(f"the person who started this job (id {reviewer_id}) is gone")
    return _issue(
        reviewer_id=reviewer_id,
        name=person.name,
        role=person.role,
        auth_mode="job",
        display_name=person.display_name,
    )


def is_issued(actor: object) -> bool:
    """Whether ``actor`` was issued by :func:`sign_in` or :func:`operator_actor`."""
    if not isinstance(actor, Actor) or not actor.seal:
        return False
    expected = _seal(actor.reviewer_id, actor.name, actor.auth_mode)
    return hmac.compare_digest(actor.seal, expected)


def _denied(actor: Actor, role: str, minimum: str) -> PermissionDenied:
    return PermissionDenied(f"{actor.name} is {_a_role(role)}; this needs {_a_role(minimum)}")


def _a_role(role: str) -> str:
    """``"a reviewer"``, ``"a policy owner"``, ``"an admin"``."""
    words = role.replace("_", " ")
    return f"{'an' if words[:1] in 'aeiou' else 'a'} {words}"


# reviewer id -> (name, role, active), read once inside :func:`one_role_read`.
_ROLES_READ: ContextVar[dict[int, tuple[str, str, bool]] | None] = ContextVar(
    "roles_read", default=None
)


@contextmanager
def one_role_read() -> Iterator[None]:
    """Inside this block :func:`authorize` reads each person's role from the database
    once and reuses it: for one run of a page, which calls several services in a few
    milliseconds (a role change applies from the next run). Every check still runs."""
    token = _ROLES_READ.set({})
    try:
        yield
    finally:
        _ROLES_READ.reset(token)


def _current_role(engine: Engine, reviewer_id: int) -> tuple[str, str, bool] | None:
    memo = _ROLES_READ.get()
    if memo is not None and reviewer_id in memo:
        return memo[reviewer_id]
    with Session(read_only(engine)) as session:
        person = reviewers.get_reviewer(session, reviewer_id=reviewer_id)
        found = None if person is None else (person.name, person.role, person.active)
    if memo is not None and found is not None:
        memo[reviewer_id] = found
    return found


def authorize(engine: Engine, actor: Actor, minimum: str) -> Actor:
    """The actor with its current role, if it was issued here and may act as ``minimum``.

    The one check every service makes. The seal proves the actor came from
    :func:`sign_in` or :func:`operator_actor`; the role and the active flag are read
    from the database (one primary-key lookup), so a role change applies to the
    next call of a session that signed in before it (inside :func:`one_role_read`,
    the next run of the page). Raises ``PermissionDenied``.
    """
    if minimum not in ROLE_RANK:
        raise ValueError(f"unknown role {minimum!r}")
    if not is_issued(actor):
        raise PermissionDenied("nobody is signed in (this actor was not issued by a sign-in)")
    if actor.is_operator:
        return actor
    assert actor.reviewer_id is not None
    found = _current_role(engine, actor.reviewer_id)
    if found is None or found[0] != actor.name:
        raise PermissionDenied(f"{actor.name} is not a reviewer of this database")
    _, role, active = found
    if not active:
        raise PermissionDenied(f"{actor.name} has been deactivated by an admin")
    if ROLE_RANK[role] < ROLE_RANK[minimum]:
        raise _denied(actor, role, minimum)
    return actor if role == actor.role else replace(actor, role=role)


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


def check_new_person_name(name: str, *, field: str = "reviewer") -> str:
    """:func:`check_reviewer_name` for a name a person signs in or is added with: also
    refused when it is, or looks like, one reserved (``operator``, the command line)."""
    identity = input_policy.check_identity(name, field=field)
    reserved = input_policy.reserved_identity(identity)
    if reserved is not None:
        raise InputError(
            f"{name!r} is reserved: the audit log records the command line as {reserved!r}",
            field=field,
        )
    return identity


def proxy_identity(value: str | None) -> str | None:
    """The name a reverse proxy's identity header gives, or ``None`` when it gives none
    that may sign in (then the page says so, as for a missing header).

    HTTP servers hand header values over decoded as Latin-1; a proxy sends UTF-8, so
    ``José`` arrives as ``JosÃ©`` and would be another person: the value is taken back
    to its bytes and decoded as UTF-8 (bytes that are not UTF-8 give ``None``), then
    NFKC-normalised (``ｊｏｓé`` is ``josé``) before the name rules and the reserved
    names apply."""
    if not value:
        return None
    try:
        raw = value.encode("latin-1")
    except UnicodeEncodeError:
        text = value  # already text beyond Latin-1: nothing to take back
    else:
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError:
            return None
    text = unicodedata.normalize("NFKC", text).strip()
    try:
        check_new_person_name(text)
    except InputError:
        return None
    return text


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
    return _issue(
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
    name = check_new_person_name(name)
    with Session(read_only(engine)) as session:
        existing = reviewers.get_reviewer_by_name(session, name=name)
        if existing is not None:
            if not existing.active:
                raise PermissionDenied(f"{name} has been deactivated by an admin")
            return _actor(existing, auth_mode)
    role = "admin" if name in configured_admins() else check_role_name(first_role)
    with Session(engine) as session:
        # INSERT ... ON CONFLICT DO NOTHING: a first sign-in from two tabs at once
        # gives both the one reviewer row instead of an IntegrityError to one of them.
        reviewer, created = reviewers.ensure_reviewer_created(
            session, name=name, role=role, display_name=display_name
        )
        if created:
            # a person who did not exist before, possibly an admin (REVIEW_APP_ADMINS)
            audit.add_entry(
                session,
                actor=name,
                action="person_signin_create",
                object_type="reviewer",
                object_key=name,
                summary={"role": role, "auth_mode": auth_mode, "configured_admin": role == "admin"},
            )
        signed_in = _actor(reviewer, auth_mode)
        session.commit()
    return signed_in


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
                f"{self.name} gets the rights of {_a_role(self.role)} back ({queued} in "
                "their queue)."
            )
        assert self.new_role is not None
        if self.new_role == self.role:
            return f"{self.name} already is {_a_role(self.role)}; nothing changes."
        if ROLE_RANK[self.new_role] > ROLE_RANK[self.role]:
            return (
                f"{self.name} becomes {_a_role(self.new_role)}: "
                f"{rights_of(self.new_role, down_to=self.role)}."
            )
        return (
            f"{self.name} goes from {_a_role(self.role)} to {_a_role(self.new_role)} and "
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
