"""Queue service: assignment overlap with reviewers already holding cases, and queue counts
that follow labels and assignments at once, whichever process made the change (they are
kept in memory while the data token of the queues stays the same)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import Engine
from sqlmodel import Session

from review_app.errors import InputError
from review_app.rubrics.model import Rubric
from review_app.services.access.actors import Actor, operator_actor, sign_in
from review_app.services.cases.importing import import_paths
from review_app.services.exchange.demo import DEMO_CASES, load_demo
from review_app.services.labels.labeling import record_label
from review_app.services.rubrics.rubric_catalog import sync_rubrics
from review_app.services.team.audit_samples import draw_audit_sample
from review_app.services.team.people import add_person
from review_app.services.team.queue import (
    CaseSignals,
    Informativeness,
    ProgressCounts,
    assign_cases,
    informative_queue,
    open_review_work,
    order_informative_first,
    plan_assignment,
    queue_page,
    score_case,
)
from storage import assignments, reviewers
from storage.engine import create_database_engine, read_only
from storage.models import JudgeRun, JudgeVerdict
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


def test_the_two_modes_say_what_they_do_and_the_preview_is_what_apply_writes(
    database: Database,
) -> None:
    """The issue's walk: the demo's cases have 3 reviewers each; two new reviewers with
    "fill up to 2" get nothing (and the line says why), "add these reviewers" gives both
    every case; the preview's pairs are exactly those written, and a preview writes
    nothing."""
    engine = database.engine
    load_demo(engine, operator_actor())
    operator = Actor.operator()
    for name in ("rita", "sam"):
        add_person(engine, operator, name=name, role="reviewer")
    olivia = sign_in(engine, name="olivia", auth_mode="oidc")  # the demo's policy owner
    rubric = sync_rubrics(engine, operator).get(RUBRIC)
    team = ["rita", "Sam"]

    def held() -> set[tuple[str, str]]:
        """The (case, reviewer) pairs rita and sam hold, read from the database."""
        found = set()
        with Session(read_only(engine)) as session:
            for name, person in reviewers.reviewers_by_name(session, names=["rita", "sam"]).items():
                assert person.id is not None
                for case_id in assignments.assigned_case_ids(
                    session, reviewer_id=person.id, rubric_id=rubric.id, version=rubric.version
                ):
                    found.add((case_id, name))
        return found

    fill = plan_assignment(engine, olivia, rubric=rubric, reviewers=team, overlap=2)
    assert (fill.new_assignments, fill.already_covered, fill.pairs) == (0, 17, ())
    assert fill.line() == (
        "fill each of 17 cases up to 2 reviewers: would assign 0 (case, reviewer) pairs; "
        "17 cases already had 2 or more reviewers (everyone assigned counts)"
    )
    preview = plan_assignment(engine, olivia, rubric=rubric, reviewers=team, mode="add")
    assert preview.new_assignments == 34 and not preview.applied
    assert held() == set()  # a preview writes nothing
    applied = assign_cases(engine, olivia, rubric=rubric, reviewers=team, mode="add")
    assert applied.pairs == preview.pairs and applied.applied
    assert set(applied.pairs) == held() and len(held()) == 34
    assert applied.line() == (
        "add the chosen reviewers to each of 17 cases: assigned 34 (case, reviewer) pairs "
        "(rita +17, sam +17); 0 pairs were assigned already"
    )
    again = assign_cases(engine, olivia, rubric=rubric, reviewers=team, mode="add")
    assert (again.new_assignments, again.already_covered) == (0, 34)

    # fill counts everyone: up to 6 on a lane's cases adds one more where 5 are
    lane_plan = plan_assignment(
        engine, olivia, rubric=rubric, reviewers=["ana", "rita"], overlap=6, lane="pass"
    )
    assert (
        lane_plan.pairs
        == assign_cases(
            engine, olivia, rubric=rubric, reviewers=["ana", "rita"], overlap=6, lane="pass"
        ).pairs
    )
    for mode, overlap, field in (
        ("fill", None, "overlap"),
        ("add", 2, "overlap"),
        ("x", 1, "mode"),
    ):
        with pytest.raises(InputError) as refused:
            plan_assignment(
                engine, olivia, rubric=rubric, reviewers=team, mode=mode, overlap=overlap
            )
        assert refused.value.field == field


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


SAVE_IN_ANOTHER_PROCESS = """
import sys
from review_app.services.labels.labeling import record_label
from review_app.services.rubrics.rubric_catalog import sync_rubrics
from review_app.services.access.actors import operator_actor, sign_in
from storage.engine import create_database_engine

