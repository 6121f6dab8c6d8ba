"""Judge prompt versions stored in the database (docs/reference.md, "Judge prompt
versions"), SQLite and PostgreSQL: files stored on sync, a used version whose file
changed refused, the database itself refusing changes by raw SQL; created versions;
``judge prompts list|show|create`` and ``judge compare`` from the command line;
``compare_judge_runs`` on gold."""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import Engine, text
from sqlalchemy.exc import DBAPIError

from review_app.cli.render_judging import render_run_comparison
from review_app.errors import DatabaseBusy, InputError, PermissionDenied
from review_app.rubrics.model import Rubric
from review_app.services.access.actors import operator_actor, sign_in
from review_app.services.cases.importing import import_paths
from review_app.services.judging.judge_compare import compare_judge_runs
from review_app.services.judging.judge_import import import_verdicts
from review_app.services.judging.judge_prompts import (
    create_judge_prompt,
    list_judge_prompts,
    preview_messages,
    prompt_for_run,
    show_judge_prompt,
)
from review_app.services.judging.judge_runner import run_judge
from review_app.services.judging.runs import list_judge_runs
from review_app.services.labels.adjudication import record_gold
from review_app.services.operations.audit import audit_entries
from review_app.services.rubrics.rubric_catalog import sync_rubrics
from storage.engine import create_database_engine
from storage.migrations.upgrade import upgrade_database
from tests.conftest import Database, cli_test_environment, invoke_cli
from tests.judge_support import FakeChatServer, serve, support_case, write_jsonl
from tests.test_judge_service import RUBRICS, make_world

OP = operator_actor()


@pytest.fixture
def server() -> Iterator[FakeChatServer]:
    yield from serve()


@pytest.fixture
def rubrics(tmp_path: Path) -> Path:
    copy = tmp_path / "rubrics"
    shutil.copytree(RUBRICS, copy)
    return copy


def _file(rubrics: Path, judge: str, version: int) -> Path:
    return rubrics / "role-adherence" / "judges" / judge / f"v{version}.txt"


