"""Audits placed where they count: a draw by stratum, sized by Neyman allocation.

``review-app assign --audit-sample K --by-stratum BY --run RUN --seed S`` (and the team
page) splits the turns run RUN judged into the strata of ``BY``
(:mod:`review_app.services.judging.strata`), allocates K audits across them in
proportion to each stratum's size times the spread of the judge's error there
(:func:`review_app.stats.stratified.neyman_allocation`, from the audits so far: a
stratum's spread is ``sd(Y - lam f)`` of its stratified PPI++ on the audited gold, the
pooled one's for strata with too little gold, and where there is no gold at all every
stratum counts alike, an allocation in proportion to size), first bringing each
stratum up to 10 audits while the budget lasts, and draws that many turns uniformly
without replacement within each stratum (never a turn an earlier uniform or stratified
sample drew). Each drawn turn's stratum and probability of being drawn (the share of
its stratum's undrawn turns drawn) are recorded; the estimates weight the gold by the
design of the draws, so they stay valid.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import numpy as np
from sqlalchemy import Engine
from sqlmodel import Session

import storage.audit_samples
from review_app.errors import InputError
from review_app.rubrics.model import Rubric
from review_app.services.access.actors import Actor, authorize
from review_app.services.judging.strata import (
    StrataBudget,
    budget_sentence,
    fit_strata,
    strata_order,
)
from review_app.services.team.audit_samples import EarlierDraw, earlier_draw
from review_app.services.team.people import assignable_people
from review_app.services.team.queue import AssignmentReport, assign_cases
from review_app.stats.core import MIN_PROPORTION_UNITS
from review_app.stats.stratified import neyman_allocation
from storage import audit

__all__ = ["AllocationPlan", "StratifiedSample", "allocation_plan", "draw_stratified_sample"]

DEFAULT_SPREAD = 0.5
"""The spread assumed where no gold tells it at all (the sd of a fair coin's 0/1); a
stratum without enough gold of its own, in a run with some, takes the largest spread
seen (so that it is not starved of audits)."""


@dataclass(frozen=True)
class AllocationPlan:
    """How K more audits would go across the strata, before drawing."""

    by: str
    run: int
    strata: list[dict[str, Any]]
    """``{"stratum", "units", "audited", "remaining", "spread", "allocated",
    "probability"}`` per stratum."""
    budget: StrataBudget
    """The widths are null without an estimate."""
    population: int
    units: dict[str, list[tuple[str, int]]]
    """The undrawn turns of each stratum, sorted."""

    def budget_line(self) -> str:
        if self.budget["width"] is None:
            return (
                "no estimate by stratum yet to project the interval from: the first audits "
                "are spread in proportion to the strata's sizes"
            )
        return budget_sentence(self.budget, by=self.by)


def allocation_plan(
    engine: Engine, actor: Actor, *, rubric: Rubric, run_id: int, by: str, size: int
) -> AllocationPlan:
    """The allocation of ``size`` more audits by ``by`` over run ``run_id``'s judged turns
    (module docstring); nothing is drawn. Policy owners."""
    if isinstance(size, bool) or size < 1:
        raise InputError(f"must be at least 1, got {size}", field="--audit-sample")
    fit = fit_strata(engine, actor, rubric=rubric, run_id=run_id, by=by)
    names = [s for s in strata_order(by) if s in set(fit.strata)]
    names += sorted(set(fit.strata) - set(names))
    members: dict[str, list[tuple[str, int]]] = {name: [] for name in names}
    audited = dict.fromkeys(names, 0)
    for unit, stratum in zip(fit.units, fit.strata, strict=True):
        if unit in fit.audited:
            audited[stratum] += 1
        else:
            members[stratum].append(unit)
    remaining = [len(members[n]) for n in names]
    if size > sum(remaining):
        raise InputError(
            f"asks for {size} turns but only {sum(remaining)} turns judged by run {run_id} "
            "are not in an audit sample yet",
            field="--audit-sample",
        )
    spreads = [fit.result.spread(name) for name in names]
    known = [s for s in spreads if s is not None]
    spreads_used = [
        s if s is not None else (max(known) if known else DEFAULT_SPREAD) for s in spreads
    ]
    sizes = [audited[n] + len(members[n]) for n in names]
    allocated = neyman_allocation(
        sizes, spreads_used, budget=size, existing=[audited[n] for n in names],
        capacity=remaining, minimum=MIN_PROPORTION_UNITS,
    )  # fmt: skip
    rows = [
        {
            "stratum": name,
            "units": sizes[i],
            "audited": audited[name],
            "remaining": remaining[i],
            "spread": spreads[i],
            "allocated": int(allocated[i]),
            "probability": (int(allocated[i]) / remaining[i]) if remaining[i] else 0.0,
        }
        for i, name in enumerate(names)
    ]
    return AllocationPlan(by, fit.run_id, rows, fit.budget(size), sum(remaining), members)


@dataclass(frozen=True)
class StratifiedSample:
    sample_id: int
    plan: AllocationPlan
    seed: int
    units: list[dict[str, Any]]
    assignment: AssignmentReport | None
    earlier: EarlierDraw | None = None
    """The first draw by the same strata of the run with the same seed, if any."""

    def to_dict(self) -> dict[str, Any]:
        return {
            "sample_id": self.sample_id,
            "design": "stratified",
            "by": self.plan.by,
            "run": self.plan.run,
            "population": self.plan.population,
            "size": len(self.units),
            "seed": self.seed,
            "strata": self.plan.strata,
            "budget": self.plan.budget,
            "units": self.units,
            "earlier_with_seed": None if self.earlier is None else self.earlier.to_dict(),
        }

    def line(self) -> str:
        placed = ", ".join(
            f"{row['stratum']} {row['allocated']}" for row in self.plan.strata if row["allocated"]
        )
        return (
            f"audit sample {self.sample_id}: drew {len(self.units)} of {self.plan.population} "
            f"turns judged by run {self.plan.run}, by {self.plan.by} (Neyman allocation, seed "
            f"{self.seed}): {placed}. {self.plan.budget_line()}"
            + ("; " + self.assignment.line() if self.assignment else "")
            + (". " + self.earlier.sentence(self.seed, same_turns=False) if self.earlier else "")
        )


def draw_stratified_sample(
    engine: Engine,
    actor: Actor,
    *,
    rubric: Rubric,
    run_id: int,
    by: str,
    size: int,
    seed: int,
    reviewers: list[str],
    overlap: int = 2,
) -> StratifiedSample:
    """Draw ``size`` turns by stratum (module docstring), record the draw with each turn's
    stratum and probability, and queue their cases.

    Within each stratum, in the order of the plan, ``numpy.random.default_rng(seed)``
    chooses that stratum's allocation from its undrawn turns (sorted) without replacement.
    """
    actor = authorize(engine, actor, "policy_owner")
    if seed < 0:
        raise InputError(f"must be zero or more, got {seed}", field="--seed")
    if not reviewers:
        raise InputError("choose at least one reviewer", field="reviewers")
    plan = allocation_plan(engine, actor, rubric=rubric, run_id=run_id, by=by, size=size)
    rng = np.random.default_rng(seed)
    units: list[tuple[str, int]] = []
    chances: list[float] = []
    strata: list[str] = []
    for row in plan.strata:
        pool = plan.units[row["stratum"]]
        if not row["allocated"]:
            continue
        chosen = rng.choice(len(pool), size=row["allocated"], replace=False)
        for i in sorted(int(i) for i in chosen):
            units.append(pool[i])
            chances.append(row["probability"])
            strata.append(row["stratum"])
    order = sorted(range(len(units)), key=units.__getitem__)
    units = [units[i] for i in order]
    chances = [chances[i] for i in order]
    strata = [strata[i] for i in order]
    with Session(engine) as session:
        assignable_people(session, names=reviewers)
        earlier = earlier_draw(session, rubric, design="stratified", seed=seed, run_id=run_id)
        sample_id = storage.audit_samples.insert_audit_sample(
            session,
            rubric_id=rubric.id,
            version=rubric.version,
            seed=seed,
            population=plan.population,
            units=units,
            created_by=actor.reviewer_id,
            now=datetime.now(UTC),
            design="stratified",
            run_id=run_id,
            expected_size=float(size),
            probabilities=chances,
            stratified_by=by,
            strata=strata,
        )
        audit.add_entry(
            session,
            actor=actor.name,
            action="audit_sample",
            object_type="rubric",
            object_key=rubric.ref,
            summary={
                "sample": sample_id,
                "design": "stratified",
                "by": by,
                "run": run_id,
                "size": len(units),
                "seed": seed,
                "population": plan.population,
                "allocation": {row["stratum"]: row["allocated"] for row in plan.strata},
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
    return StratifiedSample(
        sample_id=sample_id,
        plan=plan,
        seed=seed,
        units=[
            {"case_id": c, "turn": t, "stratum": k, "probability": p}
            for (c, t), k, p in zip(units, strata, chances, strict=True)
        ],
        assignment=assignment,
        earlier=earlier,
    )
