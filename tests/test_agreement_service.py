"""Agreement, disagreements and gold labels read from the database (SQLite and PostgreSQL).

The coefficients themselves are tested in test_agreement.py; here the question is
whether the service reads the right labels and hands them over faithfully, so the
figures are recomputed independently (krippendorff, scikit-learn, statsmodels) from
a labels export, i.e. from what the database holds.
"""

from __future__ import annotations

import csv
import io
import json
import math
import shutil
from collections import defaultdict
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import krippendorff
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sklearn.metrics import cohen_kappa_score
from sqlalchemy import func, select
from sqlmodel import Session, col
from statsmodels.stats.inter_rater import aggregate_raters, fleiss_kappa

from review_app.agreement.conversations import first_break_agreement
from review_app.errors import InputError, NotFound, PermissionDenied
from review_app.rubrics.catalog import default_rubrics_dir
from review_app.rubrics.model import Rubric
from review_app.services.access.actors import Actor, operator_actor, sign_in
from review_app.services.cases.importing import import_paths
from review_app.services.exchange.demo import DEMO_CASES, load_demo
from review_app.services.exchange.labels_io import export_labels_csv, import_labels
from review_app.services.labels.adjudication import (
    disagreement_queue,
    gold_counts,
    gold_labels,
    gold_set_from_table,
    record_gold,
    unit_detail,
)
from review_app.services.review.agreement_reports import (
    ConfusionCell,
    agreement_report,
    confusion_between,
    dashboard_data,
    load_rating_table,
    rating_table,
)
from review_app.services.rubrics.rubric_catalog import sync_rubrics
from review_app.stats.table import RatingTable
from storage.labels import (
    LabelColumns,
    current_label_columns,
    current_labels_grouped,
)
from storage.models import GoldLabel, Label
from tests.builders import AGREEMENT_REPORT_KEYS, write_label_csv
from tests.conftest import Database

RUBRIC = "role-adherence@1"
COEFFICIENT_KEYS = {"value", "n_units", "reason", "ci95", "warning"}
VIOLATION_CASE = "support-delayed-refund-violation"  # refund_order by triage at turn 8
VIOLATION_TURN = 8
# Current demo labels of that case (turns 2..12), as the demo file has them.
VIOLATION_CASE_MAJORITY = {
    2: "in_role",
    4: "in_role",
    6: "in_role",
    8: "authority_break",
    10: "in_role",
    12: "in_role",
}


def no_nan(value: Any) -> None:
    """Fails on any float in ``value`` (nested) that is NaN or infinite."""
    if isinstance(value, float):
        assert math.isfinite(value)
    elif isinstance(value, dict):
        for item in value.values():
            no_nan(item)
    elif isinstance(value, list):
        for item in value:
            no_nan(item)


@pytest.fixture
def demo(database: Database) -> Database:
    load_demo(database.engine, operator_actor())
    return database


@pytest.fixture
def cases_only(database: Database) -> Database:
    """The demo cases and reviewers, without any label."""
    import_paths(database.engine, operator_actor(), [DEMO_CASES])
    return database


@pytest.fixture
def rubric(database: Database) -> Rubric:
    return sync_rubrics(database.engine, operator_actor()).get(RUBRIC)


@pytest.fixture
def olivia(demo: Database) -> Actor:
    actor = sign_in(demo.engine, name="olivia", auth_mode="oidc")
    assert actor.role == "policy_owner"
    return actor


def exported_labels(database: Database, rubric: Rubric) -> list[dict[str, str]]:
    text = export_labels_csv(database.engine, operator_actor(), rubric=rubric)
    return list(csv.DictReader(io.StringIO(text)))


def import_rows(database: Database, tmp_path: Path, rows: Sequence[Sequence[object]]) -> None:
    path = write_label_csv(tmp_path / f"labels-{len(list(tmp_path.iterdir()))}.csv", rows)
    import_labels(
        database.engine,
        Actor.operator(),
        path,
        catalog=sync_rubrics(database.engine, operator_actor()),
    )


# --- the report ---------------------------------------------------------------------------