def test_files_are_stored_and_a_used_version_whose_file_changed_is_refused(
    database: Database, server: FakeChatServer, tmp_path: Path, rubrics: Path
) -> None:
    world = make_world(database, server, tmp_path)
    engine, rubric = world.engine, world.rubric
    listed = list_judge_prompts(engine, OP, rubric_id=rubric.id, directory=rubrics)
    assert sorted(p.ref for p in listed.prompts) == [
        "role-judge-mini@v1",
        "role-judge@v1",
        "role-judge@v2",
    ]
    assert listed.refused == {}
    v1 = show_judge_prompt(engine, OP, rubric_id=rubric.id, ref="role-judge@v1", directory=rubrics)
    assert v1.text == _file(rubrics, "role-judge", 1).read_text(encoding="utf-8")
    assert (v1.rubric_version, v1.runs, v1.source) == (
        None,
        0,
        str(_file(rubrics, "role-judge", 1)),
    )
    # no run yet: a changed file updates the stored text
    v2_file = _file(rubrics, "role-judge", 2)
    v2_file.write_text(v2_file.read_text(encoding="utf-8") + "\nBe brief.\n", encoding="utf-8")
    v2 = show_judge_prompt(engine, OP, rubric_id=rubric.id, ref="role-judge@v2", directory=rubrics)
    assert v2.text.endswith("Be brief.\n")

    # a run uses role-judge@v1: it is written for role-adherence@1 from now on
    prompt = prompt_for_run(engine, OP, rubric=rubric, ref="role-judge@v1", directory=rubrics)
    summary = run_judge(
        engine, OP, rubric=rubric, prompt=prompt, settings=world.settings(), case_ids=world.case_ids
    )
    assert summary.name == f"role-judge@v1/fake at 127.0.0.1:{world.server.port}"
    used = show_judge_prompt(
        engine, OP, rubric_id=rubric.id, ref="role-judge@v1", directory=rubrics
    )
    assert (used.rubric_version, used.runs) == (1, 1)
    [run] = list_judge_runs(engine, OP, rubric=rubric)
    with database.engine.connect() as connection:
        sha = connection.execute(
            text("SELECT prompt_sha256 FROM judge_runs WHERE id = :id"), {"id": run.id}
        ).scalar()
    assert sha == used.sha256

    # its file changes: refused, with what to do instead; the stored text stays
    v1_file = _file(rubrics, "role-judge", 1)
    v1_file.write_text(v1.text.replace("careful", "strict") + "\nNew.\n", encoding="utf-8")
    listed = list_judge_prompts(engine, OP, rubric_id=rubric.id, directory=rubrics)
    why = listed.refused["role-judge@v1"]
    assert why.startswith("role-judge@v1 has runs and its file has changed since")
    assert str(v1_file.parent) not in why
    assert "immutable once a run used it" in why and "v3.txt" in why
    for call in (
        lambda: show_judge_prompt(
            engine, OP, rubric_id=rubric.id, ref="role-judge@v1", directory=rubrics
        ),
        lambda: prompt_for_run(engine, OP, rubric=rubric, ref="role-judge@v1", directory=rubrics),
    ):
        with pytest.raises(InputError) as caught:
            call()
        assert caught.value.field == "--prompt" and "immutable" in caught.value.message
    stored_text = next(p for p in listed.prompts if p.ref == "role-judge@v1").text
    assert stored_text == v1.text

    # the database itself refuses changing or deleting a used version (raw SQL)
    for statement in (
        "UPDATE judge_prompts SET text = 'x' WHERE judge = 'role-judge' AND version = 1",
        "UPDATE judge_prompts SET sha256 = 'x' WHERE judge = 'role-judge' AND version = 1",
        "UPDATE judge_prompts SET version = 9 WHERE judge = 'role-judge' AND version = 1",
        "UPDATE judge_prompts SET rubric_version = 2 WHERE judge = 'role-judge' AND version = 1",
        "DELETE FROM judge_prompts WHERE judge = 'role-judge' AND version = 1",
    ):
        with (
            pytest.raises(DBAPIError, match="immutable once a run used it"),
            database.engine.begin() as connection,
        ):
            connection.execute(text(statement))
    # an unused version may still change (its file is the truth until a run uses it)
    with database.engine.begin() as connection:
        connection.execute(
            text("UPDATE judge_prompts SET source = 'x' WHERE judge = 'role-judge' AND version = 2")
        )
    actions = [e for e in audit_entries(engine, OP, action="judge_prompt")]
    assert {e.object for e in actions} >= {
        "role-adherence/role-judge@v1",
        "role-adherence/role-judge@v2",
    }


