"""Saves racing ``restore``: every acknowledged save survives, in the restored database
or in ``<database>.before-restore`` (issue 18: 1 of 52 and 3 of 50 were in neither).

A server keeps saving labels from several threads while ``restore`` runs again and
again. A save that returned is acknowledged; one refused because a restore is running
(``DatabaseBusy``, "being restored") is not, and the page sends it again later.
"""

from __future__ import annotations

import sqlite3
import threading
from pathlib import Path

from review_app.errors import DatabaseBusy
from review_app.services.exchange.demo import load_demo
from review_app.services.labels.labeling import record_label
from review_app.services.operations.backup import backup_database, restore_database
from review_app.services.rubrics.rubric_catalog import sync_rubrics
from tests.actors import assign, operator, signed_in
from tests.conftest import Database

CASE = "support-clean-late-parcel"
RESTORES = 6
SAVERS = 3


def _rationales(path: Path) -> set[str]:
    if not path.exists():
        return set()
    with sqlite3.connect(path) as connection:
        return {row[0] for row in connection.execute("SELECT rationale FROM labels")}


def test_no_save_acknowledged_during_a_restore_is_lost(
    sqlite_database: Database, tmp_path: Path
) -> None:
    engine = sqlite_database.engine
    load_demo(engine, operator())
    rubric = sync_rubrics(engine, operator()).get("role-adherence@1")
    rita = signed_in(engine, "rita", role="reviewer")
    assign(engine, rubric, "rita", CASE)
    snapshot = tmp_path / "snapshot.backup"
    backup_database(operator(), db=sqlite_database.url, path=snapshot)
    database = Path(sqlite_database.url.removeprefix("sqlite:///"))
    saved_aside = database.with_name(database.name + ".before-restore")

    lost: list[str] = []
    refused: list[str] = []
    stop = threading.Event()

    def saver(index: int) -> None:
        number = 0
        while not stop.is_set():
            number += 1
            rationale = f"saver {index} save {number}"
            try:
                record_label(
                    engine,
                    rita,
                    case_id=CASE,
                    turn=2 if number % 2 else 4,
                    rubric=rubric,
                    code="in_role",
                    rationale=rationale,
                )
            except DatabaseBusy as error:
                assert "being restored" in str(error) or "busy" in str(error)
                refused.append(rationale)
                continue
            acknowledged.append(rationale)

    for _ in range(RESTORES):
        acknowledged: list[str] = []
        stop.clear()
        threads = [threading.Thread(target=saver, args=(i,)) for i in range(SAVERS)]
        for thread in threads:
            thread.start()
        while len(acknowledged) < 5:
            threading.Event().wait(0.01)
        restore_database(operator(), db=sqlite_database.url, path=snapshot)
        threading.Event().wait(0.05)
        stop.set()
        for thread in threads:
            thread.join(timeout=120)
        kept = _rationales(database) | _rationales(saved_aside)
        lost.extend(r for r in acknowledged if r not in kept)
    assert lost == [], f"{len(lost)} acknowledged saves lost: {lost[:5]}"