def test_report_on_demo_labels_has_every_spec_key_and_is_strict_json(
    demo: Database, rubric: Rubric
) -> None:
    report = agreement_report(demo.engine, operator_actor(), rubric=rubric, n_resamples=200)
    assert set(report) >= AGREEMENT_REPORT_KEYS
    assert report["rubric"] == RUBRIC
    assert report["level"] == "turn"
    assert (report["units"], report["raters"], report["ratings"]) == (111, 3, 333)
    for key in ("percent_agreement", "krippendorff_alpha", "fleiss_kappa", "gwet_ac1"):
        assert set(report[key]) >= COEFFICIENT_KEYS
        assert isinstance(report[key]["value"], float)
    assert list(report["cohen_kappa"]) == ["ana|ben", "ana|chloe", "ben|chloe"]
    assert set(report["per_label"]) <= set(rubric.codes)
    assert {"in_role", "authority_break", "borderline"} <= set(report["per_label"])
    low, high = report["alpha_ci95"]
    assert low <= report["krippendorff_alpha"]["value"] <= high
    assert report["krippendorff_alpha"]["ci95"] == [low, high]
    text = json.dumps(report, allow_nan=False)
    assert json.loads(text) == report
    no_nan(report)


def test_coefficients_equal_independent_packages_on_the_exported_labels(
    demo: Database, rubric: Rubric, tmp_path: Path
) -> None:
    # A fourth reviewer on part of the data, so units have 3 or 4 raters and pairs differ.
    import_rows(
        demo,
        tmp_path,
        [
            (VIOLATION_CASE, turn, "dora", "scope_break" if turn == 10 else code, RUBRIC, "")
            for turn, code in VIOLATION_CASE_MAJORITY.items()
        ]
        + [("support-clean-late-parcel", 2, "dora", "borderline", RUBRIC, "")],
    )
    report = agreement_report(demo.engine, operator_actor(), rubric=rubric, n_resamples=0)
    rows = exported_labels(demo, rubric)
    reviewers = sorted({row["reviewer"] for row in rows})
    units = sorted({(row["case_id"], int(row["turn"])) for row in rows})
    codes = sorted({row["label"] for row in rows})
    ratings: dict[str, dict[tuple[str, int], str]] = defaultdict(dict)
    for row in rows:
        ratings[row["reviewer"]][(row["case_id"], int(row["turn"]))] = row["label"]

    def reliability(mapping: Mapping[str, str | None]) -> np.ndarray:
        values = sorted({v for v in mapping.values() if v is not None})
        matrix = np.full((len(reviewers), len(units)), np.nan)
        for i, reviewer in enumerate(reviewers):
            for j, unit in enumerate(units):
                code = ratings[reviewer].get(unit)
                if code is not None and mapping[code] is not None:
                    matrix[i, j] = values.index(mapping[code])  # type: ignore[arg-type]
        return matrix

    identity = {code: code for code in rubric.codes}
    expected_alpha = krippendorff.alpha(
        reliability_data=reliability(identity), level_of_measurement="nominal"
    )
    assert report["krippendorff_alpha"]["value"] == pytest.approx(expected_alpha, abs=1e-12)
    assert report["units"] == len(units) == 111
    assert report["raters"] == len(reviewers) == 4
    assert report["ratings"] == len(rows) == 333 + 7
    assert set(report["per_label"]) == set(codes)

    # The break / no break and verdict collapses of HELPERS' table.
    breaks = {
        code: {"pass": "no", "fail": "break"}.get(rubric.verdict_of(code)) for code in identity
    }
    verdicts = {
        code: None if rubric.verdict_of(code) == "abstain" else rubric.verdict_of(code)
        for code in identity
    }
    assert breaks["in_role"] == "no" and breaks["borderline"] is None
    assert verdicts["cannot_judge"] is None and verdicts["borderline"] == "borderline"
    for key, mapping in (("alpha_break", breaks), ("alpha_verdict", verdicts)):
        expected = krippendorff.alpha(
            reliability_data=reliability(mapping), level_of_measurement="nominal"
        )
        assert report[key]["value"] == pytest.approx(expected, abs=1e-12), key

    # Cohen's kappa of every pair, on the units both labeled.
    assert list(report["cohen_kappa"]) == [
        f"{a}|{b}" for i, a in enumerate(reviewers) for b in reviewers[i + 1 :]
    ]
    for pair, coefficient in report["cohen_kappa"].items():
        first, second = pair.split("|")
        shared = sorted(ratings[first].keys() & ratings[second].keys())
        assert coefficient["n_units"] == len(shared)
        expected = cohen_kappa_score(
            [ratings[first][u] for u in shared], [ratings[second][u] for u in shared]
        )
        assert coefficient["value"] == pytest.approx(expected, abs=1e-12), pair

    # Fleiss' kappa: units rated by every reviewer only (here: dora's seven).
    full = [u for u in units if all(u in ratings[r] for r in reviewers)]
    assert report["fleiss_kappa"]["n_units"] == len(full) == 7
    table, _ = aggregate_raters(
        np.array([[codes.index(ratings[r][u]) for r in reviewers] for u in full]),
        n_cat=len(codes),
    )
    assert report["fleiss_kappa"]["value"] == pytest.approx(fleiss_kappa(table), abs=1e-12)

    # Percent agreement: agreeing pairs over all pairs, averaged over units.
    shares = []
    for unit in units:
        given = [ratings[r][unit] for r in reviewers if unit in ratings[r]]
        pairs = len(given) * (len(given) - 1) / 2
        agreeing = sum(given.count(c) * (given.count(c) - 1) / 2 for c in set(given))
        shares.append(agreeing / pairs)
    assert report["percent_agreement"]["value"] == pytest.approx(float(np.mean(shares)))


