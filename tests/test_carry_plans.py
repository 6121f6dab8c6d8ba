"""PostgreSQL's plan of every carry-over statement does work linear in the rows (issue 35).

The probe's publication ran for 16 minutes over 156,808 labels: the statement queuing
re-reviews read the labels the same transaction had just carried into version 2, which
the planner's statistics (gathered before) put at one row, and it chose a nested loop
that scanned them all once per outer row. Here each statement of a real publication is
run once under ``EXPLAIN (ANALYZE, FORMAT JSON)`` in a savepoint rolled back before the
statement itself runs, in the very state it meets; the rows every plan node touched
(returned and filtered out, times its loops) must stay within a small multiple of the
rows in the database. A quadratic plan at this size touches hundreds of millions.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from sqlalchemy import event, text

from benchmarks.bench_carry_over import build
from review_app.services.access.actors import operator_actor, sign_in
from review_app.services.labels.labeling import record_label
from review_app.services.rubrics.rubric_carry import publish_rubric
from review_app.services.rubrics.rubric_catalog import sync_rubrics
from tests.conftest import Database

N_LABELS = 30_000
WORK_PER_ROW = 25
"""Rows touched per row in the database, at most, summed over one statement's plan."""

CARRY_STATEMENTS = (
    "INSERT INTO labels",
    "INSERT INTO gold_labels",
    "INSERT INTO judge_runs",
    "INSERT INTO judge_verdicts",
    "INSERT INTO re_reviews",
    "INSERT INTO assignments",
    "UPDATE assignments",
    "SELECT o.code",
    "SELECT o.label",
    "SELECT code, count(*)",
    "SELECT p.name",
    "SELECT count(*) FROM (SELECT DISTINCT",
)


def _touched(plan: dict[str, Any]) -> int:
    """Rows a plan node and its children produced or filtered out, over all their loops."""
    rows = (
        plan.get("Actual Rows", 0)
        + plan.get("Rows Removed by Filter", 0)
        + plan.get("Rows Removed by Join Filter", 0)
        + plan.get("Rows Removed by Index Recheck", 0)
    ) * max(1, plan.get("Actual Loops", 1))
    return int(rows) + sum(_touched(child) for child in plan.get("Plans", []))


def _nested_loops(plan: dict[str, Any]) -> int:
    own = 1 if plan.get("Node Type") == "Nested Loop" else 0
    return own + sum(_nested_loops(child) for child in plan.get("Plans", []))


def test_every_carry_statement_plan_is_linear(postgres_database: Database, tmp_path: Path) -> None:
    root = tmp_path / "rubrics"
    engine, _ = build(postgres_database.url, root, n_labels=N_LABELS, n_gold=3_000)
    catalog = sync_rubrics(engine, operator_actor(), directory=root)
    plans: list[tuple[str, int, int]] = []

    def explain(conn: Any, cursor: Any, statement: str, params: Any, context: Any, many: Any):  # type: ignore[no-untyped-def]
        if not many and statement.lstrip().startswith(CARRY_STATEMENTS):
            cursor.execute("SAVEPOINT plan_probe")
            cursor.execute("EXPLAIN (ANALYZE, FORMAT JSON) " + statement, params)
            plan = cursor.fetchone()[0]
            cursor.execute("ROLLBACK TO SAVEPOINT plan_probe")
            top = (json.loads(plan) if isinstance(plan, str) else plan)[0]["Plan"]
            plans.append((statement.split(" SELECT ")[0][:60], _touched(top), _nested_loops(top)))
        return statement, params

    with engine.connect() as connection:
        in_database = sum(
            int(connection.execute(text(f"SELECT count(*) FROM {table}")).scalar_one())
            for table in ("labels", "gold_labels", "judge_verdicts", "assignments", "cases")
        )
    event.listen(engine, "before_cursor_execute", explain, retval=True)
    try:
        first = publish_rubric(engine, operator_actor(), catalog=catalog, ref="bench@2")
        # Labels given under version 1 since: the second publication carries them, with
        # version 2 now holding tens of thousands of rows the statistics may not know.
        live = sign_in(engine, name="live0", auth_mode="local")
        for turn in (2, 4, 6):
            record_label(
                engine,
                live,
                case_id="c0000000",
                turn=turn,
                rubric=catalog.get("bench@1"),
                code="tone_break",
            )
        second = publish_rubric(engine, operator_actor(), catalog=catalog, ref="bench@2")
    finally:
        event.remove(engine, "before_cursor_execute", explain)
    assert sum(first.carried.values()) > N_LABELS * 0.8
    assert sum(second.carried.values()) == 3
    names = {name for name, _, _ in plans}
    for table in ("labels", "gold_labels", "judge_verdicts", "re_reviews", "assignments"):
        assert any(table in name for name in names), f"no plan read for the {table} statement"
    for name, touched, _ in plans:
        assert touched <= WORK_PER_ROW * in_database, (name, touched, in_database)
    assert sum(loops for *_, loops in plans) == 0, [p for p in plans if p[2]]
    engine.dispose()
