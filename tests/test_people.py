"""Deactivating and reactivating a person: rights go at once and come back, the last
active admin stays, every change leaves one audit entry; on SQLite and PostgreSQL."""

from __future__ import annotations

import json
from typing import Any

import pytest

from review_app.errors import InputError, NotFound, PermissionDenied
from review_app.rubrics.model import Rubric
from review_app.services.access.actors import sign_in
from review_app.services.cases.importing import import_paths
from review_app.services.labels.labeling import record_label
from review_app.services.operations.audit import AuditRecord, audit_entries
from review_app.services.rubrics.rubric_catalog import sync_rubrics
from review_app.services.team.audit_samples import draw_audit_sample
from review_app.services.team.people import (
    add_person,
    deactivate_person,
    list_people,
    reactivate_person,
    set_role,
)
from review_app.services.team.queue import assign_cases, queue_page
from review_app.services.team.rights import preview_rights_change
from tests.actors import assign, operator, signed_in
from tests.conftest import DEMO_CASES, Database

RUBRIC = "role-adherence@1"
CASE = "support-clean-late-parcel"


def _setup(database: Database) -> Rubric:
    import_paths(database.engine, operator(), [DEMO_CASES / f"{CASE}.json"])
    return sync_rubrics(database.engine, operator()).get(RUBRIC)


def _entries(database: Database, action: str) -> list[AuditRecord]:
    return audit_entries(database.engine, operator(), action=action)


def test_a_deactivated_reviewer_is_refused_at_once_and_reactivation_restores(
    database: Database,
) -> None:
    engine = database.engine
    rubric = _setup(database)
    rita = signed_in(engine, "rita", role="reviewer")
    assign(engine, rubric, "rita", CASE)
    record_label(engine, rita, case_id=CASE, turn=2, rubric=rubric, code="in_role")
    assert queue_page(engine, rita, rubric=rubric).assigned == 1

    change = deactivate_person(engine, operator(), name="Rita")  # names are case-folded
    assert (change.name, change.active, change.changed) == ("rita", False, True)
    assert change.line() == "rita: deactivated"
    # the session signed in before the change: its next read and write are refused
    with pytest.raises(PermissionDenied, match="rita has been deactivated by an admin"):
        queue_page(engine, rita, rubric=rubric)
    with pytest.raises(PermissionDenied, match="rita has been deactivated by an admin"):
        record_label(engine, rita, case_id=CASE, turn=2, rubric=rubric, code="scope_break")
    with pytest.raises(PermissionDenied, match="rita has been deactivated by an admin"):
        sign_in(engine, name="rita", auth_mode="oidc")
    assert "rita" not in [person.name for person in list_people(engine)]
    listed = {p.name: p.active for p in list_people(engine, include_inactive=True)}
    assert listed["rita"] is False

    assert reactivate_person(engine, operator(), name="rita").line() == "rita: reactivated"
    assert queue_page(engine, rita, rubric=rubric).assigned == 1
    record_label(engine, rita, case_id=CASE, turn=2, rubric=rubric, code="scope_break")
    assert sign_in(engine, name="rita", auth_mode="oidc").reviewer_id == rita.reviewer_id


def test_each_change_leaves_one_entry_and_a_repeat_none(database: Database) -> None:
    engine = database.engine
    signed_in(engine, "sam", role="policy_owner")
    admin = signed_in(engine, "ada", role="admin")
    deactivate_person(engine, admin, name="sam")
    again = deactivate_person(engine, admin, name="sam")
    assert not again.changed and again.line() == "sam: already deactivated, nothing changed"
    (entry,) = _entries(database, "person_deactivate")
    assert (entry.actor, entry.object_type, entry.object) == ("ada", "reviewer", "sam")
    assert entry.summary == {"before": {"active": True}, "after": {"active": False}}

    reactivate_person(engine, operator(), name="sam")
    assert reactivate_person(engine, operator(), name="sam").line() == (
        "sam: already active, nothing changed"
    )
    (entry,) = _entries(database, "person_reactivate")
    assert (entry.actor, entry.object) == ("operator", "sam")
    assert entry.summary == {"before": {"active": False}, "after": {"active": True}}


