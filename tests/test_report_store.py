"""The reports table: heavy reports computed once per state of the data, shared by servers.

On SQLite and PostgreSQL, with two engines on one database standing for two servers:
the second gets the first one's report without computing it; a new label changes the
token and the report is computed again; a reviewer reads nothing from the table; on a
database too large for intervals at once the page's report comes without them and a
report job (run by the other server's worker) stores them; when even the point figures
were slow the page gets the figures last computed while a job computes the current
ones; payloads come back from the table as the very objects stored. docs/reference.md,
"Computed reports".
"""

from __future__ import annotations

import dataclasses
import json
import math
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from sqlalchemy import Engine
from sqlmodel import Session, select

import storage.labels
from review_app.errors import PermissionDenied
from review_app.rubrics.model import Rubric
from review_app.services.access.actors import Actor
from review_app.services.exchange.demo import load_demo
from review_app.services.jobs import runner as jobs
from review_app.services.judging import judge_jobs
from review_app.services.judging.drift import drift_report
from review_app.services.judging.estimate import break_rate_estimate
from review_app.services.judging.judge_import import import_verdicts
from review_app.services.judging.judge_report import calibration_report, few_shot_material
from review_app.services.judging.run_defaults import run_choices
from review_app.services.judging.runs import list_judge_runs
from review_app.services.judging.selective import coverage_curve
from review_app.services.judging.strata import stratified_estimate
from review_app.services.labels import labeling
from review_app.services.labels.adjudication import DisagreementUnit, disagreement_queue
from review_app.services.operations import page_run
from review_app.services.reports import report_jobs, report_store
from review_app.services.review.agreement_reports import DashboardData, dashboard_data
from review_app.services.review.reliability import agreement_over_time_report, reliability_report
from review_app.services.rubrics.rubric_catalog import sync_rubrics
from storage import jobs as job_storage
from storage import reports
from storage.engine import create_database_engine
from storage.models import BackgroundJob
from tests.actors import operator, signed_in
from tests.conftest import Database

RUBRIC = "role-adherence@1"
CASE = "support-delayed-refund-violation"


@dataclass
class Servers:
    """Two engines on one demo database (two servers), and the demo's policy owner."""

    first: Engine
    second: Engine
    rubric: Rubric
    owner: Actor
    run_id: int


@pytest.fixture
def servers(database: Database) -> Iterator[Servers]:
    load_demo(database.engine, operator())
    rubric = sync_rubrics(database.engine, operator()).get(RUBRIC)
    run_id = list_judge_runs(database.engine, operator(), rubric=rubric)[0].id
    second = create_database_engine(database.url)
    try:
        yield Servers(database.engine, second, rubric, signed_in(database.engine, "olivia"), run_id)
    finally:
        second.dispose()


def counted(monkeypatch: pytest.MonkeyPatch, name: str) -> Counter[str]:
    """Count the calls of the compute function ``name`` the report store uses."""
    calls: Counter[str] = Counter()
    original: Callable[..., Any] = getattr(report_store, name)

    def counting(*args: Any, **kwargs: Any) -> Any:
        calls[str(kwargs.get("n_resamples", "-"))] += 1
        return original(*args, **kwargs)

    monkeypatch.setattr(report_store, name, counting)
    return calls


