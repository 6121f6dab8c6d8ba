"""The agreement page in Chromium: point figures at once, the intervals by themselves.

One server on a demo-loaded SQLite file, signed in through local mode as ``lee`` (an
admin), with ``REVIEW_APP_REPORT_INLINE_ROWS=0``: as on a large database, no interval is
computed while the page waits. The page shows alpha without its interval and says the
intervals are being computed; the server's report worker (a child process of ``serve``,
review_app/ui/launch.py) computes them, and the page, asking every few seconds, draws
them without anyone reloading it. docs/reference.md, "Computed reports".
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from review_app.services.access.actors import operator_actor
from review_app.services.exchange.demo import load_demo
from review_app.services.jobs.runner import list_jobs
from review_app.services.reports.report_jobs import REPORT_JOB
from review_app.services.reports.report_store import INLINE_ROWS_ENV
from storage.engine import create_database_engine
from storage.migrations.upgrade import upgrade_database
from tests.served import (
    IDLE,
    chromium,
    free_port,
    require_browser,
    serving,
    until_equal,
    wait_healthy,
)

pytestmark = pytest.mark.browser

USER = "lee"
NOTICE = "Intervals are being computed in the background"


def test_the_intervals_appear_on_the_open_page_once_the_worker_stored_them(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    require_browser()
    database = f"sqlite:///{tmp_path / 'review.db'}"
    engine = create_database_engine(database)
    upgrade_database(engine)
    load_demo(engine, operator_actor(), local_user=USER)
    monkeypatch.setenv(INLINE_ROWS_ENV, "0")
    port = free_port()
    address = f"http://127.0.0.1:{port}"
    try:
        with (
            serving(database, tmp_path, port=port, user=USER) as (process, log),
            chromium() as browser,
        ):
            wait_healthy(address, process, log)
            context = browser.new_context(viewport={"width": 1280, "height": 800})
            tab = context.new_page()
            tab.goto(f"{address}/agreement")
            tab.wait_for_selector(IDLE, timeout=120_000)
            headline = tab.locator("h3", has_text="alpha ").first
            headline.wait_for(timeout=120_000)
            # the first drawing: no interval yet (its job was queued by this very run), unless
            # on a loaded machine the worker finished the job before this first look
            if re.match(r"alpha -?\d\.\d\d \[", headline.inner_text()):
                # (the job stores the report, then marks itself done: a moment apart)
                until_equal(
                    lambda: {
                        (job.status, job.error)
                        for job in list_jobs(engine, operator_actor(), kinds=[REPORT_JOB])
                    },
                    {("done", None)},
                    seconds=30,
                )
            else:
                assert tab.get_by_text(NOTICE).count() == 1
            # the page redraws by itself: alpha with its interval, and no notice
            tab.locator("h3", has_text=re.compile(r"alpha -?\d\.\d\d \[")).wait_for(timeout=180_000)
            tab.get_by_text(NOTICE).wait_for(state="detached", timeout=60_000)
            assert not tab.locator('[data-testid="stException"]').count()
            context.close()
            jobs = list_jobs(engine, operator_actor(), kinds=[REPORT_JOB])
            assert jobs and all(job.status == "done" for job in jobs), [
                (job.status, job.error) for job in jobs
            ]
            # run by the report worker, a process of its own (host:pid:tag)
            assert process.pid not in {int(str(job.lease_owner).split(":")[1]) for job in jobs}
            assert "Traceback" not in log.read_text()
    finally:
        engine.dispose()
