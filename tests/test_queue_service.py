"""Queue service: assignment overlap with reviewers already holding cases, and queue counts
that follow labels and assignments at once (they are kept a few seconds in memory)."""

from __future__ import annotations

from review_app.services.demo import load_demo
from review_app.services.labeling import record_label
from review_app.services.people import Actor, add_person, operator_actor, sign_in
from review_app.services.queue import assign_cases, queue_page
from review_app.services.rubric_catalog import sync_rubrics
from tests.conftest import Database

RUBRIC = "role-adherence@1"


def test_a_new_reviewer_joins_cases_that_others_already_hold(sqlite_database: Database) -> None:
    engine = sqlite_database.engine
    load_demo(engine, operator_actor())  # every case is held by ana, ben and chloe
    operator = Actor.operator()
    add_person(engine, operator, name="rita", role="reviewer")
    rubric = sync_rubrics(engine, operator_actor()).get(RUBRIC)

    enough = assign_cases(engine, operator, rubric=rubric, reviewers=["rita"], overlap=3)
    assert (enough.new_assignments, enough.already_covered) == (0, 17)

    report = assign_cases(engine, operator, rubric=rubric, reviewers=["rita"], overlap=4)
    assert (report.new_assignments, report.per_reviewer, report.already_covered) == (
        17,
        {"rita": 17},
        0,
    )
    again = assign_cases(engine, operator, rubric=rubric, reviewers=["rita"], overlap=4)
    assert (again.new_assignments, again.already_covered) == (0, 17)

    # two more reviewers for overlap 5: each case goes to the less loaded of the two
    add_person(engine, operator, name="sam", role="reviewer")
    add_person(engine, operator, name="tess", role="reviewer")
    spread = assign_cases(engine, operator, rubric=rubric, reviewers=["sam", "tess"], overlap=5)
    assert spread.new_assignments == 17
    assert sorted(spread.per_reviewer.values()) == [8, 9]


def test_queue_counts_follow_labels_and_assignments_at_once(sqlite_database: Database) -> None:
    engine = sqlite_database.engine
    load_demo(engine, operator_actor())
    operator = Actor.operator()
    add_person(engine, operator, name="rita", role="reviewer")
    rubric = sync_rubrics(engine, operator_actor()).get(RUBRIC)
    rita = sign_in(engine, name="rita", auth_mode="local")

    empty = queue_page(engine, rita, rubric=rubric)
    assert (empty.completed, empty.assigned, empty.n_matching) == (0, 0, 0)

    case_id = "support-clean-late-parcel"
    assign_cases(engine, operator, rubric=rubric, reviewers=["rita"], overlap=4, case_ids=[case_id])
    queued = queue_page(engine, rita, rubric=rubric)
    assert (queued.completed, queued.assigned, queued.n_matching) == (0, 1, 1)

    for turn in (2, 4, 6, 8, 10, 12):
        record_label(engine, rita, case_id=case_id, turn=turn, rubric=rubric, code="in_role")
    done = queue_page(engine, rita, rubric=rubric)
    assert (done.completed, done.assigned, done.progress) == (1, 1, 1.0)
    assert done.rows[0].completed and done.rows[0].labeled_turns == 6
    assert queue_page(engine, rita, rubric=rubric, only_unlabeled=True).n_matching == 0
    lane = queue_page(engine, rita, rubric=rubric, lane="pass", only_unlabeled=True)
    assert lane.n_matching == 0 and lane.rows == []