def test_a_created_version_is_numbered_next_derived_and_run_by_its_name(
    database: Database, server: FakeChatServer, tmp_path: Path, rubrics: Path
) -> None:
    world = make_world(database, server, tmp_path)
    engine, rubric = world.engine, world.rubric
    base = _file(rubrics, "role-judge", 1).read_text(encoding="utf-8")
    created = create_judge_prompt(
        engine,
        OP,
        rubric=rubric,
        judge="role-judge",
        text=base + "\nBe strict.\n",
        derived_from="role-judge@v1",
        directory=rubrics,
    )
    assert (created.ref, created.derived_from, created.rubric_version) == (
        "role-judge@v3",
        "role-judge@v1",
        1,
    )
    assert created.created_by == OP.name and created.source is None
    entry = audit_entries(engine, OP, action="judge_prompt", limit=1)[0]
    assert entry.object == "role-adherence/role-judge@v3"
    prompt = prompt_for_run(engine, OP, rubric=rubric, ref="role-judge@v3", directory=rubrics)
    assert prompt.text == base + "\nBe strict.\n"
    summary = run_judge(
        engine, OP, rubric=rubric, prompt=prompt, settings=world.settings(), case_ids=world.case_ids
    )
    assert summary.name == f"role-judge@v3/fake at 127.0.0.1:{world.server.port}"
    # a file that takes the created version's number with another text is refused
    clash = _file(rubrics, "role-judge", 3)
    clash.write_text(base + "\nAnother text.\n", encoding="utf-8")
    listed = list_judge_prompts(engine, OP, rubric_id=rubric.id, directory=rubrics)
    assert listed.refused["role-judge/v3.txt"].startswith(
        "role-judge@v3 was created in the app or with `judge prompts create`"
    )
    assert listed.get("role-judge@v3").text == base + "\nBe strict.\n"  # still offered
    clash.unlink()
    # a new judge starts at v1
    other = create_judge_prompt(
        engine, OP, rubric=rubric, judge="strict-judge", text=base, directory=rubrics
    )
    assert other.ref == "strict-judge@v1" and other.derived_from is None

    # bad input: the place and the field, nothing stored
    with pytest.raises(InputError) as caught:
        create_judge_prompt(
            engine,
            OP,
            rubric=rubric,
            judge="role-judge",
            text="Codes: $codes\nReply: $replly\n",
            source="draft.txt",
            directory=rubrics,
        )
    assert (caught.value.source, caught.value.line, caught.value.field) == ("draft.txt", 2, "text")
    with pytest.raises(InputError) as caught:
        create_judge_prompt(
            engine,
            OP,
            rubric=rubric,
            judge="role-judge",
            text=base,
            derived_from="role-judge@v7",
            directory=rubrics,
        )
    assert caught.value.field == "--from"
    with pytest.raises(InputError) as caught:
        create_judge_prompt(engine, OP, rubric=rubric, judge="../x", text=base, directory=rubrics)
    assert caught.value.field == "--judge"
    refs = [
        p.ref
        for p in list_judge_prompts(engine, OP, rubric_id=rubric.id, directory=rubrics).prompts
    ]
    assert "role-judge@v4" not in refs

    # a template in a folder that is no judge's is refused until --judge names it
    loose = tmp_path / "prompts" / "v5.txt"
    loose.parent.mkdir()
    loose.write_text(base, encoding="utf-8")
    with pytest.raises(InputError, match="not a judge of role-adherence"):
        prompt_for_run(engine, OP, rubric=rubric, ref=str(loose), directory=rubrics)
    named = prompt_for_run(
        engine, OP, rubric=rubric, ref=str(loose), judge="role-judge", directory=rubrics
    )
    assert named.ref == "role-judge@v5"

    # the messages a draft would send for one unit, nothing stored
    messages = preview_messages(
        engine, OP, rubric=rubric, text=base + "\nDraft.\n", case_id="c00", turn=4
    )
    assert [m["role"] for m in messages] == ["system", "user"]
    assert "Assistant reply at turn 4." in messages[1]["content"]
    assert "Assistant reply at turn 6." not in messages[1]["content"]
    assert messages[1]["content"].endswith("Draft.\n")
    with pytest.raises(InputError) as caught:
        preview_messages(engine, OP, rubric=rubric, text="$codes $nope", case_id="c00", turn=4)
    assert (caught.value.line, caught.value.field) == (1, "text")
    with pytest.raises(InputError) as caught:
        preview_messages(engine, OP, rubric=rubric, text=base, case_id="c00", turn=3)
    assert caught.value.field == "turn"

    # reviewers neither list nor create
    reviewer = sign_in(engine, name="rita", auth_mode="local", first_role="reviewer")
    with pytest.raises(PermissionDenied):
        list_judge_prompts(engine, reviewer, rubric_id=rubric.id, directory=rubrics)
    with pytest.raises(PermissionDenied):
        create_judge_prompt(
            engine, reviewer, rubric=rubric, judge="role-judge", text=base, directory=rubrics
        )


# --- the command line -------------------------------------------------------------------


