"""Audits drawn by the judge's uncertainty: turns the judge is least sure of are drawn
more often (with a uniform share, ``mix``), each with its inclusion probability, so
estimates stay unbiased. A preview shows the draw before it is stored; a second draw
with the same seed names the earlier one.
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
from review_app.services.judging.runs import run_verdicts
from review_app.services.team.audit_samples import EarlierDraw, earlier_draw
from review_app.services.team.people import assignable_people
from review_app.services.team.queue import AssignmentReport, assign_cases, plan_assignment
from review_app.stats.active import draw_by_uncertainty
from storage import audit
from storage.engine import read_only
from storage.judging import VerdictColumns


@dataclass(frozen=True)
class UncertaintySample:
    sample_id: int | None
    """``None`` for a preview (:func:`preview_uncertainty_sample`): nothing was stored."""
    run: int
    population: int
    expected_size: float
    mix: float
    seed: int
    units: list[dict[str, object]]
    assignment: AssignmentReport | None
    earlier: EarlierDraw | None = None
    """The first draw from the run with the same seed, when there was one."""

    def to_dict(self) -> dict[str, object]:
        return {
            "sample_id": self.sample_id,
            "design": "uncertainty",
            "run": self.run,
            "population": self.population,
            "expected_size": self.expected_size,
            "units": self.units,
            "earlier_with_seed": None if self.earlier is None else self.earlier.to_dict(),
        }

    def line(self) -> str:
        head = (
            f"audit sample {self.sample_id}: drew"
            if self.sample_id is not None
            else "preview, nothing stored: would draw"
        )
        return (
            f"{head} {len(self.units)} of {self.population} "
            f"turns judged by run {self.run}, by the judge's uncertainty (expected "
            f"{self.expected_size:.1f}, uniform share {self.mix}, seed {self.seed})"
            + ("; " + self.assignment.line() if self.assignment else "")
            + (". " + self.earlier.sentence(self.seed, same_turns=True) if self.earlier else "")
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


def _check_uncertainty_request(size: int, seed: int, mix: float, reviewers: list[str]) -> None:
    if isinstance(size, bool) or size < 1:
        raise InputError(f"must be at least 1, got {size}", field="--audit-sample")
    if seed < 0:
        raise InputError(f"must be zero or more, got {seed}", field="--seed")
    if not 0.0 <= mix <= 1.0:
        raise InputError(f"must be between 0 and 1, got {mix}", field="--mix")
    if not reviewers:
        raise InputError("choose at least one reviewer", field="reviewers")


@dataclass(frozen=True)
class _Drawn:
    population: int
    units: list[tuple[str, int]]
    chances: list[float]
    expected: float

    @property
    def case_ids(self) -> list[str]:
        return sorted({case_id for case_id, _ in self.units})

    def unit_rows(self) -> list[dict[str, object]]:
        return [
            {"case_id": c, "turn": t, "probability": p}
            for (c, t), p in zip(self.units, self.chances, strict=True)
        ]


def _draw_by_uncertainty(
    engine: Engine, rubric: Rubric, *, run_id: int, size: int, seed: int, mix: float
) -> _Drawn:
    """The draw itself (nothing stored): the same arguments give the same turns."""
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
    return _Drawn(
        population=len(units_all),
        units=[units_all[i] for i in rows],
        chances=[float(pi[i]) for i in rows],
        expected=float(pi.sum()),
    )


def _sample_of(
    drawn: _Drawn,
    sample_id: int | None,
    run_id: int,
    mix: float,
    seed: int,
    assignment: AssignmentReport | None,
    earlier: EarlierDraw | None,
) -> UncertaintySample:
    """The result of a draw, or of its preview (``sample_id`` ``None``): built in one
    place, so the preview says what the draw does."""
    return UncertaintySample(
        sample_id=sample_id,
        run=run_id,
        population=drawn.population,
        expected_size=drawn.expected,
        mix=mix,
        seed=seed,
        units=drawn.unit_rows(),
        assignment=assignment,
        earlier=earlier,
    )


def preview_uncertainty_sample(
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
    """What :func:`draw_uncertainty_sample` with the same arguments would draw and
    assign, storing nothing (``sample_id`` is ``None``; policy owners): the turns, the
    (case, reviewer) pairs, and an earlier draw with the same seed."""
    actor = authorize(engine, actor, "policy_owner")
    _check_uncertainty_request(size, seed, mix, reviewers)
    drawn = _draw_by_uncertainty(engine, rubric, run_id=run_id, size=size, seed=seed, mix=mix)
    with Session(read_only(engine)) as session:
        assignable_people(session, names=reviewers)
        earlier = earlier_draw(session, rubric, design="uncertainty", seed=seed, run_id=run_id)
    case_ids = drawn.case_ids
    assignment = (
        plan_assignment(
            engine, actor, rubric=rubric, reviewers=reviewers, overlap=overlap, case_ids=case_ids
        )
        if case_ids
        else None
    )
    return _sample_of(drawn, None, run_id, mix, seed, assignment, earlier)


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
    probability, and queue the drawn turns' cases (each filled up to ``overlap``
    reviewers).

    The draw is one ``numpy.random.default_rng(seed).random()`` per judged turn with a
    score, in ``(case_id, turn)`` order; a turn is drawn when its uniform is below pi.
    A seed used before for the run draws a new sample (the same turns, from the same
    scores) and says what the first one was (:class:`EarlierDraw`).
    """
    actor = authorize(engine, actor, "policy_owner")
    _check_uncertainty_request(size, seed, mix, reviewers)
    drawn = _draw_by_uncertainty(engine, rubric, run_id=run_id, size=size, seed=seed, mix=mix)
    with Session(engine) as session:
        assignable_people(session, names=reviewers)
        earlier = earlier_draw(session, rubric, design="uncertainty", seed=seed, run_id=run_id)
        sample_id = storage.audit_samples.insert_audit_sample(
            session,
            rubric_id=rubric.id,
            version=rubric.version,
            seed=seed,
            population=drawn.population,
            units=drawn.units,
            created_by=actor.reviewer_id,
            now=datetime.now(UTC),
            design="uncertainty",
            run_id=run_id,
            mix=mix,
            expected_size=drawn.expected,
            probabilities=drawn.chances,
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
                "size": len(drawn.units),
                "expected_size": drawn.expected,
                "mix": mix,
                "seed": seed,
                "population": drawn.population,
                "earlier_with_seed": None if earlier is None else earlier.sample_id,
            },
        )
        session.commit()
    case_ids = drawn.case_ids
    assignment = (
        assign_cases(
            engine, actor, rubric=rubric, reviewers=reviewers, overlap=overlap, case_ids=case_ids
        )
        if case_ids
        else None
    )
    return _sample_of(drawn, sample_id, run_id, mix, seed, assignment, earlier)


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
