"""Rubric drafts never act, and a policy owner publishes the next version from the app
(issue 34), in Chromium at 1280x800 with proxy sign-in on the demo.

1. An unpublished ``v2.yaml`` dropped into the rubrics folder leaves every reviewer's
   sidebar default and queue as they were (it took both over before), and the rubrics
   page lists it as a draft.
2. The policy owner writes v2 in the app (the YAML area), saves the draft, previews the
   publication and publishes after the confirmation; the preview's counts and the
   published ones equal what ``rubrics publish --dry-run --json`` prints on a copy of the
   database taken before; afterwards a reviewer's default is v2 (their queue was carried).
"""

from __future__ import annotations

import json
import re
import shutil
import sqlite3
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from sqlmodel import Session

from review_app.services.access.actors import operator_actor
from review_app.services.operations.audit import audit_entries
from storage.engine import create_database_engine
from storage.models import RubricVersion
from tests.conftest import REPO
from tests.served import (
    IDLE,
    chromium,
    free_port,
    require_browser,
    serving,
    until_equal,
    wait_healthy,
)
from tests.ui_support import demo_template

pytestmark = [pytest.mark.browser, pytest.mark.slow]

REVIEWERS = ("ana", "ben", "chloe")  # the demo's reviewers, each with a queue
OWNER = "olivia"  # the demo's policy owner
V1_FILE = REPO / "rubrics" / "role-adherence" / "v1.yaml"


def v2_splitting_tone() -> str:
    """Version 2: tone_break split into tone_voice and tone_break (re-review for both)."""
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


@dataclass
class Served:
    address: str
    root: Path
    database: Path
    rubrics: Path
    browser: Any

    @property
    def url(self) -> str:
        return f"sqlite:///{self.database}"

    def tab_of(self, who: str) -> Any:
        """A fresh session signed in as ``who`` through the proxy's header."""
        context = self.browser.new_context(
            viewport={"width": 1280, "height": 800}, extra_http_headers={"X-Forwarded-User": who}
        )
        return context.new_page()


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    require_browser()
    root = tmp_path_factory.mktemp("rubric-drafts")
    database = demo_template(root / "review.db")
    rubrics = root / "rubrics"
    (rubrics / "role-adherence").mkdir(parents=True)
    shutil.copy(V1_FILE, rubrics / "role-adherence" / "v1.yaml")
    port = free_port()
    address = f"http://127.0.0.1:{port}"
    with serving(
        f"sqlite:///{database}", root, port=port, user=None, auth="proxy", rubrics_dir=rubrics
    ) as (process, log):
        wait_healthy(address, process, log)
        with chromium() as browser:
            yield Served(address, root, database, rubrics, browser)


def idle(tab: Any) -> None:
    tab.wait_for_selector(IDLE, timeout=120_000)
    assert not tab.locator('[data-testid="stException"]').count()


def main_text(tab: Any) -> str:
    return str(tab.locator('[data-testid="stMain"]').inner_text()).replace("\u2060", "")


def queue_as_seen(served: Served, who: str) -> tuple[str, str]:
    """(the sidebar's rubric version, the queue's progress line) in a new session."""
    tab = served.tab_of(who)
    try:
        tab.goto(f"{served.address}/queue")
        tab.get_by_text(re.compile(r"assigned cases labeled under")).wait_for(timeout=60_000)
        idle(tab)
        chosen = str(tab.get_by_role("combobox", name="Rubric version").input_value())
        found = re.search(r"\d+ of \d+ assigned cases labeled under \S+", main_text(tab))
        assert found is not None, main_text(tab)
        return chosen.replace("\u2060", ""), found[0]
    finally:
        tab.context.close()


def test_an_unpublished_file_leaves_every_queue_as_it_was(served: Served) -> None:
    before = {who: queue_as_seen(served, who) for who in REVIEWERS}
    for who, (chosen, progress) in before.items():
        assert chosen == "role-adherence@1", who
        assert not progress.startswith("0 of 0"), (who, progress)
    draft = served.rubrics / "role-adherence" / "v2.yaml"
    draft.write_text(v2_splitting_tone(), encoding="utf-8")
    try:
        after = {who: queue_as_seen(served, who) for who in REVIEWERS}
        assert after == before
        tab = served.tab_of(OWNER)
        try:
            tab.goto(f"{served.address}/rubrics")
            idle(tab)
            shown = main_text(tab)
            assert "Drafts (not published" in shown and "role-adherence@2 (a file)" in shown
            assert "Policy owners and admins may write, preview and publish" in shown
        finally:
            tab.context.close()
        engine = create_database_engine(served.url)
        with Session(engine) as session:
            row = session.get(RubricVersion, ("role-adherence", 2))
            assert row is not None and row.state == "draft"
        engine.dispose()
    finally:
        draft.unlink()  # the next test writes version 2 in the app


