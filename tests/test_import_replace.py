"""Replacing a labeled case keeps its labels, assignments and judge verdicts."""

from __future__ import annotations

import json
from pathlib import Path

from sqlmodel import Session

from review_app.formats.options import ImportOptions
from review_app.services.access.actors import operator_actor
from review_app.services.cases.case_views import case_view
from review_app.services.cases.importing import import_paths
from review_app.services.exchange.demo import load_demo
from tests.conftest import DEMO_CASES, Database, label_count


def test_replacing_a_labeled_case_keeps_its_labels(database: Database, tmp_path: Path) -> None:
    load_demo(database.engine, operator_actor())
    labels_before = label_count(database.engine)
    changed = json.loads((DEMO_CASES / "support-clean-late-parcel.json").read_text())
    changed["transcript"][1]["text"] = "Changed text."
    path = tmp_path / "changed.json"
    path.write_text(json.dumps(changed))

    summary = import_paths(database.engine, operator_actor(), [path], ImportOptions(replace=True))

    assert summary.totals.replaced == 1
    with Session(database.engine) as session:
        view = case_view(session, case_id="support-clean-late-parcel")
    assert label_count(database.engine) == labels_before
    assert view.turns[1].text == "Changed text."
    assert view.status == "pass"