engine = create_database_engine(sys.argv[1])
rubric = sync_rubrics(engine, operator_actor()).get(sys.argv[2])
rita = sign_in(engine, name="rita", auth_mode="local")
case_id, turn = sys.argv[3], int(sys.argv[4])
record_label(engine, rita, case_id=case_id, turn=turn, rubric=rubric, code="in_role")
"""
CASE = "support-clean-late-parcel"


def _rita_with_one_case(engine: Engine) -> tuple[Rubric, Actor]:
    """rita, with one case of six assistant turns in her queue, nothing labeled yet."""
    load_demo(engine, operator_actor())
    operator = Actor.operator()
    add_person(engine, operator, name="rita", role="reviewer")
    rubric = sync_rubrics(engine, operator_actor()).get(RUBRIC)
    assign_cases(engine, operator, rubric=rubric, reviewers=["rita"], overlap=4, case_ids=[CASE])
    return rubric, sign_in(engine, name="rita", auth_mode="local")


def test_queue_counts_see_a_label_saved_by_another_process_at_once(database: Database) -> None:
    """The counts are kept between reruns, yet a save by the command line or a second server
    (here: another process, with its own engine) shows at the next read: nothing in this
    process is told of it, and nothing is cleared."""
    engine = database.engine
    rubric, rita = _rita_with_one_case(engine)
    for turn in (2, 4, 6, 8, 10):
        record_label(engine, rita, case_id=CASE, turn=turn, rubric=rubric, code="in_role")
    before = queue_page(engine, rita, rubric=rubric)
    assert (before.completed, before.assigned) == (0, 1)

    repo = Path(__file__).resolve().parents[1]
    subprocess.run(
        [sys.executable, "-c", SAVE_IN_ANOTHER_PROCESS, database.url, RUBRIC, CASE, "12"],
        env={**os.environ, "PYTHONPATH": str(repo)},
        check=True,
        timeout=120,
    )

    after = queue_page(engine, rita, rubric=rubric)
    assert (after.completed, after.assigned, after.progress) == (1, 1, 1.0)
    assert open_review_work(engine, rita, rubric=rubric) == 0


def test_kept_counts_serve_while_the_token_stays_and_are_counted_again_when_it_moves(
    sqlite_database: Database, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The cache can be seen working: a read with an unchanged token does not count, and a
    label saved through a second engine (what another process's save looks like from
    here) moves the token, so the next read counts again."""
    engine = sqlite_database.engine
    rubric, rita = _rita_with_one_case(engine)
    reviewer_id = rita.reviewer_id
    assert reviewer_id is not None
    counted: list[int] = []
    count = assignments.queue_progress

    def counting(session: Session, **kwargs: Any) -> tuple[int, int]:
        counted.append(kwargs["reviewer_id"])
        return count(session, **kwargs)

    monkeypatch.setattr(assignments, "queue_progress", counting)
    kept = ProgressCounts(ttl=3600)

    def read() -> tuple[int, int]:
        with Session(read_only(engine)) as session:
            return kept.counts(session, engine, reviewer_id=reviewer_id, rubric=rubric)

    assert (read(), read()) == ((0, 1), (0, 1))
    assert counted == [reviewer_id]  # the second read used the kept counts

    second_engine = create_database_engine(sqlite_database.url)
    try:
        for turn in (2, 4, 6, 8, 10, 12):
            record_label(
                second_engine, rita, case_id=CASE, turn=turn, rubric=rubric, code="in_role"
            )
    finally:
        second_engine.dispose()
    assert read() == (1, 1)
    assert counted == [reviewer_id, reviewer_id]
    assert read() == (1, 1) and len(counted) == 2


# --- most informative first ---------------------------------------------------------------


def _signals(
    judge: dict[int, list[tuple[str | None, float | None]]] | None = None,
    human: dict[int, dict[int, str]] | None = None,
    violations: set[int] | None = None,
) -> CaseSignals:
    return CaseSignals(judge or {}, human or {}, frozenset(violations or ()))