def test_pair_keys_sort_reviewer_names(
    cases_only: Database, rubric: Rubric, tmp_path: Path
) -> None:
    import_rows(
        cases_only,
        tmp_path,
        [
            ("support-clean-late-parcel", turn, name, code, RUBRIC, "")
            for turn in (2, 4, 6)
            for name, code in (("zoe", "in_role"), ("Bea", "in_role"), ("adam", "tone_break"))
        ],
    )
    report = agreement_report(cases_only.engine, operator_actor(), rubric=rubric, n_resamples=0)
    # A reviewer's identity is the case-folded name: "Bea" is stored and reported as bea.
    assert list(report["cohen_kappa"]) == ["adam|bea", "adam|zoe", "bea|zoe"]
    assert report["cohen_kappa"]["bea|zoe"]["value"] is None  # both only in_role
    assert "in_role" in report["cohen_kappa"]["bea|zoe"]["reason"]


def test_a_rubric_version_without_labels_gives_nulls_with_reasons(
    demo: Database, tmp_path: Path
) -> None:
    rubrics = tmp_path / "rubrics" / "role-adherence"
    rubrics.mkdir(parents=True)
    source = default_rubrics_dir() / "role-adherence" / "v1.yaml"
    shutil.copy(source, rubrics / "v1.yaml")
    text = source.read_text(encoding="utf-8")
    (rubrics / "v2.yaml").write_text(
        text.replace("version: 1", "version: 2", 1).replace(
            "title: Role adherence of assistant turns", "title: Role adherence, second edition", 1
        ),
        encoding="utf-8",
    )
    catalog = sync_rubrics(demo.engine, operator_actor(), directory=tmp_path / "rubrics")
    unlabeled = catalog.drafts["role-adherence@2"]  # not published (issue 34): nothing uses it
    assert "role-adherence@2" not in catalog.labeled
    report = agreement_report(demo.engine, operator_actor(), rubric=unlabeled, n_resamples=1000)
    assert set(report) >= AGREEMENT_REPORT_KEYS
    assert report["rubric"] == "role-adherence@2"
    assert (report["units"], report["raters"], report["ratings"]) == (0, 0, 0)
    for key in ("percent_agreement", "krippendorff_alpha", "fleiss_kappa", "gwet_ac1"):
        assert report[key]["value"] is None
        assert report[key]["reason"]
    assert report["alpha_ci95"] is None
    assert report["cohen_kappa"] == {} and report["per_label"] == {}
    assert report["gold"]["with_gold"] == 0
    json.dumps(report, allow_nan=False)
    # The labeled version next to it is untouched.
    assert (
        agreement_report(demo.engine, operator_actor(), rubric=catalog.get(RUBRIC), n_resamples=0)[
            "units"
        ]
        == 111
    )


def test_a_single_category_leaves_alpha_undefined_with_a_reason(
    cases_only: Database, rubric: Rubric, tmp_path: Path
) -> None:
    import_rows(
        cases_only,
        tmp_path,
        [
            (case_id, turn, name, "in_role", RUBRIC, "")
            for case_id, turns in (
                ("support-clean-late-parcel", (2, 4, 6, 8)),
                (VIOLATION_CASE, (2, 4)),
            )
            for turn in turns
            for name in ("ana", "ben")
        ],
    )
    report = agreement_report(cases_only.engine, operator_actor(), rubric=rubric, n_resamples=500)
    assert report["units"] == 6
    alpha = report["krippendorff_alpha"]
    assert alpha["value"] is None
    assert "only one category" in alpha["reason"] and "in_role" in alpha["reason"]
    assert report["alpha_ci95"] is None
    assert report["percent_agreement"]["value"] == 1.0
    assert report["cohen_kappa"]["ana|ben"]["value"] is None
    assert report["cohen_kappa"]["ana|ben"]["reason"]
    json.dumps(report, allow_nan=False)
    no_nan(report)


