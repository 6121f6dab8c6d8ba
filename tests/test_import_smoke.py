from __future__ import annotations

from sqlmodel import Session

from review_app.services.access.actors import operator_actor
from review_app.services.cases.case_views import case_view
from review_app.services.cases.importing import import_paths
from tests.conftest import DEMO_CASES, Database, lane_counts


def test_demo_cases_import_and_reimport_is_a_no_op(database: Database) -> None:
    first = import_paths(database.engine, operator_actor(), [DEMO_CASES])
    assert first.totals.imported == 17
    again = import_paths(database.engine, operator_actor(), [DEMO_CASES])
    assert again.totals.imported == 0
    assert again.totals.unchanged == 17
    counts = lane_counts(database.engine)
    assert counts["violation"] == 3
    with Session(database.engine) as session:
        view = case_view(session, case_id="support-delayed-refund-violation")
    assert view.first_violation_turn == 8
    assert [t.turn for t in view.turns if t.violations] == [8]
