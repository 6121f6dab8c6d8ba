"""The audit log: one append-only row per change or export, written with the change."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import pytest

from review_app.errors import InputError, PermissionDenied
from review_app.formats.options import ImportOptions
from review_app.services.cases.importing import import_paths
from review_app.services.exchange import export, labels_io
from review_app.services.exchange.demo import DEMO_CASES, DEMO_LABELS, DEMO_VERDICTS
from review_app.services.judging import judge_import
from review_app.services.labels import adjudication, labeling
from review_app.services.operations import audit
from review_app.services.rubrics.rubric_catalog import sync_rubrics
from review_app.services.team import queue
from review_app.services.team.people import add_person, set_role
from tests.actors import operator, signed_in
from tests.conftest import Database

RUBRIC = "role-adherence@1"
CASE = "support-delayed-refund-violation"


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _latest(database: Database, action: str) -> audit.AuditRecord:
    entries = audit.audit_entries(database.engine, operator(), action=action, limit=1)
    assert entries, f"no {action} entry"
    return entries[0]


def test_every_kind_of_change_leaves_one_entry(database: Database, tmp_path: Path) -> None:
    engine = database.engine
    admin = operator()
    catalog = sync_rubrics(engine, admin)
    rubric = catalog.get(RUBRIC)
    published = _latest(database, "rubric_publish")
    assert published.actor == "operator" and published.summary["before"] is None
    assert published.summary["after"] == catalog.get(published.object).sha256

    case_file = DEMO_CASES / f"{CASE}.json"
    import_paths(engine, admin, [case_file])
    imported = _latest(database, "cases_import")
    assert imported.object == case_file.name
    assert imported.summary["sha256"] == _sha(case_file)
    assert imported.summary["imported"] == 1

    changed = json.loads(case_file.read_text(encoding="utf-8"))
    changed["chatbot_role"] = "A changed role description."
    replacement = tmp_path / "changed.json"
    replacement.write_text(json.dumps(changed), encoding="utf-8")
    import_paths(engine, admin, [replacement], ImportOptions(replace=True))
    replaced = _latest(database, "cases_replace")
    assert replaced.summary == {
        "sha256": _sha(replacement),
        "cases": [CASE],
        "stale_labels": 0,
        "stale_gold": 0,
        "dropped_verdicts": 0,
    }

    add_person(engine, admin, name="rita", role="reviewer")
    assert _latest(database, "person_add").summary["after"] == {
        "role": "reviewer",
        "active": True,
    }
    add_person(engine, admin, name="olga", role="reviewer")
    set_role(engine, admin, name="olga", role="policy_owner")
    role = _latest(database, "role_change")
    assert (role.object, role.summary) == (
        "olga",
        {"before": {"role": "reviewer"}, "after": {"role": "policy_owner"}},
    )

    queue.assign_cases(engine, admin, rubric=rubric, reviewers=["rita"], overlap=1)
    assert _latest(database, "assign").summary["new_assignments"] == {"rita": 1}

    rita = signed_in(engine, "rita")
    labeling.record_label(engine, rita, case_id=CASE, turn=2, rubric=rubric, code="in_role")
    labeling.record_label(engine, rita, case_id=CASE, turn=2, rubric=rubric, code="borderline")
    label = _latest(database, "label")
    assert (label.actor, label.object) == ("rita", f"{RUBRIC}:{CASE}:2")
    assert label.summary == {"before": "in_role", "after": "borderline", "rationale": False}

    olga = signed_in(engine, "olga")
    adjudication.record_gold(engine, olga, rubric=rubric, case_id=CASE, turn=2, code="in_role")
    gold = _latest(database, "gold")
    assert (gold.actor, gold.summary["before"], gold.summary["after"]) == (
        "olga",
        None,
        "in_role",
    )

    export.export_data(engine, olga, rubric=rubric, format="csv")
    exported = _latest(database, "export")
    assert (exported.actor, exported.summary["format"]) == ("olga", "csv")
    labels_io.export_labels_csv(engine, olga, rubric=rubric, history=True)
    assert _latest(database, "export").summary == {
        "format": "labels_csv",
        "history": True,
        "rows": 2,
    }

    # Every entry a reviewer cannot see; a policy owner can, filtered by actor.
    with pytest.raises(PermissionDenied):
        audit.audit_entries(engine, rita)
    by_rita = audit.audit_entries(engine, olga, by="rita")
    assert [e.action for e in by_rita] == ["label", "label"]


def test_imports_of_labels_and_verdicts_and_a_calibration_fit(database: Database) -> None:
    engine = database.engine
    admin = operator()
    import_paths(engine, admin, [DEMO_CASES])
    catalog = sync_rubrics(engine, admin)
    rubric = catalog.get(RUBRIC)
    summary = labels_io.import_labels(engine, admin, DEMO_LABELS, catalog=catalog)
    entry = _latest(database, "labels_import")
    assert entry.summary["sha256"] == _sha(DEMO_LABELS)
    assert entry.summary["stored"] == summary.stored > 0
    judge_import.import_verdicts(engine, admin, DEMO_VERDICTS, rubric=rubric)
    verdicts = _latest(database, "verdicts_import")
    assert verdicts.summary["sha256"] == _sha(DEMO_VERDICTS)
    assert sum(verdicts.summary["runs"].values()) > 0


def test_a_refused_change_leaves_no_entry(database: Database) -> None:
    engine = database.engine
    admin = operator()
    import_paths(engine, admin, [DEMO_CASES / f"{CASE}.json"])
    rubric = sync_rubrics(engine, admin).get(RUBRIC)
    before = len(audit.audit_entries(engine, admin))
    with pytest.raises(InputError):
        adjudication.record_gold(engine, admin, rubric=rubric, case_id=CASE, turn=1, code="in_role")
    assert len(audit.audit_entries(engine, admin)) == before


def test_the_audit_command(run_cli: Any, database: Database) -> None:
    admin = operator()
    import_paths(database.engine, admin, [DEMO_CASES / f"{CASE}.json"])
    add_person(database.engine, admin, name="ana", role="reviewer")
    result = run_cli("audit", "--json", db=database.url)
    assert result.returncode == 0, result.stderr
    entries = json.loads(result.stdout)
    assert [e["action"] for e in entries] == ["person_add", "cases_import"]
    text = run_cli("audit", "--action", "person_add", db=database.url)
    assert text.returncode == 0
    assert text.stdout.count("\n") == 1 and "  operator  person_add  reviewer ana  " in text.stdout
    assert run_cli("audit", "--since", "2999-01-01", db=database.url).stdout == (
        "no audit entries\n"
    )
    bad = run_cli("audit", "--since", "yesterday", db=database.url)
    assert bad.returncode == 2 and "--since" in bad.stderr
    assert run_cli("audit", "--actor", "nobody", "--json", db=database.url).stdout.strip() == "[]"


def test_the_reference_names_every_action_the_audit_command_accepts() -> None:
    reference = Path(__file__).resolve().parents[1] / "docs" / "reference.md"
    row = next(
        line
        for line in reference.read_text(encoding="utf-8").splitlines()
        if line.startswith("| `action` |")
    )
    assert row.split("|")[2].replace("`", "").replace(" ", "").split(",") == list(audit.ACTIONS)
