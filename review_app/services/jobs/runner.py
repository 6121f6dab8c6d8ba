"""Background jobs: judge runs and heavy reports, run off the page by a worker holding
a lease.

A policy owner (or admin) starts a job (:func:`start_judge_job`); it is stored
``queued`` with its parameters (rubric, prompt, endpoint NAME, cases: never a key).
A worker (:func:`run_worker`: a thread of each ``serve`` process, or ``review-app
jobs work``) claims it atomically (storage/jobs.py), renews its lease with a
heartbeat that also records progress, runs it as the person who started it (their
role is checked again), and honours a Stop (:func:`stop_job`). If the worker dies its
lease runs out and another worker resumes the job; a judge run asks only the units
not answered yet, so nothing stored is asked twice. A report job (:data:`REPORT_JOB`,
queued by review_app/services/reports/report_store.py when a page shows a report without its
intervals, or its figures from before the latest change) computes the report for the
data as it is and stores it in the reports table. Each server runs one worker for
judge runs (a thread) and one for reports (a child process: review_app/ui/launch.py), so
a report never waits behind a long judge run nor slows the pages down. The report worker
deletes finished report jobs after a week, or beyond the newest five of their report
(:data:`REPORT_JOBS_KEEP_DAYS`); judge runs are kept.
docs/reference.md, "Background jobs" and "Computed reports".
"""

from __future__ import annotations

import json
import logging
import os
import socket
import threading
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from sqlalchemy import Engine
from sqlmodel import Session

from review_app.errors import DatabaseBusy, InputError, NotFound, PermissionDenied
from review_app.services.access.actors import Actor, authorize, operator_actor
from storage import audit
from storage import jobs as job_storage
from storage.engine import read_only
from storage.models import BackgroundJob

log = logging.getLogger(__name__)

JUDGE_RUN = "judge_run"
REPORT_JOB = "report"
ALIGN_JOB = "judge_align"
"""A prompt suggested by an optimiser and confirmed on held-out gold
(review_app/services/judging/align.py)."""
GOLD_SCOPE = "gold"
"""A judge-run job's ``scope`` asking the units with gold only (the workbench's run)."""
LEASE_SECONDS = 60.0
"""A worker renews its lease every second (every third of a shorter lease); another may
take the job over once this long passed without a heartbeat."""
POLL_SECONDS = 2.0
REPORT_JOBS_KEEP_DAYS = 7
REPORT_JOBS_KEEP_PER_KEY = 5
"""A finished report job (done, failed or stopped) is deleted once it finished more than
:data:`REPORT_JOBS_KEEP_DAYS` days ago, or when :data:`REPORT_JOBS_KEEP_PER_KEY` newer
finished jobs of its report key (the report, rubric version and parameters; any token)
exist: each change of the data queues one per slow report, and nothing reads the old
ones. Judge runs are people's history (and named in the audit log): never deleted."""


@dataclass(frozen=True)
class JobView:
    """A job as the faces show it (no secrets are ever in a job)."""

    id: int
    kind: str
    status: str
    parameters: dict[str, Any]
    created_by: str
    created_at: str
    started_at: str | None
    finished_at: str | None
    done: int
    total: int | None
    error: str | None
    result: dict[str, Any] | None
    lease_owner: str | None
    claims: int

    @property
    def fraction(self) -> float:
        """Progress from 0 to 1 (0 until the total is known)."""
        return min(1.0, self.done / self.total) if self.total else 0.0

    @property
    def finished(self) -> bool:
        return self.status in job_storage.FINISHED

    @property
    def failures(self) -> str | None:
        """``3 of 84 failed at the endpoint`` for a judge run some of whose requests failed
        (``None`` when none did, or for another kind of job)."""
        result = self.result or {}
        failed = result.get("endpoint_errors")
        if self.kind != JUDGE_RUN or not isinstance(failed, int) or not failed:
            return None
        asked = sum(
            int(result.get(key) or 0) for key in ("answered", "answer_errors", "endpoint_errors")
        )
        return f"{failed} of {asked} failed at the endpoint"

    def to_dict(self) -> dict[str, Any]:
        return {**self.__dict__, "fraction": self.fraction, "failures": self.failures}

    def line(self) -> str:
        progress = f"{self.done}/{self.total}" if self.total is not None else f"{self.done}/?"
        what = " ".join(
            f"{key}={self.parameters[key]}"
            for key in ("rubric", "prompt", "endpoint", "optimizer", "scope")
            if self.parameters.get(key)
        )
        tail = f"  {self.failures}" if self.failures and self.status == "done" else ""
        tail += f"  error: {self.error}" if self.error else ""
        return (
            f"{self.id:>4}  {self.kind:<10} {self.status:<9} {progress:>11}  "
            f"{self.created_by:<16} {what}{tail}"
        )