def same(found: Any, expected: Any, where: str = "report") -> None:
    """``found`` equals ``expected`` with the same types all the way down (a numpy scalar
    counts as the Python number it equals; NaN equals NaN, -0.0 is not 0.0)."""
    if isinstance(expected, np.generic):
        expected = expected.item()
    assert type(found) is type(expected), f"{where}: {type(found)} is not {type(expected)}"
    if isinstance(expected, float):
        assert (math.isnan(found) and math.isnan(expected)) or (
            found == expected and math.copysign(1, found) == math.copysign(1, expected)
        ), f"{where}: {found!r} != {expected!r}"
    elif isinstance(expected, list | tuple):
        assert len(found) == len(expected), f"{where}: {len(found)} != {len(expected)} items"
        for i, (a, b) in enumerate(zip(found, expected, strict=True)):
            same(a, b, f"{where}[{i}]")
    elif isinstance(expected, dict):
        assert list(found) == list(expected), f"{where}: keys {list(found)} != {list(expected)}"
        for key in expected:
            same(found[key], expected[key], f"{where}[{key!r}]")
    elif dataclasses.is_dataclass(expected):
        for field in dataclasses.fields(expected):
            same(getattr(found, field.name), getattr(expected, field.name), f"{where}.{field.name}")
    else:
        assert found == expected, f"{where}: {found!r} != {expected!r}"


def _label_again(engine: Engine, rubric: Rubric) -> None:
    """A new current label of ana's on the case (a code other than her current one)."""
    ana = signed_in(engine, "ana")
    for code in ("borderline", "in_role"):
        saved = labeling.record_label(engine, ana, case_id=CASE, turn=2, rubric=rubric, code=code)
        if saved.changed:
            return
    raise AssertionError("no label was stored")


