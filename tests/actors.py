"""Issued actors for tests: services refuse an ``Actor`` built by hand."""

from __future__ import annotations

from sqlalchemy import Engine

from review_app.services.people import Actor, add_person, operator_actor, sign_in


def operator() -> Actor:
    """The command line's admin."""
    return operator_actor()


def signed_in(engine: Engine, name: str, *, role: str | None = None) -> Actor:
    """``name`` signed in (through OIDC); with ``role``, made that role first by the operator."""
    if role is not None:
        add_person(engine, operator_actor(), name=name, role=role)
    return sign_in(engine, name=name, auth_mode="oidc")
