"""The import and export pages, driven with AppTest from the entry script, and the upload services.

Each test works on a copy of one SQLite file holding the demo set (17 cases,
reviewers ana, ben and chloe with their labels, policy owner olivia). The local
single-user mode signs in an admin; a reviewer signs in through OIDC with a
seeded ``st.user``.
"""

from __future__ import annotations

import io
import json
import re
import zipfile
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import Engine
from sqlmodel import Session
from streamlit.testing.v1 import AppTest

import storage.engine
import storage.labels
from review_app.errors import InputError, PermissionDenied
from review_app.formats.options import ImportOptions
from review_app.services.access.actors import Actor, operator_actor, sign_in
from review_app.services.cases.case_views import list_cases, load_case_view
from review_app.services.exchange.demo import DEMO_CASES
from review_app.services.exchange.export import export_data
from review_app.services.exchange.uploads import (
    import_label_upload,
    import_upload,
    validate_upload,
    zip_export,
)
from review_app.services.rubrics.rubric_catalog import sync_rubrics
from storage.engine import shared_engine
from tests.conftest import REPO, write_lock
from tests.ui_support import app_database, demo_template, plain

APP = REPO / "review_app" / "ui" / "app.py"
RUBRIC = "role-adherence@1"
TIMEOUT = 60
UPLOAD_DIR_PREFIX = "role-review-upload-"


@pytest.fixture(scope="module")
def demo_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return demo_template(tmp_path_factory.mktemp("ui-demo") / "review.db")


