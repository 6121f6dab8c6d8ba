"""Report jobs: the queue of reports to compute for the data as it is.

A page that shows a report without its intervals, or its figures from before the latest
change, queues a report job (:func:`queue_report_job`) for the person looking at it;
review_app/services/reports/report_store.py registers the kind's handler (compute the
report and store it) with the job runner. Each server runs their worker in a child
process (review_app/ui/launch.py), so a report never waits behind a long judge run nor
slows the pages down. Finished report jobs are deleted after a week, or beyond the newest
five of their report (:data:`REPORT_JOBS_KEEP_DAYS`); judge runs are kept.
"""

from __future__ import annotations

import json
import logging
from datetime import UTC, datetime, timedelta
from typing import Any

from sqlalchemy import Engine
from sqlmodel import Session

from review_app.errors import DatabaseBusy
from review_app.services.access.actors import Actor, authorize
from review_app.services.jobs.runner import JobView, job_status, job_view
from storage import jobs as job_storage
from storage.engine import read_only

log = logging.getLogger(__name__)

REPORT_JOB = "report"
REPORT_JOBS_KEEP_DAYS = 7
REPORT_JOBS_KEEP_PER_KEY = 5
"""A finished report job (done, failed or stopped) is deleted once it finished more than
:data:`REPORT_JOBS_KEEP_DAYS` days ago, or when :data:`REPORT_JOBS_KEEP_PER_KEY` newer
finished jobs of its report key (the report, rubric version and parameters; any token)
exist: each change of the data queues one per slow report, and nothing reads the old
ones. Judge runs are people's history (and named in the audit log): never deleted."""


def queue_report_job(engine: Engine, actor: Actor, *, parameters: dict[str, Any]) -> JobView:
    """Queue a report job for ``parameters`` (report, rubric, parameters, token),
    unless one with the same parameters is queued or running: then that one. Called by
    review_app/services/reports/report_store.py for the person looking at the report (a
    policy owner or admin); no audit entry (it changes no data, and report keys carry no
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
            now=datetime.now(UTC),
        )
        session.commit()
        return job_view(job)


def latest_report_job(
    engine: Engine, actor: Actor, *, parameters: dict[str, Any]
) -> tuple[int, str, str | None] | None:
    """``(id, status, error)`` of the newest report job with ``parameters``."""
    authorize(engine, actor, "policy_owner")
    with Session(read_only(engine)) as session:
        return job_storage.latest_same(
            session, kind=REPORT_JOB, parameters_json=json.dumps(parameters, sort_keys=True)
        )


def _report_key_prefix(parameters: dict[str, Any]) -> str | None:
    """The start of the parameters text of every report job of the same report key as
    ``parameters`` (whatever its token), or ``None`` if the token is not its last key."""
    text = json.dumps({**parameters, "token": None}, sort_keys=True)
    tail = "null}"
    if not text.endswith(', "token": ' + tail):
        return None
    return text[: -len(tail)]


def prune_report_jobs(engine: Engine, view: JobView) -> None:
    """Delete the finished report jobs past the retention (:data:`REPORT_JOBS_KEEP_DAYS`,
    :data:`REPORT_JOBS_KEEP_PER_KEY`): after each report job ends, in the report worker."""
    try:
        with Session(engine) as session:
            job_storage.prune_finished(
                session,
                kind=REPORT_JOB,
                finished_before=datetime.now(UTC) - timedelta(days=REPORT_JOBS_KEEP_DAYS),
                key_prefix=_report_key_prefix(view.parameters),
                keep=REPORT_JOBS_KEEP_PER_KEY,
            )
            session.commit()
    except DatabaseBusy:  # the next report job prunes them
        log.warning("finished report jobs not pruned: the database is busy")