def _metrics(tab: Any) -> list[int]:
    values = tab.locator('[data-testid="stMetricValue"]').all_inner_texts()
    return [int(v.replace(",", "")) for v in values]


def _per_reviewer(tab: Any) -> dict[str, int]:
    """The re-review per reviewer table (the last table of the panel)."""
    rows = tab.locator('[data-testid="stTable"]').last.locator("tbody tr").all()
    found = {}
    for row in rows:
        cells = row.locator("td").all_inner_texts()
        found[cells[-2]] = int(cells[-1])
    return found


def test_a_policy_owner_writes_previews_and_publishes_v2_as_the_dry_run_says(  # type: ignore[no-untyped-def]
    served: Served, run_cli
) -> None:
    tab = served.tab_of(OWNER)
    try:
        tab.goto(f"{served.address}/rubrics")
        idle(tab)
        tab.get_by_role("tab", name="Next version").click()
        idle(tab)
        area = tab.locator("textarea").first
        # started from v1, version raised; the tab's click reruns the page, and on a
        # loaded machine the page can be idle before that rerun has drawn the text
        until_equal(lambda: "version: 2" in area.input_value(), True, seconds=60)
        area.fill(v2_splitting_tone())
        area.press("Control+Enter")
        idle(tab)
        tab.get_by_text("Added tone_voice (fail)").wait_for()  # the differences from v1
        assert "The draft reads as role-adherence@2." in main_text(tab)
        assert "tone_voice ← tone_break: split" in main_text(tab)  # and the mapping
        tab.get_by_role("button", name="Save draft").click()
        idle(tab)
        tab.get_by_role("button", name="Preview the publication").wait_for()

        # the database as it is before the preview and the publication
        copy = served.root / "before.db"
        with sqlite3.connect(served.database) as source, sqlite3.connect(copy) as target:
            source.backup(target)
        dry = run_cli(
            "rubrics",
            "publish",
            "role-adherence@2",
            "--dry-run",
            "--json",
            db=f"sqlite:///{copy}",
            env={"REVIEW_APP_RUBRICS_DIR": str(served.rubrics)},
        )
        assert dry.returncode == 0, dry.stderr
        expected = json.loads(dry.stdout)
        figures = [
            sum(expected["carried"].values()),
            sum(expected["not_carried"].values()),
            expected["re_review_units"],
        ]
        assert figures[0] > 0 and figures[2] > 0 and expected["re_review"]

        tab.get_by_role("button", name="Preview the publication").click()
        tab.get_by_text(re.compile("^Preview: what publishing")).wait_for()
        idle(tab)
        # a loaded machine may draw the panel's tables a moment after the page is idle
        until_equal(lambda: _metrics(tab), figures, seconds=30)
        until_equal(lambda: _per_reviewer(tab), expected["re_review"], seconds=30)
        publish = tab.get_by_role("button", name=re.compile("^Publish role-adherence\u2060?@2$"))
        assert publish.is_disabled()  # the confirmation comes first, never preselected
        confirm = tab.get_by_text(re.compile("^Publish role-adherence\u2060?@2: carry "))
        assert f"carry {figures[0]} labels" in confirm.inner_text()
        confirm.click()
        tab.wait_for_function(
            "() => Array.from(document.querySelectorAll('button'))"
            ".some((b) => b.innerText.startsWith('Publish role') && !b.disabled)"
        )
        idle(tab)
        publish.click()
        idle(tab)
        tab.get_by_text(re.compile("^Published role-adherence\u2060?@2$")).wait_for()
        assert _metrics(tab)[:3] == figures  # the result panel stays on the page
        assert _per_reviewer(tab) == expected["re_review"]
    finally:
        tab.context.close()

    engine = create_database_engine(served.url)
    try:
        with Session(engine) as session:
            row = session.get(RubricVersion, ("role-adherence", 2))
            assert row is not None
            assert (row.state, row.origin, row.published_by) == ("published", "app", OWNER)
            assert row.yaml_text == v2_splitting_tone()
        (entry,) = audit_entries(engine, operator_actor(), action="rubric_publish", by=OWNER)
        assert entry.summary["carried"] == expected["carried"]
        assert entry.summary["re_review"] == expected["re_review"]
    finally:
        engine.dispose()
    chosen, _ = queue_as_seen(served, REVIEWERS[0])
    assert chosen == "role-adherence@2"  # published, and their queue was carried