def _time(value: datetime | None) -> str | None:
    return None if value is None else value.astimezone(UTC).isoformat(timespec="seconds")


def _view(job: BackgroundJob) -> JobView:
    assert job.id is not None
    return JobView(
        id=job.id,
        kind=job.kind,
        status=job.status,
        parameters=json.loads(job.parameters_json),
        created_by=job.created_by,
        created_at=_time(job.created_at) or "",
        started_at=_time(job.started_at),
        finished_at=_time(job.finished_at),
        done=job.progress_done,
        total=job.progress_total,
        error=job.error,
        result=json.loads(job.result_json) if job.result_json else None,
        lease_owner=job.lease_owner,
        claims=job.claims,
    )


def _now() -> datetime:
    return datetime.now(UTC)


# --- starting, reading, stopping ----------------------------------------------------------


def start_judge_job(
    engine: Engine,
    actor: Actor,
    *,
    rubric: str,
    prompt: str,
    endpoint: str,
    judge: str | None = None,
    case_ids: Sequence[str] | None = None,
    lane: str | None = None,
    limit: int | None = None,
    scope: str | None = None,
    retries: int = 3,
    timeout: float = 120.0,
    max_tokens: int = 300,
) -> JobView:
    """Queue a judge run of ``prompt`` (``judge@vN``) on ``rubric`` (``id@version``) at the
    endpoint called ``endpoint``; a worker runs it. The job stores the endpoint's name,
    never its key (read when the job runs). ``scope`` ``gold`` asks only the units with
    gold when the job runs (:data:`GOLD_SCOPE`); else every turn of the chosen cases."""
    from review_app.services.judging.endpoints import find_endpoint

    actor = authorize(engine, actor, "policy_owner")
    find_endpoint(endpoint)  # refuse an unknown name now, not in the worker
    chosen, template = _resolve(engine, actor, rubric=rubric, prompt=prompt, judge=judge)
    if limit is not None and limit < 1:
        raise InputError("--limit is at least 1", field="--limit")
    if scope not in (None, GOLD_SCOPE):
        raise InputError(f"scope is {GOLD_SCOPE!r} or none, got {scope!r}", field="scope")
    parameters: dict[str, Any] = {
        "rubric": chosen.ref,
        "prompt": template.ref,
        "prompt_source": _prompt_source(prompt),
        "judge": judge,
        "endpoint": endpoint,
        "case_ids": list(case_ids) if case_ids else None,
        "lane": lane,
        "limit": limit,
        "scope": scope,
        "retries": retries,
        "timeout": timeout,
        "max_tokens": max_tokens,
    }
    parameters_json = json.dumps(parameters, sort_keys=True)
    with Session(engine) as session:
        same = job_storage.unfinished_same(session, kind=JUDGE_RUN, parameters_json=parameters_json)
        if same is not None:
            # Two workers would ask the same units at once; one job does the run.
            raise InputError(
                f"job {same} already runs this judge on these cases; wait for it or stop it",
                field="--background",
            )
        job = job_storage.add_job(
            session,
            kind=JUDGE_RUN,
            parameters_json=parameters_json,
            created_by=actor.name,
            created_by_id=actor.reviewer_id,
            now=_now(),
        )
        audit.add_entry(
            session,
            actor=actor.name,
            action="job_start",
            object_type="background_job",
            object_key=str(job.id),
            summary={"kind": JUDGE_RUN, **parameters},
        )
        session.commit()
        return _view(job)


def add_job_row(
    session: Session, actor: Actor, *, kind: str, parameters: dict[str, Any]
) -> JobView:
    """Store a queued job of ``kind`` with its audit entry in ``session`` (the caller
    authorized ``actor`` and commits)."""
    job = job_storage.add_job(
        session,
        kind=kind,
        parameters_json=json.dumps(parameters, sort_keys=True),
        created_by=actor.name,
        created_by_id=actor.reviewer_id,
        now=_now(),
    )
    audit.add_entry(
        session,
        actor=actor.name,
        action="job_start",
        object_type="background_job",
        object_key=str(job.id),
        summary={"kind": kind, **{k: v for k, v in parameters.items() if k != "sets"}},
    )
    return _view(job)


