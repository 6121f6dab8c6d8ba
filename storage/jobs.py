"""Background jobs: enqueue, claim under a lease, heartbeat, stop, finish.

Claiming is one conditional UPDATE per candidate row (``WHERE id = :id AND (status =
'queued' OR the lease ran out)``), kept only when it changed one row. On PostgreSQL
(READ COMMITTED) a second UPDATE of the same row waits for the first to commit, then
re-checks its WHERE against the new row and changes nothing; on SQLite every writing
transaction is ``BEGIN IMMEDIATE`` (storage/engine.py), so claims are serialised. With
several workers on one database each claim thus succeeds for exactly one of them.

Times are the workers' clocks (UTC); servers sharing a database keep them in sync.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta

from sqlalchemy import ColumnElement, Integer, and_, bindparam, case, delete, func, or_, update
from sqlmodel import Session, col, select

from storage.models import BackgroundJob

ACTIVE = ("running", "stopping")
FINISHED = ("stopped", "done", "failed")


def add_job(
    session: Session,
    *,
    kind: str,
    parameters_json: str,
    created_by: str,
    created_by_id: int | None,
    now: datetime,
) -> BackgroundJob:
    job = BackgroundJob(
        kind=kind,
        parameters_json=parameters_json,
        created_by=created_by,
        created_by_id=created_by_id,
        status="queued",
        created_at=now,
    )
    session.add(job)
    session.flush()
    return job


def get_job(session: Session, *, job_id: int) -> BackgroundJob | None:
    return session.get(BackgroundJob, job_id)


def list_jobs(
    session: Session, *, limit: int = 50, kinds: Sequence[str] | None = None
) -> list[BackgroundJob]:
    query = select(BackgroundJob).order_by(col(BackgroundJob.id).desc()).limit(limit)
    if kinds:
        query = query.where(col(BackgroundJob.kind).in_(list(kinds)))
    return list(session.exec(query))


def unfinished_same(session: Session, *, kind: str, parameters_json: str) -> int | None:
    """The id of a queued or running job of ``kind`` with exactly these parameters."""
    found = session.exec(
        select(BackgroundJob.id).where(
            col(BackgroundJob.kind) == kind,
            col(BackgroundJob.status).in_(["queued", *ACTIVE]),
            col(BackgroundJob.parameters_json) == parameters_json,
        )
    ).first()
    return found


def latest_same(
    session: Session, *, kind: str, parameters_json: str
) -> tuple[int, str, str | None] | None:
    """``(id, status, error)`` of the newest job of ``kind`` with exactly these parameters."""
    found = session.execute(
        select(BackgroundJob.id, BackgroundJob.status, BackgroundJob.error)
        .where(
            col(BackgroundJob.kind) == kind,
            col(BackgroundJob.parameters_json) == parameters_json,
        )
        .order_by(col(BackgroundJob.id).desc())
        .limit(1)
    ).first()
    return None if found is None else (int(found[0]), str(found[1]), found[2])


def lock_job_parameters(session: Session, *, kind: str, parameters_json: str) -> None:
    """Until this transaction ends, no other transaction that takes the same lock can
    add a job of ``kind`` with these parameters: check with :func:`unfinished_same`, then
    add. On PostgreSQL a transaction-scoped advisory lock on their hash; SQLite writing
    transactions are serialised already (``BEGIN IMMEDIATE``)."""
    if session.get_bind().dialect.name == "postgresql":
        session.execute(
            select(func.pg_advisory_xact_lock(func.hashtext(kind + "\n" + parameters_json)))
        )


def _claimable(now: datetime) -> ColumnElement[bool]:
    return or_(
        col(BackgroundJob.status) == "queued",
        and_(
            col(BackgroundJob.status).in_(ACTIVE),
            col(BackgroundJob.lease_expires_at) < now,
        ),
    )


def claim_next(
    session: Session,
    *,
    owner: str,
    now: datetime,
    lease_seconds: float,
    kinds: Sequence[str] | None = None,
) -> BackgroundJob | None:
    """The oldest claimable job (of ``kinds``), now leased to ``owner`` (committed);
    ``None`` if none.

    A job found ``stopping`` with an expired lease is claimed as it is (the caller
    finishes it as stopped); any other becomes ``running``.
    """
    query = select(BackgroundJob.id).where(_claimable(now))
    if kinds:
        query = query.where(col(BackgroundJob.kind).in_(list(kinds)))
    candidates = session.exec(query.order_by(col(BackgroundJob.id)).limit(8)).all()
    session.rollback()  # end the reading transaction before the writes
    until = now + timedelta(seconds=lease_seconds)
    for job_id in candidates:
        result = session.execute(
            update(BackgroundJob)
            .where(col(BackgroundJob.id) == job_id, _claimable(now))
            .values(
                status=_still_stopping_or_running(),
                lease_owner=owner,
                lease_expires_at=until,
                heartbeat_at=now,
                started_at=_started_at(now),
                claims=BackgroundJob.claims + 1,
            )
            .execution_options(synchronize_session=False)
        )
        session.commit()
        if result.rowcount == 1:  # type: ignore[attr-defined]
            job = session.get(BackgroundJob, job_id, populate_existing=True)
            if job is not None and job.lease_owner == owner:
                return job
    return None


def _still_stopping_or_running() -> ColumnElement[str]:
    return case((col(BackgroundJob.status) == "stopping", "stopping"), else_="running")


def _started_at(now: datetime) -> ColumnElement[datetime]:
    column = BackgroundJob.__table__.c.started_at  # type: ignore[attr-defined]
    return func.coalesce(column, bindparam("claimed_at", now, type_=column.type))


def heartbeat(
    session: Session,
    *,
    job_id: int,
    owner: str,
    now: datetime,
    lease_seconds: float,
    done: int,
    total: int | None,
) -> str | None:
    """Renew the lease and record progress; the job's status, or ``None`` if the lease
    is no longer ``owner``'s (another worker took the job over)."""
    result = session.execute(
        update(BackgroundJob)
        .where(
            col(BackgroundJob.id) == job_id,
            col(BackgroundJob.lease_owner) == owner,
            col(BackgroundJob.status).in_(ACTIVE),
        )
        .values(
            heartbeat_at=now,
            lease_expires_at=now + timedelta(seconds=lease_seconds),
            progress_done=done,
            progress_total=total,
        )
        .execution_options(synchronize_session=False)
    )
    session.commit()
    if result.rowcount != 1:  # type: ignore[attr-defined]
        return None
    status = session.exec(select(BackgroundJob.status).where(BackgroundJob.id == job_id)).one()
    session.rollback()
    return status


