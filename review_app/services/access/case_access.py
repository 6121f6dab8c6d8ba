"""Who may open which case: the rule every case-reading service applies.

A policy owner or admin may open any stored case. A reviewer may open only the cases in
their queue: assigned to them, or that they have labeled. A reviewer asking for a case
that is not theirs and for one that does not exist gets the same refusal, so they cannot
tell other people's case ids from made-up ones. Ids pass the input policy's id rules
before any query.
"""

from __future__ import annotations

from sqlalchemy import Engine
from sqlmodel import Session

from review_app import input_policy
from review_app.errors import InputError, NotFound, PermissionDenied
from review_app.services.access.actors import Actor, authorize
from storage import assignments
from storage.engine import read_only


def checked_case_id(case_id: object) -> str:
    """A case id given by a face (the address, a typed box) put through the input
    policy's id rules (:func:`~review_app.input_policy.check_case_id`). An id no case
    can have (a NUL, a control or bidirectional character, over 200 characters) is
    ``NotFound`` like any unknown id, on SQLite and PostgreSQL alike: it never
    reaches the database (PostgreSQL refuses a NUL with an error of its own)."""
    try:
        return input_policy.check_case_id(case_id)
    except InputError:
        shown = str(case_id)
        shown = shown if len(shown) <= 60 else shown[:60] + "…"
        raise NotFound(f"no case {shown!r} in the database") from None


def not_in_queue(actor: Actor, case_id: str) -> PermissionDenied:
    """The one refusal a reviewer gets for a case that is not theirs, whether or not it
    exists: a reviewer cannot tell the ids of other people's cases from made-up ones."""
    return PermissionDenied(f"case {case_id!r} is not in {actor.name}'s queue")


def check_case_access(
    actor: Actor, found: tuple[str, bool] | None, *, case_id: str
) -> tuple[str, bool]:
    """Refuse unless ``found`` (:func:`storage.assignments.case_hash_and_access` for the
    actor) lets the actor at the case: a policy owner or admin any stored case
    (``NotFound`` for a missing one), a reviewer only the cases assigned to them or
    that they have labeled (the same ``PermissionDenied`` for a missing case)."""
    if actor.has_role("policy_owner"):
        if found is None:
            raise NotFound(f"no case {case_id!r} in the database")
        return found
    if found is None or not found[1]:
        raise not_in_queue(actor, case_id)
    return found


def may_open_case(engine: Engine, actor: Actor, *, case_id: str) -> Actor:
    """Refuse unless the actor may open the case: a policy owner or admin any case, a
    reviewer the cases assigned to them or that they have labeled (a case that does not
    exist gets a reviewer the same answer as one that is not theirs). Returns the actor
    with its current role. Raises ``PermissionDenied``."""
    actor = authorize(engine, actor, "reviewer")
    if actor.has_role("policy_owner"):
        return actor
    assert actor.reviewer_id is not None
    case_id = checked_case_id(case_id)
    with Session(read_only(engine)) as session:
        found = assignments.case_hash_and_access(
            session, case_id=case_id, reviewer_id=actor.reviewer_id
        )
    check_case_access(actor, found, case_id=case_id)
    return actor