def queue_report_job(engine: Engine, actor: Actor, *, parameters: dict[str, Any]) -> JobView:
    """Queue a report job for ``parameters`` (report, rubric, parameters, token),
    unless one with the same parameters is queued or running: then that one. Called by
    review_app/services/reports/report_store.py for the person looking at the report (a policy
    owner or admin); no audit entry (it changes no data, and report keys carry no
    secrets)."""
    actor = authorize(engine, actor, "policy_owner")
    parameters_json = json.dumps(parameters, sort_keys=True)
    with Session(engine) as session:
        job_storage.lock_job_parameters(session, kind=REPORT_JOB, parameters_json=parameters_json)
        same = job_storage.unfinished_same(
            session, kind=REPORT_JOB, parameters_json=parameters_json
        )
        if same is not None:
            session.rollback()
            return job_status(engine, actor, job_id=same)
        job = job_storage.add_job(
            session,
            kind=REPORT_JOB,
            parameters_json=parameters_json,
            created_by=actor.name,
            created_by_id=actor.reviewer_id,
            now=_now(),
        )
        session.commit()
        return _view(job)


def latest_report_job(
    engine: Engine, actor: Actor, *, parameters: dict[str, Any]
) -> tuple[int, str, str | None] | None:
    """``(id, status, error)`` of the newest report job with ``parameters``."""
    authorize(engine, actor, "policy_owner")
    with Session(read_only(engine)) as session:
        return job_storage.latest_same(
            session, kind=REPORT_JOB, parameters_json=json.dumps(parameters, sort_keys=True)
        )


def _prompt_source(given: str) -> str:
    """What the worker resolves again: ``judge@vN``, or a template's absolute path."""
    path = Path(given)
    return str(path.resolve()) if path.suffix == ".txt" and path.exists() else given


def _resolve(
    engine: Engine, actor: Actor, *, rubric: str, prompt: str, judge: str | None
) -> tuple[Any, Any]:
    """The rubric version and the judge prompt a job names (read again when it runs): a
    stored ``judge@vN`` (made in the page or from a file) or a template file's path."""
    from review_app.services.judging.judge_prompts import prompt_for_run
    from review_app.services.rubrics.rubric_catalog import sync_rubrics

    chosen = sync_rubrics(engine, actor).get(rubric)
    template = prompt_for_run(engine, actor, rubric=chosen, ref=_prompt_source(prompt), judge=judge)
    return chosen, template


def job_status(engine: Engine, actor: Actor, *, job_id: int) -> JobView:
    """One job: status, progress (done / total), error, result."""
    authorize(engine, actor, "policy_owner")
    with Session(read_only(engine)) as session:
        job = job_storage.get_job(session, job_id=job_id)
        if job is None:
            raise NotFound(f"no job {job_id}")
        return _view(job)


def list_jobs(
    engine: Engine, actor: Actor, *, limit: int = 50, kinds: Sequence[str] | None = None
) -> list[JobView]:
    """The latest jobs (of ``kinds``), newest first."""
    authorize(engine, actor, "policy_owner")
    with Session(read_only(engine)) as session:
        return [_view(job) for job in job_storage.list_jobs(session, limit=limit, kinds=kinds)]


def stop_job(engine: Engine, actor: Actor, *, job_id: int) -> JobView:
    """Ask a job to stop: a queued one stops at once; a running one stops within a few
    seconds (its worker stores the answers it has and leaves the run resumable)."""
    actor = authorize(engine, actor, "policy_owner")
    with Session(engine) as session:
        status = job_storage.request_stop(session, job_id=job_id, now=_now())
        if status is None:
            raise NotFound(f"no job {job_id}")
        audit.add_entry(
            session,
            actor=actor.name,
            action="job_stop",
            object_type="background_job",
            object_key=str(job_id),
            summary={"status": status},
        )
        session.commit()
    return job_status(engine, actor, job_id=job_id)


# --- the worker ---------------------------------------------------------------------------


def worker_name() -> str:
    """This worker's lease owner: host, process id and a random tag."""
    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"


