"""The Judge page, driven with Streamlit's AppTest from the entry script on a demo database.

Each test copies a demo-loaded SQLite file, points ``REVIEW_APP_DATABASE_URL`` at it and
clears Streamlit's caches, so no state leaks between tests. Local single-user mode makes
the person an admin; a reviewer signs in through OIDC (``AppTest.user``).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from streamlit.testing.v1 import AppTest

from review_app.cli.render_judging import render_estimate
from review_app.services.access.actors import Actor, operator_actor
from review_app.services.judging.drift import drift_report
from review_app.services.judging.estimate import break_rate_estimate
from review_app.services.judging.judge_import import import_verdicts
from review_app.services.judging.judge_report import calibration_report, disagreement_explorer
from review_app.services.judging.runs import list_judge_runs
from review_app.services.judging.selective import certified_verdicts, route_judges
from review_app.services.rubrics.rubric_catalog import sync_rubrics
from storage.engine import create_database_engine
from tests.judge_support import REPO
from tests.ui_support import app_database, demo_template, plain

APP = REPO / "review_app" / "ui" / "app.py"
RUBRIC = "role-adherence@1"
V1 = "role-judge@v1/gemma-3-270m-it"
V2 = "role-judge@v2/gemma-3-270m-it"


@pytest.fixture(scope="module")
def demo_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return demo_template(tmp_path_factory.mktemp("ui") / "demo.db", local_user="admin")


@pytest.fixture
def database_url(demo_file: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    with app_database(demo_file, tmp_path, monkeypatch, local_user="admin") as url:
        yield url


def judge_page(**user: Any) -> AppTest:
    at = AppTest.from_file(str(APP), default_timeout=120)
    if user:
        at.user = user
    at.run()
    at.switch_page("views/judge.py")
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def service_view(url: str, run_name: str, **filters: Any) -> list[dict[str, Any]]:
    engine = create_database_engine(url)
    try:
        rubric = sync_rubrics(engine, operator_actor()).get(RUBRIC)
        report = calibration_report(engine, operator_actor(), rubric=rubric, n_resamples=0)
        run = next(r for r in report["runs"] if r["name"] == run_name)
        return disagreement_explorer(
            engine, operator_actor(), rubric=rubric, report_run=run, **filters
        )
    finally:
        engine.dispose()


def service_bins(url: str, run_name: str) -> list[float]:
    """Mean predicted score of each reliability bin of a run, from the service."""
    engine = create_database_engine(url)
    try:
        report = calibration_report(
            engine,
            operator_actor(),
            rubric=sync_rubrics(engine, operator_actor()).get(RUBRIC),
            n_resamples=0,
        )
    finally:
        engine.dispose()
    run = next(r for r in report["runs"] if r["name"] == run_name)
    return [b["mean_predicted"] for b in run["scores"]["reliability"]["bins"]]


def reliability_points(at: AppTest) -> list[float]:
    """The points the reliability diagram draws (its layer with data values)."""
    [chart] = [c for c in at.get("vega_lite_chart") if "predicted" in c.proto.spec]
    spec = json.loads(chart.proto.spec)
    layers = [layer["data"]["values"] for layer in spec["layer"] if "data" in layer]
    return [point["predicted"] for values in layers for point in values if "predicted" in point]


def item_lines(at: AppTest) -> list[str]:
    """The heading line of each disagreement shown."""
    return [m.value for m in at.markdown if " · gold `" in m.value]


def test_the_page_shows_metrics_charts_runs_and_filters(database_url: str) -> None:
    at = judge_page()
    assert [t.value for t in at.title] == ["Judge calibration"]
    assert at.caption[0].value.startswith("Gold labels: 84 units (0 adjudicated, 84 unanimous)")
    tests = table(at, "replaces a reviewer?")
    assert list(tests["run"]) == [V1, V2]
    assert list(tests["gold turns"]) == [84, 84]
    # The headline is the alternative annotator test, never a "human level" claim.
    assert list(tests["replaces a reviewer?"]) == ["inconclusive", "inconclusive"]
    assert any("leaving out one reviewer at a time" in c.value for c in at.caption)
    # The policy owner's headline: the break rate by PPI++, beside reviewers and judge alone.
    [headline] = [plain(m.value) for m in at.markdown if "break rate" in m.value]
    assert re.fullmatch(
        r"Turn break rate \d+\.\d% \[\d+\.\d%, \d+\.\d%\] \(the judge's verdicts corrected by "
        r"gold, weight \d\.\d\d\); "
        r"reviewers alone say \d+\.\d% \[\d+\.\d%, \d+\.\d%\], the judge alone \d+\.\d%\.",
        headline,
    ), headline
    charts = at.get("vega_lite_chart")
    # threshold sweep, reliability, the selective-judging dial and the drift chart
    assert len(charts) == 4
    assert reliability_points(at) == pytest.approx(service_bins(database_url, V2))
    assert any("Brier" in c.value for c in at.caption)
    # the test and the metrics per run, like-for-like kappas, the alt-test per reviewer,
    # drift agreement, the break rate by stratum, the prompt versions
    assert len(at.dataframe) == 7
    # the team's judge (the demo's v2) is preselected; runs are named by their identity
    assert at.selectbox(key="judge_run").value == V2
    assert at.selectbox(key="judge_run").options == [
        f"role-judge@{v} · model gemma-3-270m-it (imported verdicts) · role-adherence@1 · imported"
        for v in ("v1", "v2")
    ]
    assert "Imported, 111 turns; shown by default: the team's judge." in [
        plain(c.value) for c in at.caption
    ]
    assert len(item_lines(at)) == len(service_view(database_url, V2))

    at.selectbox(key="judge_run").set_value(V1).run()
    assert not at.exception
    assert reliability_points(at) == pytest.approx(service_bins(database_url, V1))
    assert service_bins(database_url, V1) != service_bins(database_url, V2)
    verdict_boxes = [*at.success, *at.error, *at.warning]
    assert any(f"`{V1}`" in box.value for box in verdict_boxes)
    shown = item_lines(at)
    expected = service_view(database_url, V1)
    assert len(shown) == len(expected) > 0
    for line, item in zip(shown, expected, strict=True):
        assert line.startswith(f"`{item['case_id']}` turn {item['turn']} · gold `{item['gold']}`")
    # Every disagreement carries the reviewers' labels beside the judge's reason.
    texts = [t.value for t in at.text]
    assert sum(t.startswith("Judge: ") for t in texts) == sum(bool(i["reason"]) for i in expected)
    assert sum(t.startswith(("ana (", "ben (", "chloe (")) for t in texts) == sum(
        sum(bool(h["rationale"]) for h in i["human"]) for i in expected
    )
    assert not [t for t in texts if t.endswith("): ")], "no label line without its rationale"
    captions = [c.value for c in at.caption]
    assert sum(c.startswith("Reviewers: ") for c in captions) == sum(
        bool(i["human"]) for i in expected
    )

    at.selectbox(key="judge_kind").set_value("false_alarm").run()
    alarms = service_view(database_url, V1, kind="false_alarm")
    assert len(item_lines(at)) == len(alarms) > 0
    assert all(line.endswith("false alarm") for line in item_lines(at))

    at.selectbox(key="judge_kind").set_value("all")
    at.selectbox(key="judge_label").set_value("authority_break").run()
    by_label = service_view(database_url, V1, label="authority_break")
    assert len(item_lines(at)) == len(by_label)
    assert all("`authority_break`" in line for line in item_lines(at))

    at.selectbox(key="judge_kind").set_value("missed_break")
    at.selectbox(key="judge_label").set_value("tone_break").run()
    assert not at.exception
    missed_tone = service_view(database_url, V1, kind="missed_break", label="tone_break")
    assert len(item_lines(at)) == len(missed_tone)
    if not missed_tone:
        assert any(c.value == "None." for c in at.caption)


def chart_rows(chart: Any) -> list[dict[str, Any]]:
    """The data rows a chart draws: Streamlit moves shared inline data to Arrow tables."""
    import pyarrow as pa

    spec = json.loads(chart.proto.spec)
    tables = [chart.proto.data.data] if chart.proto.data.data else []
    tables += [named.data.data for named in chart.proto.datasets]
    rows = [row for table in tables for row in pa.ipc.open_stream(table).read_all().to_pylist()]
    if not tables:
        for layer in spec.get("layer", []):
            rows.extend(layer.get("data", {}).get("values", []))
    return rows


def test_the_selective_judging_dial_and_the_drift_chart(database_url: str) -> None:
    at = judge_page()
    engine = create_database_engine(database_url)
    try:
        rubric = sync_rubrics(engine, operator_actor()).get(RUBRIC)
        run_id = next(r.id for r in list_judge_runs(engine, operator_actor()) if r.name == V2)
        expected = {
            alpha: route_judges(
                engine,
                operator_actor(),
                rubric=rubric,
                run_ids=[run_id],
                alpha=alpha,
                delta=0.1,
            )
            for alpha in (0.1, 0.3)
        }
        drift = drift_report(engine, operator_actor(), rubric=rubric, n_resamples=10)
    finally:
        engine.dispose()
    [dial] = [c for c in at.get("vega_lite_chart") if '"coverage"' in c.proto.spec]
    points = chart_rows(dial)
    shown = {p["alpha"]: p["coverage"] for p in points}
    for alpha, report in expected.items():
        assert shown[alpha] == pytest.approx(report["coverage"])
    at.select_slider(key="judge_route_alpha").set_value(0.3).run()
    assert not at.exception
    report = expected[0.3]
    line = next(plain(m.value) for m in at.markdown if plain(m.value).startswith("At alpha 0.3"))
    if report["runs"][0]["threshold"] is None:
        assert "decides nothing" in line
    else:
        assert f"decides {report['decided_units']} of {report['judged_units']} turns" in line
    [chart] = [c for c in at.get("vega_lite_chart") if '"answers"' in c.proto.spec]
    rows = chart_rows(chart)
    gold_rows = [r for r in rows if r["source"] == "gold"]
    assert [r["rate"] for r in gold_rows] == pytest.approx(
        [b["rate"] for b in drift["sources"][0]["by_position"]]
    )
    # gold beside the run the page shows (the team's judge), not every run
    assert {r["source"] for r in rows} == {"gold", V2}


def test_the_calibrate_button_reports_too_few_breaks(database_url: str) -> None:
    at = judge_page()
    at.button(key="judge_calibrate").click().run()
    assert not at.exception
    assert [plain(e.value) for e in at.error] == [
        "Not enough gold to calibrate this judge's scores: it takes at least 5 scored turns "
        "with gold that break and 5 that stay in role; there are 1 and 83. Adjudicate more "
        "disagreements or an audit sample, then try again."
    ]
    assert not [e for e in at.error if "field --" in e.value or "fit_calibration_map" in e.value]


def table(at: AppTest, column: str) -> Any:
    """The one table on the page with ``column``."""
    (found,) = [t.value for t in at.dataframe if column in t.value.columns]
    return found


def page_texts(at: AppTest) -> list[str]:
    """Every text the page shows, table cells and column names included."""
    texts = [
        str(e.value)
        for kind in ("title", "subheader", "markdown", "caption", "warning", "info", "error")
        for e in getattr(at, kind)
    ]
    texts += [*(e.label for e in at.expander), *(s.value for s in at.success)]
    for table in at.dataframe:
        texts += [str(c) for c in table.value.columns]
        texts += [str(v) for v in table.value.astype(str).to_numpy().ravel()]
    return texts


def test_the_decision_card_says_what_the_command_prints(database_url: str) -> None:
    engine = create_database_engine(database_url)
    try:
        rubric = sync_rubrics(engine, operator_actor()).get(RUBRIC)
        run_id = next(
            r.id for r in list_judge_runs(engine, operator_actor(), rubric=rubric) if r.name == V2
        )
        estimate = break_rate_estimate(engine, operator_actor(), rubric=rubric, run_id=run_id)
    finally:
        engine.dispose()
    printed = render_estimate(estimate).splitlines()
    at = judge_page()
    texts = [plain(t) for t in page_texts(at)]
    # The reviewers-alone rate and the budget, as `review-app judge estimate` prints them.
    (alone,) = [line.strip() for line in printed if line.strip().startswith("reviewers alone:")]
    [headline] = [t for t in texts if "break rate" in t and "reviewers alone say" in t]
    assert f"reviewers alone say {alone.removeprefix('reviewers alone: ')}," in headline
    (budget,) = [line.strip() for line in printed if line.strip().startswith("budget: about")]
    assert f"Budget: {budget.removeprefix('budget: ')}." in texts
    assert (
        f"The break rate rests on {estimate['n_judged']} judged turns and "
        f"{estimate['n_gold']} with gold from adjudicated and unanimous gold (not a random "
        "sample): its interval is not valid yet." in texts
    )
    assert (
        "Next: draw an audit sample of 100 turns at random and assign it to reviewers; once "
        "it is labeled and adjudicated, the interval is valid." in texts
    )
    assert any(t.startswith("Judge kappa against gold ") for t in texts)
    # "Inconclusive" points to like-for-like kappas that the page shows.
    (verdict,) = [plain(w.value) for w in at.warning if "would pass this test too" in w.value]
    assert "Not yet: a judge that always answers" in verdict
    assert "Read the like-for-like kappas below" in verdict
    like = table(at, "kappa between them")
    assert list(like["reviewers"]) == ["ana and ben", "ana and chloe", "ben and chloe"]
    assert all(
        re.fullmatch(r"-?\d\.\d\d \[-?\d\.\d\d, -?\d\.\d\d\]", v)
        for v in like["kappa between them"]
    )
    # p-values for reading; the exact ones stay in the JSON.
    per_reviewer = table(at, "judge wins")
    assert list(per_reviewer["p-value"]) == ["p < 0.001"] * 3
    assert all(re.fullmatch(r"\d\.\d\d", v) for v in table(at, "break kappa")["kappa"])
    for internal in (
        r"\bNone\b",
        r"\bnan\b",
        r"0\.0000000",
        "field --",
        "fit_calibration_map",
        "WARNING:",
        r"\w\|\w",
    ):
        assert not [t for t in texts if re.search(internal, t)], internal


def test_p_values_are_rounded_for_reading() -> None:
    from review_app.ui.charts import alt_test_rows

    rows = alt_test_rows(
        {
            "reviewers": [
                {
                    "reviewer": r,
                    "units": 9,
                    "p_value": p,
                    "rejected": p < 0.05,
                    "advantage_probability": 0.5,
                }
                for r, p in (("a", 6e-15), ("b", 0.0012345), ("c", 0.049876), ("d", 1.0))
            ],
            "skipped": [{"reviewer": "e", "units": 2, "reason": "too few units"}],
        }
    )
    assert [r["p-value"] for r in rows] == ["p < 0.001", "p = 0.00123", "p = 0.0499", "p = 1", "—"]


def test_uploading_verdicts_adds_a_run_and_a_bad_file_stores_nothing(database_url: str) -> None:
    at = judge_page()
    rows = [
        {
            "case_id": "support-delayed-refund-violation",
            "turn": turn,
            "judge": "uploaded",
            "prompt_version": "v1",
            "model": "m",
            "label": label,
            "score": score,
        }
        for turn, label, score in ((6, "in_role", 0.9), (8, "authority_break", 0.2))
    ]
    bad = [rows[0], {**rows[1], "label": "refund_break"}]
    at.file_uploader(key="judge_file").set_value(
        ("bad.jsonl", "".join(json.dumps(r) + "\n" for r in bad).encode(), "application/json")
    )
    at.run()
    at.button(key="judge_import").click().run()
    assert not at.exception
    assert any(e.value == "Nothing was stored." for e in at.error)
    assert any(
        t.value.startswith("bad.jsonl, line 2, field label: 'refund_break' is not a code")
        for t in at.text
    )
    assert len(at.selectbox(key="judge_run").options) == 2

    at.selectbox(key="judge_score_means").set_value("adherence")
    at.file_uploader(key="judge_file").set_value(
        ("good.jsonl", "".join(json.dumps(r) + "\n" for r in rows).encode(), "application/json")
    )
    at.run()
    at.button(key="judge_import").click().run()
    assert not at.exception
    assert [plain(s.value) for s in at.success if s.value.startswith("stored")] == [
        "stored 2 verdicts in 1 runs (uploaded@v1/m: 2)"
    ]
    assert any(
        o.startswith("uploaded@v1 · model m ") for o in at.selectbox(key="judge_run").options
    )
    assert "uploaded@v1/m" in list(at.dataframe[0].value["run"])
    engine = create_database_engine(database_url)
    try:
        [run] = [r for r in list_judge_runs(engine, operator_actor()) if r.judge == "uploaded"]
        report = calibration_report(
            engine,
            operator_actor(),
            rubric=sync_rubrics(engine, operator_actor()).get(RUBRIC),
            run_ids=[run.id],
            n_resamples=0,
        )
    finally:
        engine.dispose()
    # Adherence scores were stored as break probabilities: 1 - 0.9 and 1 - 0.2.
    [entry] = report["runs"]
    assert entry["scores"]["n"] == 2
    assert entry["scores"]["reliability"]["brier_score"] == pytest.approx(
        ((0.1 - 0) ** 2 + (0.8 - 1) ** 2) / 2
    )


def test_runs_stored_elsewhere_appear_on_the_next_rerun(database_url: str, tmp_path: Path) -> None:
    """Verdicts stored by the command line (or another session) show without a restart."""
    at = judge_page()
    assert len(at.selectbox(key="judge_run").options) == 2
    path = tmp_path / "elsewhere.jsonl"
    path.write_text(
        json.dumps(
            {
                "case_id": "support-delayed-refund-violation",
                "turn": 8,
                "judge": "elsewhere",
                "prompt_version": "v1",
                "model": "m",
                "label": "authority_break",
            }
        )
        + "\n"
    )
    engine = create_database_engine(database_url)
    try:
        rubric = sync_rubrics(engine, operator_actor()).get(RUBRIC)
        import_verdicts(engine, Actor.operator(), path, rubric=rubric)
        at.run()
        options = at.selectbox(key="judge_run").options
        assert any(o.startswith("elsewhere@v1 · model m (imported verdicts)") for o in options)
        # A changed verdict of the same run (same count of rows) shows too.
        path.write_text(path.read_text().replace("authority_break", "in_role"))
        import_verdicts(engine, Actor.operator(), path, rubric=rubric)
    finally:
        engine.dispose()
    at.selectbox(key="judge_run").set_value("elsewhere@v1/m").run()
    assert not at.exception
    metrics = table(at, "recall")
    [row] = [r for _, r in metrics.iterrows() if r["run"] == "elsewhere@v1/m"]
    assert row["recall"] == "0.00"


def test_a_reviewer_sees_only_the_refusal(
    database_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("REVIEW_APP_AUTH", "oidc")
    with pytest.raises(ValueError, match="Could not find a navigation page"):
        judge_page(is_logged_in=True, email="ana", name="Ana")


def test_certified_verdicts_show_to_policy_owners_on_the_review_page(
    database_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    engine = create_database_engine(database_url)
    try:
        rubric = sync_rubrics(engine, operator_actor()).get(RUBRIC)
        run_id = next(r.id for r in list_judge_runs(engine, operator_actor()) if r.name == V2)
        report = route_judges(
            engine, operator_actor(), rubric=rubric, run_ids=[run_id], alpha=0.3, delta=0.2,
            min_units=8, apply=True, reviewers=["ana"], overlap=3,
        )  # fmt: skip
        marks = certified_verdicts(engine, operator_actor(), rubric=rubric)
    finally:
        engine.dispose()
    assert report["decided_units"] == len(marks) > 0
    (case_id, _turn), mark = sorted(marks.items())[0]
    at = AppTest.from_file(str(APP), default_timeout=120)
    at.run()
    at.switch_page("views/review.py")
    at.query_params["case"] = case_id
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    shown = [c.value for c in at.caption if "certified (run" in c.value]
    expected = sum(1 for c, _ in marks if c == case_id)
    assert len(shown) == expected
    assert shown[0].startswith(f"Judge verdict `{mark.label}` certified (run {run_id}, alpha 0.3")

    # A reviewer labels blind: the same case shows no certified verdict.
    monkeypatch.setenv("REVIEW_APP_AUTH", "oidc")
    reviewer = AppTest.from_file(str(APP), default_timeout=120)
    reviewer.user = {"is_logged_in": True, "email": "ana", "name": "Ana"}
    reviewer.run()
    reviewer.switch_page("views/review.py")
    reviewer.query_params["case"] = case_id
    reviewer.run()
    assert not reviewer.exception
    assert not [c.value for c in reviewer.caption if "certified" in c.value]
    assert any(case_id in str(m.value) for m in [*reviewer.markdown, *reviewer.caption])


def test_the_decision_card_heads_the_page_and_draws_the_audit_sample_it_asks_for(
    database_url: str,
) -> None:
    at = judge_page()
    assert plain(at.subheader[0].value) == "May this judge replace a reviewer?"
    (answer,) = [plain(w.value) for w in at.warning if "Not yet" in w.value]
    assert answer.startswith(f"`{V2}`: Not yet: a judge that always answers in_role would pass")
    assert at.number_input(key="judge_audit_size").value == 100
    at.multiselect(key="judge_audit_reviewers").set_value(["ana", "ben"])
    at.number_input(key="judge_audit_size").set_value(20)
    at.button(key="judge_audit").click()
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    engine = create_database_engine(database_url)
    try:
        rubric = sync_rubrics(engine, operator_actor()).get(RUBRIC)
        run_id = next(
            r.id for r in list_judge_runs(engine, operator_actor(), rubric=rubric) if r.name == V2
        )
        estimate = break_rate_estimate(engine, operator_actor(), rubric=rubric, run_id=run_id)
    finally:
        engine.dispose()
    # The draw is stored: the estimate now waits on its 20 audited turns.
    assert any("of 20 audited turns have no gold yet" in w for w in estimate["warnings"]), estimate[
        "warnings"
    ]
    # The outcome stays on the page (a result panel, not a toast), in words.
    assert [plain(s.value) for s in at.success] == ["Audit sample drawn and assigned."]
    (line,) = [t.value for t in at.text if "20" in t.value and "audit" in t.value.lower()]
    assert "was used before" not in line
    # It is still there after another run of the page, until dismissed.
    at.run()
    assert [t.value for t in at.text if t.value == line]
    at.button(key="judge_audit_result_dismiss").click()
    at.run()
    assert not [t.value for t in at.text if t.value == line]
    assert not at.success


def test_after_a_change_slow_reports_show_their_last_figures_until_a_job_has_new_ones(
    database_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """As on a large database where every report is slow: the first visit shows the point
    figures (intervals from a job); after a new label the page shows the figures last
    computed, says when they were computed, and the current ones once a job stored them."""
    from review_app.services.access.actors import sign_in
    from review_app.services.jobs.runner import run_worker
    from review_app.services.labels.labeling import record_label
    from review_app.services.reports.report_jobs import REPORT_JOB
    from review_app.services.reports.report_store import INLINE_ROWS_ENV, WAIT_SECONDS_ENV
    from review_app.ui.common import INTERVALS_NOTICE
    from review_app.ui.readings import kappa_sentence

    monkeypatch.setenv(INLINE_ROWS_ENV, "0")
    monkeypatch.setenv(WAIT_SECONDS_ENV, "0")
    engine = create_database_engine(database_url)
    try:
        at = judge_page()
        notices = [plain(n.value) for n in at.info if "background" in n.value]
        assert notices == [INTERVALS_NOTICE]
        # the judge report, the drift report, the break rate by stratum
        assert run_worker(engine, until_idle=True, kinds=[REPORT_JOB]) == 3
        at.run()
        assert not [n for n in at.info if "background" in n.value]
        decision = [plain(m.value) for m in at.markdown if "Judge kappa" in m.value]

        rubric = sync_rubrics(engine, operator_actor()).get(RUBRIC)
        ana = sign_in(engine, name="ana", auth_mode="oidc")
        record_label(
            engine, ana, case_id="support-delayed-refund-violation", turn=2, rubric=rubric,
            code="borderline",
        )  # fmt: skip
        at.run()
        assert not at.exception, [e.value for e in at.exception]
        (stale,) = [plain(n.value) for n in at.info if "background" in n.value]
        assert re.fullmatch(
            r"These figures were computed at \d{4}-\d\d-\d\d \d\d:\d\d UTC, before the latest "
            r"change of labels, gold labels or verdicts; the current ones are being computed in "
            r"the background and this page shows them by itself when they are ready\.",
            stale,
        )
        assert [plain(m.value) for m in at.markdown if "Judge kappa" in m.value] == decision
        # the judge report, the drift report, the estimate, the coverage, the examples and
        # the strata
        assert run_worker(engine, until_idle=True, kinds=[REPORT_JOB]) == 6
        at.run()
        assert not [n for n in at.info if "background" in n.value]
        current = calibration_report(engine, operator_actor(), rubric=rubric, n_resamples=500)
        newest = max(current["runs"], key=lambda r: r["id"])
        assert [plain(m.value) for m in at.markdown if "Judge kappa" in m.value] == [
            kappa_sentence(newest["vs_gold"]["kappa"], who="Judge kappa")
        ]
    finally:
        engine.dispose()
