"""The rubrics page's Next version tab for a policy owner (AppTest): the per-code form
writes the YAML, the differences and the mapping follow, and a broken text shows the
one-line error a file would give, with Save disabled (issue 34)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from tests.ui_support import app_database, demo_template

REPO = Path(__file__).resolve().parents[1]
APP = REPO / "review_app" / "ui" / "app.py"
V1_FILE = REPO / "rubrics" / "role-adherence" / "v1.yaml"


@pytest.fixture
def db_url(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    template = demo_template(tmp_path / "template.db", local_user="root")
    with app_database(template, tmp_path, monkeypatch, local_user="root") as url:
        root = tmp_path / "rubrics" / "role-adherence"
        root.mkdir(parents=True)
        (root / "v1.yaml").write_text(V1_FILE.read_text(encoding="utf-8"), encoding="utf-8")
        monkeypatch.setenv("REVIEW_APP_RUBRICS_DIR", str(tmp_path / "rubrics"))
        yield url


def run(at: AppTest) -> AppTest:
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def test_the_per_code_form_writes_the_draft_and_errors_read_as_the_files(db_url: str) -> None:
    at = run(AppTest.from_file(str(APP), default_timeout=60))
    at.switch_page("views/rubrics.py")
    run(at)
    assert [t.label for t in at.tabs][:4] == [
        "Labels",
        "Examples",
        "Compare versions",
        "Next version",
    ]
    start = at.session_state["draft_text"]
    assert "version: 2" in start and "change:" not in start
    at.selectbox(key="draft_code").set_value("tone_break")
    run(at)
    (definition,) = [a for a in at.text_area if a.label == "Definition"]
    definition.set_value("Speaks in a register or a voice the role does not have.")
    (change,) = [s for s in at.selectbox if s.label.startswith("change:")]
    change.set_value("widened")
    (from_codes,) = [m for m in at.multiselect if m.label.startswith("from\\:")]
    from_codes.set_value(["tone_break"])
    (apply,) = [b for b in at.button if b.label == "Apply to the draft"]
    apply.click()
    run(at)
    text = at.session_state["draft_text"]
    assert "Speaks in a register or a voice the role does not have." in text
    assert "change: widened" in text
    assert "Changed `tone_break`: definition" in [w.value for w in at.warning]
    assert any("`tone_break` ← `tone_break`: widened" in m.value for m in at.markdown)
    save = at.button(key="draft_save")
    assert not save.disabled

    # a broken text: the file's one-line error, and nothing can be saved
    at.session_state["draft_text"] = text.replace("verdict: fail", "verdict: failing", 1)
    run(at)
    (error,) = [c.value for c in at.code if "role-adherence/v2.yaml" in c.value]
    assert error.startswith("role-adherence/v2.yaml, line ")
    assert 'field labels[1].verdict: unknown verdict "failing"' in error
    assert at.button(key="draft_save").disabled


def test_a_version_published_by_another_server_is_offered_on_the_next_page_run(
    db_url: str,
) -> None:
    """Two servers on one database: this page's catalog is cached; a draft saved and
    published elsewhere (here through the services, as another server or the command
    line would) is offered at this page's next run, not after a restart."""
    from review_app.services.rubrics.rubric_carry import publish_rubric
    from review_app.services.rubrics.rubric_catalog import sync_rubrics
    from review_app.services.rubrics.rubric_drafts import draft_text, save_draft
    from storage.engine import create_database_engine
    from tests.actors import operator

    at = run(AppTest.from_file(str(APP), default_timeout=60))
    at.switch_page("views/rubrics.py")
    run(at)
    assert at.selectbox(key="_w_rubric_ref").options == ["role-adherence@1"]
    engine = create_database_engine(db_url)
    try:
        elsewhere = sync_rubrics(engine, operator())
        text = draft_text(engine, operator(), catalog=elsewhere, rubric_id="role-adherence")
        save_draft(engine, operator(), catalog=elsewhere, rubric_id="role-adherence", text=text)
        run(at)
        # a draft never acts: saved elsewhere, still not offered
        assert at.selectbox(key="_w_rubric_ref").options == ["role-adherence@1"]
        publish_rubric(
            engine, operator(), catalog=sync_rubrics(engine, operator()), ref="role-adherence@2"
        )
    finally:
        engine.dispose()
    run(at)
    assert at.selectbox(key="_w_rubric_ref").options == ["role-adherence@1", "role-adherence@2"]