def run_worker(
    engine: Engine,
    *,
    owner: str | None = None,
    lease_seconds: float = LEASE_SECONDS,
    poll_seconds: float = POLL_SECONDS,
    until_idle: bool = False,
    stop_event: threading.Event | None = None,
    on_claim: Callable[[JobView], None] | None = None,
    kinds: Sequence[str] | None = None,
) -> int:
    """Claim and run jobs (of ``kinds``; default every kind) until ``stop_event`` is set
    (or, ``until_idle``, none is left).

    Each job runs as the person who started it, authorized again. Returns how many
    jobs this worker ran.
    """
    owner = owner or worker_name()
    stop_event = stop_event or threading.Event()
    ran = 0
    while not stop_event.is_set():
        with Session(engine) as session:
            job = job_storage.claim_next(
                session, owner=owner, now=_now(), lease_seconds=lease_seconds, kinds=kinds
            )
            view = None if job is None else _view(job)
        if view is None:
            if until_idle and not _any_waiting(engine, kinds):
                return ran
            stop_event.wait(poll_seconds)
            continue
        ran += 1
        if on_claim is not None:
            on_claim(view)
        _execute(engine, view, owner=owner, lease_seconds=lease_seconds)
    return ran


def _any_waiting(engine: Engine, kinds: Sequence[str] | None) -> bool:
    """Whether a job is queued or running under someone else's lease (it may expire)."""
    with Session(read_only(engine)) as session:
        return any(
            job.status in ("queued", *job_storage.ACTIVE)
            for job in job_storage.list_jobs(session, limit=1000, kinds=kinds)
        )


class _Beat:
    """The job's heartbeat thread: renews the lease, records progress, sees a Stop."""

    def __init__(self, engine: Engine, job_id: int, owner: str, lease_seconds: float) -> None:
        self.engine, self.job_id, self.owner = engine, job_id, owner
        self.lease_seconds = lease_seconds
        self.done: int = 0
        self.total: int | None = None
        self.stop_requested = threading.Event()
        self.lost = threading.Event()
        self.finished = threading.Event()
        self.thread = threading.Thread(target=self._loop, name=f"job-{job_id}-beat", daemon=True)

    def progress(self, done: int, total: int) -> None:
        self.done, self.total = done, total

    def should_stop(self) -> bool:
        return self.stop_requested.is_set() or self.lost.is_set()

    def beat(self) -> None:
        try:
            with Session(self.engine) as session:
                status = job_storage.heartbeat(
                    session,
                    job_id=self.job_id,
                    owner=self.owner,
                    now=_now(),
                    lease_seconds=self.lease_seconds,
                    done=self.done,
                    total=self.total,
                )
        except Exception:  # a busy database: try again at the next beat
            log.exception("job %s: heartbeat failed", self.job_id)
            return
        if status is None:
            self.lost.set()
        elif status == "stopping":
            self.stop_requested.set()

    def _loop(self) -> None:
        # Each second (or each third of a shorter lease): a Stop is seen within about a
        # second, and the lease is renewed long before it runs out.
        while not self.finished.wait(max(0.2, min(1.0, self.lease_seconds / 3))):
            self.beat()

    def __enter__(self) -> _Beat:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.finished.set()
        self.thread.join(timeout=30)


def _job_actor(engine: Engine, view: JobView) -> Actor:
    from review_app.services.access.actors import actor_for_job

    with Session(read_only(engine)) as session:
        job = job_storage.get_job(session, job_id=view.id)
        reviewer_id = None if job is None else job.created_by_id
    if reviewer_id is None:
        return operator_actor()
    return actor_for_job(engine, reviewer_id=reviewer_id)