def test_a_second_server_reads_the_report_the_first_stored(
    servers: Servers, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls = counted(monkeypatch, "dashboard_data")
    first = report_store.agreement_dashboard(servers.first, servers.owner, rubric=servers.rubric)
    assert first.status == "current"  # the demo is small: intervals at once
    assert calls == Counter({"500": 1})
    assert first.value.report["alpha_ci95"] is not None

    owner_elsewhere = signed_in(servers.second, "olivia")
    second = report_store.agreement_dashboard(
        servers.second, owner_elsewhere, rubric=servers.rubric
    )
    assert calls == Counter({"500": 1}), "the second server computed the report again"
    same(second.value, first.value)
    # and again on the first: nothing computed
    report_store.agreement_dashboard(servers.first, servers.owner, rubric=servers.rubric)
    assert calls == Counter({"500": 1})


def test_a_new_label_changes_the_token_and_the_report_is_computed_again(
    servers: Servers, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls = counted(monkeypatch, "disagreement_queue")
    report_store.open_disagreements(servers.first, servers.owner, rubric=servers.rubric)
    report_store.open_disagreements(servers.second, servers.owner, rubric=servers.rubric)
    assert sum(calls.values()) == 1
    agreement_calls = counted(monkeypatch, "dashboard_data")
    ratings = report_store.agreement_dashboard(
        servers.first, servers.owner, rubric=servers.rubric
    ).value.report["ratings"]

    _label_again(servers.first, servers.rubric)

    after = report_store.open_disagreements(servers.second, servers.owner, rubric=servers.rubric)
    assert sum(calls.values()) == 2
    same(after, disagreement_queue(servers.first, servers.owner, rubric=servers.rubric))
    again = report_store.agreement_dashboard(servers.second, servers.owner, rubric=servers.rubric)
    assert sum(agreement_calls.values()) == 2
    assert again.value.report["ratings"] == ratings  # one label replaced another
    same(
        again.value,
        dashboard_data(servers.first, servers.owner, rubric=servers.rubric, n_resamples=500),
    )


def test_a_new_verdict_changes_the_token_of_the_reports_that_read_verdicts(
    servers: Servers, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    s = servers
    judge_calls = counted(monkeypatch, "calibration_report")
    agreement_calls = counted(monkeypatch, "dashboard_data")
    before = report_store.judge_calibration(s.first, s.owner, rubric=s.rubric)
    report_store.agreement_dashboard(s.first, s.owner, rubric=s.rubric)
    verdict = {
        "case_id": CASE, "turn": 2, "judge": "role-judge", "prompt_version": "v1",
        "model": "gemma-3-270m-it", "label": "in_role", "score": 0.2, "reason": "again",
    }  # fmt: skip
    path = tmp_path / "one.jsonl"
    path.write_text(json.dumps(verdict) + "\n", encoding="utf-8")
    import_verdicts(s.first, s.owner, path, rubric=s.rubric)  # replaces one verdict

    after = report_store.judge_calibration(s.second, s.owner, rubric=s.rubric)
    report_store.agreement_dashboard(s.second, s.owner, rubric=s.rubric)
    assert sum(judge_calls.values()) == 2  # computed again
    assert sum(agreement_calls.values()) == 1  # reads no verdict: still current
    same(after.value, calibration_report(s.first, s.owner, rubric=s.rubric, n_resamples=500))
    assert after.value != before.value


def test_a_reviewer_reads_nothing_from_the_table(servers: Servers) -> None:
    stored = report_store.judge_calibration(servers.first, servers.owner, rubric=servers.rubric)
    assert stored.value["runs"]
    ana = signed_in(servers.second, "ana")
    for read in (
        lambda: report_store.judge_calibration(servers.second, ana, rubric=servers.rubric),
        lambda: report_store.agreement_dashboard(servers.second, ana, rubric=servers.rubric),
        lambda: report_store.open_disagreements(servers.second, ana, rubric=servers.rubric),
        lambda: report_store.run_estimate(
            servers.second, ana, rubric=servers.rubric, run_id=servers.run_id
        ),
        lambda: report_store.intervals_ready(
            servers.second,
            ana,
            waiting={"report": "judge_report", "rubric": RUBRIC, "parameters": {}, "token": ""},
        ),
    ):
        with pytest.raises(PermissionDenied):
            read()


@pytest.mark.parametrize(
    ("kind", "read", "compute", "interval"),
    [
        (
            "agreement",
            report_store.agreement_dashboard,
            lambda s: dashboard_data(s.first, s.owner, rubric=s.rubric, n_resamples=500),
            lambda value: value.report["alpha_ci95"],
        ),
        (
            "judge_report",
            report_store.judge_calibration,
            lambda s: calibration_report(s.first, s.owner, rubric=s.rubric, n_resamples=500),
            lambda value: value["runs"][0]["vs_reviewers"]["ana"]["kappa"]["ci95"],
        ),
        (
            "drift",
            report_store.drift,
            # the page's drift: gold beside the default run (the demo's team's judge)
            lambda s: drift_report(
                s.first,
                s.owner,
                rubric=s.rubric,
                run_id=run_choices(s.first, s.owner, rubric=s.rubric).default.id,  # type: ignore[union-attr]
                n_resamples=300,
            ),
            lambda value: next(
                row["ci95"]
                for source in value["sources"]
                for row in source["by_position"]
                if row["units"]
            ),
        ),
    ],
)
def test_the_interval_job_fills_in_what_the_page_showed_without(
    servers: Servers,
    monkeypatch: pytest.MonkeyPatch,
    kind: str,
    read: Callable[..., report_store.Shown[Any]],
    compute: Callable[[Servers], Any],
    interval: Callable[[Any], Any],
) -> None:
    monkeypatch.setenv(report_store.INLINE_ROWS_ENV, "0")  # as on a large database
    point = read(servers.first, servers.owner, rubric=servers.rubric)
    assert point.status == "computing" and point.waiting is not None
    assert interval(point.value) is None
    assert point.waiting["report"] == kind
    again = read(servers.first, servers.owner, rubric=servers.rubric)
    assert again.waiting == point.waiting
    same(again.value, point.value)
    queued = jobs.list_jobs(servers.first, servers.owner, kinds=[report_jobs.REPORT_JOB])
    assert [job.status for job in queued] == ["queued"]  # one job per key and token
    assert not report_store.intervals_ready(servers.first, servers.owner, waiting=point.waiting)

    # the other server's worker (as in each serve process) runs it
    assert jobs.run_worker(servers.second, until_idle=True, kinds=[report_jobs.REPORT_JOB]) == 1
    (done,) = jobs.list_jobs(servers.first, servers.owner, kinds=[report_jobs.REPORT_JOB])
    assert done.status == "done" and done.result is not None and done.result["computed"]
    assert report_store.intervals_ready(servers.first, servers.owner, waiting=point.waiting)

    full = read(servers.first, servers.owner, rubric=servers.rubric)
    assert full.status == "current" and full.waiting is None
    assert interval(full.value) is not None
    same(full.value, compute(servers))
    assert len(jobs.list_jobs(servers.first, servers.owner, kinds=[report_jobs.REPORT_JOB])) == 1


def test_a_failed_interval_job_is_said_and_not_queued_again(
    servers: Servers, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(report_store.INLINE_ROWS_ENV, "0")

    def broken(*args: Any, **kwargs: Any) -> Any:
        if kwargs.get("n_resamples"):
            raise RuntimeError("the bootstrap ran out of memory")
        return drift_report(*args, **kwargs)

    monkeypatch.setattr(report_store, "drift_report", broken)
    report_store.drift(servers.first, servers.owner, rubric=servers.rubric)
    jobs.run_worker(servers.first, until_idle=True, kinds=[report_jobs.REPORT_JOB])
    shown = report_store.drift(servers.first, servers.owner, rubric=servers.rubric)
    assert shown.status == "failed"
    assert shown.error == "RuntimeError: the bootstrap ran out of memory"
    (job,) = jobs.list_jobs(servers.first, servers.owner, kinds=[report_jobs.REPORT_JOB])
    assert job.status == "failed"


def _old_job(
    engine: Engine,
    parameters: dict[str, Any],
    *,
    status: str = "done",
    days: float = 0.0,
    kind: str = report_jobs.REPORT_JOB,
) -> int:
    """A job of ``kind`` stored as it would be after finishing (or in ``status``)
    ``days`` ago."""
    when = datetime.now(UTC) - timedelta(days=days)
    with Session(engine) as session:
        job = BackgroundJob(
            kind=kind,
            parameters_json=json.dumps(parameters, sort_keys=True),
            created_by="olivia",
            status=status,
            created_at=when,
            finished_at=when if status in job_storage.FINISHED else None,
            lease_owner="elsewhere" if status == "running" else None,
            lease_expires_at=when + timedelta(days=365) if status == "running" else None,
        )
        session.add(job)
        session.commit()
        assert job.id is not None
        return job.id


def _job_ids(engine: Engine) -> set[int]:
    with Session(engine) as session:
        return {job.id for job in session.exec(select(BackgroundJob)) if job.id is not None}


def _report_job(report: str, token: str, rubric: str = RUBRIC) -> dict[str, Any]:
    return {"parameters": {}, "report": report, "rubric": rubric, "token": token}


def test_pruning_deletes_finished_jobs_past_a_week_or_beyond_the_newest_of_their_key(
    database: Database,
) -> None:
    e = database.engine
    key = _report_job("agreement", "")
    prefix = json.dumps(key, sort_keys=True)[: -len('""}')]
    same_key = [_old_job(e, _report_job("agreement", f"t{i}"), days=1) for i in range(5)]
    failed = _old_job(e, _report_job("agreement", "t5"), status="failed", days=0.5)
    other_rubric = _old_job(e, _report_job("agreement", "t0", rubric=RUBRIC + "0"), days=1)
    other_key = _old_job(e, _report_job("drift", "t0"), days=6)
    old_other = _old_job(e, _report_job("drift", "t1"), status="stopped", days=8)
    old_unfinished = [_old_job(e, _report_job("drift", t), status=s, days=30) for t, s in
                      (("q", "queued"), ("r", "running"))]  # fmt: skip
    old_judge_run = _old_job(e, {"rubric": RUBRIC}, kind=judge_jobs.JUDGE_RUN, days=30)
    with Session(e) as session:
        deleted = job_storage.prune_finished(
            session,
            kind=report_jobs.REPORT_JOB,
            finished_before=datetime.now(UTC) - timedelta(days=7),
            key_prefix=prefix,
            keep=3,
        )
        session.commit()
    assert deleted == 4  # three of the key, one past the week
    # the newest three of the key (a failed one among them), every other key's within
    # the week, and every job not finished or not a report
    assert _job_ids(e) == {
        *same_key[3:],
        failed,
        other_rubric,
        other_key,
        *old_unfinished,
        old_judge_run,
    }
    assert old_other not in _job_ids(e)
    with Session(e) as session:  # again: nothing more to delete
        again = job_storage.prune_finished(
            session,
            kind=report_jobs.REPORT_JOB,
            finished_before=datetime.now(UTC) - timedelta(days=7),
            key_prefix=prefix,
            keep=3,
        )
        session.commit()
    assert again == 0


def test_the_report_worker_prunes_finished_report_jobs_and_keeps_judge_runs(
    servers: Servers, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(report_store.INLINE_ROWS_ENV, "0")  # as on a large database
    s = servers
    keep = report_jobs.REPORT_JOBS_KEEP_PER_KEY
    earlier = [_old_job(s.first, _report_job("agreement", f"t{i}"), days=1) for i in range(keep)]
    past_week = _old_job(
        s.first, _report_job("drift", "t0"), days=report_jobs.REPORT_JOBS_KEEP_DAYS + 1
    )
    judge_run = _old_job(s.first, {"rubric": RUBRIC}, kind=judge_jobs.JUDGE_RUN, days=365)
    waiting = report_store.agreement_dashboard(s.first, s.owner, rubric=s.rubric).waiting
    assert waiting is not None
    assert jobs.run_worker(s.second, until_idle=True, kinds=[report_jobs.REPORT_JOB]) == 1

    left = _job_ids(s.first)
    assert earlier[0] not in left and past_week not in left
    assert set(earlier[1:]) <= left and judge_run in left
    finished = jobs.list_jobs(s.first, s.owner, kinds=[report_jobs.REPORT_JOB])
    assert len(finished) == keep  # the job just run and the newest before it
    assert finished[0].parameters == waiting
    assert report_store.intervals_ready(s.first, s.owner, waiting=waiting)

    # A page still waiting for a job pruned since draws again (and asks anew).
    gone = {**waiting, "token": "t0"}
    assert report_store.intervals_ready(s.first, s.owner, waiting=gone)


def test_after_a_change_a_slow_report_shows_its_last_figures_until_a_job_has_new_ones(
    servers: Servers, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(report_store.INLINE_ROWS_ENV, "0")
    monkeypatch.setenv(report_store.WAIT_SECONDS_ENV, "0")  # every computation was slow
    s = servers
    assert report_store.judge_calibration(s.first, s.owner, rubric=s.rubric).status == "computing"
    estimate = report_store.run_estimate(s.first, s.owner, rubric=s.rubric, run_id=s.run_id)
    assert estimate.status == "current"  # never computed: at once (it has no intervals)
    jobs.run_worker(s.second, until_idle=True, kinds=[report_jobs.REPORT_JOB])
    before = report_store.judge_calibration(s.first, s.owner, rubric=s.rubric)
    assert before.status == "current"

    _label_again(s.first, s.rubric)
    judge_calls = counted(monkeypatch, "calibration_report")
    estimate_calls = counted(monkeypatch, "break_rate_estimate")
    queue_calls = counted(monkeypatch, "disagreement_queue")
    stale = report_store.judge_calibration(s.second, s.owner, rubric=s.rubric)
    stale_estimate = report_store.run_estimate(s.second, s.owner, rubric=s.rubric, run_id=s.run_id)
    assert (stale.status, stale_estimate.status) == ("stale", "stale")
    assert sum(judge_calls.values()) == 0 and sum(estimate_calls.values()) == 0
    same(stale.value, before.value)
    same(stale_estimate.value, estimate.value)
    assert stale.computed_at is not None and stale.waiting is not None
    assert not report_store.intervals_ready(s.first, s.owner, waiting=stale.waiting)
    # the queue the adjudication page works through is never stale
    report_store.open_disagreements(s.second, s.owner, rubric=s.rubric)
    assert sum(queue_calls.values()) == 1

    assert jobs.run_worker(s.first, until_idle=True, kinds=[report_jobs.REPORT_JOB]) == 2
    assert report_store.intervals_ready(s.first, s.owner, waiting=stale.waiting)
    fresh = report_store.judge_calibration(s.second, s.owner, rubric=s.rubric)
    assert fresh.status == "current"
    same(fresh.value, calibration_report(s.first, s.owner, rubric=s.rubric, n_resamples=500))
    assert fresh.value != before.value  # ana's new label counts


def test_a_report_that_was_quick_is_computed_at_once_after_a_change(
    servers: Servers, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(report_store.INLINE_ROWS_ENV, "0")
    monkeypatch.setenv(report_store.WAIT_SECONDS_ENV, "1000")
    s = servers
    assert report_store.agreement_dashboard(s.first, s.owner, rubric=s.rubric).status == (
        "computing"  # never computed, and large by the rows it reads
    )
    jobs.run_worker(s.first, until_idle=True, kinds=[report_jobs.REPORT_JOB])
    _label_again(s.first, s.rubric)
    calls = counted(monkeypatch, "dashboard_data")
    again = report_store.agreement_dashboard(s.second, s.owner, rubric=s.rubric)
    assert again.status == "current"
    assert calls == Counter({"500": 1})  # with its intervals, at once


def slowed(monkeypatch: pytest.MonkeyPatch, name: str, seconds: float) -> None:
    """The compute function ``name`` takes ``seconds`` longer (as on a large database)."""
    original: Callable[..., Any] = getattr(report_store, name)

    def slow(*args: Any, **kwargs: Any) -> Any:
        time.sleep(seconds)
        return original(*args, **kwargs)

    monkeypatch.setattr(report_store, name, slow)


def test_one_page_run_computes_at_once_only_what_fits_in_its_budget(
    servers: Servers, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each report was quick (0.3 s, under the 2 s a report may take), but a page showing
    them all must not wait for all: within a run's budget of 0.5 s the first is computed
    at once, the next show their last figures while jobs compute them."""
    monkeypatch.setenv(report_store.INLINE_ROWS_ENV, "0")  # as on a large database
    s = servers
    for name in ("break_rate_estimate", "coverage_curve", "few_shot_material"):
        slowed(monkeypatch, name, 0.3)

    def parts(engine: Engine) -> list[report_store.Shown[Any]]:
        return [
            report_store.run_estimate(engine, s.owner, rubric=s.rubric, run_id=s.run_id),
            report_store.run_coverage(
                engine, s.owner, rubric=s.rubric, run_id=s.run_id, delta=0.1, alphas=[0.1]
            ),
            report_store.run_few_shot(engine, s.owner, rubric=s.rubric, run_id=s.run_id),
        ]

    first = parts(s.first)  # never computed: at once (no intervals), outside a page run
    assert [shown.status for shown in first] == ["current"] * 3
    _label_again(s.first, s.rubric)
    with page_run.one_token_read(), report_store.page_budget(0.5):
        during_change = parts(s.second)
    # one report computed at once, not three
    assert [shown.status for shown in during_change] == ["current", "stale", "stale"]
    for old, stale in zip(first[1:], during_change[1:], strict=True):
        same(stale.value, old.value)
        assert stale.waiting is not None
    assert jobs.run_worker(s.first, until_idle=True, kinds=[report_jobs.REPORT_JOB]) == 2
    with page_run.one_token_read(), report_store.page_budget(0.5):
        assert [shown.status for shown in parts(s.second)] == ["current"] * 3

    # On data as small as the demo's the page shows current figures, over budget or not
    # (a loaded machine makes the demo's reports slow, not large).
    monkeypatch.setenv(report_store.INLINE_ROWS_ENV, "5000")
    _label_again(s.first, s.rubric)
    with page_run.one_token_read(), report_store.page_budget(0.0):
        assert [shown.status for shown in parts(s.second)] == ["current"] * 3


def test_one_run_reads_each_token_part_once_and_again_after_its_own_commit(
    servers: Servers, monkeypatch: pytest.MonkeyPatch
) -> None:
    s = servers
    for ask in (report_store.judge_calibration, report_store.drift):
        ask(s.first, s.owner, rubric=s.rubric)  # computed and stored (commits) first
    before = report_store.open_disagreements(s.first, s.owner, rubric=s.rubric)
    reads: list[int] = []
    label_token = storage.units.label_token

    def counting(session: Session, **where: Any) -> Any:
        reads.append(1)
        return label_token(session, **where)

    monkeypatch.setattr(storage.units, "label_token", counting)
    report_store.judge_calibration(s.first, s.owner, rubric=s.rubric)
    report_store.drift(s.first, s.owner, rubric=s.rubric)
    assert len(reads) == 2  # outside a page run: every report reads its token

    with page_run.one_token_read():  # one run of a page
        report_store.judge_calibration(s.first, s.owner, rubric=s.rubric)
        report_store.drift(s.first, s.owner, rubric=s.rubric)
        assert report_store.open_disagreements(s.first, s.owner, rubric=s.rubric) == before
        assert len(reads) == 3
        # The run's own label: its commit forgets the parts read, so the queue asked
        # for next (the adjudicate page's next unit) is of the data with the label.
        _label_again(s.first, s.rubric)
        after = report_store.open_disagreements(s.first, s.owner, rubric=s.rubric)
        assert len(reads) == 4
        same(after, disagreement_queue(s.first, s.owner, rubric=s.rubric))
        assert after != before

    with page_run.one_token_read():  # the next run, after a label stored elsewhere
        _label_again(s.second, s.rubric)
        same(
            report_store.open_disagreements(s.first, s.owner, rubric=s.rubric),
            disagreement_queue(s.first, s.owner, rubric=s.rubric),
        )


def test_payloads_come_back_as_the_objects_stored(servers: Servers) -> None:
    """Every kind of report, through the table of this backend and a second engine."""
    s = servers
    computed = {
        "agreement": dashboard_data(s.first, s.owner, rubric=s.rubric, n_resamples=500),
        "judge_report": calibration_report(s.first, s.owner, rubric=s.rubric, n_resamples=500),
        "drift": drift_report(s.first, s.owner, rubric=s.rubric, n_resamples=300),
        "estimate": break_rate_estimate(s.first, s.owner, rubric=s.rubric, run_id=s.run_id),
        "coverage": coverage_curve(
            s.first,
            s.owner,
            rubric=s.rubric,
            run_ids=[s.run_id],
            delta=0.1,
            alphas=[0.01, 0.1, 0.3],
            min_units=30,
        ),
        "disagreements": disagreement_queue(
            s.first, s.owner, rubric=s.rubric, include_adjudicated=True
        ),
        "few_shot": few_shot_material(s.first, s.owner, rubric=s.rubric, run_id=s.run_id),
        "reliability": reliability_report(s.first, s.owner, rubric=s.rubric, n_resamples=20),
        "over_time": agreement_over_time_report(s.first, s.owner, rubric=s.rubric),
        "strata": stratified_estimate(
            s.first, s.owner, rubric=s.rubric, run_id=s.run_id, by="position", n_resamples=20
        ),
    }
    assert isinstance(computed["agreement"], DashboardData)
    assert computed["disagreements"] and isinstance(computed["disagreements"][0], DisagreementUnit)
    assert set(computed) == set(report_store.KINDS)
    for kind, value in computed.items():
        same(report_store.decode_report(report_store.encode_report(value)), value, kind)
        with Session(s.first) as session:
            reports.store_report(
                session,
                key=f"test {kind}",
                kind=kind,
                rubric_id=s.rubric.id,
                rubric_version=s.rubric.version,
                token="t",
                payload_json=report_store.encode_report(value),
                seconds=1.5,
                now=datetime.now(UTC),
            )
            session.commit()
        with Session(s.second) as session:
            text = reports.stored_payload(session, key=f"test {kind}", token="t")
        assert text is not None
        same(report_store.decode_report(text), value, kind)


def test_the_payload_keeps_what_plain_json_would_lose() -> None:
    value = {
        "tuple": (1, ("a", None), []),
        "numbers": [float("nan"), float("inf"), -float("inf"), -0.0, 0.1 + 0.2, 10**30],
        "numpy": [np.float64(0.25), np.int64(7), np.bool_(True)],
        "int keys": {1: "one", (2, 3): "pair", None: "none"},
        "dollar keys": {"$tuple": [1], "plain": 2},
        "text": "Ünïcode ☃ \u0000 \n",
        "when": datetime(2026, 12, 9, 10, 0, 1, 5, tzinfo=UTC),
        "unit": DisagreementUnit("c", 2, ("reviewers_differ",), 3, ("a", "b"), None),
    }
    same(report_store.decode_report(report_store.encode_report(value)), value)
    with pytest.raises(TypeError, match="set"):
        report_store.encode_report({"codes": {"a", "b"}})

    @dataclass(frozen=True)
    class Unknown:
        x: int

    with pytest.raises(TypeError, match="Unknown"):
        report_store.encode_report([Unknown(1)])


def test_two_servers_storing_one_key_at_once_both_succeed(database: Database) -> None:
    engines = [database.engine, create_database_engine(database.url)]
    barrier = threading.Barrier(len(engines))
    errors: list[BaseException] = []

    def store(engine: Engine, name: str) -> None:
        try:
            for round_ in range(20):
                barrier.wait(timeout=30)
                with Session(engine) as session:
                    reports.store_report(
                        session,
                        key="agreement role-adherence@1 {}",
                        kind="agreement",
                        rubric_id="role-adherence",
                        rubric_version=1,
                        token=f"{name}-{round_}",
                        payload_json=f'"{name}"',
                        seconds=0.5,
                        now=datetime.now(UTC),
                    )
                    session.commit()
        except BaseException as error:
            errors.append(error)
            barrier.abort()

    threads = [
        threading.Thread(target=store, args=(engine, f"server{i}"))
        for i, engine in enumerate(engines)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    engines[1].dispose()
    assert errors == []
    with Session(database.engine) as session:
        (row,) = reports.report_rows(session)
    assert row.token in ("server0-19", "server1-19")
    assert row.payload_json == f'"{row.token.split("-")[0]}"'


def test_a_report_read_again_on_one_server_is_decoded_once(
    servers: Servers, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A page's reruns read the same stored report: decoding it (a tenth of a second for
    # the disagreements of 2,000 labeled conversations) is done once per key and token.
    decoded: list[int] = []
    original = report_store.decode_report

    def counting(text: str) -> Any:
        decoded.append(len(text))
        return original(text)

    monkeypatch.setattr(report_store, "decode_report", counting)
    first = report_store.open_disagreements(servers.first, servers.owner, rubric=servers.rubric)
    reads = [
        report_store.open_disagreements(servers.first, servers.owner, rubric=servers.rubric)
        for _ in range(3)
    ]
    assert len(decoded) == 1, decoded
    assert all(read is reads[0] for read in reads)
    same(reads[0], first)
    # another server decodes its own; a new label is a new token: decoded again
    report_store.open_disagreements(servers.second, servers.owner, rubric=servers.rubric)
    assert len(decoded) == 2
    _label_again(servers.first, servers.rubric)
    report_store.open_disagreements(servers.second, servers.owner, rubric=servers.rubric)
    report_store.open_disagreements(servers.first, servers.owner, rubric=servers.rubric)
    assert len(decoded) == 3  # computed and stored by the second, read by the first