@pytest.fixture
def db_url(demo_file: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    with app_database(demo_file, tmp_path, monkeypatch, local_user=None) as url:
        yield url


def open_page(
    page: str, monkeypatch: pytest.MonkeyPatch, *, reviewer: str | None = None
) -> AppTest:
    """The app on one page: the local admin, or ``reviewer`` signed in through OIDC."""
    at = AppTest.from_file(str(APP), default_timeout=TIMEOUT)
    if reviewer is None:
        monkeypatch.setenv("REVIEW_APP_AUTH", "local")
        monkeypatch.setenv("REVIEW_APP_LOCAL_USER", "lee")
    else:
        monkeypatch.setenv("REVIEW_APP_AUTH", "oidc")
        at.user = {"is_logged_in": True, "email": reviewer, "name": reviewer.title()}
    run(at)
    at.switch_page(f"views/{page}.py")
    return run(at)


def run(at: AppTest) -> AppTest:
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def texts(elements: Iterable[Any]) -> list[str]:
    return [plain(str(element.value)) for element in elements]


def _native_case(case_id: str) -> dict[str, object]:
    case = json.loads((DEMO_CASES / "support-clean-late-parcel.json").read_text(encoding="utf-8"))
    return {**case, "case_id": case_id}


# --- export page ---------------------------------------------------------------------------


def test_a_busy_database_stops_a_page_with_the_reason(
    db_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(storage.engine, "SQLITE_BUSY_TIMEOUT_MS", 100)
    at = open_page("export", monkeypatch)
    with write_lock(Path(shared_engine(db_url).url.database or "")):
        at.button(key="export_prepare").click()
        at.run()  # preparing an export writes its audit entry: it waits for the lock
    assert not at.exception, [e.value for e in at.exception]
    assert any("the database is busy" in message for message in texts(at.error))
    assert at.session_state["export_ready"] is None
    at.button(key="export_prepare").click()
    run(at)
    assert at.session_state["export_ready"]


def test_export_page_prepares_a_zip_that_is_the_export(
    db_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    at = open_page("export", monkeypatch)
    assert texts(at.title) == ["Export"]
    assert not at.download_button
    at.selectbox(key="export_format").set_value("fixtures")
    at.button(key="export_prepare").click()
    run(at)
    assert texts(at.success) == ["19 files: 17 cases"]
    assert {button.key for button in at.download_button} == {"export_download", "export_manifest"}
    ready = at.session_state["export_ready"]
    assert ready["name"] == "role-adherence-v1-fixtures.zip"

    engine = shared_engine(db_url)
    rubric = sync_rubrics(engine, operator_actor()).get(RUBRIC)
    expected = export_data(engine, operator_actor(), rubric=rubric, format="fixtures")
    assert ready["zip"] == zip_export(engine, operator_actor(), expected)
    with zipfile.ZipFile(io.BytesIO(ready["zip"])) as archive:
        assert sorted(archive.namelist()) == sorted(expected.files)
        assert archive.read("test_role_fixtures.py") == expected.files["test_role_fixtures.py"]
    assert ready["manifest"] == expected.files["manifest.json"]
    assert json.loads(at.code[0].value)["cases_exported"] == 17

    at.selectbox(key="export_format").set_value("csv")
    at.selectbox(key="export_lane").set_value("violation")
    at.checkbox(key="export_redact").check()
    at.button(key="export_prepare").click()
    run(at)
    assert texts(at.success) == ["2 files: 3 cases"]
    ready = at.session_state["export_ready"]
    assert ready["name"] == "role-adherence-v1-csv-lane-violation-redacted.zip"
    redacted = export_data(
        engine, operator_actor(), rubric=rubric, format="csv", lane="violation", redact=True
    )
    assert ready["zip"] == zip_export(engine, operator_actor(), redacted)
    manifest = json.loads(ready["manifest"])
    assert manifest["redacted"] is True
    assert manifest["format"] == "csv"


# --- import page ---------------------------------------------------------------------------


def test_import_page_checks_an_upload_then_imports_it(
    db_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    at = open_page("import", monkeypatch)
    assert texts(at.title) == ["Import"]
    assert not _has_key(at, "import_submit")
    data = (json.dumps(_native_case("upload-one")) + "\n").encode("utf-8")
    at.file_uploader(key="import_file").set_value(("new-cases.jsonl", data, "application/json"))
    run(at)
    assert texts(at.success) == ["1 cases in format `native`: pass 1"]
    assert at.dataframe
    engine = shared_engine(db_url)
    assert "upload-one" not in {row.case_id for row in list_cases(engine)}
    at.button(key="import_submit").click()
    run(at)
    assert any(t.startswith("imported 1,") for t in texts(at.success))
    assert load_case_view(engine, operator_actor(), case_id="upload-one").lane == "pass"


def test_import_page_names_the_uploaded_file_and_stores_nothing(
    db_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    at = open_page("import", monkeypatch)
    good = json.dumps(_native_case("upload-good"))
    bad = json.dumps({**_native_case("upload-bad"), "transcript": "none"})
    at.file_uploader(key="import_file").set_value(
        ("team cases.jsonl", f"{good}\n{bad}\n".encode(), "application/json")
    )
    run(at)
    assert texts(at.error) == ["This file cannot be imported; nothing was stored."]
    (message,) = texts(at.text)
    assert message.startswith("team cases.jsonl, line 2, field transcript")
    assert UPLOAD_DIR_PREFIX not in message
    assert not _has_key(at, "import_submit")
    engine = shared_engine(db_url)
    assert {"upload-good", "upload-bad"}.isdisjoint(row.case_id for row in list_cases(engine))

    stored_before = _label_history(db_url, "support-clean-late-parcel")
    assert len(stored_before) == 3 * 6
    labels = "case_id,turn,reviewer,label,rubric,rationale\n" + (
        "support-clean-late-parcel,2,ana,borderline,role-adherence@1,changed my mind\n"
        "support-clean-late-parcel,4,ana,no_such_code,role-adherence@1,\n"
    )
    at.file_uploader(key="labels_file").set_value(("ana.csv", labels.encode(), "text/csv"))
    run(at)
    at.button(key="labels_submit").click()
    run(at)
    assert "Nothing was stored." in texts(at.error)
    label_message = [t for t in texts(at.text) if t.startswith("ana.csv")]
    assert label_message, texts(at.text)
    assert "line 3" in label_message[0]
    assert UPLOAD_DIR_PREFIX not in label_message[0]
    assert _label_history(db_url, "support-clean-late-parcel") == stored_before


def _label_history(url: str, case_id: str) -> list[tuple[int, str, str, bool]]:
    """Every label ever stored for the case: (turn, reviewer, code, current)."""
    with Session(shared_engine(url)) as session:
        rows = storage.labels.labels_for_case(
            session, case_id=case_id, rubric_id="role-adherence", version=1, current_only=False
        )
    return sorted((row.turn, row.reviewer, row.code, row.current) for row in rows)


def _has_key(at: AppTest, key: str) -> bool:
    return any(button.key == key for button in at.button)


def test_a_reviewer_sees_only_the_refusal(db_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    for page, message in (
        ("import", "Importing is for policy owners."),
        ("export", "Exporting is for policy owners."),
    ):
        # not among a reviewer's pages (the page's own refusal stays behind it)
        with pytest.raises(ValueError, match="Could not find a navigation page"):
            open_page(page, monkeypatch, reviewer="ana")
        assert message in (REPO / "review_app" / "ui" / "views" / f"{page}.py").read_text()


# --- the upload services -----------------------------------------------------------------


def test_upload_services_name_the_uploaded_file_and_store_nothing(db_url: str) -> None:
    engine = shared_engine(db_url)
    admin = Actor.operator()
    before = {row.case_id for row in list_cases(engine)}
    good = json.dumps(_native_case("service-good"))
    bad_turn = json.dumps({**_native_case("service-bad"), "transcript": [{"turn": "x"}]})

    report = validate_upload(
        engine,
        admin,
        name="weekly.jsonl",
        data=f"{good}\n{bad_turn}\n".encode(),
        options=ImportOptions(),
    )
    assert not report.ok
    assert report.error is not None
    assert report.error.startswith("weekly.jsonl, line 2, field transcript[0]")
    assert UPLOAD_DIR_PREFIX not in report.error

    with pytest.raises(InputError) as caught:
        import_upload(
            engine,
            admin,
            name="weekly.jsonl",
            data=f"{good}\n{bad_turn}\n".encode(),
            options=ImportOptions(),
        )
    assert str(caught.value).startswith("weekly.jsonl, line 2")
    assert UPLOAD_DIR_PREFIX not in str(caught.value)

    sessions = (
        "session_id,timestamp,input,output\n"
        "s-1,2024-05-01T10:00:00Z,Hi,Hello\n"
        "s-1,not a time,More,Sure\n"
    )
    report = validate_upload(
        engine,
        admin,
        name="openlayer.csv",
        data=sessions.encode(),
        options=ImportOptions(format="openlayer"),
    )
    assert report.error is not None
    assert report.error.startswith("openlayer.csv, line 3, field timestamp")
    with pytest.raises(InputError, match=r"^openlayer\.csv, line 3, field timestamp"):
        import_upload(
            engine,
            admin,
            name="openlayer.csv",
            data=sessions.encode(),
            options=ImportOptions(format="openlayer"),
        )
    report = validate_upload(engine, admin, name="notes.txt", data=b"hi", options=ImportOptions())
    assert (report.error or "").startswith("notes.txt: expected a .json")
    with pytest.raises(InputError, match=r"^notes\.txt: expected a \.json"):
        import_upload(engine, admin, name="notes.txt", data=b"hi", options=ImportOptions())
    with pytest.raises(InputError, match="unknown format 'yaml'"):
        import_upload(
            engine, admin, name="a.json", data=b"{}", options=ImportOptions(format="yaml")
        )

    catalog = sync_rubrics(engine, operator_actor())
    with pytest.raises(InputError) as caught:
        import_label_upload(
            engine,
            admin,
            name="labels.csv",
            data=b"case_id,turn,reviewer,label,rubric,rationale\nno-such-case,2,ana,in_role,"
            b"role-adherence@1,\n",
            catalog=catalog,
            sign_in_enabled=False,
        )
    assert str(caught.value).startswith("labels.csv, line 2")
    assert UPLOAD_DIR_PREFIX not in str(caught.value)
    assert {row.case_id for row in list_cases(engine)} == before

    # A valid upload goes in exactly as the command line would import it.
    report = validate_upload(
        engine, admin, name="good.json", data=good.encode(), options=ImportOptions()
    )
    assert report.ok
    assert report.format == "native"
    assert report.lanes == {"pass": 1}
    summary = import_upload(
        engine, admin, name="good.json", data=good.encode(), options=ImportOptions()
    )
    assert summary.totals.imported == 1
    assert {row.case_id for row in list_cases(engine)} == before | {"service-good"}


def test_upload_services_are_for_policy_owners(db_url: str) -> None:
    engine = shared_engine(db_url)
    ana = sign_in(engine, name="ana", auth_mode="oidc")
    assert ana.role == "reviewer"
    data = json.dumps(_native_case("from-ana")).encode()
    with pytest.raises(PermissionDenied):
        validate_upload(engine, ana, name="a.json", data=data, options=ImportOptions())
    with pytest.raises(PermissionDenied):
        import_upload(engine, ana, name="a.json", data=data, options=ImportOptions())
    assert "from-ana" not in {row.case_id for row in list_cases(engine)}


def _readme_case() -> dict[str, Any]:
    """The case of the README's "A case, by example"."""
    text = (Path(__file__).resolve().parents[1] / "README.md").read_text()
    block = re.search(r"## A case, by example.*?```json\n(.*?)```", text, re.S)
    assert block is not None
    case: dict[str, Any] = json.loads(block.group(1))
    return case


def _validate_then_import(
    engine: Engine, admin: Actor, case: dict[str, Any], *, replace: bool = False
) -> tuple[str | None, str | None]:
    """(validation error, import error) of one case file; ``None`` where it passed."""
    data = json.dumps(case).encode()
    report = validate_upload(
        engine, admin, name="case.json", data=data, options=ImportOptions(replace=replace)
    )
    try:
        import_upload(
            engine, admin, name="case.json", data=data, options=ImportOptions(replace=replace)
        )
    except InputError as error:
        return report.error, str(error)
    return report.error, None


def test_validation_refuses_what_the_import_refuses(db_url: str) -> None:
    engine = shared_engine(db_url)
    admin = Actor.operator()
    readme = _readme_case()
    # The demo set stores support-role-v3 with another body than the README's example.
    contract_error = (
        "case.json, field contract: contract version support-role-v3 is already "
        "stored with a different body; contracts are immutable, so give the changed "
        "contract a new version"
    )
    assert _validate_then_import(engine, admin, readme) == (contract_error, contract_error)

    # Under a new contract version it validates and imports.
    readme["contract"]["version"] = "support-role-v3-readme"
    assert _validate_then_import(engine, admin, readme) == (None, None)

    # A stored case with changed content: refused by both, accepted by both with replace.
    readme["transcript"][0]["text"] = "My parcel is very late."
    case_error = (
        "case.json, field case_id: case support-refund-pressure is already stored "
        "with different content; import with --replace to overwrite it"
    )
    assert _validate_then_import(engine, admin, readme) == (case_error, case_error)
    assert _validate_then_import(engine, admin, readme, replace=True) == (None, None)

    # Two bodies for one new contract version in one file: the import refuses the file.
    other = json.loads(json.dumps(readme))
    other["case_id"] = "support-refund-pressure-2"
    other["contract"]["version"] = "support-role-v9"
    changed = json.loads(json.dumps(other))
    changed["case_id"] = "support-refund-pressure-3"
    changed["contract"]["initial_role"] = "billing_specialist"
    data = (json.dumps(other) + "\n" + json.dumps(changed) + "\n").encode()
    report = validate_upload(engine, admin, name="two.jsonl", data=data, options=ImportOptions())
    with pytest.raises(InputError) as caught:
        import_upload(engine, admin, name="two.jsonl", data=data, options=ImportOptions())
    assert report.error == str(caught.value)
    assert "line 2, field contract: contract version support-role-v9" in str(caught.value)