def finish(
    session: Session,
    *,
    job_id: int,
    owner: str,
    now: datetime,
    status: str,
    error: str | None = None,
    result_json: str | None = None,
    done: int | None = None,
    total: int | None = None,
) -> bool:
    """Mark the job finished, if ``owner`` still holds it; whether it did."""
    values: dict[str, object] = {
        "status": status,
        "error": error,
        "result_json": result_json,
        "finished_at": now,
        "lease_expires_at": None,
        "heartbeat_at": now,
    }
    if done is not None:
        values["progress_done"] = done
    if total is not None:
        values["progress_total"] = total
    result = session.execute(
        update(BackgroundJob)
        .where(
            col(BackgroundJob.id) == job_id,
            col(BackgroundJob.lease_owner) == owner,
            col(BackgroundJob.status).in_(ACTIVE),
        )
        .values(**values)
        .execution_options(synchronize_session=False)
    )
    session.commit()
    return bool(result.rowcount == 1)  # type: ignore[attr-defined]


def request_stop(session: Session, *, job_id: int, now: datetime) -> str | None:
    """Ask a job to stop: a queued one is stopped at once, a running one is ``stopping``
    until its worker sees it. The status after the request; ``None``: no such job."""
    session.execute(
        update(BackgroundJob)
        .where(col(BackgroundJob.id) == job_id, col(BackgroundJob.status) == "queued")
        .values(status="stopped", finished_at=now)
        .execution_options(synchronize_session=False)
    )
    session.execute(
        update(BackgroundJob)
        .where(col(BackgroundJob.id) == job_id, col(BackgroundJob.status) == "running")
        .values(status="stopping")
        .execution_options(synchronize_session=False)
    )
    status = session.exec(select(BackgroundJob.status).where(BackgroundJob.id == job_id)).first()
    session.commit()
    return status


def prune_finished(
    session: Session,
    *,
    kind: str,
    finished_before: datetime,
    key_prefix: str | None = None,
    keep: int = 1,
) -> int:
    """Delete the finished jobs of ``kind`` that finished before ``finished_before``, and
    those whose parameters start with ``key_prefix`` beyond the newest ``keep`` finished
    ones that do. Queued and running jobs are never deleted. One DELETE: two servers
    pruning at once delete each row once (the caller commits). How many it deleted."""
    finished = and_(col(BackgroundJob.kind) == kind, col(BackgroundJob.status).in_(FINISHED))
    condition: ColumnElement[bool] = col(BackgroundJob.finished_at) < finished_before
    if key_prefix:
        length = bindparam("key_length", len(key_prefix), type_=Integer)
        same_key = and_(
            finished,
            func.substr(col(BackgroundJob.parameters_json), 1, length) == key_prefix,
        )
        oldest_kept = (
            select(BackgroundJob.id)
            .where(same_key)
            .order_by(col(BackgroundJob.id).desc())
            .offset(max(keep, 1) - 1)
            .limit(1)
            .scalar_subquery()
        )
        condition = or_(condition, and_(same_key, col(BackgroundJob.id) < oldest_kept))
    result = session.execute(
        delete(BackgroundJob)
        .where(finished, condition)
        .execution_options(synchronize_session=False)
    )
    return int(result.rowcount)  # type: ignore[attr-defined]