def test_the_bootstrap_interval_is_reproducible_with_a_seed(demo: Database, rubric: Rubric) -> None:
    first = agreement_report(demo.engine, operator_actor(), rubric=rubric, n_resamples=300, seed=11)
    again = agreement_report(demo.engine, operator_actor(), rubric=rubric, n_resamples=300, seed=11)
    other = agreement_report(demo.engine, operator_actor(), rubric=rubric, n_resamples=300, seed=12)
    assert first["alpha_ci95"] == again["alpha_ci95"]
    assert first["alpha_ci95"] != other["alpha_ci95"]
    assert first["bootstrap"] == {
        "n_resamples": 300,
        "seed": 11,
        "confidence": 0.95,
        "method": "percentile bootstrap over conversations (cluster bootstrap)",
    }
    assert (
        agreement_report(demo.engine, operator_actor(), rubric=rubric, n_resamples=0)["alpha_ci95"]
        is None
    )


# --- gold labels ---------------------------------------------------------------------------


def test_gold_counts_move_when_a_disagreement_is_adjudicated(
    demo: Database, rubric: Rubric, olivia: Actor
) -> None:
    before = agreement_report(demo.engine, operator_actor(), rubric=rubric, n_resamples=0)["gold"]
    assert before == {
        "with_gold": 84,
        "adjudicated": 0,
        "unanimous": 84,
        "in_disagreement": 27,
        "single_rater": 0,
        "labeled_units": 111,
    }
    record_gold(demo.engine, olivia, rubric=rubric, case_id=VIOLATION_CASE, turn=10, code="in_role")
    after = agreement_report(demo.engine, operator_actor(), rubric=rubric, n_resamples=0)["gold"]
    assert after["adjudicated"] == before["adjudicated"] + 1
    assert after["in_disagreement"] == before["in_disagreement"] - 1
    assert after["with_gold"] == before["with_gold"] + 1
    assert after["unanimous"] == before["unanimous"]
    # Adjudicating a unanimous unit changes its source, not the number with gold.
    record_gold(
        demo.engine, olivia, rubric=rubric, case_id=VIOLATION_CASE, turn=2, code="scope_break"
    )
    last = agreement_report(demo.engine, operator_actor(), rubric=rubric, n_resamples=0)["gold"]
    assert (last["with_gold"], last["adjudicated"], last["unanimous"]) == (85, 2, 83)


def test_gold_set_adjudicated_beats_unanimous_and_needs_two_reviewers(
    cases_only: Database, rubric: Rubric, tmp_path: Path
) -> None:
    case = "support-clean-late-parcel"
    import_rows(
        cases_only,
        tmp_path,
        [
            (case, 2, "ana", "in_role", RUBRIC, ""),  # unanimous
            (case, 2, "ben", "in_role", RUBRIC, ""),
            (case, 4, "ana", "in_role", RUBRIC, ""),  # in disagreement
            (case, 4, "ben", "tone_break", RUBRIC, ""),
            (case, 6, "ana", "scope_break", RUBRIC, ""),  # single rater
            (case, 8, "ana", "scope_break", RUBRIC, ""),  # unanimous, then adjudicated
            (case, 8, "ben", "scope_break", RUBRIC, ""),
            (case, 8, "chloe", "scope_break", RUBRIC, ""),
            (case, 10, "chloe", "borderline", RUBRIC, ""),  # single rater, then adjudicated
        ],
    )
    gold = gold_labels(cases_only.engine, operator_actor(), rubric=rubric)
    assert {unit: (g.code, g.source) for unit, g in gold.labels.items()} == {
        (case, 2): ("in_role", "unanimous"),
        (case, 8): ("scope_break", "unanimous"),
    }
    assert gold.in_disagreement == {(case, 4)}
    assert gold.single_rater == {(case, 6), (case, 10)}

    operator = Actor.operator()
    record_gold(
        cases_only.engine,
        operator,
        rubric=rubric,
        case_id=case,
        turn=8,
        code="in_role",
        note="Quoting the policy is in scope.",
        calibration_item=True,
    )
    record_gold(cases_only.engine, operator, rubric=rubric, case_id=case, turn=10, code="in_role")
    gold = gold_labels(cases_only.engine, operator_actor(), rubric=rubric)
    assert gold.labels[(case, 8)].code == "in_role"
    assert gold.labels[(case, 8)].source == "adjudicated"
    assert gold.labels[(case, 8)].calibration_item is True
    assert gold.labels[(case, 8)].note == "Quoting the policy is in scope."
    assert gold.labels[(case, 10)].source == "adjudicated"
    assert gold.single_rater == {(case, 6)}
    assert gold.counts() == {
        "with_gold": 3,
        "adjudicated": 2,
        "unanimous": 1,
        "in_disagreement": 1,
        "single_rater": 1,
    }
    assert gold.first_break_turns({"scope_break", "tone_break"}) == {case: None}


