"""Judge verdicts the app cannot get wrong by default (issue 33), walked in Chromium at
1280x800 on the demo, with a loopback OpenAI-compatible endpoint whose answers depend on
a word in the prompt: without "STRICTLY" the judge lets every turn pass, with it the
judge answers what gold says.

The walk: the workbench opens on the team's judge; Run on gold units says its 84
requests first and sends exactly those; with no comparable baseline at the endpoint the
page says so and offers to run one; v3 (saved with the word) against v2 at the same
endpoint gives one verdict sentence, the very sentence of ``judge compare --json``, and
the next steps (Use v3 as the judge; Run v3 on every turn with its cost); a third run
stopped part-way becomes no page's default (workbench comparison, calibration view,
side-by-side table, adjudicate's judge column, which reads one complete run for every
unit); the judge, agreement and adjudicate pages fit 1280 px without sideways scrolling.
It replaces the earlier workbench walk (edit, save, run, Stop, compare, no key shown),
which it covers.

``REVIEW_APP_SCREENSHOTS=DIR`` saves a PNG of each step there (to look at the layout).
"""

from __future__ import annotations

import json
import os
import re
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from review_app.services.access.actors import operator_actor
from review_app.services.cases.case_views import load_case_view
from review_app.services.jobs.runner import list_jobs
from review_app.services.judging.endpoints import ENDPOINTS_ENV
from review_app.services.judging.run_defaults import team_judge
from review_app.services.judging.runs import list_judge_runs
from review_app.services.labels.adjudication import gold_labels
from review_app.services.operations.audit import audit_entries
from review_app.services.rubrics.rubric_catalog import sync_rubrics
from storage.engine import create_database_engine
from tests.judge_support import FakeChatServer, run_review_app
from tests.served import IDLE, chromium, free_port, require_browser, serving, wait_healthy
from tests.test_browser_wide import page_problems
from tests.ui_support import demo_template

pytestmark = [pytest.mark.browser, pytest.mark.slow]

RUBRIC = "role-adherence@1"
SECRET = "sk-judge-defaults-never-shown-9"
WORD = "STRICTLY"
JUDGED = re.compile(
    r"The assistant's role:\n(?P<role>.*?)\n\nLabels.*The turn you judge \(turn (?P<turn>\d+)\):"
    r"\n(?P<reply>.*?)\n\nRules:",
    re.S,
)
BREAKS = {
    "persona_break",
    "authority_break",
    "scope_break",
    "out_of_role_mishandled",
    "tone_break",
    "false_action_claim",
}


class Walk:
    """The page in the tab, the database and the screenshots."""

    def __init__(self, tab: Any, address: str, url: str, shots: Path | None) -> None:
        self.tab, self.address, self.url, self.shots = tab, address, url, shots
        self.step = 0

    def idle(self) -> None:
        self.tab.wait_for_selector(IDLE, timeout=120_000)

    def shot(self, name: str) -> None:
        """A PNG of the whole page at 1280 px wide (the window grown to the page's height
        for the picture: the app scrolls inside its own block)."""
        if self.shots is None:
            return
        self.step += 1
        height = self.tab.evaluate(
            "() => Math.max(...Array.from(document.querySelectorAll('*'))"
            ".map((e) => e.scrollHeight))"
        )
        self.tab.set_viewport_size({"width": 1280, "height": min(int(height), 8000)})
        self.tab.wait_for_timeout(500)
        self.tab.screenshot(path=str(self.shots / f"{self.step:02d}-{name}.png"))
        self.tab.set_viewport_size({"width": 1280, "height": 800})

    def open(self, page: str) -> None:
        self.tab.goto(f"{self.address}/{page}")
        self.idle()

    def main_text(self) -> str:
        return str(self.tab.locator('[data-testid="stMain"]').inner_text()).replace("\u2060", "")

    def text(self, words: str, timeout: float = 30_000) -> Any:
        """The first element showing ``words`` (an "@" shown after the word joiner the
        page puts before it, so that no address becomes a link)."""
        pattern = re.escape(words).replace("@", "\u2060?@")
        found = self.tab.get_by_text(re.compile(pattern)).first
        found.wait_for(timeout=timeout)
        return found

    def button(self, name: str) -> Any:
        pattern = "^" + re.escape(name).replace("@", "\u2060?@") + "$"
        return self.tab.get_by_role("button", name=re.compile(pattern))

    def chosen(self, label: str, starts: str, timeout: float = 30.0) -> str:
        """The value shown in the select box ``label``, once it starts with ``starts``."""
        box = self.tab.get_by_role("combobox", name=label)
        deadline = time.monotonic() + timeout
        while not (value := str(box.input_value())).startswith(starts):
            assert time.monotonic() < deadline, f"{label}: {value!r}"
            self.tab.wait_for_timeout(200)
        return value

    def fits(self, name: str) -> None:
        problems = page_problems(self.tab, _Page(name))
        assert not problems, problems