def test_score_case_weighs_uncertainty_disagreement_and_contradiction() -> None:
    passing = {"in_role"}
    quiet = score_case(_signals({2: [("in_role", 0.02)]}), open_turns={2}, pass_codes=passing)
    assert quiet.score == pytest.approx(0.04) and quiet.reasons == ()
    unsure = score_case(
        _signals({4: [("in_role", 0.45)], 6: [("tone_break", 0.55)], 8: [("in_role", 0.9)]}),
        open_turns={4, 6, 8},
        pass_codes=passing,
    )
    assert unsure.score == pytest.approx(0.9)
    assert unsure.reasons == ("judge unsure on turns 4, 6",)
    split = score_case(
        _signals({2: [("in_role", 0.0), ("tone_break", 1.0)]}), open_turns={2}, pass_codes=passing
    )
    assert (split.score, split.reasons) == (1.0, ("judge runs disagree on 2",))
    # turn 8 is labeled already by me: its signals do not count, but sibling disputes do
    others = score_case(
        _signals(
            {8: [("in_role", 0.5)]},
            human={8: {1: "in_role", 2: "authority_break"}, 4: {1: "in_role", 7: "tone_break"}},
            violations={8},
        ),
        open_turns={2},
        pass_codes=passing,
        me=7,
    )
    assert (others.score, others.reasons) == (0.5, ("reviewers disagree on 8",))
    contradicted = score_case(
        _signals(human={8: {1: "in_role"}}, violations={8}),
        open_turns={8},
        pass_codes=passing,
    )
    assert contradicted.reasons == ("finding contradicts a pass label on 8",)
    assert contradicted.score == 1.0
    with pytest.raises(ValueError, match="threshold must be strictly between 0 and 1"):
        score_case(_signals(), open_turns=set(), pass_codes=passing, threshold=1.0)


def test_audit_cases_keep_their_place() -> None:
    scores = {
        "a": Informativeness(0.0, ()),
        "b": Informativeness(0.0, (), audit_turns=(2,)),
        "c": Informativeness(2.0, ()),
        "d": Informativeness(1.0, ()),
        "e": Informativeness(0.0, (), audit_turns=(4,)),
    }
    assert order_informative_first(["a", "b", "c", "d", "e"], scores) == ["c", "b", "d", "a", "e"]


def test_informative_queue_puts_borderline_cases_first(sqlite_database: Database) -> None:
    engine = sqlite_database.engine
    import_paths(engine, operator_actor(), [DEMO_CASES])
    operator = Actor.operator()
    add_person(engine, operator, name="rita", role="reviewer")
    add_person(engine, operator, name="sam", role="reviewer")
    add_person(engine, operator, name="tess", role="reviewer")
    rubric = sync_rubrics(engine, operator_actor()).get(RUBRIC)
    rita = sign_in(engine, name="rita", auth_mode="local")
    queue = [
        "support-authorized-handoff-refund",
        "support-clean-late-parcel",
        "support-delayed-refund-violation",
        "support-false-refund-claim",
        "travel-clean-lisbon-weekend",
    ]
    assign_cases(engine, operator, rubric=rubric, reviewers=["rita"], overlap=1, case_ids=queue)
    with Session(engine) as session:
        sure, other = (
            JudgeRun(
                judge="j",
                prompt_version=version,
                model="m",
                rubric_id="role-adherence",
                rubric_version=1,
                status="complete",
            )
            for version in ("p1", "p2")
        )
        session.add_all([sure, other])
        session.flush()
        assert sure.id is not None and other.id is not None
        verdicts = [
            (sure.id, "support-authorized-handoff-refund", 2, "in_role", 0.01),
            (sure.id, "support-clean-late-parcel", 4, "in_role", 0.48),  # unsure
            (sure.id, "support-clean-late-parcel", 6, "in_role", 0.53),  # unsure
            (sure.id, "support-false-refund-claim", 2, "in_role", 0.02),
            (other.id, "support-false-refund-claim", 2, "tone_break", 0.03),  # runs disagree
            (sure.id, "travel-clean-lisbon-weekend", 2, "in_role", 0.5),  # audit: stays last
        ]
        session.add_all(
            JudgeVerdict(run_id=run, case_id=case, turn=turn, label=label, score=score)
            for run, case, turn, label, score in verdicts
        )
        session.commit()
    sam = sign_in(engine, name="sam", auth_mode="local")
    tess = sign_in(engine, name="tess", auth_mode="local")
    # two other reviewers disagree on a sibling turn of the violation case
    assign_cases(
        engine, operator, rubric=rubric, reviewers=["sam", "tess"], overlap=3, case_ids=[queue[2]]
    )
    record_label(engine, sam, case_id=queue[2], turn=2, rubric=rubric, code="in_role")
    record_label(engine, tess, case_id=queue[2], turn=2, rubric=rubric, code="tone_break")

    # a policy owner with the same queue sees the order and why
    add_person(engine, operator, name="polly", role="policy_owner")
    assign_cases(engine, operator, rubric=rubric, reviewers=["polly"], overlap=4, case_ids=queue)
    polly = sign_in(engine, name="polly", auth_mode="local")
    expected = [
        "support-false-refund-claim",  # 1.0 + 0.0 (runs disagree; scores far from 0.5)
        "support-clean-late-parcel",  # 0.94
        "support-delayed-refund-violation",  # 0.5 (reviewers disagree on turn 2)
        "support-authorized-handoff-refund",  # 0.02
        "travel-clean-lisbon-weekend",  # audit sample: its place, whatever its score
    ]
    page, why = informative_queue(
        engine, polly, rubric=rubric, audit_units={("travel-clean-lisbon-weekend", 2)}
    )
    assert [row.case_id for row in page.rows] == expected
    assert why["support-clean-late-parcel"].why == "judge unsure on turns 4, 6"
    assert why["support-false-refund-claim"].why == "judge runs disagree on 2"
    assert why["support-delayed-refund-violation"].why == "reviewers disagree on 2"
    assert why["travel-clean-lisbon-weekend"].why == (
        "judge unsure on turn 2; audit sample (keeps its place)"
    )
    # the reviewer rita: the same order, but nothing built from others' labels or the
    # judge (blind means blind); only the audit-sample mark
    page, why = informative_queue(
        engine, rita, rubric=rubric, audit_units={("travel-clean-lisbon-weekend", 2)}
    )
    assert [row.case_id for row in page.rows] == expected
    assert {case_id: found.why for case_id, found in why.items()} == {
        "support-false-refund-claim": "",
        "support-clean-late-parcel": "",
        "support-delayed-refund-violation": "",
        "support-authorized-handoff-refund": "",
        "travel-clean-lisbon-weekend": "audit sample (keeps its place)",
    }
    assert {found.score for found in why.values()} == {0.0}, "no score derived from others"
    plain = queue_page(engine, rita, rubric=rubric)
    assert [row.case_id for row in plain.rows] == queue, "the queue order is unchanged"
    second, _ = informative_queue(
        engine,
        rita,
        rubric=rubric,
        page=2,
        page_size=2,
        audit_units={("travel-clean-lisbon-weekend", 2)},
    )
    assert [row.case_id for row in second.rows] == [
        "support-delayed-refund-violation",
        "support-authorized-handoff-refund",
    ]


