"""``judge route``: certified selective judging on a real database, the CLI's JSON, --apply."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from sqlalchemy import Engine, select
from sqlmodel import Session

from review_app.errors import InputError
from review_app.services.access.actors import Actor
from review_app.services.exchange.export import export_data
from review_app.services.judging.judge_import import import_verdicts
from review_app.services.judging.runs import list_judge_runs
from review_app.services.judging.selective import certified_verdicts, coverage_curve, route_judges
from review_app.services.operations.audit import audit_entries
from review_app.services.team.audit_samples import draw_audit_sample
from review_app.services.team.people import add_person
from review_app.stats.selective import certify_threshold
from storage.models import Assignment, CertifiedVerdict, Reviewer
from tests.conftest import Database
from tests.corpus_world import CorpusWorld
from tests.judge_support import run_review_app, write_jsonl

OPERATOR = Actor.operator()
BREAKS = ["scope_break", "tone_break", "authority_break"]
ROUTE_KEYS = {
    "alpha", "delta", "on", "gold_source", "runs", "judged_units", "decided_units",
    "escalated_units", "coverage", "warnings",
}  # fmt: skip
RUN_KEYS = {
    "run", "threshold", "calibration_units", "kept", "decided", "disagreements", "upper_bound",
}  # fmt: skip


class World(CorpusWorld):
    """A corpus, the truth, and two judges whose errors sit at low confidence."""

    def __init__(self, engine: Engine, tmp_path: Path) -> None:
        super().__init__(engine, tmp_path, cases=60, events=25, seed=11)
        rng = np.random.default_rng(5)
        self.truth = {
            u: (str(rng.choice(BREAKS)) if rng.random() < 0.2 else "in_role") for u in self.units
        }
        self.judges: list[dict[tuple[str, int], tuple[str, float]]] = []
        for name, sharp in (("cheap", 0.6), ("strong", 0.9)):
            verdicts = {}
            for unit, code in self.truth.items():
                confidence = float(rng.uniform(0.5, 1.0))
                wrong = rng.random() < (1 - confidence) * (1.2 - sharp)
                broke = (code != "in_role") != wrong
                said = (code if code != "in_role" else "scope_break") if broke else "in_role"
                score = confidence if broke else 1 - confidence
                verdicts[unit] = (said, round(score, 4))
            self.judges.append(verdicts)
            rows = [
                {"case_id": c, "turn": t, "judge": name, "prompt_version": "v1", "model": "m",
                 "label": said, "score": score}
                for (c, t), (said, score) in verdicts.items()
            ]  # fmt: skip
            import_verdicts(
                engine, OPERATOR, write_jsonl(tmp_path / f"{name}.jsonl", rows), rubric=self.rubric
            )
        runs = {r.name.split("/")[0]: r.id for r in list_judge_runs(engine, OPERATOR)}
        self.run_ids = [runs[next(k for k in runs if k.startswith(n))] for n in ("cheap", "strong")]

    def arrays(self, k: int, units: list[tuple[str, int]]) -> tuple[np.ndarray, np.ndarray]:
        conf, wrong = [], []
        for unit in units:
            said, score = self.judges[k][unit]
            broke = said != "in_role"
            conf.append(score if broke else 1 - score)
            wrong.append(broke != (self.truth[unit] != "in_role"))
        return np.array(conf), np.array(wrong)


def test_route_falls_back_loudly_then_certifies_on_the_audit_sample(
    database: Database, tmp_path: Path
) -> None:
    world = World(database.engine, tmp_path)
    world.label([u for u in world.units if u[1] <= 2][:80], "first")
    fallback = route_judges(
        database.engine, OPERATOR, rubric=world.rubric, run_ids=world.run_ids[:1],
        alpha=0.15, delta=0.1,
    )  # fmt: skip
    assert fallback["gold_source"] == "adjudicated and unanimous gold (not a random sample)"
    assert any(w.startswith("WARNING: no audit sample has gold yet") for w in fallback["warnings"])

    draw_audit_sample(
        database.engine, OPERATOR, rubric=world.rubric, size=500, seed=4, reviewers=["rita"]
    )
    drawn = sorted(
        u
        for u in __import__("review_app.services.team.audit_samples", fromlist=["x"]).audited_units(
            database.engine, OPERATOR, rubric=world.rubric
        )
    )
    world.label(drawn, "audit")
    report = route_judges(
        database.engine, OPERATOR, rubric=world.rubric, run_ids=world.run_ids,
        alpha=0.15, delta=0.1,
    )  # fmt: skip
    assert set(report) == ROUTE_KEYS and all(set(r) == RUN_KEYS for r in report["runs"])
    assert report["gold_source"] == "audit sample"
    assert not any(w.startswith(("WARNING", "--min-units")) for w in report["warnings"])
    # The first run is certified exactly as the core does on the audit gold.
    conf, wrong = world.arrays(0, drawn)
    first = certify_threshold(conf, wrong, alpha=0.15, delta=0.1)
    assert report["runs"][0]["threshold"] == first.threshold is not None
    assert report["runs"][0]["kept"] == first.kept
    assert report["runs"][0]["calibration_units"] == len(drawn)
    # The second run is certified on the audit units the first did not decide.
    left = [u for u, c in zip(drawn, conf, strict=True) if c < first.threshold]
    conf2, wrong2 = world.arrays(1, left)
    second = certify_threshold(conf2, wrong2, alpha=0.15, delta=0.1)
    assert report["runs"][1]["threshold"] == second.threshold
    assert report["runs"][1]["calibration_units"] == len(left)
    all_conf, _ = world.arrays(0, world.units)
    assert report["runs"][0]["decided"] == int((all_conf >= first.threshold).sum())
    assert report["judged_units"] == len(world.units)
    assert report["decided_units"] == sum(r["decided"] for r in report["runs"])
    assert report["escalated_units"] == len(world.units) - report["decided_units"]
    assert report["coverage"] == pytest.approx(report["decided_units"] / len(world.units))


def test_apply_marks_certified_and_queues_escalated_cases(
    database: Database, tmp_path: Path
) -> None:
    world = World(database.engine, tmp_path)
    world.label(world.units[::3], "gold")
    with pytest.raises(InputError) as error:
        route_judges(
            database.engine, OPERATOR, rubric=world.rubric, run_ids=world.run_ids,
            alpha=0.1, delta=0.1, apply=True,
        )  # fmt: skip
    assert error.value.field == "--reviewers"
    add_person(database.engine, OPERATOR, name="tess")
    report = route_judges(
        database.engine, OPERATOR, rubric=world.rubric, run_ids=world.run_ids,
        alpha=0.1, delta=0.1, apply=True, reviewers=["tess"], overlap=3,
    )  # fmt: skip
    assert report["decided_units"] > 0 and report["escalated_units"] > 0
    certified = certified_verdicts(database.engine, OPERATOR, rubric=world.rubric)
    assert len(certified) == report["decided_units"] == report["applied"]["certified"]
    some_unit, entry = next(iter(certified.items()))
    assert entry.alpha == 0.1 and entry.delta == 0.1 and entry.run in world.run_ids
    assert entry.confidence >= entry.threshold
    escalated_cases = {c for c, t in world.units if (c, t) not in certified}
    with Session(database.engine) as session:
        queued = set(
            session.scalars(
                select(Assignment.case_id).where(
                    Assignment.reviewer_id
                    == select(Reviewer.id).where(Reviewer.name == "tess").scalar_subquery()
                )
            ).all()
        )
    assert report["applied"]["escalated_cases"] == len(escalated_cases) > 0
    assert queued == escalated_cases
    (entry,) = audit_entries(database.engine, OPERATOR, action="judge_route")
    assert entry.summary["certified"] == len(certified)
    # Applying again replaces, never duplicates.
    route_judges(
        database.engine, OPERATOR, rubric=world.rubric, run_ids=world.run_ids[:1],
        alpha=0.1, delta=0.1, apply=True, reviewers=["rita"], overlap=1,
    )  # fmt: skip
    with Session(database.engine) as session:
        rows = session.scalars(select(CertifiedVerdict)).all()
    assert {r.run_id for r in rows} <= {world.run_ids[0]}
    # Exports carry the certified verdicts with alpha, delta and the run.
    result = export_data(database.engine, OPERATOR, rubric=world.rubric, format="fixtures")
    documents = [
        json.loads(body) for name, body in result.files.items() if name.endswith(".json")
        and not name.startswith("manifest")
    ]  # fmt: skip
    marked = [c for d in documents for c in d.get("certified_judge_verdicts", [])]
    assert len(marked) == len(rows) > 0
    assert set(marked[0]) == {"turn", "label", "run", "confidence", "threshold", "alpha", "delta"}
    assert some_unit is not None


def test_warns_when_min_units_cannot_certify(sqlite_database: Database, tmp_path: Path) -> None:
    world = World(sqlite_database.engine, tmp_path)
    world.label(world.units[::3], "gold")
    # 0 of 30 bounds the rate at 1 - 0.1 ** (1 / 30) = 0.074 > 0.05: 45 units are needed.
    report = route_judges(
        sqlite_database.engine, OPERATOR, rubric=world.rubric, run_ids=world.run_ids[1:],
        alpha=0.05, delta=0.1,
    )  # fmt: skip
    assert any(w.startswith("--min-units 30 is below 45") for w in report["warnings"])
    wide = route_judges(
        sqlite_database.engine, OPERATOR, rubric=world.rubric, run_ids=world.run_ids[1:],
        alpha=0.05, delta=0.1, min_units=45,
    )  # fmt: skip
    assert not any(w.startswith("--min-units") for w in wide["warnings"])


def test_route_cli_json_and_bad_input(sqlite_database: Database, tmp_path: Path) -> None:
    world = World(sqlite_database.engine, tmp_path)
    world.label(world.units[::4], "gold")
    runs = ",".join(map(str, world.run_ids))
    done = run_review_app(
        "judge", "route", "--rubric", "role-adherence@1", "--runs", runs, "--alpha", "0.2",
        "--delta", "0.1", "--json", db=sqlite_database.url, home=tmp_path,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert set(report) == ROUTE_KEYS and report["on"] == "verdict"
    text = run_review_app(
        "judge", "route", "--rubric", "role-adherence@1", "--runs", runs, "--alpha", "0.2",
        "--delta", "0.1", "--on", "code", db=sqlite_database.url, home=tmp_path,
    )  # fmt: skip
    assert text.returncode == 0 and "judge decides" in text.stdout
    for bad, field in (
        (["--runs", "1,x", "--alpha", "0.2", "--delta", "0.1"], "--runs"),
        (["--runs", runs, "--alpha", "1.5", "--delta", "0.1"], "--alpha"),
        (["--runs", runs, "--alpha", "0.2", "--delta", "0.1", "--on", "tone"], "--on"),
    ):
        failed = run_review_app(
            "judge", "route", "--rubric", "role-adherence@1", *bad,
            db=sqlite_database.url, home=tmp_path,
        )  # fmt: skip
        assert failed.returncode == 2 and field in failed.stderr


def test_coverage_curve_is_the_route_at_each_alpha(
    sqlite_database: Database, tmp_path: Path
) -> None:
    world = World(sqlite_database.engine, tmp_path)
    world.label(world.units[::3], "gold")
    alphas = [0.05, 0.1, 0.15, 0.2, 0.3]
    curve = coverage_curve(
        sqlite_database.engine, OPERATOR, rubric=world.rubric, run_ids=world.run_ids[:1],
        delta=0.1, alphas=alphas, min_units=45,
    )  # fmt: skip
    coverages = [p["coverage"] for p in curve["points"]]
    assert coverages == sorted(coverages)  # one run: a looser alpha never decides less
    for point in curve["points"]:
        report = route_judges(
            sqlite_database.engine, OPERATOR, rubric=world.rubric, run_ids=world.run_ids[:1],
            alpha=point["alpha"], delta=0.1, min_units=45,
        )  # fmt: skip
        assert point["coverage"] == report["coverage"]
        assert point["thresholds"] == [r["threshold"] for r in report["runs"]]