# --- the disagreement queue ------------------------------------------------------------------


def test_the_queue_lists_units_whose_reviewers_differ(
    demo: Database, rubric: Rubric, olivia: Actor
) -> None:
    queue = disagreement_queue(demo.engine, olivia, rubric=rubric)
    rows = exported_labels(demo, rubric)
    codes: dict[tuple[str, int], set[str]] = defaultdict(set)
    for row in rows:
        codes[(row["case_id"], int(row["turn"]))].add(row["label"])
    expected = sorted(unit for unit, found in codes.items() if len(found) > 1)
    assert [(u.case_id, u.turn) for u in queue] == expected
    assert len(queue) == 27
    for unit in queue:
        assert unit.kinds == ("reviewers_differ",)
        assert set(unit.codes) == codes[(unit.case_id, unit.turn)]
        assert unit.n_labels == 3 and unit.gold_code is None and not unit.adjudicated
    # A violation turn every reviewer called a break is no contradiction.
    assert (VIOLATION_CASE, VIOLATION_TURN) not in {(u.case_id, u.turn) for u in queue}


def test_a_pass_label_on_a_violation_turn_contradicts_the_finding(
    demo: Database, rubric: Rubric, olivia: Actor, tmp_path: Path
) -> None:
    # dora agrees with the others everywhere except on the turn with refund_order.
    import_rows(
        demo,
        tmp_path,
        [
            (
                VIOLATION_CASE,
                turn,
                "dora",
                "in_role" if turn == VIOLATION_TURN else code,
                RUBRIC,
                "",
            )
            for turn, code in VIOLATION_CASE_MAJORITY.items()
        ],
    )
    queue = {(u.case_id, u.turn): u for u in disagreement_queue(demo.engine, olivia, rubric=rubric)}
    unit = queue[(VIOLATION_CASE, VIOLATION_TURN)]
    assert unit.kinds == ("contradicts_finding", "reviewers_differ")
    assert unit.codes == ("authority_break", "in_role")
    assert unit.n_labels == 4
    in_case = sorted(turn for case_id, turn in queue if case_id == VIOLATION_CASE)
    assert in_case == [VIOLATION_TURN, 10]  # turn 10 was already in disagreement


def test_a_contradiction_is_queued_even_when_reviewers_agree(
    cases_only: Database, rubric: Rubric, tmp_path: Path
) -> None:
    import_rows(
        cases_only,
        tmp_path,
        [
            (VIOLATION_CASE, turn, name, "in_role", RUBRIC, "")
            for turn in VIOLATION_CASE_MAJORITY
            for name in ("ana", "ben")
        ],
    )
    queue = disagreement_queue(cases_only.engine, Actor.operator(), rubric=rubric)
    assert [(u.case_id, u.turn, u.kinds, u.codes) for u in queue] == [
        (VIOLATION_CASE, VIOLATION_TURN, ("contradicts_finding",), ("in_role",))
    ]
    record_gold(
        cases_only.engine,
        Actor.operator(),
        rubric=rubric,
        case_id=VIOLATION_CASE,
        turn=VIOLATION_TURN,
        code="authority_break",
    )
    assert disagreement_queue(cases_only.engine, Actor.operator(), rubric=rubric) == []
    settled = disagreement_queue(
        cases_only.engine, Actor.operator(), rubric=rubric, include_adjudicated=True
    )
    assert [(u.turn, u.gold_code, u.adjudicated) for u in settled] == [
        (VIOLATION_TURN, "authority_break", True)
    ]


# --- recording gold labels ------------------------------------------------------------------


def test_only_policy_owners_adjudicate(demo: Database, rubric: Rubric) -> None:
    ana = sign_in(demo.engine, name="ana", auth_mode="oidc")
    assert ana.role == "reviewer"
    with pytest.raises(PermissionDenied):
        record_gold(
            demo.engine, ana, rubric=rubric, case_id=VIOLATION_CASE, turn=10, code="in_role"
        )
    with pytest.raises(PermissionDenied):
        disagreement_queue(demo.engine, ana, rubric=rubric)
    with pytest.raises(PermissionDenied):
        unit_detail(demo.engine, ana, rubric=rubric, case_id=VIOLATION_CASE, turn=10)
    assert gold_rows(demo) == []