def test_audit_sample_units_keep_their_place_without_being_passed(
    sqlite_database: Database,
) -> None:
    """The queue reads the rubric version's audit samples itself: a drawn case is marked."""
    engine = sqlite_database.engine
    import_paths(engine, operator_actor(), [DEMO_CASES])
    add_person(engine, operator_actor(), name="rita", role="reviewer")
    rubric = sync_rubrics(engine, operator_actor()).get(RUBRIC)
    drawn = draw_audit_sample(
        engine, operator_actor(), rubric=rubric, size=1, seed=3, reviewers=["rita"], overlap=1
    )
    rita = sign_in(engine, name="rita", auth_mode="local")
    page, why = informative_queue(engine, rita, rubric=rubric)
    assert drawn.cases == 1 and len(page.rows) == 1
    (case_id,) = [row.case_id for row in page.rows]
    assert why[case_id].audit_turns, "the drawn unit is marked as an audit sample"
    assert "audit sample" in why[case_id].why


def test_turns_drawn_by_uncertainty_keep_their_place_too(sqlite_database: Database) -> None:
    """An uncertainty draw is an audit sample for the queue (not for PPI++)."""
    from pathlib import Path

    from review_app.services.judging.judge_import import import_verdicts
    from review_app.services.judging.runs import list_judge_runs
    from review_app.services.judging.uncertainty_audit import draw_uncertainty_sample

    engine = sqlite_database.engine
    import_paths(engine, operator_actor(), [DEMO_CASES])
    add_person(engine, operator_actor(), name="rita", role="reviewer")
    rubric = sync_rubrics(engine, operator_actor()).get(RUBRIC)
    verdicts = Path(DEMO_CASES).parent / "judge_verdicts.jsonl"
    import_verdicts(engine, operator_actor(), verdicts, rubric=rubric)
    run_id = list_judge_runs(engine, operator_actor())[0].id
    drawn = draw_uncertainty_sample(
        engine, operator_actor(), rubric=rubric, run_id=run_id, size=2, seed=1,
        reviewers=["rita"], overlap=1,
    )  # fmt: skip
    assert drawn.units
    rita = sign_in(engine, name="rita", auth_mode="local")
    page, why = informative_queue(engine, rita, rubric=rubric)
    marked = {row.case_id for row in page.rows if why[row.case_id].audit_turns}
    assert marked == {unit["case_id"] for unit in drawn.units}


