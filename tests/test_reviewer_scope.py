"""A plain reviewer saves and reads only on the cases that are theirs, on both backends.

Found by the trust probe (issue 18): a reviewer could label any case by id (the save
created the assignment), then open it and read everyone's labels; the messages told
which case ids exist (``NotFound`` against ``PermissionDenied``) and which turns are
user events. Here a reviewer acting for themself (a save, key presses, an import of
their own label file) is refused on a case outside their queue exactly as on a case
that does not exist, and nothing of the refused attempt is stored.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from sqlalchemy import func, select
from sqlmodel import Session

from review_app.errors import InputError, PermissionDenied
from review_app.services.cases import case_views as cases
from review_app.services.exchange import labels_io
from review_app.services.exchange.demo import load_demo
from review_app.services.labels import labeling
from review_app.services.labels.key_events import KeyEvent, apply_key_events
from review_app.services.rubrics.rubric_catalog import sync_rubrics
from review_app.services.team import queue
from storage.models import Assignment, Label
from tests.actors import operator, signed_in
from tests.conftest import Database

RUBRIC = "role-adherence@1"
MINE = "support-clean-late-parcel"
THEIRS = "support-delayed-refund-violation"  # labeled by ana, ben, chloe in the demo
MISSING = "no-such-case-anywhere"


def _world(database: Database):  # type: ignore[no-untyped-def]
    load_demo(database.engine, operator())
    catalog = sync_rubrics(database.engine, operator())
    rubric = catalog.get(RUBRIC)
    rita = signed_in(database.engine, "rita", role="reviewer")
    queue.assign_cases(
        database.engine,
        operator(),
        rubric=rubric,
        reviewers=["rita"],
        overlap=9,
        case_ids=[MINE],
    )
    return rita, rubric, catalog


def _rita_rows(database: Database, case_id: str) -> tuple[int, int]:
    with Session(database.engine) as session:
        rita = select(func.count()).select_from(Label).where(Label.case_id == case_id)
        labels = session.execute(rita.where(Label.reviewer_id == _rita_id(session))).scalar_one()
        assigned = session.execute(
            select(func.count())
            .select_from(Assignment)
            .where(Assignment.case_id == case_id, Assignment.reviewer_id == _rita_id(session))
        ).scalar_one()
    return int(labels), int(assigned)


def _rita_id(session: Session) -> int:
    from storage.reviewers import get_reviewer_by_name

    found = get_reviewer_by_name(session, name="rita")
    assert found is not None and found.id is not None
    return found.id


def _refusal(call) -> tuple[type[BaseException], str]:  # type: ignore[no-untyped-def]
    with pytest.raises((PermissionDenied, InputError)) as caught:
        call()
    return type(caught.value), str(caught.value)


def test_a_reviewer_cannot_label_a_case_outside_their_queue(database: Database) -> None:
    rita, rubric, _ = _world(database)
    engine = database.engine

    def save(case_id: str, turn: int):  # type: ignore[no-untyped-def]
        return lambda: labeling.record_label(
            engine, rita, case_id=case_id, turn=turn, rubric=rubric, code="in_role"
        )

    theirs = _refusal(save(THEIRS, 2))
    missing = _refusal(save(MISSING, 2))
    # one answer for a case that exists and one that does not (the id aside)
    assert theirs[0] is missing[0] is PermissionDenied
    assert theirs[1].replace(THEIRS, "X") == missing[1].replace(MISSING, "X")
    assert theirs[1] == f"case {THEIRS!r} is not in rita's queue"
    # a user turn of someone else's case: the same answer, nothing about the turn
    assert _refusal(save(THEIRS, 1)) == theirs
    assert _refusal(save(THEIRS, 99)) == theirs
    assert _rita_rows(database, THEIRS) == (0, 0), "no label, no assignment created"
    # so the case stays closed and the others' labels unread
    assert _refusal(lambda: cases.load_case_view(engine, rita, case_id=THEIRS)) == theirs
    assert _refusal(lambda: cases.case_fingerprint(engine, rita, case_id=THEIRS)) == theirs
    assert (
        _refusal(lambda: labeling.case_labels(engine, rita, case_id=THEIRS, rubric=rubric))
        == theirs
    )
    for call in (
        lambda: cases.load_case_view(engine, rita, case_id=MISSING),
        lambda: cases.case_fingerprint(engine, rita, case_id=MISSING),
        lambda: labeling.case_labels(engine, rita, case_id=MISSING, rubric=rubric),
    ):
        assert _refusal(call) == missing
    # her own case: saved, and after labeling every turn she sees the others
    saved = save(MINE, 2)()
    assert saved.labeled_turns == 1
    with pytest.raises(InputError, match="user event"):
        save(MINE, 1)()  # on her own case the turn may be named


def test_key_presses_on_a_case_outside_the_queue_store_nothing(database: Database) -> None:
    rita, rubric, _ = _world(database)
    presses = [KeyEvent(1, 2, "in_role"), KeyEvent(2, 1, "in_role")]

    def press(case_id: str):  # type: ignore[no-untyped-def]
        return lambda: apply_key_events(
            database.engine, rita, case_id=case_id, rubric=rubric, client_id="tab", events=presses
        )

    theirs, missing = _refusal(press(THEIRS)), _refusal(press(MISSING))
    assert theirs[0] is missing[0] is PermissionDenied
    assert theirs[1].replace(THEIRS, "X") == missing[1].replace(MISSING, "X")
    assert _rita_rows(database, THEIRS) == (0, 0)
    applied = press(MINE)()
    assert len(applied.applied) == 1 and len(applied.errors) == 1


def _label_file(tmp_path: Path, name: str, case_id: str) -> Path:
    path = tmp_path / name
    path.write_text(
        "case_id,turn,reviewer,label,rubric,rationale\n"
        f"{MINE},2,rita,in_role,{RUBRIC},\n"
        f"{case_id},2,rita,in_role,{RUBRIC},\n",
        encoding="utf-8",
    )
    return path


def test_a_reviewer_imports_their_own_labels_only_on_their_cases(
    database: Database, tmp_path: Path
) -> None:
    rita, _, catalog = _world(database)

    def load(path: Path):  # type: ignore[no-untyped-def]
        return lambda: labels_io.import_labels(database.engine, rita, path, catalog=catalog)

    theirs = _refusal(load(_label_file(tmp_path, "theirs.csv", THEIRS)))
    missing = _refusal(load(_label_file(tmp_path, "missing.csv", MISSING)))
    assert theirs[0] is missing[0] is InputError
    assert theirs[1] == (
        f"{tmp_path / 'theirs.csv'}, line 3, field case_id: case {THEIRS!r} is not in rita's queue"
    )
    assert theirs[1].replace(THEIRS, "X").replace("theirs", "f") == missing[1].replace(
        MISSING, "X"
    ).replace("missing", "f")
    assert _rita_rows(database, THEIRS) == (0, 0)
    assert _rita_rows(database, MINE) == (0, 1), "nothing of the refused file stored"
    # a user turn of a case not hers: the same answer again, not "turn 1 is a user event"
    sneaky = tmp_path / "sneaky.csv"
    sneaky.write_text(
        f"case_id,turn,reviewer,label,rubric,rationale\n{THEIRS},1,rita,in_role,{RUBRIC},\n",
        encoding="utf-8",
    )
    assert "is not in rita's queue" in _refusal(load(sneaky))[1]
    # her own case: stored
    mine = tmp_path / "mine.csv"
    mine.write_text(
        f"case_id,turn,reviewer,label,rubric,rationale\n{MINE},2,rita,in_role,{RUBRIC},\n",
        encoding="utf-8",
    )
    assert load(mine)().stored == 1


def test_a_policy_owner_imports_a_file_for_others_beyond_any_queue(
    database: Database, tmp_path: Path
) -> None:
    _, _, catalog = _world(database)
    olga = signed_in(database.engine, "olga", role="policy_owner")
    path = tmp_path / "history.csv"
    path.write_text(
        "case_id,turn,reviewer,label,rubric,rationale\n"
        f"{THEIRS},2,rita,in_role,{RUBRIC},from another tool\n",
        encoding="utf-8",
    )
    assert labels_io.import_labels(database.engine, olga, path, catalog=catalog).stored == 1
    assert _rita_rows(database, THEIRS) == (1, 1)
