"""The team as a policy owner sees it: who reviews, how far each has come, what is
left unassigned, and one sentence saying what to do next.

The team page (``review_app/ui/views/team.py``) shows this and calls the same
services the commands call to change it: :func:`~review_app.services.team.queue.assign_cases`
(``review-app assign``), :func:`~review_app.services.team.audit_samples.draw_audit_sample`
(``review-app assign --audit-sample``) and the people services (``review-app reviewers``).
"""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy import Engine
from sqlmodel import Session

import storage.cases
from review_app.rubrics.model import Rubric
from review_app.services.access.actors import Actor, authorize
from storage import assignments, reviewers
from storage.engine import read_only


@dataclass(frozen=True)
class MemberProgress:
    name: str
    display_name: str | None
    role: str
    active: bool
    assigned: int
    finished: int

    @property
    def open(self) -> int:
        return self.assigned - self.finished


@dataclass(frozen=True)
class TeamView:
    rubric: str
    members: list[MemberProgress]
    cases: int
    unassigned_cases: int

    @property
    def open_cases(self) -> int:
        return sum(m.open for m in self.members if m.active)

    def next_step(self) -> str:
        """What the numbers mean for the policy owner, in one sentence."""
        active = [m for m in self.members if m.active]
        if not active:
            return "No one is on the team yet: an admin adds people below."
        if self.cases == 0:
            return "No conversations are stored yet: import cases first (Import page)."
        if not any(m.assigned for m in active):
            return (
                f"No case is in anyone's queue under {self.rubric}: assign cases below, "
                "two or more reviewers per case so their agreement can be measured."
            )
        behind = [m for m in active if m.open]
        if self.unassigned_cases and not behind:
            return (
                f"Every queue is done and {self.unassigned_cases} case"
                f"{'s are' if self.unassigned_cases != 1 else ' is'} in nobody's queue: "
                "assign more below, or draw an audit sample for the judge's estimate."
            )
        if behind:
            slowest = max(behind, key=lambda m: m.open)
            return (
                f"{self.open_cases} queued case{'s' if self.open_cases != 1 else ''} still "
                f"open; {slowest.name} has the most ({slowest.open}). Agreement and "
                "adjudication are worth reading once the overlapping cases are done."
            )
        return (
            "Every assigned case is done: read the agreement page, then adjudicate the "
            "disagreements."
        )


def team_view(engine: Engine, actor: Actor, *, rubric: Rubric) -> TeamView:
    """Everyone with their queue's progress under ``rubric`` (policy owners and admins)."""
    authorize(engine, actor, "policy_owner")
    with Session(read_only(engine)) as session:
        progress = assignments.progress_by_reviewer(
            session, rubric_id=rubric.id, version=rubric.version
        )
        people = reviewers.list_reviewers(session, active_only=False)
        unassigned = assignments.cases_without_reviewer(
            session, rubric_id=rubric.id, version=rubric.version
        )
        cases = storage.cases.case_count(session)
    members = [
        MemberProgress(
            name=person.name,
            display_name=person.display_name,
            role=person.role,
            active=person.active,
            assigned=progress.get(person.id or 0, (0, 0))[0],
            finished=progress.get(person.id or 0, (0, 0))[1],
        )
        for person in people
    ]
    members.sort(key=lambda m: (not m.active, m.name))
    return TeamView(rubric.ref, members, cases, unassigned)
