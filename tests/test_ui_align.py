"""The workbench's "Suggest a better prompt", driven with AppTest on a copy of the demo
database: the cost said before anything starts, the job run by a worker, its result
left on the page (docs/reference.md, "Suggesting a prompt")."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from review_app.services.access.actors import operator_actor
from review_app.services.jobs.runner import list_jobs, run_worker
from review_app.services.judging.align import ALIGN_JOB, VERDICTS
from review_app.services.judging.endpoints import ENDPOINTS_ENV
from storage.engine import create_database_engine
from tests.align_support import OptimiserStub, endpoints_file, helpful_proposals, word_judge
from tests.judge_support import FakeChatServer
from tests.test_ui_workbench import texts, workbench
from tests.ui_support import app_database, demo_template, plain


@pytest.fixture(scope="module")
def demo_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return demo_template(tmp_path_factory.mktemp("ui") / "demo.db", local_user="admin")


@pytest.fixture
def stubs() -> Iterator[tuple[FakeChatServer, OptimiserStub]]:
    judge = FakeChatServer(delay=0.0, answer=word_judge).start()
    optimiser = OptimiserStub(helpful_proposals()).start()
    try:
        yield judge, optimiser
    finally:
        judge.stop()
        optimiser.stop()


@pytest.fixture
def database_url(
    demo_file: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    stubs: tuple[FakeChatServer, OptimiserStub],
) -> Iterator[str]:
    monkeypatch.setenv(ENDPOINTS_ENV, str(endpoints_file(tmp_path / "e.toml", *stubs)))
    with app_database(demo_file, tmp_path, monkeypatch, local_user="admin") as url:
        yield url


def test_the_cost_is_said_first_and_the_result_stays_on_the_page(
    database_url: str, stubs: tuple[FakeChatServer, OptimiserStub]
) -> None:
    judge, optimiser = stubs
    at = workbench()
    assert "Suggest a better prompt" in [plain(s.value) for s in at.subheader]
    # never the judge's endpoint preselected as the optimiser
    assert at.selectbox(key="align_endpoint").value == "judge"
    assert at.selectbox(key="align_optimizer").value == "optimizer"
    at.number_input(key="align_budget").set_value(40).run()
    shown = texts(at)
    assert any("requests to judge" in t and "to optimizer" in t for t in shown), shown
    assert judge.requests == [] and optimiser.requests == []  # nothing asked yet
    start = next(b for b in at.button if b.key == "align_start")
    assert "at most" in plain(start.label)
    start.click().run()
    assert not at.exception, [e.value for e in at.exception]
    engine = create_database_engine(database_url)
    try:
        [job] = list_jobs(engine, operator_actor(), kinds=[ALIGN_JOB])
        assert job.created_by == "admin" and job.parameters["budget"] == 40
        assert run_worker(engine, until_idle=True, poll_seconds=0.05) == 1
    finally:
        engine.dispose()
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    panel = [plain(t.value) for t in at.text]
    assert any(line.startswith(VERDICTS) for line in panel), panel
    assert any("Requests:" in line for line in panel)
    assert any("Dorner, Nastl & Hardt" in line for line in panel) or any(
        line.startswith("not confirmed: no candidate") for line in panel
    )