def _cli_database(path: Path) -> str:
    url = f"sqlite:///{path}"
    engine = create_database_engine(url)
    upgrade_database(engine)
    cases = [
        support_case(f"c{i:02d}", assistant_turns=3, refund_at=i % 3 if i % 2 else None)
        for i in range(14)
    ]
    import_paths(engine, OP, [write_jsonl(path.parent / "cases.jsonl", cases)])
    sync_rubrics(engine, OP)
    engine.dispose()
    return url


def test_judge_prompts_list_show_create_and_bad_input(tmp_path: Path, rubrics: Path) -> None:
    url = _cli_database(tmp_path / "review.db")
    home = tmp_path / "home"
    home.mkdir()
    env = cli_test_environment(home, url)
    env["REVIEW_APP_RUBRICS_DIR"] = str(rubrics)

    def cli(*args: str, input: str | None = None):
        return invoke_cli(args, env=env, cwd=home, input=input)

    listed = cli("judge", "prompts", "list", "--rubric", "role-adherence@1")
    assert listed.returncode == 0, listed.stderr
    assert "role-judge@v1" in listed.stdout and "role-judge-mini@v1" in listed.stdout
    as_json = json.loads(
        cli("judge", "prompts", "list", "--rubric", "role-adherence@1", "--json").stdout
    )
    assert {p["ref"] for p in as_json["prompts"]} == {
        "role-judge@v1",
        "role-judge@v2",
        "role-judge-mini@v1",
    }
    shown = cli("judge", "prompts", "show", "role-judge@v2", "--rubric", "role-adherence@1")
    assert shown.returncode == 0
    assert shown.stdout == _file(rubrics, "role-judge", 2).read_text(encoding="utf-8")

    draft = tmp_path / "draft.txt"
    draft.write_text(shown.stdout + "\nAnswer in one line.\n", encoding="utf-8")
    created = cli(
        "judge", "prompts", "create", "--rubric", "role-adherence@1", "--judge", "role-judge",
        "--from", "role-judge@v2", "--file", str(draft),
    )  # fmt: skip
    assert (created.returncode, created.stdout) == (0, "role-judge@v3\n"), created.stderr
    piped = cli(
        "judge", "prompts", "create", "--rubric", "role-adherence@1", "--judge", "role-judge",
        input=shown.stdout + "\nPiped.\n",
    )  # fmt: skip
    assert (piped.returncode, piped.stdout) == (0, "role-judge@v4\n"), piped.stderr
    again = cli("judge", "prompts", "show", "role-judge@v4", "--rubric", "role-adherence@1")
    assert again.stdout == shown.stdout + "\nPiped.\n"

    bad = tmp_path / "bad.txt"
    bad.write_text("Codes: $codes\nTranscript: $conversation\nAlso $colour.\n", encoding="utf-8")
    refused = cli(
        "judge", "prompts", "create", "--rubric", "role-adherence@1", "--judge", "role-judge",
        "--file", str(bad),
    )  # fmt: skip
    assert refused.returncode == 2
    assert f"{bad}, line 3, field text: unknown placeholder $colour" in refused.stderr
    no_parent = cli(
        "judge", "prompts", "create", "--rubric", "role-adherence@1", "--judge", "role-judge",
        "--from", "role-judge@v9", "--file", str(draft),
    )  # fmt: skip
    assert no_parent.returncode == 2 and "--from" in no_parent.stderr
    bad_ref = cli("judge", "prompts", "show", "role-judge-v2", "--rubric", "role-adherence@1")
    assert bad_ref.returncode == 2 and "is not a prompt version JUDGE@vN" in bad_ref.stderr
    listed = cli("judge", "prompts", "list", "--rubric", "role-adherence@1", "--json")
    assert "role-judge@v5" not in listed.stdout

    # judge run: a template in a folder that is no judge's, without --judge, is refused
    loose = tmp_path / "prompts" / "v3.txt"
    loose.parent.mkdir()
    loose.write_text(shown.stdout, encoding="utf-8")
    run = cli(
        "judge", "run", "--rubric", "role-adherence@1", "--prompt", str(loose),
        "--base-url", "http://127.0.0.1:9/v1", "--model", "m",
    )  # fmt: skip
    assert run.returncode == 2
    assert "not a judge of role-adherence" in run.stderr and "--judge" in run.stderr


