"""``reviewers reliability`` and ``agreement --over-time`` on real databases."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from crowdkit.aggregation import DawidSkene
from sqlalchemy import Engine
from sqlmodel import Session

import storage.carry
import storage.labels
from review_app.errors import PermissionDenied
from review_app.services.access.actors import operator_actor
from review_app.services.exchange.labels_io import import_labels
from review_app.services.labels.adjudication import record_gold
from review_app.services.review.reliability import agreement_over_time_report, reliability_report
from review_app.services.team.people import add_person
from storage.reviewers import reviewer_names
from tests.actors import signed_in
from tests.conftest import Database
from tests.corpus_world import CorpusWorld
from tests.judge_support import run_review_app

OPERATOR = operator_actor()
NAMES = ("ana", "bo", "cy", "dee")
CODES = ["in_role", "tone_break", "scope_break", "authority_break"]
CARELESS = {"tone_break": "in_role", "scope_break": "authority_break"}


class Team(CorpusWorld):
    """A corpus labelled by four reviewers, cy careless on two codes."""

    def __init__(self, engine: Engine, tmp_path: Path) -> None:
        super().__init__(engine, tmp_path, cases=70, events=25, seed=3)
        rng = np.random.default_rng(8)
        self.truth = {u: str(rng.choice(CODES, p=[0.5, 0.2, 0.2, 0.1])) for u in self.units}
        self.labels: list[tuple[str, int, str, str]] = []
        for unit in self.units:
            for name in rng.choice(NAMES, size=3, replace=False):
                code = self.truth[unit]
                if name == "cy" and code in CARELESS and rng.random() < 0.55:
                    code = CARELESS[code]
                elif rng.random() < 0.06:
                    code = str(rng.choice([c for c in CODES if c != code]))
                self.labels.append((unit[0], unit[1], str(name), code))

    def import_labels(self) -> None:
        lines = ["case_id,turn,reviewer,label,rubric,rationale"]
        lines += [f"{c},{t},{n},{code},role-adherence@1," for c, t, n, code in self.labels]
        path = self.tmp / "labels.csv"
        path.write_text("\n".join(lines) + "\n")
        import_labels(self.engine, OPERATOR, path, catalog=self.catalog)

    def adjudicate(self, count: int) -> list[tuple[str, int]]:
        given: dict[tuple[str, int], set[str]] = {}
        for c, t, _, code in self.labels:
            given.setdefault((c, t), set()).add(code)
        disputed = [u for u, codes in sorted(given.items()) if len(codes) > 1][:count]
        for case_id, turn in disputed:
            record_gold(
                self.engine, OPERATOR, rubric=self.rubric, case_id=case_id, turn=turn,
                code=self.truth[(case_id, turn)],
            )  # fmt: skip
        return disputed


def test_reliability_names_the_careless_reviewer_and_the_cli_prints_it(
    database: Database, tmp_path: Path
) -> None:
    team = Team(database.engine, tmp_path)
    team.import_labels()
    # Without gold, the estimate is crowd-kit's DawidSkene on the same labels.
    plain = reliability_report(database.engine, OPERATOR, rubric=team.rubric, n_resamples=0)
    frame = pd.DataFrame(
        [((c, t), n, code) for c, t, n, code in team.labels], columns=["task", "worker", "label"]
    )
    reference = DawidSkene(n_iter=100).fit(frame)
    assert plain["anchored_units"] == 0
    assert plain["priors"] == pytest.approx(reference.priors_.to_dict(), abs=1e-9)
    for row in plain["reviewers"]:
        own = frame[frame.worker == row["name"]]
        posterior = reference.probas_.loc[own.task.tolist()].to_numpy()
        columns = [list(reference.probas_.columns).index(code) for code in own.label]
        accuracy = posterior[np.arange(len(own)), columns].mean()
        assert row["accuracy"] == pytest.approx(accuracy, abs=1e-8)
        for true, given in row["confusion"].items():
            for code, probability in given.items():
                errors = reference.errors_
                want = errors.loc[(row["name"], code), true] if (row["name"], code) in \
                    errors.index else 0.0  # fmt: skip
                assert probability == pytest.approx(want, abs=1e-9)

    disputed = team.adjudicate(40)
    report = reliability_report(database.engine, OPERATOR, rubric=team.rubric, n_resamples=60)
    assert report["anchored_units"] == len(disputed) == 40
    assert report["below_others"] == ["cy"]
    cy = next(r for r in report["reviewers"] if r["name"] == "cy")
    assert set(cy["responsible_codes"]) == set(CARELESS)
    assert report["sentence"].startswith("cy's accuracy ")
    assert "`tone_break` turns they give `in_role`" in report["sentence"]

    done = run_review_app(
        "reviewers", "reliability", "--rubric", "role-adherence@1", "--json", "--resamples", "30",
        db=database.url, home=tmp_path,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    document = json.loads(done.stdout)
    assert [r["name"] for r in document["reviewers"]] == list(NAMES)
    for row in document["reviewers"]:
        assert {"name", "accuracy", "ci95", "confusion"} <= set(row)
        assert len(row["ci95"]) == 2 and row["ci95"][0] <= row["accuracy"] <= row["ci95"][1]
        for given in row["confusion"].values():
            assert sum(given.values()) == pytest.approx(1.0)
    text = run_review_app(
        "reviewers", "reliability", "--rubric", "role-adherence@1", "--resamples", "30",
        db=database.url, home=tmp_path,
    )  # fmt: skip
    assert text.returncode == 0 and "cy's accuracy" in text.stdout
    assert "below others" in text.stdout.splitlines()[2]


def test_reviewers_may_not_read_reliability(database: Database, tmp_path: Path) -> None:
    team = Team(database.engine, tmp_path)
    rita = signed_in(database.engine, "rita", role="reviewer")
    with pytest.raises(PermissionDenied):
        reliability_report(database.engine, rita, rubric=team.rubric)
    with pytest.raises(PermissionDenied):
        agreement_over_time_report(database.engine, rita, rubric=team.rubric)


def test_agreement_over_time_by_week_with_the_publication_marked(
    database: Database, tmp_path: Path
) -> None:
    team = Team(database.engine, tmp_path)
    for name in NAMES:
        add_person(database.engine, OPERATOR, name=name, role="reviewer")
    monday = datetime(2026, 9, 7, 8, 0, tzinfo=UTC)
    per_week = len(team.units) // 5
    with Session(database.engine) as session:
        ids = {name: i for i, name in reviewer_names(session).items()}
        rows = []
        for case_id, turn, name, code in team.labels:
            index = team.units.index((case_id, turn))
            week = min(index // per_week, 4)
            moment = monday + timedelta(weeks=week, seconds=20 * (index % per_week))
            rows.append((case_id, turn, ids[name], "role-adherence", 1, code, None, True, "app",
                         moment))  # fmt: skip
        storage.labels.insert_labels(session, rows=rows)
        storage.carry.create_carry(
            session, rubric_id="role-adherence", from_version=0, to_version=1, actor="operator",
            at=monday + timedelta(weeks=2, hours=1),
        )  # fmt: skip
        session.commit()
    team.adjudicate(30)
    report = agreement_over_time_report(database.engine, OPERATOR, rubric=team.rubric)
    assert report["by"] == "week" and len(report["periods"]) == 5
    assert [p["period"] for p in report["periods"]][2] == "week of 2026-09-21"
    assert report["publications"] == [
        {"rubric": "role-adherence@1", "at": (monday + timedelta(weeks=2, hours=1)).isoformat(),
         "period": "week of 2026-09-21"}
    ]  # fmt: skip
    assert sum(p["labels"] for p in report["periods"]) == len(team.labels)
    for period in report["periods"]:
        (version,) = period["versions"]
        assert version["rubric"] == "role-adherence@1" and version["value"] is not None
    assert {r["name"] for p in report["periods"] for r in p["reviewers"]} <= set(NAMES)
    assert report["session"]["first_hour"]["n"] > 0
    assert len(report["sentences"]) == 2

    done = run_review_app(
        "agreement", "--rubric", "role-adherence@1", "--over-time", "--json",
        db=database.url, home=tmp_path,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    document = json.loads(done.stdout)
    assert set(document) == {
        "rubric", "by", "batch", "periods", "publications", "session", "sentences", "warnings",
    }  # fmt: skip
    assert document["periods"] == json.loads(json.dumps(report["periods"]))
    text = run_review_app(
        "agreement", "--rubric", "role-adherence@1", "--over-time",
        db=database.url, home=tmp_path,
    )  # fmt: skip
    assert "week of 2026-09-21 (published role-adherence@1)" in text.stdout