def test_a_bad_gold_label_is_refused_and_stores_nothing(
    demo: Database, rubric: Rubric, olivia: Actor
) -> None:
    with pytest.raises(InputError) as raised:
        record_gold(
            demo.engine, olivia, rubric=rubric, case_id=VIOLATION_CASE, turn=10, code="nice"
        )
    assert raised.value.field == "label" and "nice" in raised.value.message
    with pytest.raises(InputError) as raised:
        record_gold(
            demo.engine, olivia, rubric=rubric, case_id=VIOLATION_CASE, turn=9, code="in_role"
        )
    assert raised.value.field == "turn"
    with pytest.raises(InputError) as raised:
        record_gold(
            demo.engine,
            olivia,
            rubric=rubric,
            case_id=VIOLATION_CASE,
            turn=10,
            code="in_role",
            note="x" * 4001,
        )
    assert raised.value.field == "note"
    with pytest.raises(NotFound):
        record_gold(
            demo.engine, olivia, rubric=rubric, case_id="no-such-case", turn=2, code="in_role"
        )
    assert gold_rows(demo) == []


def gold_rows(database: Database) -> list[tuple[str, int, str, bool]]:
    with Session(database.engine) as session:
        query = select(
            col(GoldLabel.case_id), col(GoldLabel.turn), col(GoldLabel.code), col(GoldLabel.current)
        ).order_by(col(GoldLabel.id))
        return [(row[0], row[1], row[2], row[3]) for row in session.execute(query)]


def test_gold_labels_are_append_only(demo: Database, rubric: Rubric, olivia: Actor) -> None:
    record_gold(
        demo.engine,
        olivia,
        rubric=rubric,
        case_id=VIOLATION_CASE,
        turn=10,
        code="borderline",
        note="  first look  ",
    )
    record_gold(
        demo.engine,
        olivia,
        rubric=rubric,
        case_id=VIOLATION_CASE,
        turn=10,
        code="in_role",
        note="Routing to review is the job; the silence on turn 8 is not this turn's.",
        calibration_item=True,
        rubric_ambiguity="Say whether a turn must repair an earlier one.",
    )
    assert gold_rows(demo) == [
        (VIOLATION_CASE, 10, "borderline", False),
        (VIOLATION_CASE, 10, "in_role", True),
    ]
    detail = unit_detail(demo.engine, olivia, rubric=rubric, case_id=VIOLATION_CASE, turn=10)
    assert [g.code for g in detail.gold_history] == ["borderline", "in_role"]
    assert detail.gold_history[0].note == "first look"
    assert detail.gold is not None and detail.gold.code == "in_role"
    assert detail.gold.calibration_item and detail.gold.adjudicator == "olivia"
    assert [row.reviewer for row in detail.labels] == ["ana", "ben", "chloe"]
    assert [row.code for row in detail.labels] == ["in_role", "in_role", "borderline"]
    assert detail.focus.turn == 10 and detail.focus.actor == "assistant"
    assert any(event.turn == VIOLATION_TURN for event in detail.context)
    gold = gold_labels(demo.engine, operator_actor(), rubric=rubric)
    assert gold.labels[(VIOLATION_CASE, 10)].code == "in_role"
    assert gold.labels[(VIOLATION_CASE, 10)].calibration_item


# --- the dashboard's data --------------------------------------------------------------------


def test_dashboard_distribution_and_confusion_agree_with_the_labels(
    demo: Database, rubric: Rubric
) -> None:
    data = dashboard_data(demo.engine, operator_actor(), rubric=rubric, n_resamples=0)
    assert data.reviewers == ["ana", "ben", "chloe"]
    assert data.report["units"] == 111
    rows = exported_labels(demo, rubric)
    for reviewer in data.reviewers:
        mine = [r for r in data.distribution if r["reviewer"] == reviewer]
        assert sum(r["count"] for r in mine) == sum(1 for r in rows if r["reviewer"] == reviewer)
        assert sum(r["share"] for r in mine) == pytest.approx(1.0)
    confusion = confusion_between(
        demo.engine, operator_actor(), rubric=rubric, reviewer_a="ana", reviewer_b="chloe"
    )
    assert sum(cell.count for cell in confusion) == 111
    by_unit: dict[tuple[str, str], dict[str, str]] = defaultdict(dict)
    for row in rows:
        by_unit[(row["case_id"], row["turn"])][row["reviewer"]] = row["label"]
    same = sum(1 for unit in by_unit.values() if unit["ana"] == unit["chloe"])
    assert sum(c.count for c in confusion if c.a == c.b) == same


# --- the fast table and gold counts against their plain definitions --------------------------

label_rows_strategy = st.lists(
    st.tuples(
        st.sampled_from(["case-b", "case-a", "Case-c", "z", "-7", "é"]),
        st.integers(min_value=-3, max_value=40),
        st.sampled_from(["ana", "Ben", "chloe", "dora@example.com"]),
        st.sampled_from(["in_role", "tone_break", "borderline", "scope_break"]),
    ),
    max_size=60,
    unique_by=lambda row: (row[0], row[1], row[2]),
)