def test_only_an_admin_may_and_only_known_people(database: Database) -> None:
    engine = database.engine
    signed_in(engine, "sam", role="reviewer")
    owner = signed_in(engine, "olga", role="policy_owner")
    for change in (deactivate_person, reactivate_person):
        with pytest.raises(PermissionDenied, match=r"olga is a policy owner; this needs an admin$"):
            change(engine, owner, name="sam")
        with pytest.raises(NotFound, match="no reviewer named 'nobody'"):
            change(engine, operator(), name="Nobody")
    assert _entries(database, "person_deactivate") == []


def test_the_last_active_admin_stays(database: Database) -> None:
    engine = database.engine
    ada = signed_in(engine, "ada", role="admin")
    with pytest.raises(InputError, match="ada is the last active admin"):
        deactivate_person(engine, operator(), name="ada")
    bo = signed_in(engine, "bo", role="admin")
    # with another active admin, that admin may deactivate ada (never ada herself)
    assert deactivate_person(engine, bo, name="ada").changed
    with pytest.raises(PermissionDenied, match="deactivated"):
        deactivate_person(engine, ada, name="bo")
    # a deactivated admin does not count: bo is now the last one, for demotions too
    with pytest.raises(InputError, match="bo is the last active admin"):
        deactivate_person(engine, operator(), name="bo")
    with pytest.raises(InputError, match="the last admin cannot be demoted"):
        set_role(engine, operator(), name="bo", role="reviewer")
    with pytest.raises(InputError, match="the last admin cannot be demoted"):
        add_person(engine, operator(), name="bo", role="policy_owner")
    reactivate_person(engine, operator(), name="ada")
    set_role(engine, operator(), name="bo", role="reviewer")
    assert _entries(database, "person_deactivate")[0].object == "ada"


def test_nobody_deactivates_or_demotes_themselves(database: Database) -> None:
    engine = database.engine
    ada = signed_in(engine, "ada", role="admin")
    bo = signed_in(engine, "bo", role="admin")  # ada is not the last admin: still refused
    with pytest.raises(InputError, match="ada: you cannot deactivate yourself") as refused:
        deactivate_person(engine, ada, name="Ada")
    assert refused.value.field == "reviewer"
    for demote in (
        lambda: set_role(engine, ada, name="ada", role="policy_owner"),
        lambda: set_role(engine, ada, name="ada", role="reviewer"),
        lambda: add_person(engine, ada, name="ada", role="reviewer"),
    ):
        with pytest.raises(InputError, match="ada: you cannot demote yourself") as refused:
            demote()
        assert refused.value.field == "role"
    # nothing was written, and ada still acts as an active admin
    assert [(p.name, p.role, p.active) for p in list_people(engine, include_inactive=True)] == [
        ("ada", "admin", True),
        ("bo", "admin", True),
    ]
    assert _entries(database, "person_deactivate") == []
    assert _entries(database, "role_change") == []
    # her own role again is no demotion, and another admin may do what she may not
    set_role(engine, ada, name="ada", role="admin")
    set_role(engine, bo, name="ada", role="policy_owner")
    assert deactivate_person(engine, bo, name="ada").changed