# --- comparing two runs ------------------------------------------------------------------

N_CASES = 14  # 3 assistant turns each: 42 gold units


def _compare_world(database: Database, tmp_path: Path) -> tuple[Engine, Rubric]:
    engine = database.engine
    cases = [support_case(f"c{i:02d}", assistant_turns=3, refund_at=None) for i in range(N_CASES)]
    import_paths(engine, OP, [write_jsonl(tmp_path / "cases.jsonl", cases)])
    rubric = sync_rubrics(engine, OP).get("role-adherence@1")
    units = [(f"c{i:02d}", turn) for i in range(N_CASES) for turn in (2, 4, 6)]
    gold = {u: ("authority_break" if k % 3 == 0 else "in_role") for k, u in enumerate(units)}
    for (case_id, turn), code in gold.items():
        record_gold(engine, OP, rubric=rubric, case_id=case_id, turn=turn, code=code)
    rows = []
    for k, unit in enumerate(units):
        right = gold[unit]
        wrong = "in_role" if right != "in_role" else "scope_break"
        for version, code in (("v1", wrong if k % 2 == 0 else right), ("v2", right)):
            rows.append(
                {
                    "case_id": unit[0],
                    "turn": unit[1],
                    "judge": "role-judge",
                    "prompt_version": version,
                    "model": "m",
                    "label": code,
                    "reason": f"{version} says {code}",
                }
            )
    import_verdicts(engine, OP, write_jsonl(tmp_path / "verdicts.jsonl", rows), rubric=rubric)
    return engine, rubric


def test_compare_two_runs_on_gold_with_a_verdict(database: Database, tmp_path: Path) -> None:
    engine, rubric = _compare_world(database, tmp_path)
    runs = {r.name: r.id for r in list_judge_runs(engine, OP, rubric=rubric)}
    v1, v2 = runs["role-judge@v1/m"], runs["role-judge@v2/m"]
    report = compare_judge_runs(engine, OP, rubric=rubric, run_ids=(v1, v2), n_resamples=300)
    assert report["n_units"] == 42 and report["n_conversations"] == N_CASES
    assert report["outcome"] == "second_better"
    assert report["verdict"].startswith("v2 agrees with gold better than v1: kappa +")
    assert report["verdict"].endswith(
        " on 42 units, and v2 is right where v1 was wrong on 21 units and never the reverse "
        "(McNemar p < 0.001)."
    )
    assert report["pairing"] == "chosen" and report["confound"] is None
    assert report["kappa"]["v2"]["value"] == pytest.approx(1.0)
    assert report["mcnemar"]["only_second_right"] == 21
    assert report["mcnemar"]["only_first_right"] == 0
    assert report["gold_source"]["adjudicated"] == 42
    assert len(report["differing"]) == 21
    first = report["differing"][0]
    assert first["first"]["reason"] == f"v1 says {first['first']['code']}"
    assert first["second"]["reason"] == f"v2 says {first['second']['code']}"
    assert "alternative annotator test" in render_run_comparison(report)
    swapped = compare_judge_runs(engine, OP, rubric=rubric, run_ids=(v2, v1), n_resamples=300)
    assert swapped["outcome"] == "first_better"
    assert swapped["kappa_difference"]["value"] == pytest.approx(
        -report["kappa_difference"]["value"]
    )
    # by default: the newest complete run against an earlier prompt's with the same model
    # at the same endpoint (here both imported)
    default = compare_judge_runs(engine, OP, rubric=rubric, n_resamples=100)
    assert (default["runs"][0]["id"], default["runs"][1]["id"]) == (v1, v2)
    assert default["pairing"].startswith("default: role-judge@v2 against role-judge@v1")
    with pytest.raises(InputError) as caught:
        compare_judge_runs(engine, OP, rubric=rubric, run_ids=(v1, 999))
    assert caught.value.field == "--runs"
    reviewer = sign_in(engine, name="rita", auth_mode="local", first_role="reviewer")
    with pytest.raises(PermissionDenied):
        compare_judge_runs(engine, reviewer, rubric=rubric, run_ids=(v1, v2))


