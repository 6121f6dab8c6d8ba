"""``review-app drift`` on a real database: breaks planted late show where they are."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import numpy as np
from sqlalchemy import Engine

from benchmarks.corpus import generate_corpus
from review_app.services.access.actors import Actor
from review_app.services.cases.importing import import_paths
from review_app.services.exchange.labels_io import import_labels
from review_app.services.judging.drift import drift_report
from review_app.services.judging.judge_import import import_verdicts
from review_app.services.judging.runs import list_judge_runs
from review_app.services.rubrics.rubric_catalog import sync_rubrics
from tests.conftest import Database
from tests.judge_support import run_review_app, write_jsonl

OPERATOR = Actor.operator()


def planted(engine: Engine, tmp_path: Path) -> tuple[dict, list]:
    cases = list(generate_corpus(120, 25, seed=4))
    import_paths(engine, OPERATOR, [write_jsonl(tmp_path / "corpus.jsonl", cases)])
    catalog = sync_rubrics(engine, OPERATOR)
    rubric = catalog.get("role-adherence@1")
    rng = np.random.default_rng(8)
    truth: dict[tuple[str, int], str] = {}
    for case in cases:
        answers = [e["turn"] for e in case["transcript"] if e["actor"] == "assistant"]
        for position, turn in enumerate(sorted(answers), start=1):
            late = position >= 5  # from the 5-8 bin on
            truth[(case["case_id"], turn)] = (
                "scope_break" if rng.random() < (0.5 if late else 0.03) else "in_role"
            )
    lines = ["case_id,turn,reviewer,label,rubric,rationale"]
    for (case_id, turn), code in truth.items():
        for reviewer in ("rita", "sam"):
            lines.append(f"{case_id},{turn},{reviewer},{code},role-adherence@1,")
    (tmp_path / "gold.csv").write_text("\n".join(lines) + "\n")
    import_labels(engine, OPERATOR, tmp_path / "gold.csv", catalog=catalog)
    rows = [
        {"case_id": c, "turn": t, "judge": "j", "prompt_version": "v1", "model": "m",
         "label": code if rng.random() < 0.9 else "in_role"}
        for (c, t), code in truth.items()
    ]  # fmt: skip
    import_verdicts(engine, OPERATOR, write_jsonl(tmp_path / "v.jsonl", rows), rubric=rubric)
    return {"rubric": rubric}, list(truth.items())


def test_late_breaks_show_in_bins_first_breaks_and_slope(
    database: Database, tmp_path: Path
) -> None:
    world, truth = planted(database.engine, tmp_path)
    report = drift_report(
        database.engine, OPERATOR, rubric=world["rubric"], n_resamples=200, seed=1
    )
    assert set(report) == {
        "rubric", "min_units", "resamples", "seed", "sources", "agreement", "warnings",
    }  # fmt: skip
    gold, run = report["sources"]
    assert gold["source"] == "gold" and run["source"] == "run"
    assert gold["units"] == len(truth)
    assert gold["breaks"] == sum(code != "in_role" for _, code in truth)
    rows = gold["by_position"]
    assert all(r["units"] >= 30 for r in rows)
    assert sum(r["units"] for r in rows) == len(truth)
    early = [r for r in rows if r["high"] is not None and r["high"] <= 4]
    late = [r for r in rows if r["low"] >= 5]
    assert early and late
    assert max(r["ci95"][1] for r in early) < min(r["ci95"][0] for r in late)
    assert gold["slope"]["odds_ratio"] > 1 and gold["slope"]["ci95"][0] > 1
    # First breaks sit at answer 5 or later for most conversations that break.
    first = Counter({r["bin"]: r["conversations"] for r in gold["first_break"]})
    broke = sum(first.values())
    assert broke + gold["no_break_conversations"] == gold["conversations"]
    late_labels = {r["bin"] for r in late}
    assert sum(n for b, n in first.items() if b in late_labels) > broke / 2
    assert sum(r["units"] for r in gold["by_role"]) == len(truth)
    # The judge run is its own source, and agreement comes on gold's bins.
    assert run["run"] == list_judge_runs(database.engine, OPERATOR)[0].id
    agreement = report["agreement"]
    assert [r["bin"] for r in agreement["by_position"]] == [r["bin"] for r in rows]
    assert all(r["reviewer_alpha"] == 1.0 for r in agreement["by_position"])
    kappas = [r["judge_kappa"][str(run["run"])] for r in agreement["by_position"]]
    assert any(k is not None and 0 < k < 1 for k in kappas)


def test_drift_cli_json(sqlite_database: Database, tmp_path: Path) -> None:
    planted(sqlite_database.engine, tmp_path)
    done = run_review_app(
        "drift", "--rubric", "role-adherence@1", "--resamples", "50", "--json",
        db=sqlite_database.url, home=tmp_path,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["sources"][0]["source"] == "gold"
    text = run_review_app(
        "drift", "--rubric", "role-adherence@1", "--resamples", "50", "--run", "999",
        db=sqlite_database.url, home=tmp_path,
    )  # fmt: skip
    assert text.returncode != 0 and "999" in text.stderr
    bad = run_review_app(
        "drift", "--rubric", "role-adherence@1", "--min-units", "0",
        db=sqlite_database.url, home=tmp_path,
    )  # fmt: skip
    assert bad.returncode == 2 and "--min-units" in bad.stderr