def test_the_preview_names_the_person_what_they_lose_and_the_refusals(
    database: Database,
) -> None:
    engine = database.engine
    rubric = _setup(database)
    ada = signed_in(engine, "ada", role="admin")
    signed_in(engine, "rita", role="policy_owner")
    assign(engine, rubric, "rita", CASE)

    losing = preview_rights_change(engine, ada, name="Rita", change="deactivate")
    assert (losing.name, losing.open_assignments, losing.loses_rights) == ("rita", 1, True)
    assert losing.refusal is None
    assert losing.sentence().startswith(
        "rita (policy owner) loses every right from their next action on: assigning cases"
    )
    assert "labeling the cases in their queue" in losing.sentence()
    assert "Their 1 open assignment stays in their queue undone" in losing.sentence()
    demoted = preview_rights_change(engine, ada, name="rita", change="role", role="reviewer")
    assert demoted.loses_rights and "loses assigning cases" in demoted.sentence()
    assert "labeling" not in demoted.sentence()  # a reviewer keeps labeling
    promoted = preview_rights_change(engine, ada, name="rita", change="role", role="admin")
    assert not promoted.loses_rights and promoted.refusal is None

    own = preview_rights_change(engine, ada, name="ada", change="deactivate")
    assert own.refusal == "ada: you cannot deactivate yourself; another admin can"
    assert own.sentence().startswith("Refused: ")
    last = preview_rights_change(engine, operator(), name="ada", change="role", role="reviewer")
    assert last.refusal == "ada is the last active admin and cannot be demoted"
    with pytest.raises(PermissionDenied):
        preview_rights_change(engine, signed_in(engine, "rita"), name="ada", change="deactivate")
    # a preview writes nothing
    assert [(p.name, p.role, p.active) for p in list_people(engine, include_inactive=True)] == [
        ("ada", "admin", True),
        ("rita", "policy_owner", True),
    ]


def test_the_commands(database: Database, run_cli: Any) -> None:
    db = database.url
    assert run_cli("reviewers", "add", "Ana", "--role", "admin", db=db).stdout == "ana: admin\n"
    run_cli("reviewers", "add", "ben", db=db)
    done = run_cli("reviewers", "deactivate", "BEN", db=db)
    assert (done.returncode, done.stdout) == (0, "ben: deactivated\n")
    again = run_cli("reviewers", "deactivate", "ben", db=db)
    assert (again.returncode, again.stdout) == (0, "ben: already deactivated, nothing changed\n")
    assert [line.split() for line in run_cli("reviewers", "list", db=db).stdout.splitlines()] == [
        ["ana", "admin"],
        ["ben", "reviewer", "inactive"],
    ]
    assert json.loads(run_cli("reviewers", "list", "--json", db=db).stdout) == [
        {"name": "ana", "role": "admin", "active": True},
        {"name": "ben", "role": "reviewer", "active": False},
    ]
    unknown = run_cli("reviewers", "reactivate", "nobody", db=db)
    assert (unknown.returncode, unknown.stdout) == (2, "")
    assert unknown.stderr == "error: no reviewer named 'nobody'\n"
    last = run_cli("reviewers", "deactivate", "ana", db=db)
    assert last.returncode == 2 and "ana is the last active admin" in last.stderr
    demoted = run_cli("reviewers", "add", "ana", "--role", "reviewer", db=db)
    assert (demoted.returncode, demoted.stdout) == (2, "")
    assert demoted.stderr == (
        "error: field role: the last admin cannot be demoted; make someone else admin first\n"
    )
    back = run_cli("reviewers", "reactivate", "ben", db=db)
    assert (back.returncode, back.stdout) == (0, "ben: reactivated\n")
    audit = run_cli("audit", "--action", "person_deactivate", "--json", db=db).stdout
    assert [entry["object"] for entry in json.loads(audit)] == ["ben"]


def test_a_deactivated_reviewer_is_given_no_new_cases(database: Database) -> None:
    engine = database.engine
    rubric = _setup(database)
    signed_in(engine, "rita", role="reviewer")
    deactivate_person(engine, operator(), name="rita")
    with pytest.raises(InputError, match="rita: deactivated, so given no cases") as refused:
        assign_cases(engine, operator(), rubric=rubric, reviewers=["Rita"], overlap=1)
    assert refused.value.field == "reviewers"
    with pytest.raises(InputError, match="rita: deactivated, so given no cases"):
        draw_audit_sample(engine, operator(), rubric=rubric, size=1, seed=0, reviewers=["rita"])
    assert _entries(database, "assign") == []
    assert _entries(database, "audit_sample") == []
    reactivate_person(engine, operator(), name="rita")
    report = assign_cases(engine, operator(), rubric=rubric, reviewers=["rita"], overlap=1)
    assert report.new_assignments == 1


