"""``export --out`` never writes through a symbolic link planted there and never deletes a
file the earlier export's manifest does not list (issue 18 item 7)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from review_app.services.access.actors import operator_actor
from review_app.services.exchange.demo import load_demo
from storage.engine import create_database_engine
from storage.migrations.upgrade import upgrade_database

RUBRIC = "role-adherence@1"
VIOLATION = "support-delayed-refund-violation"
CLEAN = "support-clean-late-parcel"  # not in the violation lane


@pytest.fixture
def demo_db(tmp_path: Path) -> Iterator[str]:
    url = f"sqlite:///{tmp_path / 'demo.db'}"
    engine = create_database_engine(url)
    upgrade_database(engine)
    load_demo(engine, operator_actor())
    engine.dispose()
    yield url


def _export(run_cli, db: str, out: Path, *extra: str):  # type: ignore[no-untyped-def]
    return run_cli("export", "--rubric", RUBRIC, "--out", str(out), *extra, db=db)


def test_a_link_planted_in_out_is_not_written_through(
    run_cli, demo_db: str, tmp_path: Path
) -> None:  # type: ignore[no-untyped-def]
    out = tmp_path / "fixtures"
    first = _export(run_cli, demo_db, out, "--lane", "violation")
    assert first.returncode == 0, first.stderr
    assert (out / f"{VIOLATION}.json").is_file() and not (out / f"{CLEAN}.json").exists()
    victim = tmp_path / "elsewhere" / "victim.txt"
    victim.parent.mkdir()
    victim.write_text("keep me\n")
    (out / f"{CLEAN}.json").symlink_to(victim)  # a name the next export writes
    before = sorted(p.name for p in out.iterdir())

    again = _export(run_cli, demo_db, out)
    assert again.returncode == 2, again
    lines = again.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in again.stderr
    assert f"{CLEAN}.json is a symbolic link" in lines[0] and str(out) in lines[0]
    assert victim.read_text() == "keep me\n", "nothing written outside --out"
    assert sorted(p.name for p in out.iterdir()) == before, "nothing changed in --out"


def test_a_link_as_the_manifest_is_not_followed(run_cli, demo_db: str, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    out = tmp_path / "fixtures"
    out.mkdir()
    victim = tmp_path / "victim.json"
    victim.write_text("{}")
    (out / "manifest.json").symlink_to(victim)
    done = _export(run_cli, demo_db, out)
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert victim.read_text() == "{}"


def test_a_manifest_without_a_file_list_deletes_nothing_it_does_not_list(
    run_cli, demo_db: str, tmp_path: Path
) -> None:  # type: ignore[no-untyped-def]
    out = tmp_path / "fixtures"
    first = _export(run_cli, demo_db, out, "--lane", "violation")
    assert first.returncode == 0, first.stderr
    manifest = json.loads((out / "manifest.json").read_text())
    manifest.pop("files")  # as earlier versions wrote it
    (out / "manifest.json").write_text(json.dumps(manifest))
    (out / "my-notes.json").write_text('{"mine": true}')
    (out / "conftest.py").write_text("# mine\n")

    again = _export(run_cli, demo_db, out)
    assert again.returncode == 0, again.stderr
    assert (out / "my-notes.json").read_text() == '{"mine": true}'
    assert (out / "conftest.py").read_text() == "# mine\n"
    assert (out / f"{CLEAN}.json").is_file()
    assert "files" in json.loads((out / "manifest.json").read_text())
