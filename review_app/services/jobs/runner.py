"""Background jobs: work run off the page by a worker holding a lease.

A service queues a job (:func:`add_job_row`) of a kind registered here
(:func:`register_job_kind`): judging registers judge runs and prompt alignment
(review_app/services/judging/judge_jobs.py, align.py), reports register report jobs
(review_app/services/reports/report_store.py). A job is stored ``queued`` with its
parameters (never a key). A worker (:func:`run_worker`: a thread or child process of each
``serve`` process, or ``review-app jobs work``) claims one atomically (storage/jobs.py)
among the kinds it knows, renews its lease with a heartbeat (:class:`Heartbeat`) that
also records progress and sees a Stop (:func:`stop_job`), and runs it as the person who
started it (their role is checked again) with the kind's handler. If the worker dies its
lease runs out and another worker resumes the job: each kind's handler makes a second
claim safe (a judge run asks only the units not answered yet). The kinds that import this
module never leave it: it knows no kind by name.
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
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import Engine
from sqlmodel import Session

from review_app.errors import InputError, NotFound, PermissionDenied
from review_app.services.access.actors import Actor, actor_for_job, authorize, operator_actor
from storage import audit
from storage import jobs as job_storage
from storage.engine import read_only
from storage.models import BackgroundJob

log = logging.getLogger(__name__)

LEASE_SECONDS = 60.0
"""A worker renews its lease every second (every third of a shorter lease); another may
take the job over once this long passed without a heartbeat."""
POLL_SECONDS = 2.0


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
        """``3 of 84 failed at the endpoint`` for a job some of whose requests to a judge
        endpoint failed (its result counts ``endpoint_errors``; ``None`` when none did)."""
        result = self.result or {}
        failed = result.get("endpoint_errors")
        if not isinstance(failed, int) or not failed:
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


def job_view(job: BackgroundJob) -> JobView:
    """A stored job row as the faces show it."""
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
    return job_view(job)


def job_status(engine: Engine, actor: Actor, *, job_id: int) -> JobView:
    """One job: status, progress (done / total), error, result."""
    authorize(engine, actor, "policy_owner")
    with Session(read_only(engine)) as session:
        job = job_storage.get_job(session, job_id=job_id)
        if job is None:
            raise NotFound(f"no job {job_id}")
        return job_view(job)


def list_jobs(
    engine: Engine, actor: Actor, *, limit: int = 50, kinds: Sequence[str] | None = None
) -> list[JobView]:
    """The latest jobs (of ``kinds``), newest first."""
    authorize(engine, actor, "policy_owner")
    with Session(read_only(engine)) as session:
        return [job_view(job) for job in job_storage.list_jobs(session, limit=limit, kinds=kinds)]


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
    """Claim and run jobs (of ``kinds``; by default every kind registered in this process,
    :func:`registered_kinds`: a worker never claims a job it cannot run) until
    ``stop_event`` is set (or, ``until_idle``, none is left).

    Each job runs as the person who started it, authorized again. Returns how many
    jobs this worker ran.
    """
    owner = owner or worker_name()
    stop_event = stop_event or threading.Event()
    kinds = _runnable(kinds)
    ran = 0
    while not stop_event.is_set():
        with Session(engine) as session:
            job = job_storage.claim_next(
                session, owner=owner, now=_now(), lease_seconds=lease_seconds, kinds=kinds
            )
            view = None if job is None else job_view(job)
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


def _runnable(kinds: Sequence[str] | None) -> tuple[str, ...]:
    """``kinds`` (by default every registered kind), refused if one is not registered in
    this process: a worker would claim its jobs and fail them."""
    known = registered_kinds()
    if kinds is None:
        return known
    unknown = sorted(set(kinds) - set(known))
    if unknown:
        raise ValueError(
            f"job kinds not registered in this process: {', '.join(unknown)} "
            "(import review_app.services.job_kinds)"
        )
    return tuple(kinds)


def _any_waiting(engine: Engine, kinds: Sequence[str] | None) -> bool:
    """Whether a job is queued or running under someone else's lease (it may expire)."""
    with Session(read_only(engine)) as session:
        return any(
            job.status in ("queued", *job_storage.ACTIVE)
            for job in job_storage.list_jobs(session, limit=1000, kinds=kinds)
        )


