"""Who is using the app: OIDC sign-in, a trusted proxy header, or local single-user mode.

``REVIEW_APP_AUTH`` chooses: ``oidc`` (Streamlit's ``st.login``; needs an ``[auth]``
section in secrets.toml), ``proxy`` (a header set by a trusted reverse proxy; the
header name is ``REVIEW_APP_PROXY_HEADER``, default ``X-Forwarded-User``, and the
mode must be chosen explicitly because anyone can send a header to an exposed
server), or ``local``. Without the variable: ``oidc`` when secrets have ``[auth]``,
else ``local``, where the one person using the app is an admin named
``REVIEW_APP_LOCAL_USER`` (default: the operating-system user).

:func:`current_actor` turns the identity into the session's signed-in actor.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import streamlit as st

from review_app.services.access.actors import (
    Actor,
    authorize,
    local_user_name,
    proxy_identity,
    sign_in,
)
from review_app.ui.cached import engine

AUTH_ENV = "REVIEW_APP_AUTH"
PROXY_HEADER_ENV = "REVIEW_APP_PROXY_HEADER"
AUTH_MODES = ("oidc", "proxy", "local")


@dataclass(frozen=True)
class Identity:
    name: str
    mode: str
    display_name: str | None = None
    first_role: str = "reviewer"


def _secrets_have_auth() -> bool:
    try:
        return "auth" in st.secrets
    except Exception:  # no secrets.toml at all
        return False


def auth_mode() -> str:
    chosen = os.environ.get(AUTH_ENV, "").strip().lower()
    if chosen:
        if chosen not in AUTH_MODES:
            raise ValueError(f"{AUTH_ENV} must be one of {', '.join(AUTH_MODES)}, not {chosen!r}")
        return chosen
    return "oidc" if _secrets_have_auth() else "local"


def proxy_header_name() -> str:
    return os.environ.get(PROXY_HEADER_ENV, "X-Forwarded-User")


def read_proxy_header() -> str | None:
    """The identity header of this session's request (a seam tests can replace)."""
    value = st.context.headers.get(proxy_header_name())
    return value.strip() if value else None


def current_identity() -> Identity | None:
    """The identity of this browser session, or ``None`` when nobody is signed in."""
    mode = auth_mode()
    if mode == "oidc":
        if not st.user.is_logged_in:
            return None
        email = st.user.get("email")
        subject = st.user.get("sub")
        name = str(email or subject or "")
        if not name:
            return None
        display = st.user.get("name")
        return Identity(name=name, mode="oidc", display_name=str(display) if display else None)
    if mode == "proxy":
        # UTF-8 taken back from the Latin-1 the server decoded, NFKC, the name rules and
        # the reserved names: a value breaking them signs nobody in, as a missing one.
        named = proxy_identity(read_proxy_header())
        return Identity(name=named, mode="proxy") if named else None
    return Identity(name=local_user_name(), mode="local", first_role="admin")


def current_actor() -> Actor | None:
    """The signed-in actor, or ``None`` (the entry script then shows the sign-in)."""
    identity = current_identity()
    if identity is None:
        return None
    kept = st.session_state["signed_in"]
    if kept is not None and kept[0] == identity:
        # Signed in at an earlier run of this session: check the issued actor again
        # (its seal, and its current role and active flag from the database).
        return authorize(engine(), kept[1], "reviewer")
    signed_in = sign_in(
        engine(),
        name=identity.name,
        auth_mode=identity.mode,
        display_name=identity.display_name,
        first_role=identity.first_role,
    )
    st.session_state["signed_in"] = (identity, signed_in)
    return signed_in
