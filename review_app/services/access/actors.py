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
import unicodedata
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field, replace
from pathlib import Path

from sqlalchemy import Engine
from sqlmodel import Session

from review_app import input_policy
from review_app.errors import InputError, PermissionDenied
from storage import audit, reviewers
from storage.engine import read_only
from storage.models import REVIEWER_ROLES, Reviewer

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
    import tomllib  # only here: every command imports this module, few read the file

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
    return PermissionDenied(
        f"{actor.name} is {role_with_article(role)}; this needs {role_with_article(minimum)}"
    )


def role_words(role: str) -> str:
    """A role's name as words: ``"policy owner"``."""
    return role.replace("_", " ")


def is_self(actor: Actor, name: str) -> bool:
    """Whether ``name`` is the signed-in person acting (the command line's operator is
    nobody's name: ``operator`` is reserved)."""
    return actor.reviewer_id is not None and actor.name == name


def role_with_article(role: str) -> str:
    """``"a reviewer"``, ``"a policy owner"``, ``"an admin"``."""
    words = role_words(role)
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