def _queues(database: Database) -> dict[str, int]:
    """Cases per person under the demo's rubric version."""
    from sqlmodel import Session

    from storage import assignments, reviewers

    with Session(database.engine) as session:
        names = reviewers.reviewer_names(session)
        counts = assignments.progress_by_reviewer(session, rubric_id="role-adherence", version=1)
    return {names[reviewer_id]: assigned for reviewer_id, (assigned, _) in counts.items()}


@pytest.mark.parametrize("configured", ["proxy", "oidc", "secrets"])
def test_demo_under_sign_in_makes_no_person_for_the_os_user(
    database: Database, run_cli: Any, tmp_path: Any, configured: str
) -> None:
    """Under sign-in nobody is the operating-system user: the demo makes no person (no
    admin) for them and gives its cases to its own reviewers only, even when someone of
    the team already holds one of them."""
    _setup(database)
    signed_in(database.engine, "rita", role="reviewer")
    assign(database.engine, sync_rubrics(database.engine, operator()).get(RUBRIC), "rita", CASE)
    env = {"REVIEW_APP_LOCAL_USER": "root"}
    if configured == "secrets":  # no REVIEW_APP_AUTH: an [auth] section makes OIDC the default
        (tmp_path / ".streamlit").mkdir()
        (tmp_path / ".streamlit" / "secrets.toml").write_text('[auth]\nclient_id = "x"\n')
        env["REVIEW_APP_AUTH"] = ""
    else:
        env["REVIEW_APP_AUTH"] = configured
    done = run_cli("demo", "--no-serve", db=database.url, env=env)
    assert done.returncode == 0, done.stderr
    people = {p.name: p.role for p in list_people(database.engine, include_inactive=True)}
    assert people == {
        "ana": "reviewer",
        "ben": "reviewer",
        "chloe": "reviewer",
        "olivia": "policy_owner",
        "rita": "reviewer",
    }
    assert _queues(database) == {"ana": 17, "ben": 17, "chloe": 17, "rita": 1}
    assert "queues: add the chosen reviewers to each of 17 cases: assigned 51 " in done.stdout


def test_demo_in_local_mode_makes_the_local_user_an_admin_with_the_cases(
    database: Database, run_cli: Any
) -> None:
    env = {"REVIEW_APP_AUTH": "local", "REVIEW_APP_LOCAL_USER": "Lee"}
    done = run_cli("demo", "--no-serve", db=database.url, env=env)
    assert done.returncode == 0, done.stderr
    assert {p.name: p.role for p in list_people(database.engine)}["lee"] == "admin"
    assert _queues(database) == {"ana": 17, "ben": 17, "chloe": 17, "lee": 17}


def test_a_second_uniform_draw_with_a_seed_says_it_is_a_new_sample(database: Database) -> None:
    engine = database.engine
    rubric = _setup(database)
    signed_in(engine, "rita", role="reviewer")
    olivia = signed_in(engine, "olivia", role="policy_owner")
    first = draw_audit_sample(engine, olivia, rubric=rubric, size=1, seed=3, reviewers=["rita"])
    assert first.earlier is None and "was used before" not in first.line()
    second = draw_audit_sample(
        engine, operator(), rubric=rubric, size=1, seed=3, reviewers=["rita"]
    )
    assert second.earlier is not None
    assert (second.earlier.sample_id, second.earlier.size, second.earlier.by) == (
        first.sample_id,
        1,
        "olivia",
    )
    assert f"seed 3 was used before: audit sample {first.sample_id} drew 1 turns on " in (
        second.line()
    )
    assert second.line().endswith(
        ", by olivia. This is a new sample, not that one again: it draws among the turns no "
        "earlier sample drew"
    )
    third = draw_audit_sample(engine, olivia, rubric=rubric, size=1, seed=3, reviewers=["rita"])
    assert third.earlier is not None and third.earlier.draws == 2
    assert "seed 3 was used before (used 2 times so far)" in third.line()
    assert (
        draw_audit_sample(engine, olivia, rubric=rubric, size=1, seed=4, reviewers=["rita"]).earlier
        is None
    )