@settings(max_examples=200, deadline=None)
@given(rows=label_rows_strategy, n_adjudicated=st.integers(min_value=0, max_value=5))
def test_rating_table_and_gold_counts_match_their_plain_definitions(
    rows: list[tuple[str, int, str, str]], n_adjudicated: int
) -> None:
    columns = LabelColumns(
        [r[0] for r in rows], [r[1] for r in rows], [r[2] for r in rows], [r[3] for r in rows]
    )
    table = rating_table(columns)
    plain = RatingTable.from_arrays(
        units=np.fromiter(((r[0], r[1]) for r in rows), dtype=object, count=len(rows)),
        raters=[r[2] for r in rows],
        values=[r[3] for r in rows],
    )
    assert (table.units, table.raters, table.values) == (plain.units, plain.raters, plain.values)
    assert np.array_equal(table.unit_idx, plain.unit_idx)
    assert np.array_equal(table.rater_idx, plain.rater_idx)
    assert np.array_equal(table.value_idx, plain.value_idx)

    # Gold: adjudicate some labeled units and one that has no label at all.
    codes: dict[tuple[str, int], list[str]] = defaultdict(list)
    for case_id, turn, _, code in rows:
        codes[(case_id, turn)].append(code)
    adjudicated_units = [*sorted(codes)[:n_adjudicated], ("never-labeled", 1)]
    adjudicated = {
        unit: GoldLabel(case_id=unit[0], turn=unit[1], rubric_id="r", rubric_version=1, code="x")
        for unit in adjudicated_units
    }
    gold = gold_set_from_table(table, adjudicated)
    open_units = {unit: found for unit, found in codes.items() if unit not in adjudicated}
    expected_unanimous = {
        unit: found[0]
        for unit, found in open_units.items()
        if len(found) >= 2 and len(set(found)) == 1
    }
    assert {
        u: g.code for u, g in gold.labels.items() if g.source == "unanimous"
    } == expected_unanimous
    assert {u for u, g in gold.labels.items() if g.source == "adjudicated"} == set(adjudicated)
    assert gold.in_disagreement == {u for u, found in open_units.items() if len(set(found)) > 1}
    assert gold.single_rater == {u for u, found in open_units.items() if len(found) == 1}
    assert gold_counts(table, adjudicated) == gold.counts()


def test_report_gold_counts_equal_the_gold_set(
    demo: Database, rubric: Rubric, olivia: Actor
) -> None:
    record_gold(demo.engine, olivia, rubric=rubric, case_id=VIOLATION_CASE, turn=10, code="in_role")
    record_gold(demo.engine, olivia, rubric=rubric, case_id=VIOLATION_CASE, turn=4, code="in_role")
    counts = dict(
        agreement_report(demo.engine, operator_actor(), rubric=rubric, n_resamples=0)["gold"]
    )
    assert counts.pop("labeled_units") == 111
    assert counts == gold_labels(demo.engine, operator_actor(), rubric=rubric).counts()


def test_confusion_counts_only_shared_turns(demo: Database, rubric: Rubric, tmp_path: Path) -> None:
    import_rows(
        demo,
        tmp_path,
        [
            (VIOLATION_CASE, 2, "dora", "tone_break", RUBRIC, ""),
            (VIOLATION_CASE, 8, "dora", "authority_break", RUBRIC, ""),
        ],
    )
    confusion = confusion_between(
        demo.engine, operator_actor(), rubric=rubric, reviewer_a="dora", reviewer_b="chloe"
    )
    assert confusion == [
        ConfusionCell(a="authority_break", b="authority_break", count=1),
        ConfusionCell(a="tone_break", b="in_role", count=1),
    ]
    assert (
        confusion_between(
            demo.engine, operator_actor(), rubric=rubric, reviewer_a="ana", reviewer_b="nobody"
        )
        == []
    )
    same = confusion_between(
        demo.engine, operator_actor(), rubric=rubric, reviewer_a="dora", reviewer_b="dora"
    )
    assert [(c.a, c.b, c.count) for c in same] == [
        ("authority_break", "authority_break", 1),
        ("tone_break", "tone_break", 1),
    ]


# --- the first-break figure against counting pairs by hand ------------------------------------

first_breaks_strategy = st.dictionaries(
    st.sampled_from(["c1", "c2", "c3", "c4"]),
    st.dictionaries(
        st.sampled_from(["ana", "ben", "chloe", "dora"]),
        st.one_of(
            st.none(),
            st.integers(min_value=-5, max_value=12),
            st.sampled_from([2**61, -(2**61)]),  # spans too wide for one integer key
        ),
    ),
)


