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
from review_app.rubrics import Rubric
from review_app.services.judging.runs import run_verdicts
from review_app.services.review.queue import AssignmentReport, assign_cases
from review_app.services.team.people import Actor, assignable_people, authorize
from review_app.stats.active import draw_by_uncertainty
from storage import audit
from storage.engine import read_only
from storage.judging import VerdictColumns


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


@dataclass(frozen=True)
class UncertaintySample:
    sample_id: int
    run: int
    population: int
    expected_size: float
    mix: float
    seed: int
    units: list[dict[str, object]]
    assignment: AssignmentReport | None

    def to_dict(self) -> dict[str, object]:
        return {
            "sample_id": self.sample_id,
            "design": "uncertainty",
            "run": self.run,
            "population": self.population,
            "expected_size": self.expected_size,
            "units": self.units,
        }

    def line(self) -> str:
        return (
            f"audit sample {self.sample_id}: drew {len(self.units)} of {self.population} "
            f"turns judged by run {self.run}, by the judge's uncertainty (expected "
            f"{self.expected_size:.1f}, mix {self.mix}, seed {self.seed})"
            + ("; " + self.assignment.line() if self.assignment else "")
        )


def scored_turns(columns: VerdictColumns) -> dict[tuple[str, int], float]:
    """``{unit: score}`` of a run's turn verdicts with a score and no error, in
    ``(case_id, turn)`` order."""
    found: dict[tuple[str, int], float] = {}
    for case_id, turn, score, error in zip(
        columns.case_ids, columns.turns, columns.scores, columns.errors, strict=True
    ):
        if turn is not None and score is not None and error is None:
            found[(case_id, int(turn))] = min(1.0, max(0.0, float(score)))
    return dict(sorted(found.items()))


def draw_uncertainty_sample(
    engine: Engine,
    actor: Actor,
    *,
    rubric: Rubric,
    run_id: int,
    size: int,
    seed: int,
    reviewers: list[str],
    mix: float = 0.5,
    overlap: int = 2,
) -> UncertaintySample:
    """Draw each turn run ``run_id`` judged with probability pi from its score
    (:mod:`review_app.stats.active`), record the draw with every drawn turn's
    probability, and queue the drawn turns' cases.

    The draw is one ``numpy.random.default_rng(seed).random()`` per judged turn with a
    score, in ``(case_id, turn)`` order; a turn is drawn when its uniform is below pi.
    """
    actor = authorize(engine, actor, "policy_owner")
    if isinstance(size, bool) or size < 1:
        raise InputError(f"must be at least 1, got {size}", field="--audit-sample")
    if seed < 0:
        raise InputError(f"must be zero or more, got {seed}", field="--seed")
    if not 0.0 <= mix <= 1.0:
        raise InputError(f"must be between 0 and 1, got {mix}", field="--mix")
    if not reviewers:
        raise InputError("choose at least one reviewer", field="reviewers")
    ((_, columns),) = run_verdicts(engine, rubric, [run_id])
    scored = scored_turns(columns)
    if size > len(scored):
        raise InputError(
            f"asks for {size} turns but run {run_id} judged only {len(scored)} turns with a score",
            field="--audit-sample",
        )
    units_all = list(scored)
    pi, drawn = draw_by_uncertainty(
        np.fromiter(scored.values(), dtype=np.float64, count=len(scored)),
        budget=size,
        mix=mix,
        seed=seed,
    )
    rows = np.flatnonzero(drawn).tolist()
    units = [units_all[i] for i in rows]
    chances = [float(pi[i]) for i in rows]
    expected = float(pi.sum())
    with Session(engine) as session:
        assignable_people(session, names=reviewers)
        sample_id = storage.audit_samples.insert_audit_sample(
            session,
            rubric_id=rubric.id,
            version=rubric.version,
            seed=seed,
            population=len(units_all),
            units=units,
            created_by=actor.reviewer_id,
            now=datetime.now(UTC),
            design="uncertainty",
            run_id=run_id,
            mix=mix,
            expected_size=expected,
            probabilities=chances,
        )
        audit.add_entry(
            session,
            actor=actor.name,
            action="audit_sample",
            object_type="rubric",
            object_key=rubric.ref,
            summary={
                "sample": sample_id,
                "design": "uncertainty",
                "run": run_id,
                "size": len(units),
                "expected_size": expected,
                "mix": mix,
                "seed": seed,
                "population": len(units_all),
            },
        )
        session.commit()
    case_ids = sorted({case_id for case_id, _ in units})
    assignment = (
        assign_cases(
            engine, actor, rubric=rubric, reviewers=reviewers, overlap=overlap, case_ids=case_ids
        )
        if case_ids
        else None
    )
    return UncertaintySample(
        sample_id=sample_id,
        run=run_id,
        population=len(units_all),
        expected_size=expected,
        mix=mix,
        seed=seed,
        units=[
            {"case_id": c, "turn": t, "probability": p}
            for (c, t), p in zip(units, chances, strict=True)
        ],
        assignment=assignment,
    )


@dataclass(frozen=True)
class UncertaintyDraw:
    """A stored uncertainty draw from a run's scores (docs/reference.md, "Uncertainty
    audit JSON")."""

    sample_id: int
    population: int
    mix: float | None
    seed: int
    probabilities: dict[tuple[str, int], float]
    """Each drawn unit's probability of being drawn (its pi)."""


def uncertainty_sample(
    engine: Engine, actor: Actor, *, rubric: Rubric, run_id: int
) -> UncertaintyDraw | None:
    """The newest uncertainty draw from run ``run_id``; None when there is none."""
    authorize(engine, actor, "policy_owner")
    with Session(read_only(engine)) as session:
        found = storage.audit_samples.latest_uncertainty_sample(
            session, rubric_id=rubric.id, version=rubric.version, run_id=run_id
        )
    if found is None:
        return None
    sample, probabilities = found
    assert sample.id is not None
    return UncertaintyDraw(
        sample_id=sample.id,
        population=sample.population,
        mix=sample.mix,
        seed=sample.seed,
        probabilities=probabilities,
    )


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
