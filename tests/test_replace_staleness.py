"""``import --replace`` keeps labels on turns whose conversation is unchanged and makes the
others stale: not current, kept in the history, "needs relabeling" for their reviewer."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from sqlalchemy import text

from review_app.formats.options import ImportOptions
from review_app.rubrics.model import Rubric
from review_app.services.access.actors import Actor, sign_in
from review_app.services.cases.importing import import_paths
from review_app.services.judging.judge_import import import_verdicts
from review_app.services.labels.adjudication import record_gold, unit_detail
from review_app.services.labels.labeling import case_labels, record_label
from review_app.services.rubrics.rubric_catalog import sync_rubrics
from review_app.services.team.queue import queue_page
from tests.actors import assign
from tests.conftest import Database

RUBRIC = "role-adherence@1"
CASE = "replaced-case"


def _case(transcript: list[dict[str, Any]], role: str = "Support agent.") -> dict[str, Any]:
    return {"case_id": CASE, "chatbot_role": role, "transcript": transcript}


FOUR_EVENTS = [
    {"turn": 1, "actor": "user", "text": "Where is my parcel?"},
    {"turn": 2, "actor": "assistant", "text": "Can I have your order number?"},
    {"turn": 3, "actor": "user", "text": "It is 1234."},
    {"turn": 4, "actor": "assistant", "text": "It arrives tomorrow."},
]


def _import(database: Database, tmp_path: Path, case: dict[str, Any], name: str) -> None:
    path = tmp_path / f"{name}.json"
    path.write_text(json.dumps(case))
    import_paths(database.engine, Actor.operator(), [path], ImportOptions(replace=True))


def _label_both(database: Database, rubric: Rubric, tmp_path: Path) -> Actor:
    _import(database, tmp_path, _case(FOUR_EVENTS), "first")
    ana = sign_in(database.engine, name="ana", auth_mode="local")
    assign(database.engine, rubric, "ana", CASE)
    for turn, code in ((2, "in_role"), (4, "scope_break")):
        record_label(database.engine, ana, case_id=CASE, turn=turn, rubric=rubric, code=code)
    return ana


def _rows(database: Database, sql: str) -> list[tuple[Any, ...]]:
    with database.engine.connect() as connection:
        return [tuple(row) for row in connection.execute(text(sql))]


def test_a_shorter_replacement_keeps_the_unchanged_turn_and_drops_the_vanished_one(
    database: Database, tmp_path: Path
) -> None:
    rubric = sync_rubrics(database.engine, Actor.operator()).get(RUBRIC)
    ana = _label_both(database, rubric, tmp_path)
    before = case_labels(database.engine, ana, case_id=CASE, rubric=rubric)
    assert (before.labeled_turns, before.total_turns, before.complete) == (2, 2, True)

    _import(database, tmp_path, _case(FOUR_EVENTS[:2]), "shorter")

    after = case_labels(database.engine, ana, case_id=CASE, rubric=rubric)
    # "2 of 1 labeled" is impossible: the label on the vanished turn 4 is history
    assert (after.labeled_turns, after.total_turns) == (1, 1)
    assert set(after.mine) == {2}
    assert after.needs_relabeling == frozenset()  # turn 4 is gone: nothing to relabel
    rows = _rows(database, "SELECT turn, code, current, stale FROM labels ORDER BY id")
    assert [(t, c, bool(cur), bool(st)) for t, c, cur, st in rows] == [
        (2, "in_role", True, False),
        (4, "scope_break", False, True),
    ]
    page = queue_page(database.engine, ana, rubric=rubric)
    assert [(r.case_id, r.labeled_turns, r.completed) for r in page.rows] == [(CASE, 1, True)]


def test_a_changed_turn_makes_its_label_and_later_ones_stale(
    database: Database, tmp_path: Path
) -> None:
    rubric = sync_rubrics(database.engine, Actor.operator()).get(RUBRIC)
    ana = _label_both(database, rubric, tmp_path)
    record_gold(
        database.engine, Actor.operator(), rubric=rubric, case_id=CASE, turn=2, code="in_role"
    )
    changed = [dict(event) for event in FOUR_EVENTS]
    changed[2]["text"] = "It is 9999."  # a user turn between the two assistant turns
    assert queue_page(database.engine, ana, rubric=rubric).completed == 1

    _import(database, tmp_path, _case(changed), "changed")

    after = case_labels(database.engine, ana, case_id=CASE, rubric=rubric)
    assert (after.labeled_turns, after.total_turns, after.complete) == (1, 2, False)
    assert set(after.mine) == {2}
    assert after.needs_relabeling == frozenset({4})
    assert after.blind  # no longer complete: others' labels are hidden again
    assert [row.stale for row in after.my_history[4]] == [True]
    # the gold label on turn 2 stays: nothing up to turn 2 changed
    detail = unit_detail(database.engine, Actor.operator(), rubric=rubric, case_id=CASE, turn=2)
    assert detail.gold is not None and detail.gold.code == "in_role"
    page = queue_page(database.engine, ana, rubric=rubric)
    assert [(r.labeled_turns, r.completed) for r in page.rows] == [(1, False)]
    # the counts kept since the read before the import are counted again (no new label
    # or queue entry: the replacement's audit entry moves the queues' token)
    assert (page.completed, page.assigned) == (0, 1)

    # relabeling the turn makes the case complete again; the stale label stays history
    record_label(database.engine, ana, case_id=CASE, turn=4, rubric=rubric, code="in_role")
    again = case_labels(database.engine, ana, case_id=CASE, rubric=rubric)
    assert (again.labeled_turns, again.complete, again.needs_relabeling) == (2, True, frozenset())
    assert len(_rows(database, "SELECT id FROM labels")) == 3


def test_a_changed_role_makes_every_label_and_gold_label_stale(
    database: Database, tmp_path: Path
) -> None:
    rubric = sync_rubrics(database.engine, Actor.operator()).get(RUBRIC)
    ana = _label_both(database, rubric, tmp_path)
    for turn in (2, 4):
        record_gold(
            database.engine,
            Actor.operator(),
            rubric=rubric,
            case_id=CASE,
            turn=turn,
            code="in_role",
        )

    _import(database, tmp_path, _case(FOUR_EVENTS, role="Billing specialist."), "role")

    after = case_labels(database.engine, ana, case_id=CASE, rubric=rubric)
    assert (after.labeled_turns, after.needs_relabeling) == (0, frozenset({2, 4}))
    gold = _rows(database, "SELECT turn, current, stale FROM gold_labels ORDER BY id")
    assert [(t, bool(c), bool(s)) for t, c, s in gold] == [(2, False, True), (4, False, True)]
    detail = unit_detail(database.engine, Actor.operator(), rubric=rubric, case_id=CASE, turn=4)
    assert detail.gold is None and detail.gold_history[0].stale


def test_a_conversation_that_only_grew_keeps_its_labels(database: Database, tmp_path: Path) -> None:
    rubric = sync_rubrics(database.engine, Actor.operator()).get(RUBRIC)
    ana = _label_both(database, rubric, tmp_path)
    longer = [
        *FOUR_EVENTS,
        {"turn": 5, "actor": "user", "text": "Thanks."},
        {"turn": 6, "actor": "assistant", "text": "You are welcome."},
    ]

    _import(database, tmp_path, _case(longer), "longer")

    after = case_labels(database.engine, ana, case_id=CASE, rubric=rubric)
    assert (after.labeled_turns, after.total_turns, after.complete) == (2, 3, False)
    assert after.needs_relabeling == frozenset()
    assert _rows(database, "SELECT count(*) FROM labels WHERE stale") == [(0,)]
    page = queue_page(database.engine, ana, rubric=rubric)
    assert [(r.labeled_turns, r.completed) for r in page.rows] == [(2, False)]


def test_replace_says_what_went_stale_and_removes_verdicts_on_changed_turns(
    database: Database, tmp_path: Path, run_cli: Any
) -> None:
    rubric = sync_rubrics(database.engine, Actor.operator()).get(RUBRIC)
    _label_both(database, rubric, tmp_path)
    record_gold(
        database.engine, Actor.operator(), rubric=rubric, case_id=CASE, turn=4, code="in_role"
    )
    run = {"judge": "j", "prompt_version": "v1", "model": "m"}
    verdicts = tmp_path / "verdicts.jsonl"
    verdicts.write_text(
        "".join(
            json.dumps({"case_id": CASE, "turn": turn, "label": "in_role", **run}) + "\n"
            for turn in (2, 4, None)
        )
    )
    import_verdicts(database.engine, Actor.operator(), verdicts, rubric=rubric)
    changed = [*FOUR_EVENTS[:3], {"turn": 4, "actor": "assistant", "text": "Refunded."}]
    path = tmp_path / "changed.json"
    path.write_text(json.dumps(_case(changed)))

    result = run_cli("import", "--replace", str(path), db=database.url)

    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith(
        "imported 1 (1 replaced: 1 label and 1 gold label went stale, "
        "2 judge verdicts on changed turns removed), unchanged 0,"
    ), result.stdout
    # the unchanged turn 2 keeps its verdict; turn 4 and the whole-conversation one judged
    # content that is gone, so no report can pair them with the new transcript
    assert _rows(database, "SELECT case_id, turn FROM judge_verdicts") == [(CASE, 2)]
    summaries = _rows(database, "SELECT summary_json FROM audit_log WHERE action = 'cases_replace'")
    assert len(summaries) == 1
    summary = json.loads(summaries[0][0])
    assert (summary["stale_labels"], summary["stale_gold"], summary["dropped_verdicts"]) == (
        1,
        1,
        2,
    )
    again = run_cli("import", "--json", "--replace", str(path), db=database.url)
    assert json.loads(again.stdout)["totals"]["stale_labels"] == 0  # unchanged: nothing stale