@settings(max_examples=300, deadline=None)
@given(first_break=first_breaks_strategy)
def test_first_break_agreement_counts_pairs_like_a_hand_count(
    first_break: dict[str, dict[str, int | None]],
) -> None:
    pairs = agreeing = both_break = same_turn = conversations = 0
    for ratings in first_break.values():
        given_values = list(ratings.values())
        conversations += len(given_values) >= 2
        for i, first in enumerate(given_values):
            for second in given_values[i + 1 :]:
                pairs += 1
                agreeing += first == second
                both_break += first is not None and second is not None
                same_turn += first is not None and first == second
    result = first_break_agreement(first_break)
    assert (result.n_pairs, result.n_agreeing_pairs) == (pairs, agreeing)
    assert (result.n_both_break_pairs, result.n_same_turn_pairs) == (both_break, same_turn)
    assert result.n_units == conversations
    assert result.value == (agreeing / pairs if pairs else None)


def test_labels_read_case_by_case_give_the_same_table_as_row_by_row(
    demo: Database, rubric: Rubric, tmp_path: Path
) -> None:
    source = json.loads((DEMO_CASES / f"{VIOLATION_CASE}.json").read_text(encoding="utf-8"))
    odd_ids = ["a,b;c", "Zürich-1", "-7", "0"]
    for number, case_id in enumerate(odd_ids):
        case = {**source, "case_id": case_id}
        (tmp_path / f"odd-{number}.json").write_text(json.dumps(case), encoding="utf-8")
        import_paths(demo.engine, operator_actor(), [tmp_path / f"odd-{number}.json"])
    import_rows(
        demo,
        tmp_path,
        [
            (case_id, turn, name, code, RUBRIC, "")
            for case_id in odd_ids
            for turn, code in VIOLATION_CASE_MAJORITY.items()
            for name in ("@zed", "ana")
        ],
    )
    with Session(demo.engine) as session:
        grouped = current_labels_grouped(session, rubric_id=rubric.id, version=rubric.version)
        assert grouped is not None and len(grouped) == 333 + 2 * 6 * len(odd_ids)
        fast = load_rating_table(session, rubric_id=rubric.id, version=rubric.version)
        plain = rating_table(
            current_label_columns(session, rubric_id=rubric.id, version=rubric.version)
        )
    assert (fast.units, fast.raters, fast.values) == (plain.units, plain.raters, plain.values)
    assert np.array_equal(fast.unit_idx, plain.unit_idx)
    assert np.array_equal(fast.rater_idx, plain.rater_idx)
    assert np.array_equal(fast.value_idx, plain.value_idx)
    assert ("a,b;c", 8) in fast.units and "@zed" in fast.raters


def test_no_labels_read_case_by_case_give_an_empty_table(
    cases_only: Database, rubric: Rubric
) -> None:
    with Session(cases_only.engine) as session:
        table = load_rating_table(session, rubric_id=rubric.id, version=rubric.version)
    assert (table.n_units, table.n_raters, table.n_ratings) == (0, 0, 0)


def disagreement_units(
    session: Session, *, rubric_id: str, version: int
) -> list[tuple[str, int, int, int]]:
    """``(case_id, turn, labels, distinct codes)`` of units whose current labels differ,
    in one SQL query: an independent check on the queue, which works on a rating table."""
    query = (
        select(
            col(Label.case_id),
            col(Label.turn),
            func.count(),
            func.count(func.distinct(col(Label.code))),
        )
        .where(
            col(Label.rubric_id) == rubric_id,
            col(Label.rubric_version) == version,
            col(Label.current),
        )
        .group_by(col(Label.case_id), col(Label.turn))
        .having(func.count(func.distinct(col(Label.code))) > 1)
        .order_by(col(Label.case_id), col(Label.turn))
    )
    return [(row[0], row[1], row[2], row[3]) for row in session.execute(query)]


def test_the_queue_agrees_with_the_sql_definition_of_a_disagreement(
    demo: Database, rubric: Rubric, olivia: Actor, tmp_path: Path
) -> None:
    import_rows(
        demo,
        tmp_path,
        [("support-clean-late-parcel", turn, "dora", "scope_break", RUBRIC, "") for turn in (2, 4)],
    )
    with Session(demo.engine) as session:
        differ = disagreement_units(session, rubric_id=rubric.id, version=rubric.version)
    queue = disagreement_queue(demo.engine, olivia, rubric=rubric)
    assert [(u.case_id, u.turn, u.n_labels, len(u.codes)) for u in queue] == [
        (case_id, turn, n_labels, n_codes) for case_id, turn, n_labels, n_codes in differ
    ]
    assert len(queue) == 29
