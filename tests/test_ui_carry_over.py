"""The rubrics page publishes version 2 for an admin; the queue and review pages then show a
reviewer their re-review units with the old label and both definitions (AppTest)."""

from __future__ import annotations

import csv
import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from tests.ui_support import app_database, demo_template

REPO = Path(__file__).resolve().parents[1]
APP = REPO / "review_app" / "ui" / "app.py"
V1_FILE = REPO / "rubrics" / "role-adherence" / "v1.yaml"
DEMO_LABELS = REPO / "review_app" / "demo_data" / "labels.csv"


def _v2_splitting_tone() -> str:
    text = V1_FILE.read_text(encoding="utf-8").replace("\nversion: 1\n", "\nversion: 2\n")
    head = "  - code: tone_break\n    verdict: fail\n"
    assert head in text
    return text.replace(
        head,
        "  - code: tone_voice\n    verdict: fail\n    title: Wrong voice\n"
        "    definition: Speaks in a voice the persona does not have.\n"
        "    from: [tone_break]\n    change: split\n"
        "  - code: tone_break\n    verdict: fail\n    from: [tone_break]\n    change: split\n",
    )


@pytest.fixture
def db_url(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    template = demo_template(tmp_path / "template.db", local_user="root")
    with app_database(template, tmp_path, monkeypatch, local_user="root") as url:
        root = tmp_path / "rubrics" / "role-adherence"
        root.mkdir(parents=True)
        (root / "v1.yaml").write_text(V1_FILE.read_text(encoding="utf-8"), encoding="utf-8")
        (root / "v2.yaml").write_text(_v2_splitting_tone(), encoding="utf-8")
        monkeypatch.setenv("REVIEW_APP_RUBRICS_DIR", str(tmp_path / "rubrics"))
        yield url


def run(at: AppTest) -> AppTest:
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def test_admin_publishes_and_the_reviewer_sees_the_re_review(
    db_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    at = run(AppTest.from_file(str(APP), default_timeout=60))
    at.switch_page("views/rubrics.py")
    run(at)
    compare = at.tabs[2]
    assert "- `tone_voice` ← `tone_break`: split" in [m.value for m in compare.markdown]
    at.button(key="draft_preview_button").click()
    run(at)
    at.checkbox(key="draft_confirm").check()
    run(at)
    at.button(key="draft_publish").click()
    run(at)
    assert any(s.value.startswith("Published role") for s in at.success)
    lines = "\n".join(t.value for t in at.text)
    with DEMO_LABELS.open(encoding="utf-8") as handle:
        rows = [r for r in csv.DictReader(handle) if r["label"] == "tone_break"]
    assert f"re-review tone_break                   {len(rows)}" in lines
    assert "role-adherence@2: carried" in lines

    # the agreement page sets the two versions side by side on their common units
    at.switch_page("views/agreement.py")
    run(at)
    at.selectbox(key="agreement_rubric").set_value("role-adherence@2")
    run(at)
    assert any("units both have" in h.value for h in at.subheader), [h.value for h in at.subheader]
    (table,) = [t.value for t in at.dataframe if "version" in t.value.columns]
    assert list(table["version"]) == ["role-adherence@1", "role-adherence@2"]
    assert any("hold labels carried from the version before" in c.value for c in at.caption)

    # the judge page sets the judge's kappa under both versions side by side
    at.switch_page("views/judge.py")
    run(at)
    at.selectbox(key="_w_rubric_ref").set_value("role-adherence@2")
    run(at)
    assert any("versions side by side" in h.value for h in at.subheader), [
        h.value for h in at.subheader
    ]
    (judged,) = [t.value for t in at.dataframe if "units compared" in t.value.columns]
    assert set(judged["version"]) == {"role-adherence@1", "role-adherence@2"}
    assert any(c.value.startswith("Carried from the version before") for c in at.caption)

    # a reviewer who gave tone_break sees their units, with both definitions
    who = rows[0]["reviewer"]
    monkeypatch.setenv("REVIEW_APP_LOCAL_USER", who)
    at = run(AppTest.from_file(str(APP), default_timeout=60))
    at.selectbox(key="_w_rubric_ref").set_value("role-adherence@2")
    run(at)
    at.switch_page("views/queue.py")
    run(at)
    mine = [r for r in rows if r["reviewer"] == who]
    assert any(e.label.startswith(f"Re-review: {len(mine)} turns") for e in at.expander), [
        e.label for e in at.expander
    ]
    at.switch_page("views/review.py")
    at.query_params["case"] = mine[0]["case_id"]
    run(at)
    texts = [t.value for t in at.text]
    assert any(t.startswith("tone_break (role-adherence@1): ") for t in texts)
    # the new code with its key under v2 (docs/reference.md, "Label keys")
    news = [t for t in texts if t.startswith("tone_voice (role-adherence@2)")]
    assert news  # one per turn of the case to label again
    for new in news:
        assert re.fullmatch(
            r"tone_voice \(role-adherence@2\) \[key [0-9a-z]\]: "
            r"Speaks in a voice the persona does not have\.",
            new,
        ), new


def test_rubric_ambiguity_notes_are_listed_under_their_code(
    db_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    from review_app.rubrics.parsing import load_rubric_file
    from review_app.services.access.actors import operator_actor
    from review_app.services.labels.adjudication import record_gold
    from storage.engine import shared_engine

    engine = shared_engine(db_url)
    with DEMO_LABELS.open(encoding="utf-8") as handle:
        row = next(r for r in csv.DictReader(handle) if r["label"] == "scope_break")
    note = "**where does scope end?** <b>x</b>"
    record_gold(
        engine,
        operator_actor(),
        rubric=load_rubric_file(V1_FILE),
        case_id=row["case_id"],
        turn=int(row["turn"]),
        code="scope_break",
        rubric_ambiguity=note,
    )
    at = run(AppTest.from_file(str(APP), default_timeout=60))
    at.switch_page("views/rubrics.py")
    run(at)
    at.selectbox(key="_w_rubric_ref").set_value("role-adherence@1")
    run(at)
    labels_tab = at.tabs[0]
    texts = [t.value for t in labels_tab.text]
    assert note in texts  # literal text, never Markdown
    captions = [c.value for c in labels_tab.caption]
    assert f"Ambiguity noted at `{row['case_id']}` turn {row['turn']}" in captions
    # listed under scope_break: after its heading, before the next label's
    headings = [m.value for m in labels_tab.markdown]
    assert "#### `scope_break` · fail · `scope`" in headings


def test_only_admins_see_the_publish_button(db_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    from review_app.services.access.actors import operator_actor
    from review_app.services.team.people import add_person
    from storage.engine import shared_engine

    add_person(shared_engine(db_url), operator_actor(), name="olga", role="policy_owner")
    monkeypatch.setenv("REVIEW_APP_LOCAL_USER", "olga")
    at = run(AppTest.from_file(str(APP), default_timeout=60))
    at.switch_page("views/rubrics.py")
    run(at)
    assert "- `tone_voice` ← `tone_break`: split" in [m.value for m in at.tabs[2].markdown]
    assert not [b for b in at.button if b.key == "rubric_publish"]
