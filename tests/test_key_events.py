"""Key presses of the review page: stored in order, each exactly once, on both backends.

The browser re-sends its whole unacknowledged queue at every change, and two reruns
can carry the same presses; ``apply_key_events`` and the unique index on
``label_events`` make a press count once whatever arrives how often.
"""

from __future__ import annotations

import threading
from pathlib import Path

import pytest
from sqlalchemy import func, select
from sqlalchemy.exc import IntegrityError
from sqlmodel import Session

from review_app.errors import DatabaseBusy, InputError
from review_app.services.access.actors import Actor, operator_actor, sign_in
from review_app.services.exchange.demo import load_demo
from review_app.services.labels.key_events import (
    KeyEvent,
    KeyEventsResult,
    apply_key_events,
    parse_key_events,
)
from review_app.services.labels.labeling import case_labels
from review_app.services.rubrics.rubric_catalog import sync_rubrics
from review_app.services.team.people import add_person
from storage import labels, reviewers
from storage.engine import create_database_engine
from storage.models import Label, LabelEvent
from tests.actors import assign
from tests.conftest import Database, write_lock

RUBRIC = "role-adherence@1"
CASE = "support-clean-late-parcel"


def _setup(database: Database) -> tuple[Actor, object]:
    load_demo(database.engine, operator_actor())
    add_person(database.engine, Actor.operator(), name="rita", role="reviewer")
    rita = sign_in(database.engine, name="rita", auth_mode="local")
    rubric = sync_rubrics(database.engine, operator_actor()).get(RUBRIC)
    assign(database.engine, rubric, "rita", CASE)
    return rita, rubric


def _rows(database: Database) -> list[tuple[int, str, str | None]]:
    with Session(database.engine) as session:
        rita = reviewers.get_reviewer_by_name(session, name="rita")
        assert rita is not None
        found = session.execute(
            select(Label.turn, Label.code, Label.rationale)
            .where(Label.reviewer_id == rita.id, Label.case_id == CASE)
            .order_by(Label.id)
        ).all()
    return [(turn, code, rationale) for turn, code, rationale in found]


def test_a_resent_queue_applies_each_press_once_in_order(database: Database) -> None:
    rita, rubric = _setup(database)
    queue = [
        KeyEvent(1, 2, "in_role"),
        KeyEvent(2, 4, "tone_break", "too casual"),
        KeyEvent(3, 2, "borderline"),  # the same turn again: a change, kept in order
    ]
    first = apply_key_events(
        database.engine, rita, case_id=CASE, rubric=rubric, client_id="tab-1", events=queue[:2]
    )
    assert (len(first.applied), first.duplicates, first.last_seq) == (2, 0, 2)
    # the browser had not heard back: it sends everything, shuffled, with one more
    again = apply_key_events(
        database.engine,
        rita,
        case_id=CASE,
        rubric=rubric,
        client_id="tab-1",
        events=list(reversed(queue)),
    )
    assert (len(again.applied), again.duplicates, again.last_seq) == (1, 2, 3)
    assert _rows(database) == [
        (2, "in_role", None),
        (4, "tone_break", "too casual"),
        (2, "borderline", None),
    ]
    # acknowledged presses are skipped without a look at the database
    skipped = apply_key_events(
        database.engine,
        rita,
        case_id=CASE,
        rubric=rubric,
        client_id="tab-1",
        events=queue,
        after_seq=3,
    )
    assert (skipped.applied, skipped.duplicates, skipped.last_seq) == ([], 0, 3)
    # another page load numbers from 1 again: its presses are new
    other = apply_key_events(
        database.engine,
        rita,
        case_id=CASE,
        rubric=rubric,
        client_id="tab-2",
        events=[KeyEvent(1, 6, "in_role")],
    )
    assert len(other.applied) == 1
    mine = case_labels(database.engine, rita, case_id=CASE, rubric=rubric).mine
    assert {t: r.code for t, r in mine.items()} == {2: "borderline", 4: "tone_break", 6: "in_role"}


def test_a_key_without_a_rationale_keeps_the_turns_rationale(database: Database) -> None:
    rita, rubric = _setup(database)
    events = [
        KeyEvent(1, 8, "authority_break", "issued the refund itself"),
        KeyEvent(2, 8, "false_action_claim"),
        KeyEvent(3, 8, "false_action_claim", ""),  # an emptied rationale clears it
    ]
    apply_key_events(
        database.engine, rita, case_id=CASE, rubric=rubric, client_id="t", events=events
    )
    assert _rows(database) == [
        (8, "authority_break", "issued the refund itself"),
        (8, "false_action_claim", "issued the refund itself"),
        (8, "false_action_claim", None),
    ]