class _Page:
    """What ``page_problems`` asks of a page: its name and its decision sentence."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.sentence = None


def _judge_on_a_word(gold: dict[tuple[str, int, str], str]) -> Any:
    """The endpoint's answer: with the word, what gold says of the judged turn (found by
    its role, number and text); without it, a judge that drifts: every turn from the 8th
    on is a scope break."""

    def answer(prompt: str) -> dict[str, Any]:
        found = JUDGED.search(prompt)
        if found is None:
            code = "in_role"
        elif WORD in prompt:
            code = gold.get((found["role"], int(found["turn"]), found["reply"]), "in_role")
        else:
            code = "scope_break" if int(found["turn"]) >= 8 else "in_role"
        broke = code in BREAKS
        return {"label": code, "score": 0.9 if broke else 0.1, "reason": f"Reads as {code}."}

    return answer


def _gold_by_turn_text(url: str) -> dict[tuple[str, int, str], str]:
    engine = create_database_engine(url)
    try:
        rubric = sync_rubrics(engine, operator_actor()).get(RUBRIC)
        gold = gold_labels(engine, operator_actor(), rubric=rubric).labels
        found: dict[tuple[str, int, str], str] = {}
        for case_id in sorted({case for case, _ in gold}):
            view = load_case_view(engine, operator_actor(), case_id=case_id)
            for turn in view.turns:
                if (case_id, turn.turn) in gold:
                    key = (view.chatbot_role or "", turn.turn, turn.text or "")
                    found[key] = gold[(case_id, turn.turn)].code
        return found
    finally:
        engine.dispose()


@pytest.fixture
def world(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[str, FakeChatServer]]:
    database = demo_template(tmp_path / "review.db", local_user="admin")
    url = f"sqlite:///{database}"
    fake = FakeChatServer(delay=0.02, answer=_judge_on_a_word(_gold_by_turn_text(url))).start()
    endpoints = tmp_path / "endpoints.toml"
    endpoints.write_text(
        f'[endpoints.loopback]\nbase_url = "{fake.base_url}"\nmodel = "loop-model"\n'
        f'api_key = "{SECRET}"\nresponse_format = "json_object"\nconcurrency = 4\n',
        encoding="utf-8",
    )
    monkeypatch.setenv(ENDPOINTS_ENV, str(endpoints))
    (tmp_path / "home").mkdir()
    try:
        yield url, fake
    finally:
        fake.stop()


def _run_on_gold(walk: Walk, *, requests: int) -> None:
    run = walk.button(f"Run on gold units ({requests} requests)")
    run.wait_for(timeout=60_000)
    walk.text(f"{requests} requests to loopback (model loop-model): the gold units, 84 turns")
    run.click()


def test_a_judge_iteration_whose_defaults_compare_like_with_like(
    tmp_path: Path, world: tuple[str, FakeChatServer]
) -> None:
    require_browser()
    url, fake = world
    shots_dir = os.environ.get("REVIEW_APP_SCREENSHOTS")
    shots = Path(shots_dir) if shots_dir else None
    if shots is not None:
        shots.mkdir(parents=True, exist_ok=True)
    port = free_port()
    address = f"http://127.0.0.1:{port}"
    with serving(url, tmp_path, port=port, user="admin") as (process, log), chromium() as browser:
        wait_healthy(address, process, log)
        context = browser.new_context(viewport={"width": 1280, "height": 800})
        walk = Walk(context.new_page(), address, url, shots)

        # 1. The calibration view and the workbench open on the team's judge (the demo's v2).
        walk.open("judge")
        walk.text("Imported, 111 turns; shown by default: the team's judge.")
        walk.text(
            "The team's judge for role-adherence@1 is role-judge@v2 with model gemma-3-270m-it"
        )
        walk.shot("calibration-team-judge")
        walk.tab.get_by_text("Prompt workbench", exact=True).click()
        walk.idle()
        prompt = walk.tab.get_by_label("Prompt", exact=True)
        prompt.wait_for(timeout=60_000)
        version = walk.tab.get_by_role("combobox", name="Prompt version")
        version_text = str(version.input_value())
        assert version_text.startswith(
            "role-judge@v2 · file rubrics/role-adherence/judges/role-judge/v2.txt, synced "
        ), version_text
        assert " by admin" not in version_text  # a file is credited to the file
        assert version.count() == 1

        # 2. v2 on the gold units at the loopback endpoint: 84 requests said, 84 sent.
        _run_on_gold(walk, requests=84)
        walk.text("role-judge@v2 on loopback, done, 84 of 84 turns", timeout=180_000)
        assert len(fake.requests) == 84
        walk.text("there is nothing to compare it with like for like")
        assert walk.button("Run role-judge@v1 on loopback").count() == 1
        walk.shot("no-comparable-baseline")

        # 3. v3 = v2 with the word, saved and run on the same 84 units.
        prompt.fill(
            prompt.input_value() + f"\nJudge {WORD}: a refund outside the role breaks it.\n"
        )
        walk.button("Save as new version").click()
        walk.idle()
        walk.chosen("Prompt version", "role-judge@v3 · ")
        fake.reset_log()
        _run_on_gold(walk, requests=84)
        walk.text("role-judge@v3 on loopback, done, 84 of 84 turns", timeout=180_000)
        assert len(fake.requests) == 84
        verdict = walk.text("v3 agrees with gold better than v2").inner_text()
        assert verdict.endswith("(McNemar p < 0.001)."), verdict
        walk.text("The default pair: role-judge@v3 against role-judge@v2 (the latest earlier")
        assert "differ in more than the prompt" not in walk.main_text()
        walk.text("background job: 27 requests to loopback (model loop-model): every turn")
        assert walk.button("Run v3 on every turn").count() == 1
        walk.shot("verdict-and-next-steps")
        walk.fits("workbench")

        # 4. Use v3 as the judge: stored, audited, said in the page.
        walk.button("Use v3 as the judge").click()
        walk.idle()
        walk.text(
            "The team's judge for role-adherence@1 is role-judge@v3 with model loop-model at "
            "loopback"
        )

        # 5. A third version, run more slowly and stopped part-way.
        prompt.fill(prompt.input_value() + "\nBe brief.\n")
        walk.button("Save as new version").click()
        walk.idle()
        walk.chosen("Prompt version", "role-judge@v4 · ")
        fake.delay = 0.5
        _run_on_gold(walk, requests=84)
        walk.tab.get_by_text(re.compile(r"running, ([4-9]|\d\d) of 84 turns")).first.wait_for(
            timeout=120_000
        )
        walk.button("Stop").click()
        walk.text("role-judge@v4 on loopback, stopped, ", timeout=60_000)
        fake.delay = 0.02
        walk.idle()
        walk.text("role-judge@v4 has no complete run yet (model loop-model at loopback: stopped at")
        stopped_verdict = walk.text("v3 agrees with gold better than v2").inner_text()
        assert stopped_verdict == verdict  # the stopped run takes nothing over
        walk.shot("stopped-run-not-default")
        page_verdict = verdict

        # 6. The calibration view opens on the team's judge (v3), never the stopped run;
        #    the side-by-side table keeps every complete run and leaves the stopped out.
        walk.open("judge")
        chosen = str(walk.tab.get_by_role("combobox", name="Judge run").input_value())
        assert "role-judge@v3 · model loop-model at loopback" in chosen, chosen
        walk.text("Prompt versions side by side")
        walk.shot("calibration-after-stop")
        walk.fits("judge")
        # like for like: the complete runs at loopback, v2 and v3 (not the stopped v4)
        walk.text("The complete runs with model loop-model at loopback, on the units")
        headers = walk.tab.locator('[role="columnheader"]').all_inner_texts()
        assert any("role-judge@v3" in h for h in headers), headers
        assert any("role-judge@v2" in h for h in headers), headers
        assert not any("role-judge@v4" in h for h in headers), headers

        # 7. Adjudicate: one complete run (the team's judge) for every unit.
        walk.open("adjudicate")
        walk.text("The judge's column is one run for every unit, the team's judge: role-judge@v3")
        walk.shot("adjudicate")
        walk.fits("adjudicate")
        walk.tab.keyboard.press("1")
        walk.tab.keyboard.press("Enter")
        walk.idle()
        walk.text("The judge's column is one run for every unit, the team's judge: role-judge@v3")

        # 8. Agreement: readers counted right, the drift sentence, nothing scrolls sideways.
        walk.open("agreement")
        walk.text("Where in the conversation the role breaks")
        walk.shot("agreement")
        walk.fits("agreement")
        assert "read by three reviewers each" in walk.main_text()
        body = walk.main_text()
        assert SECRET not in body and SECRET not in walk.tab.content()
        context.close()
    assert SECRET not in log.read_text(encoding="utf-8", errors="replace")

    # The command line's default pair and its verdict are the page's.
    compared = run_review_app(
        "judge", "compare", "--rubric", RUBRIC, "--json", db=url, home=tmp_path / "home"
    )
    assert compared.returncode == 0, compared.stderr
    report = json.loads(compared.stdout)
    assert report["verdict"] == page_verdict
    assert [run["identity"].split(" · ")[0] for run in report["runs"]] == [
        "role-judge@v2",
        "role-judge@v3",
    ]
    engine = create_database_engine(url)
    try:
        rubric = sync_rubrics(engine, operator_actor()).get(RUBRIC)
        runs = {run.name: run for run in list_judge_runs(engine, operator_actor(), rubric=rubric)}
        team = team_judge(engine, operator_actor(), rubric=rubric)
        assert team is not None and team.matches(runs["role-judge@v3/loop-model at loopback"])
        [chosen_entry] = [
            e for e in audit_entries(engine, operator_actor(), action="team_judge")
            if e.actor == "admin"
        ]  # fmt: skip
        assert chosen_entry.summary["after"] == runs["role-judge@v3/loop-model at loopback"].id
        stopped = runs["role-judge@v4/loop-model at loopback"]
        assert stopped.state == "stopped" and stopped.state_text.startswith("stopped at ")
        jobs = list_jobs(engine, operator_actor())
        assert [job.status for job in jobs if job.kind == "judge_run"] == [
            "stopped",
            "done",
            "done",
        ]
        assert all(job.parameters["scope"] == "gold" for job in jobs if job.kind == "judge_run")
    finally:
        engine.dispose()
