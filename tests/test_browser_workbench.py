"""A whole prompt iteration in Chromium, no terminal: edit the prompt, save it as a new
version, run it on the gold units against an endpoint (a loopback OpenAI-compatible
server with latency), watch the job's progress and its Stop button, read the comparison
with the earlier version. The job runs in the server's worker; the key never shows."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from review_app.services.judging.endpoints import ENDPOINTS_ENV
from review_app.services.operations.jobs import list_jobs
from review_app.services.team.people import operator_actor
from storage.engine import create_database_engine
from tests.judge_support import FakeChatServer
from tests.served import IDLE, chromium, free_port, require_browser, serving, wait_healthy
from tests.ui_support import demo_template

pytestmark = [pytest.mark.browser, pytest.mark.slow]

SECRET = "sk-browser-never-shown-7"


@pytest.fixture
def fake() -> Iterator[FakeChatServer]:
    server = FakeChatServer(delay=0.25).start()
    try:
        yield server
    finally:
        server.stop()


def test_edit_save_run_and_compare_without_a_terminal(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fake: FakeChatServer
) -> None:
    require_browser()
    database = demo_template(tmp_path / "review.db", local_user="admin")
    url = f"sqlite:///{database}"
    endpoints = tmp_path / "endpoints.toml"
    endpoints.write_text(
        f'[endpoints.loopback]\nbase_url = "{fake.base_url}"\nmodel = "loop-model"\n'
        f'api_key = "{SECRET}"\nresponse_format = "json_object"\nconcurrency = 4\n',
        encoding="utf-8",
    )
    monkeypatch.setenv(ENDPOINTS_ENV, str(endpoints))
    (tmp_path / "home").mkdir()
    port = free_port()
    address = f"http://127.0.0.1:{port}"
    with serving(url, tmp_path, port=port, user="admin") as (process, log), chromium() as browser:
        wait_healthy(address, process, log)
        context = browser.new_context(viewport={"width": 1280, "height": 800})
        tab: Any = context.new_page()
        tab.goto(f"{address}/judge")
        tab.wait_for_selector(IDLE, timeout=60_000)
        tab.get_by_text("Prompt workbench", exact=True).click()
        prompt = tab.get_by_label("Prompt", exact=True)
        prompt.wait_for(timeout=60_000)
        prompt.fill(prompt.input_value() + "\nA refund is never in role for this bot.\n")
        tab.get_by_role("button", name="Save as new version").click()
        tab.wait_for_selector(IDLE, timeout=60_000)
        tab.get_by_text("Saved as ", exact=False).first.wait_for(timeout=30_000)
        assert "A refund is never in role" in prompt.input_value()
        assert tab.get_by_text("Endpoint", exact=True).count()
        tab.get_by_role("button", name="Run on gold units").click()
        stop = tab.get_by_role("button", name="Stop")
        stop.wait_for(timeout=60_000)  # shown while the job runs (111 turns, 0.25 s each)
        tab.get_by_text(", done, 111 of 111 turns").wait_for(timeout=180_000)
        tab.get_by_text("on 84 units").first.wait_for(timeout=60_000)
        assert not stop.count()
        headline = tab.get_by_text("on 84 units").first.inner_text()
        assert headline.startswith(("No detectable difference", "v")), headline
        body = tab.locator('[data-testid="stMain"]').inner_text()
        assert not tab.locator('[data-testid="stException"]').count()
        assert SECRET not in body and SECRET not in tab.content()
        context.close()
    assert SECRET not in log.read_text(encoding="utf-8", errors="replace")
    engine = create_database_engine(url)
    try:
        [job] = list_jobs(engine, operator_actor())
    finally:
        engine.dispose()
    assert job.status == "done" and job.created_by == "admin"
    assert SECRET not in str(job.parameters)
    assert fake.max_in_flight <= 4