def test_judge_compare_from_the_command_line(sqlite_database: Database, tmp_path: Path) -> None:
    _compare_world(sqlite_database, tmp_path)
    sqlite_database.engine.dispose()
    home = tmp_path / "home"
    home.mkdir()
    env = cli_test_environment(home, sqlite_database.url)
    listed = invoke_cli(["judge", "runs", "--json"], env=env, cwd=home)
    ids = {r["name"]: r["id"] for r in json.loads(listed.stdout)}
    runs = f"{ids['role-judge@v1/m']},{ids['role-judge@v2/m']}"
    base = ["judge", "compare", "--rubric", "role-adherence@1", "--runs", runs]
    shown = invoke_cli([*base, "--resamples", "200", "--seed", "3"], env=env, cwd=home)
    assert shown.returncode == 0, shown.stderr
    assert shown.stdout.startswith("v2 agrees with gold better than v1: kappa +")
    as_json_verdict = json.loads(
        invoke_cli([*base, "--json", "--resamples", "200", "--seed", "3"], env=env, cwd=home).stdout
    )["verdict"]
    assert shown.stdout.splitlines()[0] == as_json_verdict
    as_json = json.loads(
        invoke_cli([*base, "--json", "--resamples", "200"], env=env, cwd=home).stdout
    )
    assert as_json["outcome"] == "second_better" and as_json["n_units"] == 42
    bad = invoke_cli(
        ["judge", "compare", "--rubric", "role-adherence@1", "--runs", "1,x"], env=env, cwd=home
    )
    assert bad.returncode == 2 and "--runs" in bad.stderr


def test_listing_unchanged_prompt_files_needs_no_write_lock(
    sqlite_database: Database, server: FakeChatServer, tmp_path: Path, rubrics: Path
) -> None:
    """The workbench lists prompts on every rerun: with nothing new on disk that is a read,
    which must not queue behind (or block) the writers of a busy SQLite database."""
    import sqlite3

    world = make_world(sqlite_database, server, tmp_path)
    engine, rubric = world.engine, world.rubric
    first = list_judge_prompts(engine, OP, rubric_id=rubric.id, directory=rubrics)
    impatient = create_database_engine(sqlite_database.url, busy_timeout_ms=100)
    writer = sqlite3.connect(sqlite_database.url.removeprefix("sqlite:///"), isolation_level=None)
    try:
        writer.execute("BEGIN IMMEDIATE")
        again = list_judge_prompts(impatient, OP, rubric_id=rubric.id, directory=rubrics)
        assert [p.ref for p in again.prompts] == [p.ref for p in first.prompts]
        # a changed file is stored: that needs the write lock, which another writer holds
        v2_file = _file(rubrics, "role-judge", 2)
        v2_file.write_text(v2_file.read_text(encoding="utf-8") + "\nShorter.\n", encoding="utf-8")
        with pytest.raises(DatabaseBusy):
            list_judge_prompts(impatient, OP, rubric_id=rubric.id, directory=rubrics)
    finally:
        if writer.in_transaction:
            writer.rollback()
        writer.close()
        impatient.dispose()
    stored = list_judge_prompts(engine, OP, rubric_id=rubric.id, directory=rubrics)
    assert show_judge_prompt(
        engine, OP, rubric_id=rubric.id, ref="role-judge@v2", directory=rubrics
    ).text.endswith("Shorter.\n")
    assert [p.ref for p in stored.prompts] == [p.ref for p in first.prompts]