def test_refused_presses_are_reported_and_the_rest_applied(database: Database) -> None:
    rita, rubric = _setup(database)
    result = apply_key_events(
        database.engine,
        rita,
        case_id=CASE,
        rubric=rubric,
        client_id="t",
        events=[KeyEvent(1, 2, "nope"), KeyEvent(2, 3, "in_role"), KeyEvent(3, 4, "in_role")],
    )
    assert [s.turn for s in result.applied] == [4]
    assert result.last_seq == 3
    assert result.errors == [
        "turn 2: 'nope' is not a code of role-adherence@1; codes: " + ", ".join(rubric.codes),
        "turn 3: turn 3 of support-clean-late-parcel is a user event; role-adherence@1 "
        "labels assistant turns",
    ]


def test_the_database_refuses_a_second_copy_of_a_press(database: Database) -> None:
    rita, rubric = _setup(database)
    apply_key_events(
        database.engine,
        rita,
        case_id=CASE,
        rubric=rubric,
        client_id="t",
        events=[KeyEvent(1, 2, "in_role")],
    )
    assert rita.reviewer_id is not None
    with Session(database.engine) as session, pytest.raises(IntegrityError):
        labels.add_label_event(
            session,
            reviewer_id=rita.reviewer_id,
            client_id="t",
            seq=1,
            case_id=CASE,
            turn=2,
            label_id=None,
        )


def test_two_reruns_sending_the_same_queue_at_once_store_it_once(database: Database) -> None:
    rita, rubric = _setup(database)
    events = [KeyEvent(seq, turn, "in_role") for seq, turn in enumerate((2, 4, 6, 8), start=1)]
    barrier = threading.Barrier(2)
    failures: list[BaseException] = []

    def send() -> None:
        try:
            barrier.wait()
            apply_key_events(
                database.engine, rita, case_id=CASE, rubric=rubric, client_id="t", events=events
            )
        except BaseException as error:
            failures.append(error)

    threads = [threading.Thread(target=send) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert failures == []
    assert [turn for turn, _, _ in _rows(database)] == [2, 4, 6, 8]
    with Session(database.engine) as session:
        assert session.scalar(select(func.count()).select_from(LabelEvent)) == 4


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        ([], "key events: expected an object"),
        ({"client": "", "events": []}, "key events: client must be a short string"),
        ({"client": "c", "events": {}}, "key events: events must be a list of at most 500"),
        ({"client": "c", "events": [{"seq": 0, "turn": 2, "code": "x"}]}, "seq must be"),
        ({"client": "c", "events": [{"seq": True, "turn": 2, "code": "x"}]}, "seq must be"),
        ({"client": "c", "events": [{"seq": 1, "turn": "2", "code": "x"}]}, "turn must be"),
        ({"client": "c", "events": [{"seq": 1, "turn": 2, "code": 3}]}, "code must be"),
        (
            {"client": "c", "events": [{"seq": 1, "turn": 2, "code": "x", "rationale": 1}]},
            "rationale must be",
        ),
    ],
)
def test_malformed_values_are_refused(raw: object, message: str) -> None:
    with pytest.raises(InputError, match=message):
        parse_key_events(raw)


def test_parse_orders_by_sequence() -> None:
    client, events = parse_key_events(
        {
            "client": "c",
            "events": [
                {"seq": 2, "turn": 4, "code": "b", "rationale": None},
                {"seq": 1, "turn": 2, "code": "a"},
            ],
        }
    )
    assert client == "c"
    assert events == [KeyEvent(1, 2, "a"), KeyEvent(2, 4, "b")]


def test_a_press_waiting_past_the_busy_timeout_stores_nothing_and_applies_later(
    sqlite_database: Database,
) -> None:
    rita, rubric = _setup(sqlite_database)
    path = Path(sqlite_database.engine.url.database or "")
    impatient = create_database_engine(sqlite_database.url, busy_timeout_ms=100)
    queue = [KeyEvent(1, 2, "in_role"), KeyEvent(2, 4, "tone_break", "too casual")]

    def send() -> KeyEventsResult:
        return apply_key_events(
            impatient, rita, case_id=CASE, rubric=rubric, client_id="tab-1", events=queue
        )

    try:
        busy = pytest.raises(DatabaseBusy, match=r"database is busy .* more than 0\.1 s")
        with write_lock(path), busy:
            send()
        assert _rows(sqlite_database) == []
        with Session(sqlite_database.engine) as session:
            assert session.scalar(select(func.count()).select_from(LabelEvent)) == 0
        # the lock is gone: the same queue, sent again, is stored once
        result = send()
        assert (len(result.applied), result.duplicates, result.last_seq) == (2, 0, 2)
        assert send().duplicates == 2
    finally:
        impatient.dispose()
    assert _rows(sqlite_database) == [(2, "in_role", None), (4, "tone_break", "too casual")]
