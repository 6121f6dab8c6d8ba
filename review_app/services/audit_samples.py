"""Audit samples: turns drawn uniformly at random, so that their gold is a random sample.

Gold from adjudication and unanimous reviewers is not a random sample (disagreements,
where the breaks are, wait for adjudication; unanimous units are the easy ones). A
prediction-powered estimate of the break rate is valid only with gold on a uniform
random sample of the judged units: ``review-app assign --audit-sample K --seed S``
draws K assistant turns uniformly at random (without replacement, and never a turn an
earlier sample of the rubric version already drew, so all samples together stay one
uniform sample), records the draw, and queues the drawn turns' conversations.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime

import numpy as np
from sqlalchemy import Engine
from sqlmodel import Session

import storage.audit_samples
import storage.reviewers
from review_app.errors import InputError
from review_app.rubrics import Rubric
from review_app.services.people import Actor, assignable_people, authorize
from review_app.services.queue import AssignmentReport, assign_cases
from storage import audit
from storage.engine import read_only


@dataclass(frozen=True)
class AuditReport:
    sample_id: int
    size: int
    population: int
    seed: int
    cases: int
    assignment: AssignmentReport

    def line(self) -> str:
        return (
            f"audit sample {self.sample_id}: drew {self.size} of {self.population} turns "
            f"uniformly at random (seed {self.seed}) from {self.cases} cases; "
            + self.assignment.line()
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
            session, rubric_id=rubric.id, version=rubric.version
        )
        population = [u for u in storage.audit_samples.assistant_units(session) if u not in done]
        if size > len(population):
            raise InputError(
                f"asks for {size} turns but only {len(population)} assistant turns are not "
                "in an audit sample yet",
                field="--audit-sample",
            )
        chosen = np.random.default_rng(seed).choice(len(population), size=size, replace=False)
        units = sorted(population[int(i)] for i in chosen)
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
    return AuditReport(sample_id, size, len(population), seed, len(case_ids), assignment)


def audited_units(engine: Engine, actor: Actor, *, rubric: Rubric) -> set[tuple[str, int]]:
    """Every turn drawn by an audit sample of the rubric version (policy owners)."""
    authorize(engine, actor, "policy_owner")
    with Session(read_only(engine)) as session:
        return storage.audit_samples.audited_units(
            session, rubric_id=rubric.id, version=rubric.version
        )
