"""Issued actors for tests: services refuse an ``Actor`` built by hand."""

from __future__ import annotations

from sqlalchemy import Engine

from review_app.rubrics.model import Rubric
from review_app.services.access.actors import Actor, operator_actor, sign_in
from review_app.services.team.people import add_person
from review_app.services.team.queue import assign_cases


def operator() -> Actor:
    """The command line's admin."""
    return operator_actor()


def signed_in(engine: Engine, name: str, *, role: str | None = None) -> Actor:
    """``name`` signed in (through OIDC); with ``role``, made that role first by the operator."""
    if role is not None:
        add_person(engine, operator_actor(), name=name, role=role)
    return sign_in(engine, name=name, auth_mode="oidc")


def assign(engine: Engine, rubric: Rubric, name: str, *case_ids: str) -> None:
    """Put the cases in ``name``'s queue (as the operator): a reviewer labels only those."""
    assign_cases(
        engine,
        operator_actor(),
        rubric=rubric,
        reviewers=[name],
        overlap=1_000,
        case_ids=list(case_ids),
    )