def _execute(engine: Engine, view: JobView, *, owner: str, lease_seconds: float) -> None:
    def finish(status: str, **values: Any) -> None:
        with Session(engine) as session:
            job_storage.finish(
                session, job_id=view.id, owner=owner, now=_now(), status=status, **values
            )

    if view.status == "stopping":  # stop requested, then its worker died
        finish("stopped")
        return
    if view.kind == REPORT_JOB:
        _execute_report_job(engine, view, owner=owner, lease_seconds=lease_seconds)
        return
    if view.kind == ALIGN_JOB:
        _execute_align_job(engine, view, owner=owner, lease_seconds=lease_seconds)
        return
    if view.kind != JUDGE_RUN:
        finish("failed", error=f"unknown job kind {view.kind!r}")
        return
    with _Beat(engine, view.id, owner, lease_seconds) as beat:
        try:
            summary = _run_judge_job(engine, view, beat)
        except (InputError, NotFound, PermissionDenied) as error:
            finish("failed", error=str(error), done=beat.done, total=beat.total)
            return
        except Exception as error:  # never a key: settings are not in the message
            log.exception("job %s failed", view.id)
            finish(
                "failed", error=f"{type(error).__name__}: {error}", done=beat.done, total=beat.total
            )
            return
    if beat.lost.is_set():
        return  # another worker holds the job now
    if summary.stopped:
        status = "stopped"
    elif summary.all_failed:
        status = "failed"  # the first error says why; the counts are in the result
    else:
        status = "done"  # any failures are counted in the result ("k of n failed")
    finish(
        status,
        result_json=json.dumps(summary.to_dict(), sort_keys=True),
        done=summary.skipped + summary.answered + summary.answer_errors + summary.endpoint_errors,
        total=summary.units,
        error=f"every request failed at the endpoint; the first: {summary.first_error}"
        if status == "failed"
        else None,
    )


def _execute_report_job(engine: Engine, view: JobView, *, owner: str, lease_seconds: float) -> None:
    from review_app.services.reports.report_store import compute_report

    def finish(status: str, **values: Any) -> None:
        with Session(engine) as session:
            job_storage.finish(
                session, job_id=view.id, owner=owner, now=_now(), status=status, **values
            )
        _prune_report_jobs(engine, view.parameters)

    with _Beat(engine, view.id, owner, lease_seconds) as beat:
        beat.progress(0, 1)
        try:
            result = compute_report(engine, _job_actor(engine, view), parameters=view.parameters)
        except (InputError, NotFound, PermissionDenied) as error:
            finish("failed", error=str(error), done=0, total=1)
            return
        except Exception as error:
            log.exception("job %s failed", view.id)
            finish("failed", error=f"{type(error).__name__}: {error}", done=0, total=1)
            return
    if beat.lost.is_set():
        return  # another worker holds the job now (it finds the stored report)
    finish("done", result_json=json.dumps(result.to_dict(), sort_keys=True), done=1, total=1)


def _execute_align_job(engine: Engine, view: JobView, *, owner: str, lease_seconds: float) -> None:
    from review_app.services.judging.align import run_align_job

    def finish(status: str, **values: Any) -> None:
        with Session(engine) as session:
            job_storage.finish(
                session, job_id=view.id, owner=owner, now=_now(), status=status, **values
            )

    with _Beat(engine, view.id, owner, lease_seconds) as beat:
        try:
            result = run_align_job(
                engine,
                _job_actor(engine, view),
                job_id=view.id,
                parameters=view.parameters,
                stop=beat.should_stop,
                progress=beat.progress,
            )
        except (InputError, NotFound, PermissionDenied) as error:
            finish("failed", error=str(error), done=beat.done, total=beat.total)
            return
        except Exception as error:  # never a key: settings are not in the message
            log.exception("job %s failed", view.id)
            finish(
                "failed", error=f"{type(error).__name__}: {error}", done=beat.done, total=beat.total
            )
            return
    if beat.lost.is_set():
        return  # another worker holds the job now
    finish(
        "stopped" if result.get("stopped") else "done",
        result_json=json.dumps(result, sort_keys=True),
        done=beat.done,
        total=beat.total,
    )


def _report_key_prefix(parameters: dict[str, Any]) -> str | None:
    """The start of the parameters text of every report job of the same report key as
    ``parameters`` (whatever its token), or ``None`` if the token is not its last key."""
    text = json.dumps({**parameters, "token": None}, sort_keys=True)
    tail = "null}"
    if not text.endswith(', "token": ' + tail):
        return None
    return text[: -len(tail)]


