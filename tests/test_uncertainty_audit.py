"""``assign --by-uncertainty`` and the active block of ``judge estimate``, on real databases."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from sqlalchemy import select
from sqlmodel import Session

from review_app.cli.render_judging import render_estimate
from review_app.errors import InputError
from review_app.services.judging.estimate import break_rate_estimate
from review_app.services.judging.uncertainty_audit import (
    draw_uncertainty_sample,
    preview_uncertainty_sample,
)
from review_app.stats.active import active_mean, uniform_width
from storage.models import AuditSample, AuditUnit
from tests.actors import signed_in
from tests.conftest import Database
from tests.judge_support import run_review_app
from tests.test_judge_route import OPERATOR, World

SAMPLE_KEYS = {
    "sample_id",
    "design",
    "run",
    "population",
    "expected_size",
    "units",
    "earlier_with_seed",
}


def literal_draw(world: World, run: int, *, k: int, tau: float, seed: int):
    units = sorted(world.units)  # every turn the run judged has a score
    s = np.array([world.judges[run][u][1] for u in units])
    u = np.minimum(s, 1 - s)
    b = k / len(units)
    pi = np.clip((1 - tau) * (b / u.mean()) * u + tau * b, 0, 1)
    uniforms = np.random.default_rng(seed).random(len(units))
    return units, s, pi, uniforms < pi


def test_draw_is_recorded_with_probabilities_and_estimate_uses_it(
    database: Database, tmp_path: Path
) -> None:
    world = World(database.engine, tmp_path)
    world.label(world.units[:2], "people")  # creates rita and sam
    run = world.run_ids[0]
    sample = draw_uncertainty_sample(
        database.engine, OPERATOR, rubric=world.rubric, run_id=run, size=120, seed=9,
        reviewers=["rita", "sam"], mix=0.3,
    )  # fmt: skip
    units, s, pi, drawn = literal_draw(world, 0, k=120, tau=0.3, seed=9)
    want = [
        {"case_id": units[i][0], "turn": units[i][1], "probability": pytest.approx(pi[i])}
        for i in np.flatnonzero(drawn)
    ]
    document = sample.to_dict()
    assert set(document) == SAMPLE_KEYS and document["design"] == "uncertainty"
    assert document["units"] == want
    assert document["population"] == len(units)
    assert document["expected_size"] == pytest.approx(pi.sum())
    with Session(database.engine) as session:
        stored = session.scalars(select(AuditSample)).one()
        rows = session.scalars(select(AuditUnit)).all()
    assert (stored.design, stored.run_id, stored.mix) == ("uncertainty", run, 0.3)
    assert sorted((r.case_id, r.turn, r.probability) for r in rows) == [
        (u["case_id"], u["turn"], pytest.approx(u["probability"].expected)) for u in want
    ]

    # Label all but three drawn turns: the estimate counts them and names them.
    drawn_units = [units[i] for i in np.flatnonzero(drawn)]
    world.label(drawn_units[3:], "uncertain")
    estimate = break_rate_estimate(database.engine, OPERATOR, rubric=world.rubric, run_id=run)
    active = estimate["active"]
    assert set(active) == {"value", "ci95", "design", "drawn", "with_gold"}
    assert active["drawn"] == len(drawn_units)
    gold_units = set(drawn_units[3:]) | set(world.units[:2])
    xi = np.array([u in set(drawn_units[3:]) for u in units])
    y = np.array([float(world.truth[u] != "in_role") for u in units])
    weights = np.where(drawn, pi, 1.0)
    reference = active_mean(s, y, xi, weights)
    assert active["with_gold"] == len(drawn_units) - 3 and len(gold_units) > 0
    assert active["value"] == pytest.approx(reference.value)
    assert active["ci95"] == pytest.approx([max(0, reference.ci95[0]), min(1, reference.ci95[1])])
    waiting = [w for w in estimate["warnings"] if "drawn by uncertainty" in w]
    assert len(waiting) == 1 and waiting[0].startswith("WARNING: 3 of")
    assert f"{drawn_units[0][0]}:{drawn_units[0][1]}" in waiting[0]
    line = estimate["budget"]["uncertainty"]
    assert line["labels"] == len(drawn_units) - 3
    assert line["uniform_width"] == pytest.approx(
        uniform_width(s, y, xi, weights, labels=len(drawn_units) - 3)
    )
    assert "a uniform draw of as many would give" in render_estimate(estimate)
    # The uncertainty draw is not a uniform audit sample: PPI++ still says it has none.
    assert estimate["gold_source"].startswith("adjudicated")


def test_bad_uncertainty_requests(database: Database, tmp_path: Path) -> None:
    world = World(database.engine, tmp_path)
    world.label(world.units[:2], "people")
    for options, field in (
        ({"size": 0}, "--audit-sample"),
        ({"size": 10**6}, "--audit-sample"),
        ({"size": 10, "mix": 1.5}, "--mix"),
    ):
        with pytest.raises(InputError) as error:
            draw_uncertainty_sample(
                database.engine, OPERATOR, rubric=world.rubric, run_id=world.run_ids[0],
                seed=1, reviewers=["rita"], **options,
            )  # fmt: skip
        assert error.value.field == field
    with Session(database.engine) as session:
        assert session.scalars(select(AuditSample)).all() == []


def test_assign_by_uncertainty_cli(sqlite_database: Database, tmp_path: Path) -> None:
    world = World(sqlite_database.engine, tmp_path)
    world.label(world.units[:2], "people")
    run = world.run_ids[1]
    done = run_review_app(
        "assign", "--rubric", "role-adherence@1", "--reviewers", "rita,sam",
        "--audit-sample", "50", "--seed", "3", "--by-uncertainty", str(run), "--json",
        db=sqlite_database.url, home=tmp_path,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    document = json.loads(done.stdout)
    assert set(document) == SAMPLE_KEYS and document["run"] == run
    units, _, _, drawn = literal_draw(world, 1, k=50, tau=0.5, seed=3)
    assert [(u["case_id"], u["turn"]) for u in document["units"]] == [
        units[i] for i in np.flatnonzero(drawn)
    ]
    missing = run_review_app(
        "assign", "--rubric", "role-adherence@1", "--reviewers", "rita",
        "--by-uncertainty", str(run), db=sqlite_database.url, home=tmp_path,
    )  # fmt: skip
    assert missing.returncode == 2 and "--by-uncertainty" in missing.stderr
    stray = run_review_app(
        "assign", "--rubric", "role-adherence@1", "--reviewers", "rita", "--mix", "0.2",
        db=sqlite_database.url, home=tmp_path,
    )  # fmt: skip
    assert stray.returncode == 2 and "--mix" in stray.stderr
    text = run_review_app(
        "judge", "estimate", "--rubric", "role-adherence@1", "--run", str(run),
        db=sqlite_database.url, home=tmp_path,
    )  # fmt: skip
    assert text.returncode == 0 and "uncertainty draw:" in text.stdout


def test_the_preview_is_what_the_draw_stores_and_a_second_seed_says_so(
    database: Database, tmp_path: Path
) -> None:
    world = World(database.engine, tmp_path)
    world.label(world.units[:2], "people")  # creates rita and sam
    olivia = signed_in(database.engine, "olivia", role="policy_owner")
    run = world.run_ids[0]
    request = {
        "rubric": world.rubric, "run_id": run, "size": 40, "seed": 4,
        "reviewers": ["rita", "sam"], "mix": 0.5, "overlap": 2,
    }  # fmt: skip
    preview = preview_uncertainty_sample(database.engine, olivia, **request)
    assert preview.sample_id is None and preview.earlier is None
    assert preview.line().startswith("preview, nothing stored: would draw ")
    with Session(database.engine) as session:
        assert session.scalars(select(AuditSample)).all() == []
    first = draw_uncertainty_sample(database.engine, olivia, **request)
    assert first.units == preview.units and first.earlier is None
    assert first.assignment is not None and preview.assignment is not None
    # the pairs previewed are the pairs assigned, and every drawn case got both reviewers
    assert first.assignment.pairs == preview.assignment.pairs
    assert {c for c, _ in first.assignment.pairs} == {u["case_id"] for u in first.units}
    assert "seed 4 was used before" not in first.line()

    # the same seed again: a new sample of the same turns, and the line says what the
    # first one was (its number, size, time and who drew it)
    again = preview_uncertainty_sample(database.engine, olivia, **request)
    assert again.earlier is not None and again.earlier.sample_id == first.sample_id
    second = draw_uncertainty_sample(database.engine, olivia, **request)
    assert second.sample_id != first.sample_id and second.units == first.units
    assert second.earlier is not None
    assert (second.earlier.sample_id, second.earlier.size, second.earlier.by) == (
        first.sample_id,
        len(first.units),
        "olivia",
    )
    assert (
        f"seed 4 was used before: audit sample {first.sample_id} drew {len(first.units)} turns on "
    ) in second.line()
    assert ", by olivia. This is a new sample, not that one again: the same seed" in second.line()
    assert second.to_dict()["earlier_with_seed"]["sample_id"] == first.sample_id
    # another seed, or another run, is no repeat
    other = dict(request, seed=5)
    assert draw_uncertainty_sample(database.engine, olivia, **other).earlier is None
    assert (
        preview_uncertainty_sample(
            database.engine, olivia, **dict(request, run_id=world.run_ids[1])
        ).earlier
        is None
    )


def test_the_command_says_a_second_draw_with_a_seed_is_a_new_sample(
    sqlite_database: Database, tmp_path: Path
) -> None:
    world = World(sqlite_database.engine, tmp_path)
    world.label(world.units[:2], "people")
    command = (
        "assign", "--rubric", "role-adherence@1", "--reviewers", "rita,sam",
        "--audit-sample", "30", "--seed", "7", "--by-uncertainty", str(world.run_ids[0]),
    )  # fmt: skip
    dry = run_review_app(*command, "--dry-run", db=sqlite_database.url, home=tmp_path)
    assert dry.returncode == 0, dry.stderr
    *pairs, dry_line = dry.stdout.splitlines()
    assert dry_line.startswith("preview, nothing stored: would draw ") and pairs
    with Session(sqlite_database.engine) as session:
        assert session.scalars(select(AuditSample)).all() == []
    first = run_review_app(*command, db=sqlite_database.url, home=tmp_path)
    assert first.returncode == 0, first.stderr
    # the draw is the one previewed: the same turns, and the pairs previewed assigned
    previewed = dry_line.split(": would draw ", 1)[1].replace("would assign", "assigned")
    assert first.stdout.split(": drew ", 1)[1] == previewed + "\n"
    assert "was used before" not in first.stdout
    second = run_review_app(*command, db=sqlite_database.url, home=tmp_path)
    assert second.returncode == 0, second.stderr
    sample = int(first.stdout.split(":")[0].removeprefix("audit sample "))
    assert f"seed 7 was used before: audit sample {sample} drew " in second.stdout
    assert "by the command line (operator). This is a new sample" in second.stdout
    as_json = run_review_app(*command, "--json", db=sqlite_database.url, home=tmp_path)
    earlier = json.loads(as_json.stdout)["earlier_with_seed"]
    assert (earlier["sample_id"], earlier["by"], earlier["draws"]) == (sample, None, 2)
