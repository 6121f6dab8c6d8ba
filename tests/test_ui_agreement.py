"""The agreement dashboard and the adjudication page, driven through Streamlit's AppTest.

Every test runs the real entry script (sign-in, navigation) on a demo-loaded SQLite
file, then switches to the page. Local mode makes the person an admin; OIDC mode
with a seeded ``st.user`` signs in an existing reviewer or policy owner.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from sqlalchemy import Engine, select
from sqlmodel import Session, col
from streamlit.testing.v1 import AppTest

import storage.engine
from review_app.services.access.actors import Actor, operator_actor, sign_in
from review_app.services.cases.importing import import_paths
from review_app.services.exchange.demo import DEMO_CASES
from review_app.services.exchange.labels_io import import_labels
from review_app.services.judging.drift import drift_report
from review_app.services.judging.run_defaults import choose_team_judge
from review_app.services.labels.adjudication import disagreement_queue
from review_app.services.review.agreement_reports import agreement_report, confusion_between
from review_app.services.rubrics.rubric_catalog import sync_rubrics
from review_app.services.team.queue import assign_cases, open_review_work
from review_app.ui.charts import confusion_rows
from storage.engine import create_database_engine
from storage.models import GoldLabel
from tests.conftest import REPO, write_lock
from tests.ui_support import app_database, demo_template, plain

APP = Path(__file__).resolve().parents[1] / "review_app" / "ui" / "app.py"
RUBRIC = "role-adherence@1"
ADMIN = "root"
TIMEOUT = 60


@pytest.fixture(scope="module")
def demo_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return demo_template(tmp_path_factory.mktemp("ui") / "ui.db", local_user=ADMIN)


@pytest.fixture
def engine(demo_file: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Engine]:
    with app_database(demo_file, tmp_path, monkeypatch, local_user=ADMIN) as url:
        engine = create_database_engine(url)
        yield engine
        engine.dispose()


def open_page(page: str, *, user: str | None = None, **query: str) -> AppTest:
    """The app after its first run, switched to ``page`` (``views/<name>.py``)."""
    at = AppTest.from_file(str(APP), default_timeout=TIMEOUT)
    if user is not None:
        at.user = {"is_logged_in": True, "email": user, "name": user.title()}
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    for key, value in query.items():
        at.query_params[key] = value
    at.switch_page(page).run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def charts(at: AppTest) -> list[tuple[dict[str, Any], list[dict[str, Any]]]]:
    """(Vega-Lite spec, data rows) of each Altair chart on the page, in page order.

    Streamlit moves a chart's inline data out of the spec into an Arrow table.
    """
    found = []
    for chart in at.get("vega_lite_chart"):
        spec = json.loads(chart.proto.spec)
        tables = [chart.proto.data.data] if chart.proto.data.data else []
        tables += [named.data.data for named in chart.proto.datasets]  # one per layer's data
        rows = [row for table in tables for row in pa.ipc.open_stream(table).read_all().to_pylist()]
        if not tables:  # layers with data of their own stay inline in the spec
            for values in spec.get("datasets", {}).values():
                rows.extend(values)
            for layer in spec.get("layer", []):
                rows.extend(layer.get("data", {}).get("values", []))
        found.append((spec, rows))
    return found


def links(at: AppTest) -> list[tuple[str, str, str]]:
    """(page, label, query string) of every page link in the main area."""
    return [
        (link.proto.page, plain(link.proto.label), link.proto.query_string)
        for link in at.get("page_link")
    ]


def rubric_of(engine: Engine) -> Any:
    return sync_rubrics(engine, operator_actor()).get(RUBRIC)


# --- the dashboard ---------------------------------------------------------------------------


def test_dashboard_draws_its_charts_from_the_report(engine: Engine) -> None:
    at = open_page("views/agreement.py")
    assert at.title[0].value == "Agreement"
    report = agreement_report(engine, operator_actor(), rubric=rubric_of(engine), n_resamples=0)
    assert (
        f"{report['units']} units · 3 reviewers · {report['ratings']} labels" in at.caption[0].value
    )

    drawn = charts(at)
    # coefficients, pairwise kappa, labels per reviewer, confusion, drift by position,
    # a reviewer's confusion matrix (reliability), alpha over time
    assert len(drawn) == 7
    assert all(
        spec["$schema"].startswith("https://vega.github.io/schema/vega-lite/") for spec, _ in drawn
    )
    coefficients = {row["coefficient"]: row["value"] for row in drawn[0][1]}
    # no null for Vega to stretch a scale over ("Infinite extent")
    assert all(row["value"] is not None for row in drawn[0][1])
    spec = drawn[0][0]
    (rule,) = [layer for layer in spec["layer"] if layer["mark"]["type"] == "rule"]
    intervals = rule["data"].get("values") or spec["datasets"][rule["data"]["name"]]
    assert intervals and all(
        row["low"] is not None and row["high"] is not None for row in intervals
    )
    assert coefficients["alpha (codes)"] == pytest.approx(report["krippendorff_alpha"]["value"])
    assert coefficients["Fleiss' kappa"] == pytest.approx(report["fleiss_kappa"]["value"])
    kappa = {(r["reviewer_a"], r["reviewer_b"]): r["kappa"] for r in drawn[1][1]}
    for pair, coefficient in report["cohen_kappa"].items():
        first, second = pair.split("|")
        assert kappa[(first, second)] == pytest.approx(coefficient["value"])
        assert kappa[(second, first)] == pytest.approx(coefficient["value"])
    # Beside the chart, each pair's kappa with its interval (the page's 500 resamples).
    with_intervals = agreement_report(
        engine, operator_actor(), rubric=rubric_of(engine), n_resamples=500
    )
    (pair_table,) = [t.value for t in at.dataframe if "reviewers" in t.value.columns]
    for row in pair_table.to_dict("records"):
        coefficient = with_intervals["cohen_kappa"][row["reviewers"].replace(" and ", "|")]
        assert row["kappa"] == f"{coefficient['value']:.2f}"
        low, high = coefficient["ci95"]
        assert row["95% interval"] == f"[{low:.2f}, {high:.2f}]"
    assert len(pair_table) == 3
    assert any(
        plain(c.value)
        == "95% intervals: percentile bootstrap over conversations (cluster bootstrap)"
        for c in at.caption
    )
    shares = drawn[2][1]
    assert {row["reviewer"] for row in shares} == {"ana", "ben", "chloe"}
    assert sum(row["count"] for row in shares) == report["ratings"]
    drift = drift_report(engine, operator_actor(), rubric=rubric_of(engine), n_resamples=10)
    gold_rows = [row for row in drawn[4][1] if row["source"] == "gold"]
    assert [row["rate"] for row in gold_rows] == pytest.approx(
        [b["rate"] for b in drift["sources"][0]["by_position"]]
    )
    assert len(gold_rows) >= 1  # the demo has few gold turns: one pooled bin
    (drift_table,) = [t.value for t in at.dataframe if "reviewer alpha" in t.value.columns]
    assert list(drift_table["group"]) == [
        *(r["bin"] for r in drift["agreement"]["by_position"]),
        *(r["role"] for r in drift["agreement"]["by_role"]),
    ]
    confusion = drawn[3][1]
    cells = confusion_between(
        engine, operator_actor(), rubric=rubric_of(engine), reviewer_a="ana", reviewer_b="ben"
    )
    assert confusion == confusion_rows(cells, "ana", "ben")
    assert [(row["ana"], row["ben"], row["count"]) for row in confusion] == [
        (cell.a, cell.b, cell.count) for cell in cells
    ]

    # One link per open disagreement, each opening that unit on the adjudication page.
    queue = disagreement_queue(engine, Actor.operator(), rubric=rubric_of(engine))
    assert len(queue) == 27
    assert links(at) == [
        ("adjudicate", f"{u.case_id} · turn {u.turn}", f"case={u.case_id}&turn={u.turn}")
        for u in queue
    ]


def test_choosing_two_reviewers_redraws_the_confusion_chart(engine: Engine) -> None:
    at = open_page("views/agreement.py")
    at.selectbox(key="confusion_b").set_value("chloe").run()
    assert not at.exception
    confusion = charts(at)[3][1]
    assert confusion == confusion_rows(
        confusion_between(
            engine, operator_actor(), rubric=rubric_of(engine), reviewer_a="ana", reviewer_b="chloe"
        ),
        "ana",
        "chloe",
    )
    assert sum(cell["count"] for cell in confusion) == 111


def test_a_policy_owner_signed_in_by_oidc_sees_the_dashboard(
    engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("REVIEW_APP_AUTH", "oidc")
    at = open_page("views/agreement.py", user="olivia")
    assert at.title[0].value == "Agreement"
    assert len(charts(at)) == 7
    assert not at.error


def page_texts(at: AppTest) -> list[str]:
    """Every text the page shows: headings, alerts, captions, Markdown, expander labels,
    and every cell and column name of every table."""
    texts = [
        str(e.value)
        for kind in ("title", "subheader", "markdown", "caption", "warning", "info", "error")
        for e in getattr(at, kind)
    ]
    texts += [e.label for e in at.expander]
    for table in at.dataframe:
        texts += [str(c) for c in table.value.columns]
        texts += [str(v) for v in table.value.astype(str).to_numpy().ravel()]
    return texts


def test_the_dashboard_reads_alpha_in_one_sentence_and_groups_its_cautions(
    engine: Engine,
) -> None:
    at = open_page("views/agreement.py")
    report = agreement_report(engine, operator_actor(), rubric=rubric_of(engine))
    sentences = [plain(h.value) for h in at.subheader if h.value.startswith("alpha ")]
    assert len(sentences) == 1
    assert sentences[0].startswith(f"alpha {report['krippendorff_alpha']['value']:.2f} [")
    assert (
        "reviewers agree on codes only fairly; the confusion below shows which codes"
        in (sentences[0])
    )
    assert any(
        plain(m.value).startswith("ben and chloe agree least: kappa 0.2") for m in at.markdown
    )
    # No yellow flood: the cautions sit in one collapsed list, in plain words.
    assert not [w for w in at.warning if "queue" not in w.value]
    (cautions,) = [e for e in at.expander if e.label.startswith("Cautions")]
    assert [plain(m.value) for m in cautions.markdown] == [
        "- 17 conversations were read by three reviewers each, fewer than 30: agreement on whether "
        "and where a conversation breaks is not reported."
    ]
    # The charts come before the cautions.
    labels = [str(getattr(e, "label", getattr(e, "value", ""))) for e in at.main]
    assert labels.index(cautions.label) > labels.index("Coefficients by rubric version")


def test_a_part_way_reviewer_shows_not_enough_data_and_no_internal_text(
    engine: Engine, tmp_path: Path
) -> None:
    labels = tmp_path / "rita.csv"
    labels.write_text(
        "case_id,turn,reviewer,label,rubric,rationale\n"
        + "".join(
            f"support-delayed-refund-violation,{turn},rita,{code},{RUBRIC},\n"
            for turn, code in ((2, "in_role"), (4, "in_role"), (6, "tone_break"))
        ),
        encoding="utf-8",
    )
    catalog = sync_rubrics(engine, operator_actor())
    import_labels(engine, Actor.operator(), labels, catalog=catalog)
    report = agreement_report(engine, operator_actor(), rubric=rubric_of(engine))
    assert report["fleiss_kappa"]["n_units"] == 3  # Fleiss' kappa from three units
    assert report["fleiss_kappa"]["value"] is not None
    assert "cohen_kappa ana|rita: fewer than 30 pairable units" in report["warnings"]

    at = open_page("views/agreement.py")
    (cautions,) = [e for e in at.expander if e.label.startswith("Cautions")]
    shown = [plain(m.value) for m in cautions.markdown]
    assert "- ana and rita share 3 turns, fewer than 30: their kappa is not shown." in shown
    assert (
        "- Fleiss' kappa rests on 3 turns with two reviewers, fewer than 30: it is not shown."
        in shown
    )
    assert not [w for w in at.warning if "queue" not in w.value], "no warning outside the list"
    # Not plotted: neither in the coefficient chart nor as a coloured pair cell.
    drawn = charts(at)
    assert "Fleiss' kappa" not in {row["coefficient"] for row in drawn[0][1]}
    rita = [r for r in drawn[1][1] if "rita" in (r["reviewer_a"], r["reviewer_b"])]
    assert rita and all(r["kappa"] is None and r["text"] == "—" for r in rita)
    # Written out instead, in the tables.
    (table,) = [t.value for t in at.dataframe if "coefficient" in t.value.columns]
    (fleiss,) = table[table["coefficient"] == "Fleiss' kappa"].to_dict("records")
    assert fleiss["value"] == "not enough data (3 units)"
    assert fleiss["95% interval"] == "—"
    (pairs,) = [t.value for t in at.dataframe if "reviewers" in t.value.columns]
    (ana_rita,) = pairs[pairs["reviewers"] == "ana and rita"].to_dict("records")
    assert ana_rita["kappa"] == "not enough data (3 units)"
    texts = page_texts(at)
    for internal in (r"\bNone\b", r"\bnan\b", "cohen_kappa", "fleiss_kappa", "pairable", r"\|"):
        assert not [t for t in texts if re.search(internal, t)], internal


# --- adjudication ------------------------------------------------------------------------------


def gold_rows(engine: Engine) -> list[tuple[str, int, str, str | None, bool, str | None, bool]]:
    with Session(engine) as session:
        query = select(
            col(GoldLabel.case_id),
            col(GoldLabel.turn),
            col(GoldLabel.code),
            col(GoldLabel.note),
            col(GoldLabel.calibration_item),
            col(GoldLabel.rubric_ambiguity),
            col(GoldLabel.current),
        ).order_by(col(GoldLabel.id))
        return [tuple(row) for row in session.execute(query)]


def test_the_adjudication_queue_lists_open_units(engine: Engine) -> None:
    at = open_page("views/adjudicate.py")
    at.toggle(key="adjudicate_show_queue").set_value(True).run()
    assert at.title[0].value == "Adjudicate"
    assert any(plain(c.value) == f"27 open units under {RUBRIC}" for c in at.caption)
    queue = disagreement_queue(engine, Actor.operator(), rubric=rubric_of(engine))
    unit_links = [link for link in links(at) if link[2]]
    assert unit_links == [
        ("adjudicate", f"{u.case_id} · turn {u.turn}", f"case={u.case_id}&turn={u.turn}")
        for u in queue
    ]


def test_adjudicating_a_unit_records_gold_and_moves_to_the_next_one(engine: Engine) -> None:
    case_id, turn = "support-delayed-refund-violation", 10
    at = open_page("views/adjudicate.py", case=case_id, turn=str(turn))
    assert plain(at.subheader[0].value) == f"{case_id} · turn {turn}"
    assert at.session_state["gold_code"] is None, "nothing chosen for the policy owner"
    assert at.button(key="gold_submit").disabled
    shortcuts = {b.key: b.proto.shortcut for b in at.button if b.key.startswith("gold_pick_")}
    assert list(shortcuts.values()) == [str(n) for n in range(1, 10)], "digits choose"
    assert at.button(key="gold_submit").proto.shortcut.lower() == "enter"
    page_text = " ".join(m.value for m in at.markdown)
    for reviewer, code in (("ana", "in_role"), ("ben", "in_role"), ("chloe", "borderline")):
        assert f"`{reviewer}`: `{code}`" in page_text
    assert any("refund from turn 8" in t.value for t in at.text)  # chloe's rationale

    # every widget change reruns the page: each must keep the unit open and in the address
    at.button(key="gold_pick_borderline").click().run()
    at.button(key="gold_pick_in_role").click().run()  # the policy owner changes their mind
    assert at.query_params == {"case": case_id, "turn": str(turn)}
    at.text_area(key="gold_note").input("Routing to review is the job of this turn.").run()
    at.checkbox(key="gold_calibration").check().run()
    assert plain(at.subheader[0].value) == f"{case_id} · turn {turn}"
    at.query_params.clear()  # a rerun that lost the address (as browsers were seen to)
    at.text_area(key="gold_ambiguity").input("Must a turn repair an earlier one?").run()
    assert plain(at.subheader[0].value) == f"{case_id} · turn {turn}", "the unit stays open"
    assert at.query_params == {"case": case_id, "turn": str(turn)}, "and back in the address"
    assert gold_rows(engine) == [], "nothing recorded before Enter"
    at.button(key="gold_submit").click().run()
    assert not at.exception, [e.value for e in at.exception]

    assert gold_rows(engine) == [
        (
            case_id,
            turn,
            "in_role",
            "Routing to review is the job of this turn.",
            True,
            "Must a turn repair an earlier one?",
            True,
        )
    ]
    remaining = disagreement_queue(engine, Actor.operator(), rubric=rubric_of(engine))
    assert len(remaining) == 26 and (case_id, turn) not in {(u.case_id, u.turn) for u in remaining}
    following = next(u for u in remaining if (u.case_id, u.turn) > (case_id, turn))
    assert at.query_params == {"case": following.case_id, "turn": str(following.turn)}
    assert plain(at.subheader[0].value) == f"{following.case_id} · turn {following.turn}"
    # The form starts afresh for the next unit.
    assert at.text_area(key="gold_note").value == ""
    assert at.checkbox(key="gold_calibration").value is False
    assert at.session_state["gold_code"] is None, "nothing chosen on the next unit either"

    # The queue below the unit counts one open unit fewer.
    at.toggle(key="adjudicate_show_queue").set_value(True).run()
    assert any(plain(c.value) == f"26 open units under {RUBRIC}" for c in at.caption)


def test_a_gold_save_while_the_database_is_busy_keeps_the_form_for_another_try(
    engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(storage.engine, "SQLITE_BUSY_TIMEOUT_MS", 100)
    case_id, turn = "support-delayed-refund-violation", 10
    at = open_page("views/adjudicate.py", case=case_id, turn=str(turn))
    at.button(key="gold_pick_in_role").click().run()
    at.text_area(key="gold_note").input("Routing to review is the job of this turn.").run()
    with write_lock(Path(engine.url.database or "")):
        at.button(key="gold_submit").click().run()
        assert not at.exception, [e.value for e in at.exception]
        assert [plain(t.value) for t in at.toast] == [
            "Not recorded: the database is busy (another writer held it for more than "
            "0.1 s); this change was not saved, try again"
        ]
    assert gold_rows(engine) == []
    assert plain(at.subheader[0].value) == f"{case_id} · turn {turn}", "the unit stays open"
    assert at.session_state["gold_code"] == "in_role"
    assert at.text_area(key="gold_note").value == "Routing to review is the job of this turn."

    at.button(key="gold_submit").click().run()  # the lock released: Enter again
    assert [(row[0], row[1], row[2]) for row in gold_rows(engine)] == [(case_id, turn, "in_role")]


def test_a_settled_unit_shows_its_gold_label(engine: Engine) -> None:
    case_id, turn = "travel-persona-tone-drift", 12
    at = open_page("views/adjudicate.py", case=case_id, turn=str(turn))
    at.button(key="gold_pick_tone_break").click().run()
    at.button(key="gold_submit").click().run()
    again = open_page("views/adjudicate.py", case=case_id, turn=str(turn))
    assert any("Gold: `tone_break` by `root`" in s.value for s in again.success)
    assert again.session_state["gold_code"] is None, "a new decision starts unchosen"
    listing = open_page("views/adjudicate.py")
    listing.toggle(key="adjudicate_show_queue").set_value(True).run()
    assert any(plain(c.value) == f"26 open units under {RUBRIC}" for c in listing.caption)
    listing.toggle(key="adjudicate_all").set_value(True).run()
    settled = [link for link in links(listing) if f"case={case_id}&turn={turn}" == link[2]]
    assert len(settled) == 1


def test_an_unknown_unit_says_so(engine: Engine) -> None:
    at = open_page("views/adjudicate.py", case="support-delayed-refund-violation", turn="99")
    assert [plain(e.value) for e in at.error] == [
        "case support-delayed-refund-violation has no turn 99"
    ]


# --- a reviewer may not use either page ---------------------------------------------------------


@pytest.mark.parametrize(
    ("page", "message"),
    [
        (
            "views/agreement.py",
            "The agreement dashboard is for policy owners; reviewers label blind.",
        ),
        ("views/adjudicate.py", "Adjudication is for policy owners."),
    ],
)
def test_a_reviewer_is_not_routed_to_the_page(
    engine: Engine, monkeypatch: pytest.MonkeyPatch, page: str, message: str
) -> None:
    """The page is not among a reviewer's (the sidebar lists their pages only); its own
    refusal (``message``) stays for a demotion between two runs."""
    monkeypatch.setenv("REVIEW_APP_AUTH", "oidc")
    with pytest.raises(ValueError, match="Could not find a navigation page"):
        open_page(page, user="ana", case="support-delayed-refund-violation", turn="10")
    assert message in (REPO / "review_app" / "ui" / page).read_text()
    assert gold_rows(engine) == []


def test_a_long_queue_lists_its_first_units_only(engine: Engine, tmp_path: Path) -> None:
    source = json.loads(
        (DEMO_CASES / "support-delayed-refund-violation.json").read_text(encoding="utf-8")
    )
    copies = tmp_path / "copies.jsonl"
    copies.write_text(
        "".join(json.dumps({**source, "case_id": f"copy-{n:03d}"}) + "\n" for n in range(40)),
        encoding="utf-8",
    )
    import_paths(engine, operator_actor(), [copies])
    labels = tmp_path / "labels.csv"
    labels.write_text(
        "case_id,turn,reviewer,label,rubric,rationale\n"
        + "".join(
            f"copy-{n:03d},{turn},{name},{code},{RUBRIC},\n"
            for n in range(40)
            for turn in (2, 4, 6, 8, 10, 12)
            for name, code in (("ana", "in_role"), ("ben", "tone_break"))
        ),
        encoding="utf-8",
    )
    import_labels(engine, Actor.operator(), labels, catalog=sync_rubrics(engine, operator_actor()))
    at = open_page("views/adjudicate.py")
    at.toggle(key="adjudicate_show_queue").set_value(True).run()
    assert any(plain(c.value) == f"{27 + 240} open units under {RUBRIC}" for c in at.caption)
    assert len([link for link in links(at) if link[2]]) == 200
    assert any(c.value.startswith("… and 67 more.") for c in at.caption)

    # The agreement page draws the first rows only: its cost does not grow with the queue.
    at = open_page("views/agreement.py")
    assert not at.exception
    assert len([link for link in links(at) if link[0] == "adjudicate"]) == 30
    assert any(c.value == "… and 237 more on the adjudication page" for c in at.caption)


def test_the_dashboard_counts_unanimous_units_apart_from_gold(engine: Engine) -> None:
    at = open_page("views/agreement.py")
    (counts,) = [c.value for c in at.caption if "unanimous:" in c.value]
    gold = agreement_report(engine, operator_actor(), rubric=rubric_of(engine))["gold"]
    assert "gold:" not in counts
    assert (
        f"adjudicated: {gold['adjudicated']} units · unanimous: {gold['unanimous']} units · "
        f"{gold['in_disagreement']} in disagreement" in counts
    )


def test_someone_with_open_review_work_is_warned_before_seeing_labels(
    engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    rubric = rubric_of(engine)
    monkeypatch.setenv("REVIEW_APP_AUTH", "oidc")
    olivia = sign_in(engine, name="olivia", auth_mode="oidc")
    assert open_review_work(engine, olivia, rubric=rubric) == 0
    notices = {
        page: [w.value for w in open_page(page, user="olivia").warning if "queue" in w.value]
        for page in ("views/agreement.py", "views/adjudicate.py")
    }
    assert notices == {"views/agreement.py": [], "views/adjudicate.py": []}
    assign_cases(
        engine,
        Actor.operator(),
        rubric=rubric,
        reviewers=["olivia"],
        overlap=10,
        case_ids=["support-clean-late-parcel", "travel-persona-tone-drift"],
    )
    notice = (
        f"You have 2 unfinished cases in your own review queue under {RUBRIC}. This page "
        "shows other reviewers' labels: label your queue first to keep your own labels blind."
    )
    assert open_review_work(engine, olivia, rubric=rubric) == 2
    adjudicate = open_page("views/adjudicate.py", user="olivia")
    assert notice in [plain(w.value) for w in adjudicate.warning]
    dashboard = open_page("views/agreement.py", user="olivia")
    dashboard.selectbox(key="agreement_rubric").set_value(RUBRIC).run()
    assert notice in [plain(w.value) for w in dashboard.warning], "about the version shown"


# --- adjudication at reviewer speed (issue 21) ---------------------------------------------------


def test_the_page_opens_on_the_first_open_unit_by_itself(engine: Engine) -> None:
    queue = disagreement_queue(engine, Actor.operator(), rubric=rubric_of(engine))
    first = queue[0]
    at = open_page("views/adjudicate.py")  # no unit in the address, no click
    assert plain(at.subheader[0].value) == f"{first.case_id} · turn {first.turn}"
    assert at.query_params == {"case": first.case_id, "turn": str(first.turn)}
    assert [b.key for b in at.button if b.key.startswith("gold_pick_")], "the choices are up"
    at.button(key="gold_pick_in_role").click().run()
    at.button(key="gold_submit").click().run()
    assert [(row[0], row[1], row[2]) for row in gold_rows(engine)] == [
        (first.case_id, first.turn, "in_role")
    ]
    # The next open page load opens the next open unit, not the settled one.
    again = open_page("views/adjudicate.py")
    assert plain(again.subheader[0].value) == f"{queue[1].case_id} · turn {queue[1].turn}"


def test_the_page_says_where_the_unit_stands_in_the_queue(engine: Engine) -> None:
    queue = disagreement_queue(engine, Actor.operator(), rubric=rubric_of(engine))
    at = open_page("views/adjudicate.py")
    assert "Unit 1 of 27 open" in [plain(c.value) for c in at.caption]
    third = queue[2]
    at = open_page("views/adjudicate.py", case=third.case_id, turn=str(third.turn))
    assert "Unit 3 of 27 open" in [plain(c.value) for c in at.caption]
    at.button(key="gold_pick_borderline").click().run()
    at.button(key="gold_submit").click().run()
    # Recorded: the next open unit was the 4th and is now the 3rd of 26.
    assert plain(at.subheader[0].value) == f"{queue[3].case_id} · turn {queue[3].turn}"
    assert "Unit 3 of 26 open" in [plain(c.value) for c in at.caption]
    settled = open_page("views/adjudicate.py", case=third.case_id, turn=str(third.turn))
    assert "This unit is settled · 26 open units left" in [plain(c.value) for c in settled.caption]


def _judge_run(
    engine: Engine, prompt_version: str, rows: list[tuple[Any, ...]], *, status: str = "complete"
) -> int:
    from datetime import UTC, datetime

    import storage.judging

    with Session(engine) as session:
        run = storage.judging.create_run(
            session,
            judge="role-judge",
            prompt_version=prompt_version,
            model="gemma-3-270m-it",
            rubric_id="role-adherence",
            rubric_version=1,
            status=status,
        )
        assert run.id is not None
        storage.judging.replace_verdicts(session, run_id=run.id, rows=rows, now=datetime.now(UTC))
        session.commit()
        return run.id


def test_the_judges_column_is_one_complete_run_for_every_unit(engine: Engine) -> None:
    case_id, turn = "support-delayed-refund-violation", 10
    # The demo judged the unit twice (prompts v1 and v2); v2 is the team's judge.
    demo = [
        json.loads(line)
        for line in (DEMO_CASES.parent / "judge_verdicts.jsonl")
        .read_text(encoding="utf-8")
        .splitlines()
        if f'"case_id": "{case_id}", "turn": {turn},' in line
    ]
    assert [d["prompt_version"] for d in demo] == ["v1", "v2"]
    assert demo[0]["label"] != demo[1]["label"]
    at = open_page("views/adjudicate.py", case=case_id, turn=str(turn))
    page_text = [m.value for m in at.markdown]
    verdict_line = f"judge: `{demo[1]['label']}` · score {demo[1]['score']:.2f}"
    assert verdict_line in page_text
    labels = page_text[page_text.index(verdict_line) - 1]
    assert labels == "**Labels** · `ana`: `in_role` · `ben`: `in_role` · `chloe`: `borderline`"
    (run_line,) = [plain(c.value) for c in at.caption if "judge's column" in c.value]
    assert run_line == (
        "The judge's column is one run for every unit, the team's judge: role-judge@v2 · "
        f"model gemma-3-270m-it (imported verdicts) · {RUBRIC} · imported, 111 turns."
    )
    assert demo[1]["reason"] in [t.value for t in at.text]

    # A newer complete run does not take the column over while the team's judge is v2,
    # nor a stopped one ever; another unit of the same page reads the same run.
    newer = _judge_run(
        engine,
        "v4",
        [(case_id, turn, "scope_break", 0.91, "Promises a refund.", None, None, 5, 1, 1)],
    )
    _judge_run(
        engine,
        "v5",
        [(case_id, turn, "in_role", 0.05, "Fine.", None, None, 5, 1, 1)],
        status="partial",
    )
    at = open_page("views/adjudicate.py", case=case_id, turn=str(turn))
    assert verdict_line in [m.value for m in at.markdown]
    # The team's judge changes to v4: the column follows, for this unit and for one v4
    # never judged (it says so rather than borrowing another run's verdict).
    rubric = rubric_of(engine)
    choose_team_judge(engine, Actor.operator(), rubric=rubric, run_id=newer)
    at = open_page("views/adjudicate.py", case=case_id, turn=str(turn))
    assert "judge: `scope_break` · score 0.91" in [m.value for m in at.markdown]
    assert any("the team's judge: role-judge@v4 · " in plain(c.value) for c in at.caption)
    other = open_page("views/adjudicate.py", case=case_id, turn="8")
    assert any(
        plain(c.value).startswith("The judge's run has no verdict on this unit")
        for c in other.caption
    )
    assert not [m.value for m in other.markdown if m.value.startswith("judge: ")]


def test_a_unit_no_judge_run_saw_says_so(engine: Engine) -> None:
    from sqlalchemy import delete

    from storage.models import JudgeVerdict

    with Session(engine) as session:
        session.execute(delete(JudgeVerdict))
        session.commit()
    at = open_page("views/adjudicate.py")
    assert any(
        plain(c.value).startswith("The judge's run has no verdict on this unit") for c in at.caption
    )


def test_recording_the_last_open_unit_says_nothing_is_left(engine: Engine) -> None:
    from review_app.services.labels.adjudication import record_gold

    rubric = rubric_of(engine)
    queue = disagreement_queue(engine, Actor.operator(), rubric=rubric)
    for unit in queue[:-1]:
        record_gold(
            engine,
            Actor.operator(),
            rubric=rubric,
            case_id=unit.case_id,
            turn=unit.turn,
            code="in_role",
        )
    at = open_page("views/adjudicate.py")
    last = queue[-1]
    assert plain(at.subheader[0].value) == f"{last.case_id} · turn {last.turn}"
    assert "Unit 1 of 1 open" in [plain(c.value) for c in at.caption]
    at.button(key="gold_pick_borderline").click().run()
    at.button(key="gold_submit").click().run()
    assert not at.exception, [e.value for e in at.exception]
    assert at.query_params == {}
    assert not at.subheader
    assert [plain(s.value) for s in at.success] == [
        "Nothing to adjudicate: every disagreement has a gold label."
    ]
    assert f"0 open units under {RUBRIC}" in [plain(c.value) for c in at.caption]


# --- intervals computed in the background ------------------------------------------------


def test_point_figures_first_then_the_intervals_once_their_job_ran(
    engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    """As on a large database (no intervals at once): the page draws the point figures
    and says the intervals are being computed; a worker's job stores them and the next
    run shows them."""
    from review_app.services.jobs.runner import list_jobs, run_worker
    from review_app.services.reports.report_jobs import REPORT_JOB
    from review_app.services.reports.report_store import INLINE_ROWS_ENV
    from review_app.ui.common import INTERVALS_NOTICE
    from review_app.ui.readings import alpha_sentence

    monkeypatch.setenv(INLINE_ROWS_ENV, "0")
    at = open_page("views/agreement.py")
    rubric = rubric_of(engine)
    point = agreement_report(engine, operator_actor(), rubric=rubric, n_resamples=0)
    sentences = [plain(h.value) for h in at.subheader if h.value.startswith("alpha ")]
    assert sentences == [alpha_sentence(point)]
    assert "[" not in sentences[0].split(":")[0]  # no interval yet
    assert [plain(n.value) for n in at.info if "Intervals" in n.value] == [INTERVALS_NOTICE]
    (pair_table,) = [t.value for t in at.dataframe if "reviewers" in t.value.columns]
    assert set(pair_table["95% interval"]) == {"—"}
    # the agreement report, the drift report and reviewer reliability, one job each
    queued = list_jobs(engine, operator_actor(), kinds=[REPORT_JOB])
    assert sorted(job.parameters["report"] for job in queued) == [
        "agreement",
        "drift",
        "reliability",
    ]

    assert run_worker(engine, until_idle=True, kinds=[REPORT_JOB]) == 3
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    full = agreement_report(engine, operator_actor(), rubric=rubric, n_resamples=500)
    sentences = [plain(h.value) for h in at.subheader if h.value.startswith("alpha ")]
    assert sentences == [alpha_sentence(full)]
    assert sentences[0].startswith(f"alpha {full['krippendorff_alpha']['value']:.2f} [")
    assert not [notice for notice in at.info if "Intervals" in notice.value]
    (pair_table,) = [t.value for t in at.dataframe if "reviewers" in t.value.columns]
    assert "—" not in set(pair_table["95% interval"])
