"""One current label per reviewer and unit, one current gold label per unit, whatever
the concurrency: two sessions (two tabs, two servers) saving at the same instant.

Each race runs two threads released together by a barrier, 20 times. On PostgreSQL
before the partial unique indexes and the row locks, most rounds left two current
labels (or raised IntegrityError on a get-or-create); SQLite serialises writers and
must give the same answers.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from functools import partial
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import Engine, text
from sqlalchemy.exc import IntegrityError

from review_app.errors import InputError
from review_app.rubrics.model import Rubric
from review_app.services.access.actors import Actor, sign_in
from review_app.services.cases.importing import import_paths
from review_app.services.exchange.labels_io import import_labels
from review_app.services.labels.adjudication import record_gold
from review_app.services.labels.labeling import record_label
from review_app.services.rubrics.rubric_catalog import sync_rubrics
from review_app.services.team.people import add_person, deactivate_person, set_role
from storage.engine import create_database_engine
from storage.migrations.upgrade import upgrade_database
from tests.actors import assign
from tests.conftest import DEMO_CASES, Database, postgres_schema

RUBRIC = "role-adherence@1"
CASE = "support-clean-late-parcel"
ROUNDS = 20


def _race(first: Callable[[], Any], second: Callable[[], Any]) -> list[Any]:
    """Run both at once (released by a barrier); their results, or the exceptions raised."""
    barrier = threading.Barrier(2)
    results: list[Any] = [None, None]

    def run(index: int, call: Callable[[], Any]) -> None:
        barrier.wait()
        try:
            results[index] = call()
        except Exception as error:  # the test asserts none reached the caller
            results[index] = error

    threads = [threading.Thread(target=run, args=(i, c)) for i, c in enumerate((first, second))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    return results


def _setup(database: Database) -> Rubric:
    import_paths(database.engine, Actor.operator(), [DEMO_CASES / f"{CASE}.json"])
    return sync_rubrics(database.engine, Actor.operator()).get(RUBRIC)


def _scalar(database: Database, sql: str, **params: Any) -> Any:
    with database.engine.connect() as connection:
        return connection.execute(text(sql), params).scalar_one()


def test_two_tabs_saving_one_turn_leave_one_current_label(database: Database) -> None:
    rubric = _setup(database)
    ana = sign_in(database.engine, name="ana", auth_mode="local")
    assign(database.engine, rubric, "ana", CASE)
    # a first label, so the races below are about labels (the assignment exists)
    record_label(database.engine, ana, case_id=CASE, turn=2, rubric=rubric, code="in_role")
    rows = 1
    for round_ in range(ROUNDS):
        results = _race(
            lambda: record_label(
                database.engine, ana, case_id=CASE, turn=2, rubric=rubric, code="in_role"
            ),
            lambda: record_label(
                database.engine, ana, case_id=CASE, turn=2, rubric=rubric, code="scope_break"
            ),
        )
        assert not [r for r in results if isinstance(r, Exception)], results
        # a save of the code already current stores nothing: one row per change
        rows += sum(1 for r in results if r.changed)
        current = _scalar(
            database,
            "SELECT count(*) FROM labels WHERE case_id = :c AND turn = 2 AND current",
            c=CASE,
        )
        assert current == 1, f"round {round_}: {current} current labels"
        assert _scalar(database, "SELECT count(*) FROM labels") == rows
        # last writer wins: the current label is the one saved last (highest id)
        latest = _scalar(database, "SELECT max(id) FROM labels")
        assert _scalar(database, "SELECT id FROM labels WHERE current") == latest
        assert _scalar(database, "SELECT labeled_turns FROM assignments") == 1


def test_two_policy_owners_recording_gold_on_one_unit_leave_one_current(
    database: Database,
) -> None:
    rubric = _setup(database)
    operator = Actor.operator()
    for round_ in range(ROUNDS):
        results = _race(
            lambda: record_gold(
                database.engine, operator, rubric=rubric, case_id=CASE, turn=4, code="in_role"
            ),
            lambda: record_gold(
                database.engine, operator, rubric=rubric, case_id=CASE, turn=4, code="scope_break"
            ),
        )
        assert not [r for r in results if isinstance(r, Exception)], results
        current = _scalar(database, "SELECT count(*) FROM gold_labels WHERE current")
        assert current == 1, f"round {round_}: {current} current gold labels"
        assert _scalar(database, "SELECT count(*) FROM gold_labels") == 2 * (round_ + 1)
        latest = _scalar(database, "SELECT max(id) FROM gold_labels")
        assert _scalar(database, "SELECT id FROM gold_labels WHERE current") == latest


def test_a_first_sign_in_from_two_tabs_gives_both_the_same_reviewer(database: Database) -> None:
    for round_ in range(ROUNDS):
        name = f"newcomer-{round_}"
        results = _race(
            lambda: sign_in(database.engine, name=name, auth_mode="oidc"),  # noqa: B023
            lambda: sign_in(database.engine, name=name, auth_mode="oidc"),  # noqa: B023
        )
        assert not [r for r in results if isinstance(r, Exception)], results
        assert results[0].reviewer_id == results[1].reviewer_id is not None
        count = _scalar(database, "SELECT count(*) FROM reviewers WHERE name = :n", n=name)
        assert count == 1


def test_a_first_save_on_an_unassigned_case_from_two_tabs(database: Database) -> None:
    rubric = _setup(database)

    def save(reviewer: Actor, turn: int) -> Callable[[], Any]:
        return lambda: record_label(
            database.engine, reviewer, case_id=CASE, turn=turn, rubric=rubric, code="in_role"
        )

    for round_ in range(ROUNDS):
        # a policy owner may label any case (a reviewer only those in their queue): the
        # first save creates the assignment
        add_person(database.engine, Actor.operator(), name=f"r{round_}", role="policy_owner")
        reviewer = sign_in(database.engine, name=f"r{round_}", auth_mode="local")
        results = _race(save(reviewer, 2), save(reviewer, 4))
        assert not [r for r in results if isinstance(r, Exception)], results
        assert sorted(r.labeled_turns for r in results) == [1, 2]
        rows = _scalar(
            database,
            "SELECT count(*) FROM assignments WHERE reviewer_id = :r",
            r=reviewer.reviewer_id,
        )
        assert rows == 1
        labeled = _scalar(
            database,
            "SELECT labeled_turns FROM assignments WHERE reviewer_id = :r",
            r=reviewer.reviewer_id,
        )
        assert labeled == 2


def test_the_database_refuses_a_second_current_label(database: Database) -> None:
    """The invariant holds even for a writer that skips the service (raw SQL)."""
    rubric = _setup(database)
    ana = sign_in(database.engine, name="ana", auth_mode="local")
    assign(database.engine, rubric, "ana", CASE)
    record_label(database.engine, ana, case_id=CASE, turn=2, rubric=rubric, code="in_role")
    insert = (
        "INSERT INTO labels (case_id, turn, reviewer_id, rubric_id, rubric_version, code, "
        "current, source, created_at) VALUES (:c, 2, :r, 'role-adherence', 1, 'in_role', "
        "true, 'app', CURRENT_TIMESTAMP)"
    )
    with pytest.raises(IntegrityError), database.engine.begin() as connection:
        connection.execute(text(insert), {"c": CASE, "r": ana.reviewer_id})
    gold = (
        "INSERT INTO gold_labels (case_id, turn, rubric_id, rubric_version, code, "
        "calibration_item, current, created_at) VALUES (:c, 2, 'role-adherence', 1, "
        "'in_role', false, true, CURRENT_TIMESTAMP)"
    )
    with database.engine.begin() as connection:
        connection.execute(text(gold), {"c": CASE})
    with pytest.raises(IntegrityError), database.engine.begin() as connection:
        connection.execute(text(gold), {"c": CASE})


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def unmigrated(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Engine]:
    """An empty database with no schema at all (the test migrates it step by step)."""
    if request.param == "sqlite":
        engine = create_database_engine(f"sqlite:///{tmp_path / 'old.db'}")
        yield engine
        engine.dispose()
        return
    with postgres_schema() as url:
        engine = create_database_engine(url)
        try:
            yield engine
        finally:
            engine.dispose()


def test_the_migration_repairs_duplicate_current_labels(unmigrated: Engine) -> None:
    upgrade_database(unmigrated, "0004")
    with unmigrated.begin() as connection:
        connection.execute(
            text(
                "INSERT INTO cases (case_id, n_events, n_assistant_turns, content_sha256, "
                "source_format, imported_at) VALUES ('c', 4, 2, 'x', 'native', CURRENT_TIMESTAMP)"
            )
        )
        for name in ("ana", "ben"):
            connection.execute(
                text(
                    "INSERT INTO reviewers (name, role, active, created_at) "
                    "VALUES (:n, 'reviewer', true, CURRENT_TIMESTAMP)"
                ),
                {"n": name},
            )
        label = (
            "INSERT INTO labels (case_id, turn, reviewer_id, rubric_id, rubric_version, code, "
            "current, source, created_at) VALUES ('c', :t, :r, 'role-adherence', 1, :code, "
            ":current, 'app', CURRENT_TIMESTAMP)"
        )
        rows = [
            (2, 1, "in_role", False),  # history of ana on turn 2
            (2, 1, "scope_break", True),  # three current labels of ana on turn 2
            (2, 1, "in_role", True),
            (2, 1, "borderline", True),  # the latest: stays current
            (2, 2, "in_role", True),  # ben on turn 2: alone, untouched
            (4, 1, "in_role", True),  # ana on turn 4: two current
            (4, 1, "tone_break", True),
        ]
        for turn, reviewer, code, current in rows:
            connection.execute(
                text(label), {"t": turn, "r": reviewer, "code": code, "current": current}
            )
        gold = (
            "INSERT INTO gold_labels (case_id, turn, rubric_id, rubric_version, code, "
            "calibration_item, current, created_at) VALUES ('c', 2, 'role-adherence', 1, :code, "
            "false, true, CURRENT_TIMESTAMP)"
        )
        for code in ("in_role", "scope_break"):
            connection.execute(text(gold), {"code": code})

    upgrade_database(unmigrated)

    with unmigrated.connect() as connection:
        labels = connection.execute(
            text("SELECT id, turn, reviewer_id, code, current, stale FROM labels ORDER BY id")
        ).all()
        gold_rows = connection.execute(
            text("SELECT code, current FROM gold_labels ORDER BY id")
        ).all()
    assert len(labels) == len(rows)  # every row kept as history
    current = {
        (turn, reviewer): code for _, turn, reviewer, code, is_current, _ in labels if is_current
    }
    assert current == {(2, 1): "borderline", (2, 2): "in_role", (4, 1): "tone_break"}
    assert sum(1 for row in labels if row[4]) == 3
    assert not any(row[5] for row in labels)  # nothing stale
    assert [(code, bool(is_current)) for code, is_current in gold_rows] == [
        ("in_role", False),
        ("scope_break", True),
    ]
    # and from now on the database holds the line
    with pytest.raises(IntegrityError), unmigrated.begin() as connection:
        connection.execute(text(label), {"t": 4, "r": 1, "code": "in_role", "current": True})


def test_a_label_csv_import_racing_a_save_leaves_one_current_label(
    database: Database, tmp_path: Path
) -> None:
    rubric = _setup(database)
    catalog = sync_rubrics(database.engine, Actor.operator())
    ana = sign_in(database.engine, name="ana", auth_mode="local")
    assign(database.engine, rubric, "ana", CASE)
    record_label(database.engine, ana, case_id=CASE, turn=2, rubric=rubric, code="in_role")
    rows = 1
    for round_ in range(ROUNDS):
        csv_file = tmp_path / f"labels-{round_}.csv"
        csv_file.write_text(
            "case_id,turn,reviewer,label,rubric,rationale\n"
            f"{CASE},2,ana,borderline,{RUBRIC},round {round_}\n"
        )
        results = _race(
            lambda: import_labels(
                database.engine,
                Actor.operator(),
                csv_file,  # noqa: B023
                catalog=catalog,
            ),
            lambda: record_label(
                database.engine, ana, case_id=CASE, turn=2, rubric=rubric, code="scope_break"
            ),
        )
        assert not [r for r in results if isinstance(r, Exception)], results
        # the import's row is new each round (its rationale); the save of scope_break
        # stores nothing when scope_break is current already
        rows += 1 + (1 if results[1].changed else 0)
        current = _scalar(database, "SELECT count(*) FROM labels WHERE current")
        assert current == 1, f"round {round_}: {current} current labels"
        assert _scalar(database, "SELECT count(*) FROM labels") == rows
        assert _scalar(database, "SELECT labeled_turns FROM assignments") == 1


def test_an_admin_adding_a_person_who_signs_in_at_that_moment(database: Database) -> None:
    operator = Actor.operator()
    for round_ in range(ROUNDS):
        name = f"joiner-{round_}"
        results = _race(
            lambda: add_person(database.engine, operator, name=name, role="policy_owner"),  # noqa: B023
            lambda: sign_in(database.engine, name=name, auth_mode="oidc"),  # noqa: B023
        )
        assert not [r for r in results if isinstance(r, Exception)], results
        assert results[0].id == results[1].reviewer_id is not None
        rows = _scalar(database, "SELECT count(*) FROM reviewers WHERE name = :n", n=name)
        assert rows == 1
        # whichever came first, the admin's role stands
        role = _scalar(database, "SELECT role FROM reviewers WHERE name = :n", n=name)
        assert role == "policy_owner"


def test_two_admins_adding_one_person_at_once(database: Database) -> None:
    operator = Actor.operator()
    for round_ in range(ROUNDS):
        name = f"added-{round_}"
        results = _race(
            lambda: add_person(database.engine, operator, name=name, role="reviewer"),  # noqa: B023
            lambda: add_person(database.engine, operator, name=name, role="reviewer"),  # noqa: B023
        )
        assert not [r for r in results if isinstance(r, Exception)], results
        assert results[0].id == results[1].id is not None
        actions = _scalar(
            database,
            "SELECT count(*) FROM audit_log WHERE object_key = :n AND action = 'person_add'",
            n=name,
        )
        assert actions == 1  # one of them added the person; the other changed nothing new


def test_the_migration_moves_a_judge_errors_kind_out_of_its_text(unmigrated: Engine) -> None:
    upgrade_database(unmigrated, "0009")
    with unmigrated.begin() as connection:
        connection.execute(
            text(
                "INSERT INTO cases (case_id, n_events, n_assistant_turns, content_sha256, "
                "source_format, imported_at) VALUES ('c', 6, 3, 'x', 'native', CURRENT_TIMESTAMP)"
            )
        )
        connection.execute(
            text(
                "INSERT INTO judge_runs (judge, prompt_version, model, rubric_id, rubric_version, "
                "source, status, created_at, updated_at) VALUES ('j', 'v1', 'm', "
                "'role-adherence', 1, 'run', 'partial', CURRENT_TIMESTAMP, CURRENT_TIMESTAMP)"
            )
        )
        for turn, error in (
            (2, "endpoint: HTTP 503 after 4 attempts"),
            (4, "answer: no JSON object; the answer was: 'fine'"),
            (6, None),
        ):
            connection.execute(
                text(
                    "INSERT INTO judge_verdicts (run_id, case_id, turn, error, created_at) "
                    "VALUES (1, 'c', :turn, :error, CURRENT_TIMESTAMP)"
                ),
                {"turn": turn, "error": error},
            )
    upgrade_database(unmigrated)
    query = "SELECT turn, error_kind, error FROM judge_verdicts ORDER BY turn"
    with unmigrated.connect() as connection:
        assert [tuple(row) for row in connection.execute(text(query))] == [
            (2, "endpoint", "HTTP 503 after 4 attempts"),
            (4, "answer", "no JSON object; the answer was: 'fine'"),
            (6, None, None),
        ]


def test_two_admins_removing_the_last_two_admins_at_once_leave_one(database: Database) -> None:
    """Each round starts with exactly two active admins; two deactivations (or a
    deactivation and a demotion) at once: one passes, the other finds the last admin."""
    operator = Actor.operator()
    survivor = None
    for round_ in range(ROUNDS):
        first, second = f"admin-{round_}-a", f"admin-{round_}-b"
        add_person(database.engine, operator, name=first, role="admin")
        add_person(database.engine, operator, name=second, role="admin")
        if survivor is not None:
            deactivate_person(database.engine, operator, name=survivor)
        remove_second: Callable[[], object] = (
            partial(set_role, database.engine, operator, name=second, role="reviewer")
            if round_ % 2
            else partial(deactivate_person, database.engine, operator, name=second)
        )
        results = _race(
            partial(deactivate_person, database.engine, operator, name=first), remove_second
        )
        refused = [r for r in results if isinstance(r, Exception)]
        assert len(refused) == 1 and isinstance(refused[0], InputError), results
        admins = _scalar(database, "SELECT count(*) FROM reviewers WHERE role = 'admin' AND active")
        assert admins == 1, f"round {round_}: {admins} active admins"
        survivor = first if isinstance(results[0], Exception) else second
