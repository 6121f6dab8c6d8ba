"""Rubric drafts never act; policy owners write, preview and publish the next version
(issue 34; docs/reference.md, "Rubric drafts and publication"). SQLite and PostgreSQL.

A world: the demo cases, rubric ``carry@1`` (tests/carry_support.py) with labels of
ana and ben on a few units and both with cases assigned; the tests add ``carry@2`` as a
file or write it in the app.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import pytest
from sqlalchemy import select, text
from sqlmodel import Session, col

from review_app.errors import InputError, PermissionDenied
from review_app.rubrics.parsing import load_rubric_file, parse_rubric_text
from review_app.services.access.actors import Actor, operator_actor
from review_app.services.cases.importing import import_paths
from review_app.services.exchange.labels_io import import_labels
from review_app.services.operations.audit import audit_entries
from review_app.services.rubrics.rubric_carry import publish_rubric
from review_app.services.rubrics.rubric_catalog import (
    RubricCatalog,
    default_ref_for,
    sync_rubrics,
)
from review_app.services.rubrics.rubric_drafts import (
    check_draft,
    draft_text,
    edit_code,
    export_text,
    preview_publish,
    save_draft,
)
from review_app.services.team.queue import assign_cases
from storage.cases import actor_units
from storage.models import Case, RubricCarry, RubricVersion
from tests.actors import signed_in
from tests.builders import write_label_csv
from tests.carry_support import V1, V2, write_rubrics
from tests.conftest import DEMO_CASES, Database, row_counts

CODES = ("in_role", "persona_break", "scope_break", "tone_break")


@dataclass
class World:
    db: Database
    root: Path
    ana: Actor
    ben: Actor
    owner: Actor

    def catalog(self) -> RubricCatalog:
        return sync_rubrics(self.db.engine, operator_actor(), directory=self.root)


@pytest.fixture
def world(database: Database, tmp_path: Path) -> World:
    engine, op = database.engine, operator_actor()
    import_paths(engine, op, [DEMO_CASES])
    root = write_rubrics(tmp_path / "rubrics", v2=None)
    catalog = sync_rubrics(engine, op, directory=root)
    ana = signed_in(engine, "ana", role="reviewer")
    ben = signed_in(engine, "ben", role="reviewer")
    owner = signed_in(engine, "olga", role="policy_owner")
    with Session(engine) as session:
        case_ids = sorted(session.scalars(select(col(Case.case_id))))
        units = actor_units(session, case_ids=case_ids[:3])
    rows = [
        (case_id, turn, reviewer, CODES[(index + offset) % 4], "carry@1", "why")
        for index, (case_id, turn) in enumerate(units)
        for offset, reviewer in enumerate(("ana", "ben"))
    ]
    import_labels(engine, op, write_label_csv(tmp_path / "labels.csv", rows), catalog=catalog)
    assign_cases(
        engine,
        op,
        rubric=catalog.get("carry@1"),
        reviewers=["ana", "ben"],
        overlap=2,
        case_ids=case_ids[:5],
    )
    return World(database, root, ana, ben, owner)


def _add_v2_file(world: World, content: str = V2) -> None:
    (world.root / "carry" / "v2.yaml").write_text(content, encoding="utf-8")


def test_a_draft_file_is_never_a_default_nor_usable(world: World) -> None:
    """Issue 34 (4): as soon as v2.yaml existed every reviewer's default was v2. A file
    past version 1 is a draft: not offered, not the default of anyone, refused by get."""
    _add_v2_file(world)
    catalog = world.catalog()
    assert catalog.refs == ["carry@1"] and catalog.draft_refs == ["carry@2"]
    assert catalog.default_ref() == "carry@1"
    engine = world.db.engine
    for who in (world.ana, world.ben, world.owner, operator_actor()):
        assert default_ref_for(engine, who, catalog) == "carry@1"
    with pytest.raises(InputError, match="carry@2 is a draft"):
        catalog.get("carry@2")
    assert catalog.for_reports("carry@1").ref == "carry@1"
    with pytest.raises(InputError, match="draft"):
        catalog.for_reports("carry@2")  # reports, exports, judge pages read it this way
    with Session(engine) as session:
        row = session.get(RubricVersion, ("carry", 2))
        assert row is not None and row.state == "draft" and row.origin == "file"
        assert row.yaml_text == V2
    # the publication makes it the reviewers' default (their assignments were carried)
    publish_rubric(engine, world.owner, catalog=catalog, ref="carry@2")
    after = world.catalog()
    assert after.refs == ["carry@1", "carry@2"] and after.draft_refs == []
    assert default_ref_for(engine, world.ana, after) == "carry@2"
    assert after.default_ref() == "carry@2"


def test_a_reviewers_default_is_the_version_their_assignments_name(world: World) -> None:
    """A published v2 nobody is assigned to is not a reviewer's default; a person with
    no assignments gets the newest published version."""
    engine = world.db.engine
    _add_v2_file(world)
    catalog = world.catalog()
    publish_rubric(engine, operator_actor(), catalog=catalog, ref="carry@2")
    with Session(engine) as session:  # as if v2 had been published without carrying queues
        session.execute(text("DELETE FROM assignments WHERE rubric_version = 2"))
        session.commit()
    catalog = world.catalog()
    assert default_ref_for(engine, world.ana, catalog) == "carry@1"
    cy = signed_in(engine, "cy", role="reviewer")
    assert default_ref_for(engine, cy, catalog) == "carry@2"


def test_the_command_line_refuses_a_draft_everywhere_it_takes_a_version(  # type: ignore[no-untyped-def]
    sqlite_database: Database, tmp_path: Path, run_cli
) -> None:
    root = write_rubrics(tmp_path / "rubrics")  # v1 and v2 files
    import_paths(sqlite_database.engine, operator_actor(), [DEMO_CASES])
    env = {"REVIEW_APP_RUBRICS_DIR": str(root)}
    listing = run_cli("rubrics", "list", "--json", db=sqlite_database.url, env=env)
    assert listing.returncode == 0, listing.stderr
    status = {row["rubric"]: row["status"] for row in json.loads(listing.stdout)}
    assert status == {"carry@1": "offered", "carry@2": "draft"}
    for command in (
        ("assign", "--rubric", "carry@2", "--reviewers", "ana", "--overlap", "1"),
        ("export", "--rubric", "carry@2", "--out", str(tmp_path / "out")),
        ("labels", "export", "--rubric", "carry@2"),
        ("agreement", "--rubric", "carry@2"),
    ):
        result = run_cli(*command, db=sqlite_database.url, env=env)
        assert result.returncode == 2, (command, result.stdout, result.stderr)
        assert "carry@2 is a draft" in result.stderr, (command, result.stderr)


def test_reviewers_are_refused_and_policy_owners_publish_audited(world: World) -> None:
    engine = world.db.engine
    _add_v2_file(world)
    catalog = world.catalog()
    text_v2 = draft_text(engine, world.owner, catalog=catalog, rubric_id="carry")
    for act in (
        lambda: publish_rubric(engine, world.ana, catalog=catalog, ref="carry@2"),
        lambda: preview_publish(engine, world.ana, catalog=catalog, ref="carry@2"),
        lambda: save_draft(engine, world.ana, catalog=catalog, rubric_id="carry", text=text_v2),
        lambda: check_draft(engine, world.ana, catalog=catalog, rubric_id="carry", text=text_v2),
    ):
        with pytest.raises(PermissionDenied):
            act()
    assert world.catalog().draft_refs == ["carry@2"]
    report = publish_rubric(engine, world.owner, catalog=catalog, ref="carry@2")
    (entry,) = audit_entries(engine, operator_actor(), action="rubric_publish", by="olga")
    assert entry.object == "carry@2"
    assert entry.summary["carried"] == report.carried and entry.summary["before"] is None
    with Session(engine) as session:
        row = session.get(RubricVersion, ("carry", 2))
        assert row is not None and row.state == "published" and row.published_by == "olga"


def test_the_preview_is_the_publication_and_stores_nothing(world: World) -> None:
    """The dry run's counts are the publication's; the database is as it was after it."""
    engine = world.db.engine
    _add_v2_file(world)
    catalog = world.catalog()
    before = row_counts(engine)
    preview = preview_publish(engine, world.owner, catalog=catalog, ref="carry@2")
    assert row_counts(engine) == before
    assert world.catalog().draft_refs == ["carry@2"]
    assert sum(preview.carried.values()) > 0 and preview.re_review_units > 0
    assert set(preview.re_review) == {"ana", "ben"}
    published = publish_rubric(engine, world.owner, catalog=catalog, ref="carry@2")
    assert published.to_dict() == preview.to_dict()
    with Session(engine) as session:
        assert len(list(session.scalars(select(RubricCarry)))) == 1


def test_a_draft_written_in_the_app_checks_like_a_file_and_publishes(
    world: World, tmp_path: Path
) -> None:
    engine, owner = world.db.engine, world.owner
    catalog = world.catalog()
    start = draft_text(engine, owner, catalog=catalog, rubric_id="carry")
    assert parse_rubric_text(start).version == 2
    # the per-code form: split persona_break as the file V2 does, and add an example
    edited = edit_code(
        engine,
        owner,
        catalog=catalog,
        rubric_id="carry",
        text=start,
        code="persona_break",
        title="Persona",
        definition="Drops the persona.",
        verdict="fail",
        from_codes=["persona_break"],
        change="narrowed",
        example={"kind": "fail", "context": "Hi", "reply": "I am Bob.", "why": "persona_break"},
    )
    checked = check_draft(engine, owner, catalog=catalog, rubric_id="carry", text=edited)
    assert checked.ok and checked.diff is not None
    assert checked.diff.mapping is not None
    assert checked.diff.mapping.fate("persona_break") == "narrowed"
    saved = save_draft(engine, owner, catalog=catalog, rubric_id="carry", text=edited)
    catalog = world.catalog()
    assert catalog.draft_refs == ["carry@2"] and catalog.draft_info["carry@2"].origin == "app"
    assert catalog.drafts["carry@2"].sha256 == saved.sha256
    assert catalog.default_ref() == "carry@1"
    assert default_ref_for(engine, world.ana, catalog) == "carry@1"
    (entry,) = audit_entries(engine, operator_actor(), action="rubric_draft", by="olga")
    assert entry.object == "carry@2"
    report = publish_rubric(engine, owner, catalog=catalog, ref="carry@2")
    assert "persona_break" in report.not_carried
    catalog = world.catalog()
    assert catalog.refs == ["carry@1", "carry@2"]  # published without any file
    with pytest.raises(InputError, match="published"):
        save_draft(engine, owner, catalog=catalog, rubric_id="carry", text=edited)


@pytest.mark.parametrize(
    ("change", "line", "field"),
    [
        (("verdict: fail, title: Scope", "verdict: failing, title: Scope"), 7, "labels[2].verdict"),
        (("version: 2", "version: 3"), 2, "version"),
        (("code: tone_break", "code: Tone"), 9, "labels[4].code"),
    ],
)
def test_validation_errors_name_the_line_and_field_as_the_file_does(
    world: World, tmp_path: Path, change: tuple[str, str], line: int, field: str
) -> None:
    engine = world.db.engine
    catalog = world.catalog()
    bad = V1.replace("version: 1", "version: 2").replace(*change)
    checked = check_draft(engine, world.owner, catalog=catalog, rubric_id="carry", text=bad)
    assert checked.rubric is None and checked.error is not None
    assert checked.error.startswith(f"carry/v2.yaml, line {line}, field {field}: "), checked.error
    assert "\n" not in checked.error
    with pytest.raises(InputError) as refused:
        save_draft(engine, world.owner, catalog=catalog, rubric_id="carry", text=bad)
    assert str(refused.value) == checked.error
    assert world.catalog().draft_refs == []  # nothing stored
    if field != "version":  # the same text as a file gives the same error
        path = tmp_path / "same" / "carry" / "v2.yaml"
        path.parent.mkdir(parents=True)
        path.write_text(bad, encoding="utf-8")
        with pytest.raises(InputError) as from_file:
            load_rubric_file(path)
        assert (from_file.value.line, from_file.value.field) == (line, field)
        assert from_file.value.message == refused.value.message


def test_export_round_trips_drafts_and_published_versions(  # type: ignore[no-untyped-def]
    world: World, tmp_path: Path, run_cli
) -> None:
    engine, owner = world.db.engine, world.owner
    catalog = world.catalog()
    start = draft_text(engine, owner, catalog=catalog, rubric_id="carry")
    edited = start.replace("title: Carry test", "title: Carry test, second edition", 1)
    save_draft(engine, owner, catalog=catalog, rubric_id="carry", text=edited)
    catalog = world.catalog()
    for ref in ("carry@1", "carry@2"):
        exported = export_text(engine, world.ana, catalog=catalog, ref=ref)
        assert parse_rubric_text(exported).sha256 == catalog.any_version(ref).sha256
    assert export_text(engine, owner, catalog=catalog, ref="carry@2") == edited
    if world.db.url.startswith("sqlite"):
        env = {"REVIEW_APP_RUBRICS_DIR": str(world.root)}
        out = tmp_path / "exported"
        out.mkdir()
        result = run_cli(
            "rubrics", "export", "carry@2", "--out", str(out), db=world.db.url, env=env
        )
        assert result.returncode == 0, result.stderr
        loaded = load_rubric_file(out / "carry" / "v2.yaml")
        assert loaded.sha256 == catalog.drafts["carry@2"].sha256
        # the exported file in the rubrics folder is the same draft, not a conflict
        (world.root / "carry" / "v2.yaml").write_text(edited, encoding="utf-8")
        again = world.catalog()
        assert again.draft_refs == ["carry@2"] and not again.refused
        # a different file is not overwritten
        (out / "carry" / "v2.yaml").write_text("other", encoding="utf-8")
        refused = run_cli(
            "rubrics", "export", "carry@2", "--out", str(out), db=world.db.url, env=env
        )
        assert refused.returncode == 2 and "not overwritten" in refused.stderr


def test_a_published_version_never_turns_back_into_a_draft(world: World) -> None:
    """The database refuses it (a trigger), whatever writes."""
    engine = world.db.engine
    with Session(engine) as session:
        row = session.get(RubricVersion, ("carry", 1))
        assert row is not None and row.state == "published"
    with pytest.raises(Exception, match="stays published"), engine.begin() as connection:
        connection.execute(text("UPDATE rubric_versions SET state = 'draft' WHERE version = 1"))
    with pytest.raises(Exception, match="draft or published"), engine.begin() as connection:
        connection.execute(text("UPDATE rubric_versions SET state = 'gone' WHERE version = 1"))


def test_the_migration_marks_what_has_acted_published_and_the_rest_draft(
    database: Database,
) -> None:
    """Rows stored before migration 0040: version 1 and a version carried into are
    published (they acted); a later version nobody published is a draft."""
    from alembic import command

    from storage.migrations.upgrade import alembic_config, upgrade_database

    config = alembic_config()
    with database.engine.begin() as connection:
        config.attributes["connection"] = connection
        command.downgrade(config, "0040-1")  # the revision before 0040, whatever it is
    with database.engine.begin() as connection:
        for rubric_id, version in (("a", 1), ("a", 2), ("a", 3)):
            connection.execute(
                text(
                    "INSERT INTO rubric_versions (rubric_id, version, sha256, title, body_json, "
                    "loaded_at) VALUES (:r, :v, 'x', 't', '{}', CURRENT_TIMESTAMP)"
                ),
                {"r": rubric_id, "v": version},
            )
        connection.execute(
            text(
                "INSERT INTO rubric_carries (rubric_id, from_version, to_version, actor, at, "
                "summary_json) VALUES ('a', 1, 2, 'operator', CURRENT_TIMESTAMP, '{}')"
            )
        )
    upgrade_database(database.engine)
    with database.engine.connect() as connection:
        rows = connection.execute(
            text("SELECT version, state, published_at IS NOT NULL FROM rubric_versions")
        ).all()
    assert sorted(tuple(row) for row in rows) == [
        (1, "published", True),
        (2, "published", True),
        (3, "draft", False),
    ]