def _prune_report_jobs(engine: Engine, parameters: dict[str, Any]) -> None:
    """Delete the finished report jobs past the retention (:data:`REPORT_JOBS_KEEP_DAYS`,
    :data:`REPORT_JOBS_KEEP_PER_KEY`): after each report job ends, in the report worker."""
    try:
        with Session(engine) as session:
            job_storage.prune_finished(
                session,
                kind=REPORT_JOB,
                finished_before=_now() - timedelta(days=REPORT_JOBS_KEEP_DAYS),
                key_prefix=_report_key_prefix(parameters),
                keep=REPORT_JOBS_KEEP_PER_KEY,
            )
            session.commit()
    except DatabaseBusy:  # the next report job prunes them
        log.warning("finished report jobs not pruned: the database is busy")
    except Exception:  # housekeeping: never stops the worker
        log.exception("finished report jobs not pruned")


def _run_judge_job(engine: Engine, view: JobView, beat: _Beat) -> Any:
    from review_app.services.judging.endpoints import endpoint_settings
    from review_app.services.judging.judge_runner import run_judge, select_case_ids

    parameters = view.parameters
    actor = _job_actor(engine, view)
    chosen, template = _resolve(
        engine,
        actor,
        rubric=parameters["rubric"],
        prompt=parameters.get("prompt_source") or parameters["prompt"],
        judge=parameters.get("judge"),
    )
    settings = endpoint_settings(
        parameters["endpoint"],
        retries=parameters.get("retries", 3),
        timeout=parameters.get("timeout", 120.0),
        max_tokens=parameters.get("max_tokens", 300),
    )
    units: list[tuple[str, int]] | None = None
    if parameters.get("scope") == GOLD_SCOPE:
        from review_app.services.labels.adjudication import gold_labels

        units = sorted(gold_labels(engine, actor, rubric=chosen).labels)
        case_ids = sorted({case_id for case_id, _ in units})
    else:
        case_ids = select_case_ids(
            engine,
            case_ids=parameters.get("case_ids"),
            lane=parameters.get("lane"),
            limit=parameters.get("limit"),
        )
    skipped: list[int] = [0]

    def counted(units: int, already: int) -> None:
        skipped[0] = already
        beat.progress(already, units)

    def progress(done: int, total: int) -> None:
        beat.progress(skipped[0] + done, skipped[0] + total)

    summary = run_judge(
        engine,
        actor,
        rubric=chosen,
        prompt=template,
        settings=settings,
        case_ids=case_ids,
        units=units,
        scope=scope_words(parameters),
        progress=progress,
        stop=beat.should_stop,
        counted=counted,
    )
    return summary


def scope_words(parameters: dict[str, Any]) -> str:
    """What a judge-run job asks, in words (kept with the run's summary)."""
    if parameters.get("scope") == GOLD_SCOPE:
        return "the gold units"
    if parameters.get("case_ids"):
        return f"{len(parameters['case_ids'])} chosen conversations"
    if parameters.get("lane") or parameters.get("limit"):
        return "the chosen conversations"
    return "every turn"


# --- one worker per server process ----------------------------------------------------------

_process_worker: dict[str, threading.Thread] = {}
_process_worker_lock = threading.Lock()


def start_process_worker(
    engine: Engine,
    *,
    url: str,
    lease_seconds: float = LEASE_SECONDS,
    kinds: Sequence[str] = (JUDGE_RUN,),
) -> bool:
    """Start this process's worker thread for jobs of ``kinds`` on the database at ``url``
    once (a daemon thread: it lives as long as the process, across page reruns and
    reloads). Whether it was started by this call. ``serve`` runs one for judge runs (they
    wait on the endpoint, not the processor); report jobs compute for seconds to minutes
    in Python, so ``serve`` runs their worker in a child process
    (review_app/ui/launch.py), where it does not slow the pages down."""
    name = f"{url} {','.join(kinds)}"
    with _process_worker_lock:
        thread = _process_worker.get(name)
        if thread is not None and thread.is_alive():
            return False
        thread = threading.Thread(
            target=_worker_forever,
            args=(engine, lease_seconds, tuple(kinds)),
            name=f"review-app-jobs ({', '.join(kinds)})",
            daemon=True,
        )
        _process_worker[name] = thread
        thread.start()
        return True


def _worker_forever(engine: Engine, lease_seconds: float, kinds: Sequence[str]) -> None:
    while True:
        try:
            run_worker(
                engine,
                lease_seconds=lease_seconds,
                poll_seconds=min(POLL_SECONDS, lease_seconds / 3),
                kinds=kinds,
            )
        except Exception:  # a lost database connection: wait, then poll again
            log.exception("the job worker stopped; restarting it")
            time.sleep(POLL_SECONDS * 5)
