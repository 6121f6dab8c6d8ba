"""The ``serve`` process: a background-job worker thread, then Streamlit, in one process.

``review-app serve`` execs ``python -m review_app.ui.launch run app.py ...``: the worker
(review_app/services/operations/jobs.py) starts with the server, before any browser connects,
lives across reruns, reloads and sessions, and dies with the process (so its lease
runs out and another server resumes its job). ``REVIEW_APP_JOB_WORKER=0`` turns it off;
``REVIEW_APP_JOB_LEASE_SECONDS`` sets its lease (default 60).
"""

from __future__ import annotations

import os
import sys

JOB_WORKER_ENV = "REVIEW_APP_JOB_WORKER"
JOB_LEASE_ENV = "REVIEW_APP_JOB_LEASE_SECONDS"


def main() -> None:
    if os.environ.get(JOB_WORKER_ENV, "1") != "0":
        from review_app.services.operations.database import database_url, open_database
        from review_app.services.operations.jobs import LEASE_SECONDS, start_process_worker

        url = database_url()
        lease = float(os.environ.get(JOB_LEASE_ENV) or LEASE_SECONDS)
        start_process_worker(open_database(url), url=url, lease_seconds=lease)
    from streamlit.web import cli

    sys.argv = ["streamlit", *sys.argv[1:]]
    sys.exit(cli.main())


if __name__ == "__main__":
    main()
