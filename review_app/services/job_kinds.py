"""Every kind of background job, registered with the job runner: what a worker process
imports before it claims jobs (``serve``'s workers, ``review-app jobs work``).

Above every floor of ``services/``: it gathers the kinds the floors register
(:func:`review_app.services.jobs.runner.register_job_kind`).
"""

from __future__ import annotations

from review_app.services.judging.align import ALIGN_JOB_KIND
from review_app.services.judging.judge_run_kind import JUDGE_RUN_KIND
from review_app.services.reports.report_store import REPORT_JOB_KIND

ENDPOINT_KINDS: tuple[str, ...] = (JUDGE_RUN_KIND.name, ALIGN_JOB_KIND.name)
"""Jobs that wait on a judge endpoint, not the processor: a thread of each server."""
REPORT_KINDS: tuple[str, ...] = (REPORT_JOB_KIND.name,)
"""Jobs that compute in Python for seconds to minutes: each server's child process, where
they do not slow the pages down."""
ALL_KINDS: tuple[str, ...] = ENDPOINT_KINDS + REPORT_KINDS
