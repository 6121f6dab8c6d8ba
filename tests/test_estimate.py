"""Break-rate estimates (PPI++) and audit samples, on real databases."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import ppi_py
import pytest
from sqlalchemy import Engine, func, select
from sqlmodel import Session

from review_app.cli.render_judging import estimate_headline
from review_app.errors import InputError
from review_app.services.access.actors import Actor
from review_app.services.judging.estimate import break_rate_estimate
from review_app.services.judging.judge_import import import_verdicts
from review_app.services.judging.runs import list_judge_runs
from review_app.services.team.audit_samples import draw_audit_sample
from storage.models import AuditSample, AuditUnit
from tests.conftest import Database
from tests.corpus_world import CorpusWorld
from tests.judge_support import write_jsonl

OPERATOR = Actor.operator()
BREAKS = ["scope_break", "tone_break", "authority_break"]


class World(CorpusWorld):
    def __init__(self, engine: Engine, tmp_path: Path) -> None:
        super().__init__(engine, tmp_path, cases=40, events=25, seed=11)
        rng = np.random.default_rng(5)
        # Breaks cluster on later turns, so the first turns are an easy, biased sample.
        self.truth = {
            unit: (str(rng.choice(BREAKS)) if rng.random() < 0.08 + 0.04 * unit[1] else "in_role")
            for unit in self.units
        }
        self.judge: dict[tuple[str, int], str] = {}
        for unit, code in self.truth.items():
            if code != "in_role":
                self.judge[unit] = "in_role" if rng.random() < 0.3 else code
            else:
                self.judge[unit] = "scope_break" if rng.random() < 0.05 else "in_role"
        rows = [
            {"case_id": c, "turn": t, "judge": "j", "prompt_version": "v1", "model": "m",
             "label": code}
            for (c, t), code in self.judge.items()
        ]  # fmt: skip
        path = write_jsonl(tmp_path / "verdicts.jsonl", rows)
        import_verdicts(engine, OPERATOR, path, rubric=self.rubric)
        self.run_id = list_judge_runs(engine, OPERATOR, rubric=self.rubric)[0].id


def expected(world: World, gold_units: list[tuple[str, int]]) -> dict[str, Any]:
    y = np.array([world.truth[u] != "in_role" for u in gold_units], dtype=float)
    f = np.array([world.judge[u] != "in_role" for u in gold_units], dtype=float)
    rest = [u for u in world.units if u not in set(gold_units)]
    f_u = np.array([world.judge[u] != "in_role" for u in rest], dtype=float)
    low, high = ppi_py.ppi_mean_ci(y, f, f_u, alpha=0.05)
    return {
        "value": float(ppi_py.ppi_mean_pointestimate(y, f, f_u)[0]),
        "ci95": [max(0.0, float(np.ravel(low)[0])), min(1.0, float(np.ravel(high)[0]))],
    }


def test_estimate_falls_back_loudly_then_uses_the_audit_sample(
    database: Database, tmp_path: Path
) -> None:
    world = World(database.engine, tmp_path)
    # Reviewers labeled the first turns only: gold, but not a random sample.
    first_turns = [u for u in world.units if u[1] <= 2][:60]
    world.label(first_turns, "first")
    fallback = break_rate_estimate(
        database.engine, OPERATOR, rubric=world.rubric, run_id=world.run_id
    )
    assert fallback["gold_source"] == "adjudicated and unanimous gold (not a random sample)"
    assert any(w.startswith("WARNING: no audit sample has gold yet") for w in fallback["warnings"])

    report = draw_audit_sample(
        database.engine, OPERATOR, rubric=world.rubric, size=150, seed=3, reviewers=["rita", "sam"]
    )
    assert report.size == 150 and report.population == len(world.units)
    with Session(database.engine) as session:
        (sample,) = session.scalars(select(AuditSample)).all()
        drawn = sorted((u.case_id, u.turn) for u in session.scalars(select(AuditUnit)).all())
    assert (sample.seed, sample.size, sample.population) == (3, 150, len(world.units))
    population = world.units  # sorted assistant turns, as the draw sees them
    chosen = np.random.default_rng(3).choice(len(population), size=150, replace=False)
    assert drawn == sorted(population[int(i)] for i in chosen)

    world.label(drawn, "audit")
    estimate = break_rate_estimate(
        database.engine, OPERATOR, rubric=world.rubric, run_id=world.run_id
    )
    assert estimate["gold_source"] == "audit sample"
    assert not any(w.startswith("WARNING") for w in estimate["warnings"])
    assert estimate["n_gold"] == 150 and estimate["n_judged"] == len(world.units)
    reference = expected(world, drawn)
    assert estimate["ppi"]["value"] == pytest.approx(reference["value"], abs=1e-6)
    assert estimate["ppi"]["ci95"] == pytest.approx(reference["ci95"], abs=1e-6)
    judge_rate = np.mean([code != "in_role" for code in world.judge.values()])
    assert estimate["judge_only"] == pytest.approx(judge_rate)
    true_rate = np.mean([code != "in_role" for code in world.truth.values()])
    low, high = estimate["ppi"]["ci95"]
    assert low <= true_rate <= high
    assert set(estimate) >= {"level", "n_gold", "n_judged", "judge_only", "human_only", "ppi"}
    assert set(estimate["ppi"]) == {"value", "ci95", "lambda", "lambda_reason"}
    assert set(estimate["human_only"]) == {"value", "ci95"}
    assert estimate["budget"]["more_audited_units_to_halve_width"] > 0
    headline = estimate_headline(estimate)
    assert headline.startswith("turn break rate ") and "judge alone would say" in headline

    # A second draw never repeats a drawn turn.
    second = draw_audit_sample(
        database.engine, OPERATOR, rubric=world.rubric, size=20, seed=3, reviewers=["rita"]
    )
    assert second.population == len(world.units) - 150
    with Session(database.engine) as session:
        assert session.scalar(select(func.count()).select_from(AuditUnit)) == 170


def test_a_bad_audit_request_stores_nothing(database: Database, tmp_path: Path) -> None:
    world = World(database.engine, tmp_path)
    world.label(world.units[:2], "two")  # creates the reviewers
    for options, field in (
        ({"size": 0, "reviewers": ["rita"]}, "--audit-sample"),
        ({"size": 10**6, "reviewers": ["rita"]}, "--audit-sample"),
        ({"size": 5, "reviewers": ["nobody"]}, "reviewers"),
    ):
        with pytest.raises(InputError) as error:
            draw_audit_sample(database.engine, OPERATOR, rubric=world.rubric, seed=1, **options)
        assert error.value.field == field
    with Session(database.engine) as session:
        assert session.scalar(select(func.count()).select_from(AuditSample)) == 0


def test_conversation_level_and_a_bad_level(database: Database, tmp_path: Path) -> None:
    world = World(database.engine, tmp_path)
    world.label(world.units, "all")
    conversations = break_rate_estimate(
        database.engine, OPERATOR, rubric=world.rubric, run_id=world.run_id, level="conversation"
    )
    assert conversations["level"] == "conversation"
    assert conversations["n_judged"] == 40
    # Every unit has gold: nothing is left to predict, so no PPI estimate, and it says so.
    assert conversations["ppi"]["value"] is None
    assert any("no PPI estimate" in w for w in conversations["warnings"])
    with pytest.raises(InputError) as error:
        break_rate_estimate(
            database.engine, OPERATOR, rubric=world.rubric, run_id=world.run_id, level="x"
        )
    assert error.value.field == "--level"