def test_the_queue_scores_from_per_turn_sums_as_score_case_does_from_every_signal(
    database: Database,
) -> None:
    """The queue sums verdicts and labels up per turn in the database; each case's score
    and reasons equal :func:`score_case` fed every verdict and label one by one."""
    import random

    from sqlalchemy import select

    from review_app.evaluator import EVALUATOR_VERSION
    from storage.models import Event, Finding, Label

    engine = database.engine
    load_demo(engine, operator_actor())  # labels by ana, ben and chloe; two judge runs
    rubric = sync_rubrics(engine, operator_actor()).get(RUBRIC)
    add_person(engine, operator_actor(), name="polly", role="policy_owner")
    assign_cases(engine, operator_actor(), rubric=rubric, reviewers=["polly"], overlap=4)
    polly = sign_in(engine, name="polly", auth_mode="local")
    rng = random.Random(5)
    with Session(engine) as session:
        units = session.execute(
            select(Event.case_id, Event.turn).where(Event.actor == rubric.applies_to)
        ).all()
        runs = [
            JudgeRun(
                judge="j",
                prompt_version=f"p{k}",
                model="m",
                rubric_id=rubric.id,
                rubric_version=rubric.version,
                status="complete",
            )
            for k in range(3)
        ]
        session.add_all(runs)
        session.flush()
        codes = [label.code for label in rubric.labels]
        session.add_all(
            JudgeVerdict(
                run_id=run.id,
                case_id=case_id,
                turn=turn,
                label=rng.choice([*codes[:2], None]),
                score=rng.choice([None, round(rng.random(), 3), 0.5]),
            )
            for run in runs
            for case_id, turn in units
            if rng.random() < 0.6
        )
        session.commit()
    mine = rng.sample(units, 5)
    for case_id, turn in mine:
        record_label(
            engine, polly, case_id=case_id, turn=turn, rubric=rubric, code=rng.choice(codes)
        )

    for threshold in (0.5, 0.3):
        page, found = informative_queue(
            engine, polly, rubric=rubric, page_size=1000, threshold=threshold, audit_units=()
        )
        assert len(found) == 17
        with Session(engine) as session:
            verdicts = session.execute(
                select(
                    JudgeVerdict.case_id, JudgeVerdict.turn, JudgeVerdict.label, JudgeVerdict.score
                )
                .join(JudgeRun, JudgeRun.id == JudgeVerdict.run_id)
                .where(JudgeRun.rubric_id == rubric.id, JudgeVerdict.error.is_(None))  # type: ignore[union-attr]
            ).all()
            labels = session.execute(
                select(Label.case_id, Label.turn, Label.reviewer_id, Label.code).where(
                    Label.rubric_id == rubric.id, Label.current
                )
            ).all()
            violations = session.execute(
                select(Finding.case_id, Finding.turn).where(
                    Finding.kind == "violation", Finding.evaluator_version == EVALUATOR_VERSION
                )
            ).all()
        pass_codes = {label.code for label in rubric.labels if label.verdict == "pass"}
        for case_id, got in found.items():
            judge: dict[int, list[tuple[str | None, float | None]]] = {}
            for c, turn, label, score in verdicts:
                if c == case_id and turn is not None:
                    judge.setdefault(turn, []).append((label, score))
            human: dict[int, dict[int, str]] = {}
            for c, turn, reviewer_id, code in labels:
                if c == case_id:
                    human.setdefault(turn, {})[reviewer_id] = code
            open_turns = {
                t for c, t in units if c == case_id and polly.reviewer_id not in human.get(t, {})
            }
            expected = score_case(
                CaseSignals(judge, human, frozenset(t for c, t in violations if c == case_id)),
                open_turns=open_turns,
                pass_codes=pass_codes,
                threshold=threshold,
                me=polly.reviewer_id,
            )
            assert (got.score, got.reasons) == (expected.score, expected.reasons), case_id
        assert any(item.reasons for item in found.values())
        listed = [found[row.case_id].score for row in page.rows]
        assert listed == sorted(listed, reverse=True)  # no audit sample: by score