class Heartbeat:
    """A running job's heartbeat thread: renews the lease, records progress, sees a Stop.

    A kind's handler reports progress with :meth:`progress` and asks :meth:`should_stop`
    between units of work."""

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

    def __enter__(self) -> Heartbeat:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.finished.set()
        self.thread.join(timeout=30)


# --- job kinds -------------------------------------------------------------------------------


@dataclass(frozen=True)
class JobOutcome:
    """How a job ended, as its kind's handler says: stored with the job."""

    status: str
    """``done``, ``stopped`` or ``failed``."""
    result: dict[str, Any] | None = None
    done: int | None = None
    total: int | None = None
    error: str | None = None


JobHandler = Callable[[Engine, Actor, "JobView", Heartbeat], JobOutcome]
"""Runs one claimed job as the person who started it (authorized again by the handler's
services). Raises ``InputError``, ``NotFound`` or ``PermissionDenied`` for a job that
cannot run (stored as its error); any other exception is stored with its type name."""


@dataclass(frozen=True)
class JobKind:
    """A kind of job and how a worker runs it."""

    name: str
    handler: JobHandler
    after: Callable[[Engine, JobView], None] | None = None
    """Housekeeping once a job of the kind has finished, whatever its outcome (report
    jobs prune the old ones); its failures are logged, never raised."""


_KINDS: dict[str, JobKind] = {}
_KINDS_LOCK = threading.Lock()


def register_job_kind(kind: JobKind) -> JobKind:
    """Make ``kind`` runnable by this process's workers (called once, when the module that
    queues jobs of the kind is imported). Registering another handler under a name
    already taken is refused."""
    with _KINDS_LOCK:
        known = _KINDS.get(kind.name)
        if known is not None and known != kind:
            raise ValueError(f"job kind {kind.name!r} is already registered")
        _KINDS[kind.name] = kind
    return kind


def registered_kinds() -> tuple[str, ...]:
    """The kinds this process's workers can run, sorted."""
    with _KINDS_LOCK:
        return tuple(sorted(_KINDS))


def job_actor(engine: Engine, view: JobView) -> Actor:
    """The person who started the job, issued for the worker (their current role is read
    again by every service the handler calls); the operator for a job the command line
    started."""
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
    with _KINDS_LOCK:
        kind = _KINDS.get(view.kind)
    if kind is None:
        finish("failed", error=f"unknown job kind {view.kind!r}")
        return
    try:
        _run_kind(engine, view, kind, finish, owner=owner, lease_seconds=lease_seconds)
    finally:
        if kind.after is not None:
            try:
                kind.after(engine, view)
            except Exception:  # housekeeping: never stops the worker
                log.exception("job %s: the housekeeping after it failed", view.id)


def _run_kind(
    engine: Engine,
    view: JobView,
    kind: JobKind,
    finish: Callable[..., None],
    *,
    owner: str,
    lease_seconds: float,
) -> None:
    with Heartbeat(engine, view.id, owner, lease_seconds) as beat:
        try:
            outcome = kind.handler(engine, job_actor(engine, view), view, beat)
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
        outcome.status,
        result_json=None if outcome.result is None else json.dumps(outcome.result, sort_keys=True),
        done=beat.done if outcome.done is None else outcome.done,
        total=beat.total if outcome.total is None else outcome.total,
        error=outcome.error,
    )


# --- one worker per server process ----------------------------------------------------------

_process_worker: dict[str, threading.Thread] = {}
_process_worker_lock = threading.Lock()


def start_process_worker(
    engine: Engine,
    *,
    url: str,
    lease_seconds: float = LEASE_SECONDS,
    kinds: Sequence[str],
) -> bool:
    """Start this process's worker thread for jobs of ``kinds`` on the database at ``url``
    once (a daemon thread: it lives as long as the process, across page reruns and
    reloads). Whether it was started by this call. ``serve`` runs one for judge runs (they
    wait on the endpoint, not the processor); report jobs compute for seconds to minutes
    in Python, so ``serve`` runs their worker in a child process
    (review_app/ui/launch.py), where it does not slow the pages down."""
    kinds = _runnable(kinds)
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
