"""Audit samples: turns drawn uniformly at random, so that their gold is a random sample.

Gold from adjudication and unanimous reviewers is not a random sample (disagreements,
where the breaks are, wait for adjudication; unanimous units are the easy ones). A
prediction-powered estimate of the break rate is valid only with gold on a uniform
random sample of the judged units: ``review-app assign --audit-sample K --seed S``
draws K assistant turns uniformly at random (without replacement, and never a turn an
earlier uniform or stratified sample of the rubric version already drew, so all samples
together stay uniform within the strata of their draws), records the draw, and queues
the drawn turns' conversations.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime

import numpy as np
from sqlalchemy import Engine
from sqlmodel import Session

import storage.audit_samples
import storage.cases
import storage.reviewers
from review_app.errors import InputError
from review_app.rubrics.model import Rubric
from review_app.services.access.actors import Actor, authorize
from review_app.services.team.people import assignable_people
from review_app.services.team.queue import AssignmentReport, assign_cases
from storage import audit
from storage.engine import read_only


@dataclass(frozen=True)
class EarlierDraw:
    """The first earlier draw of the same design with the same seed (and run)."""

    sample_id: int
    size: int
    at: datetime
    by: str | None
    """The person who drew it; ``None``: the command line."""
    draws: int
    """How many draws used the seed before this one."""

    def sentence(self, seed: int, *, same_turns: bool) -> str:
        who = self.by if self.by is not None else "the command line (operator)"
        times = f" (used {self.draws} times so far)" if self.draws > 1 else ""
        again = (
            "the same seed and scores draw the same turns again; choose another seed for "
            "other turns"
            if same_turns
            else "it draws among the turns no earlier sample drew"
        )
        return (
            f"seed {seed} was used before{times}: audit sample {self.sample_id} drew "
            f"{self.size} turns on {self.at:%Y-%m-%d %H:%M} UTC, by {who}. This is a new "
            f"sample, not that one again: {again}"
        )

    def to_dict(self) -> dict[str, object]:
        return {
            "sample_id": self.sample_id,
            "size": self.size,
            "at": self.at.isoformat(timespec="seconds"),
            "by": self.by,
            "draws": self.draws,
        }


def earlier_draw(
    session: Session, rubric: Rubric, *, design: str, seed: int, run_id: int | None = None
) -> EarlierDraw | None:
    """The first earlier draw of ``design`` with ``seed`` (from run ``run_id`` when
    given) for the rubric version, or None: a building block of the draws, which
    authorized their actor (it takes their open Session)."""
    found = storage.audit_samples.draws_with_seed(
        session,
        rubric_id=rubric.id,
        version=rubric.version,
        design=design,
        seed=seed,
        run_id=run_id,
    )
    if not found:
        return None
    sample_id, size, at, by = found[0]
    return EarlierDraw(sample_id, size, at, by, len(found))


@dataclass(frozen=True)
class AuditReport:
    sample_id: int
    size: int
    population: int
    seed: int
    cases: int
    assignment: AssignmentReport
    earlier: EarlierDraw | None = None
    """The first draw with the same seed, when there was one."""

    def line(self) -> str:
        return (
            f"audit sample {self.sample_id}: drew {self.size} of {self.population} turns "
            f"uniformly at random (seed {self.seed}) from {self.cases} cases; "
            + self.assignment.line()
            + (". " + self.earlier.sentence(self.seed, same_turns=False) if self.earlier else "")
        )


def draw_audit_sample(
    engine: Engine,
    actor: Actor,
    *,
    rubric: Rubric,
    size: int,
    seed: int,
    reviewers: list[str],
    overlap: int = 2,
) -> AuditReport:
    """Draw ``size`` turns uniformly at random, record the draw, queue their cases.

    The draw is ``numpy.random.default_rng(seed).choice(population, size,
    replace=False)`` over the sorted assistant turns not drawn before for this rubric
    version, so the same database and seed give the same sample.
    """
    actor = authorize(engine, actor, "policy_owner")
    if isinstance(size, bool) or size < 1:
        raise InputError(f"must be at least 1, got {size}", field="--audit-sample")
    if seed < 0:
        raise InputError(f"must be zero or more, got {seed}", field="--seed")
    if not reviewers:
        raise InputError("choose at least one reviewer", field="reviewers")
    with Session(engine) as session:
        assignable_people(session, names=reviewers)
        done = storage.audit_samples.audited_units(
            session, rubric_id=rubric.id, version=rubric.version, design=("uniform", "stratified")
        )
        population = [u for u in storage.cases.assistant_units(session) if u not in done]
        if size > len(population):
            raise InputError(
                f"asks for {size} turns but only {len(population)} assistant turns are not "
                "in an audit sample yet",
                field="--audit-sample",
            )
        chosen = np.random.default_rng(seed).choice(len(population), size=size, replace=False)
        units = sorted(population[int(i)] for i in chosen)
        earlier = earlier_draw(session, rubric, design="uniform", seed=seed)
        sample_id = storage.audit_samples.insert_audit_sample(
            session,
            rubric_id=rubric.id,
            version=rubric.version,
            seed=seed,
            population=len(population),
            units=units,
            created_by=actor.reviewer_id,
            now=datetime.now(UTC),
        )
        audit.add_entry(
            session,
            actor=actor.name,
            action="audit_sample",
            object_type="rubric",
            object_key=rubric.ref,
            summary={
                "sample": sample_id,
                "size": size,
                "seed": seed,
                "population": len(population),
            },
        )
        session.commit()
    case_ids = sorted({case_id for case_id, _ in units})
    assignment = assign_cases(
        engine, actor, rubric=rubric, reviewers=reviewers, overlap=overlap, case_ids=case_ids
    )
    return AuditReport(sample_id, size, len(population), seed, len(case_ids), assignment, earlier)


def audited_units(
    engine: Engine, actor: Actor, *, rubric: Rubric, designs: tuple[str, ...] = ("uniform",)
) -> set[tuple[str, int]]:
    """Every turn drawn by an audit sample of ``designs`` of the rubric version (policy
    owners; uniform draws by default)."""
    authorize(engine, actor, "policy_owner")
    with Session(read_only(engine)) as session:
        return storage.audit_samples.audited_units(
            session, rubric_id=rubric.id, version=rubric.version, design=designs
        )
