"""``judge estimate --by`` and ``assign --by-stratum`` on real databases."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import numpy as np
import ppi_py
import pytest
from scipy import stats
from sqlalchemy import Engine, select
from sqlmodel import Session

from review_app.errors import InputError
from review_app.services.access.actors import operator_actor
from review_app.services.judging.estimate import break_rate_estimate
from review_app.services.judging.judge_import import import_verdicts
from review_app.services.judging.runs import list_judge_runs
from review_app.services.judging.strata import stratified_estimate
from review_app.services.judging.stratified_audit import allocation_plan, draw_stratified_sample
from review_app.services.team.audit_samples import draw_audit_sample
from storage.models import AuditSample, AuditUnit
from tests.conftest import Database
from tests.corpus_world import CorpusWorld
from tests.judge_support import run_review_app, write_jsonl

OPERATOR = operator_actor()
BREAKS = ["scope_break", "tone_break", "authority_break"]
Z = float(stats.norm.ppf(0.975))
STRATUM_KEYS = {"stratum", "weight", "n_units", "n_gold", "lambda", "value", "ci95", "judge_kappa"}


def position_bin(position: int) -> str:
    for low, high, label in (
        (1, 1, "1"),
        (2, 2, "2"),
        (3, 4, "3-4"),
        (5, 8, "5-8"),
        (9, 16, "9-16"),
    ):
        if low <= position <= high:
            return label
    return "17+"


class World(CorpusWorld):
    """A corpus whose judge is right on 60% of the first two answers and on 97% of the
    later ones: calibrated overall, broken at the start of the conversation."""

    def __init__(self, engine: Engine, tmp_path: Path) -> None:
        super().__init__(engine, tmp_path, cases=70, events=26, seed=4)
        self.position: dict[tuple[str, int], int] = {}
        for case in self.cases:
            turns = [e["turn"] for e in case["transcript"] if e["actor"] == "assistant"]
            for ordinal, turn in enumerate(sorted(turns), start=1):
                self.position[(case["case_id"], turn)] = ordinal
        rng = np.random.default_rng(12)
        self.truth = {
            u: str(rng.choice(BREAKS)) if rng.random() < 0.25 else "in_role" for u in self.units
        }
        self.judge = {}
        for unit, code in self.truth.items():
            right = 0.6 if self.position[unit] <= 2 else 0.97
            if rng.random() < right:
                self.judge[unit] = code
            else:
                self.judge[unit] = "in_role" if code != "in_role" else str(rng.choice(BREAKS))
        rows = [
            {"case_id": c, "turn": t, "judge": "j", "prompt_version": "v1", "model": "m",
             "label": code}
            for (c, t), code in self.judge.items()
        ]  # fmt: skip
        import_verdicts(
            engine, OPERATOR, write_jsonl(tmp_path / "v.jsonl", rows), rubric=self.rubric
        )
        self.run_id = list_judge_runs(engine, OPERATOR, rubric=self.rubric)[0].id

    def drawn(self) -> list[tuple[str, int]]:
        with Session(self.engine) as session:
            return sorted((u.case_id, u.turn) for u in session.scalars(select(AuditUnit)))


def breaks(codes) -> np.ndarray:
    return np.array([code != "in_role" for code in codes], dtype=float)


def test_stratified_estimate_is_ppi_py_per_position_combined(
    database: Database, tmp_path: Path
) -> None:
    world = World(database.engine, tmp_path)
    world.label(world.units[:2], "people")  # rita and sam exist before the draw
    draw_audit_sample(database.engine, OPERATOR, rubric=world.rubric, size=260, seed=5,
                      reviewers=["rita", "sam"])  # fmt: skip
    audited = world.drawn()
    world.label(audited, "audit")
    block = stratified_estimate(
        database.engine, OPERATOR, rubric=world.rubric, run_id=world.run_id, by="position",
        n_resamples=40,
    )  # fmt: skip
    assert block["by"] == "position" and block["gold_source"] == "audit samples"
    assert [row["stratum"] for row in block["strata"]] == ["1", "2", "3-4", "5-8", "9-16"]
    audited_set = set(audited)
    values, variances, weights = [], [], []
    for row in block["strata"]:
        assert set(row) >= STRATUM_KEYS
        inside = [u for u in world.units if position_bin(world.position[u]) == row["stratum"]]
        gold = [u for u in inside if u in audited_set]
        rest = [u for u in inside if u not in audited_set]
        y = breaks(world.truth[u] for u in gold)
        f = breaks(world.judge[u] for u in gold)
        f_u = breaks(world.judge[u] for u in rest)
        value = float(np.ravel(ppi_py.ppi_mean_pointestimate(y, f, f_u))[0])
        low, high = (float(np.ravel(b)[0]) for b in ppi_py.ppi_mean_ci(y, f, f_u, alpha=0.05))
        assert row["n_units"] == len(inside) and row["n_gold"] == len(gold)
        assert row["weight"] == pytest.approx(len(inside) / len(world.units))
        assert row["value"] == pytest.approx(value, abs=1e-9)
        assert row["ci95"] == pytest.approx([max(0, low), min(1, high)], abs=1e-9)
        values.append(value)
        variances.append(((high - low) / (2 * Z)) ** 2)
        weights.append(len(inside) / len(world.units))
    value = float(np.dot(weights, values))
    half = Z * float(np.sqrt(np.dot(np.square(weights), variances)))
    assert block["value"] == pytest.approx(value, abs=1e-9)
    assert block["ci95"] == pytest.approx([value - half, value + half], abs=1e-9)
    early = [s for s in block["sentences"] if s.startswith("Where position is ")]
    assert early and all(
        s.startswith(("Where position is 1,", "Where position is 2,")) for s in early
    )
    assert "well below" in early[0] and "--by-stratum position" in early[0]
    assert block["budget"]["width_neyman"] < block["budget"]["width"]

    estimate = break_rate_estimate(
        database.engine, OPERATOR, rubric=world.rubric, run_id=world.run_id, by="position",
        n_resamples=40,
    )  # fmt: skip
    assert estimate["stratified"]["value"] == pytest.approx(block["value"])
    # a uniform draw only: the plain estimate is unweighted PPI++ on it
    y = breaks(world.truth[u] for u in audited)
    f = breaks(world.judge[u] for u in audited)
    f_u = breaks(world.judge[u] for u in world.units if u not in audited_set)
    assert estimate["ppi"]["value"] == pytest.approx(
        float(np.ravel(ppi_py.ppi_mean_pointestimate(y, f, f_u))[0]), abs=1e-9
    )


def test_a_draw_by_stratum_records_its_design_and_the_estimates_weigh_it(
    database: Database, tmp_path: Path
) -> None:
    world = World(database.engine, tmp_path)
    world.label(world.units[:2], "people")
    draw_audit_sample(database.engine, OPERATOR, rubric=world.rubric, size=90, seed=1,
                      reviewers=["rita", "sam"])  # fmt: skip
    pilot = world.drawn()
    world.label(pilot, "pilot")
    plan = allocation_plan(
        database.engine, OPERATOR, rubric=world.rubric, run_id=world.run_id, by="position",
        size=150,
    )  # fmt: skip
    assert sum(row["allocated"] for row in plan.strata) == 150
    per_unit = {row["stratum"]: row["allocated"] / row["units"] for row in plan.strata}
    # the judge errs far more in the first answers: those strata get more audits
    assert per_unit["1"] > 2 * per_unit["9-16"]
    assert plan.budget["width_neyman"] < plan.budget["width_uniform"]
    sample = draw_stratified_sample(
        database.engine, OPERATOR, rubric=world.rubric, run_id=world.run_id, by="position",
        size=150, seed=3, reviewers=["rita", "sam"],
    )  # fmt: skip
    document = sample.to_dict()
    assert document["design"] == "stratified" and document["by"] == "position"
    assert len(document["units"]) == 150
    with Session(database.engine) as session:
        stored = session.scalars(
            select(AuditSample).where(AuditSample.design == "stratified")
        ).one()
        rows = session.scalars(select(AuditUnit).where(AuditUnit.sample_id == stored.id)).all()
    assert (stored.stratified_by, stored.run_id, stored.size) == ("position", world.run_id, 150)
    counts = Counter(r.stratum for r in rows)
    for row in plan.strata:
        assert counts.get(row["stratum"], 0) == row["allocated"]
    for r in rows:
        (c, t) = (r.case_id, r.turn)
        assert position_bin(world.position[(c, t)]) == r.stratum
        plan_row = next(p for p in plan.strata if p["stratum"] == r.stratum)
        assert r.probability == pytest.approx(plan_row["allocated"] / plan_row["remaining"])
        assert (c, t) not in set(pilot)
    stratified = sorted((r.case_id, r.turn) for r in rows)
    world.label(stratified, "stratified")

    # The plain estimate weighs each gold turn by its position bin's inverse share audited.
    gold = pilot + stratified
    cell = {u: position_bin(world.position[u]) for u in world.units}
    totals = Counter(cell.values())
    audited_per = Counter(cell[u] for u in gold)
    w = np.array([totals[cell[u]] / audited_per[cell[u]] for u in gold])
    y = breaks(world.truth[u] for u in gold)
    f = breaks(world.judge[u] for u in gold)
    f_u = breaks(world.judge[u] for u in world.units if u not in set(gold))
    estimate = break_rate_estimate(
        database.engine, OPERATOR, rubric=world.rubric, run_id=world.run_id, by="lane",
        n_resamples=0,
    )  # fmt: skip
    assert estimate["ppi"]["value"] == pytest.approx(
        float(np.ravel(ppi_py.ppi_mean_pointestimate(y, f, f_u, w=w))[0]), abs=1e-9
    )
    low, high = (float(np.ravel(b)[0]) for b in ppi_py.ppi_mean_ci(y, f, f_u, alpha=0.05, w=w))
    assert estimate["ppi"]["ci95"] == pytest.approx([max(0, low), min(1, high)], abs=1e-9)
    truth_rate = float(np.mean(breaks(world.truth.values())))
    assert low <= truth_rate <= high
    # by lane the draws' position cells differ within a stratum: weighted there
    assert any(row["weighted"] for row in estimate["stratified"]["strata"])
    by_position = stratified_estimate(
        database.engine, OPERATOR, rubric=world.rubric, run_id=world.run_id, by="position",
        n_resamples=0,
    )  # fmt: skip
    assert not any(row["weighted"] for row in by_position["strata"])


def test_the_commands(database: Database, tmp_path: Path) -> None:
    world = World(database.engine, tmp_path)
    world.label(world.units[:2], "people")
    run = str(world.run_id)
    done = run_review_app(
        "assign", "--rubric", "role-adherence@1", "--reviewers", "rita,sam", "--audit-sample",
        "60", "--by-stratum", "lane", "--run", run, "--seed", "2", "--json",
        db=database.url, home=tmp_path,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    document = json.loads(done.stdout)
    assert set(document) == {
        "sample_id", "design", "by", "run", "population", "size", "seed", "strata", "budget",
        "units", "earlier_with_seed",
    }  # fmt: skip
    assert document["earlier_with_seed"] is None
    again = run_review_app(
        "assign", "--rubric", "role-adherence@1", "--reviewers", "rita,sam", "--audit-sample",
        "10", "--by-stratum", "lane", "--run", run, "--seed", "2",
        db=database.url, home=tmp_path,
    )  # fmt: skip
    assert again.returncode == 0, again.stderr
    assert (
        f"seed 2 was used before: audit sample {document['sample_id']} drew 60 turns on "
    ) in again.stdout
    assert "by the command line (operator). This is a new sample" in again.stdout
    assert document["size"] == 60 and {u["stratum"] for u in document["units"]} <= {
        "violation", "invalid", "missing-context", "no-contract", "pass",
    }  # fmt: skip
    world.label([(u["case_id"], u["turn"]) for u in document["units"]], "lane")
    estimate = run_review_app(
        "judge", "estimate", "--rubric", "role-adherence@1", "--run", run, "--by", "lane",
        "--resamples", "20", "--json", db=database.url, home=tmp_path,
    )  # fmt: skip
    assert estimate.returncode == 0, estimate.stderr
    stratified = json.loads(estimate.stdout)["stratified"]
    assert {"value", "ci95", "by", "strata"} <= set(stratified)
    for row in stratified["strata"]:
        assert set(row) >= STRATUM_KEYS
    text = run_review_app(
        "judge", "estimate", "--rubric", "role-adherence@1", "--run", run, "--by", "lane",
        "--resamples", "0", db=database.url, home=tmp_path,
    )  # fmt: skip
    assert "by lane: break rate" in text.stdout
    for args, message in [
        (["--by-stratum", "lane"], "--by-stratum: needs --run RUN"),
        (["--by-stratum", "lane", "--run", run], "--by-stratum: needs --audit-sample K"),
        (["--by-stratum", "mood", "--run", run, "--audit-sample", "5"],
         "--by: must be one of position, lane, code, finding, got 'mood'"),
        (["--run", run, "--audit-sample", "5"], "--run: only with --by-stratum BY"),
    ]:  # fmt: skip
        bad = run_review_app(
            "assign", "--rubric", "role-adherence@1", "--reviewers", "rita", *args,
            db=database.url, home=tmp_path,
        )  # fmt: skip
        assert bad.returncode == 2 and message in bad.stderr, bad.stderr
    bad = run_review_app(
        "judge", "estimate", "--rubric", "role-adherence@1", "--run", run, "--by", "lane",
        "--level", "conversation", db=database.url, home=tmp_path,
    )  # fmt: skip
    assert bad.returncode == 2 and "--by" in bad.stderr


def test_allocation_refuses_more_than_is_left(database: Database, tmp_path: Path) -> None:
    world = World(database.engine, tmp_path)
    with pytest.raises(InputError) as caught:
        allocation_plan(
            database.engine, OPERATOR, rubric=world.rubric, run_id=world.run_id, by="finding",
            size=len(world.units) + 1,
        )  # fmt: skip
    assert "are not in an audit sample yet" in str(caught.value)
