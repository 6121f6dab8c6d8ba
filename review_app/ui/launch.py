"""The ``serve`` process: background-job workers, then Streamlit, in one process.

``review-app serve`` execs ``python -m review_app.ui.launch run app.py ...``: the workers
(review_app/services/jobs/runner.py) start with the server, before any browser connects, live
across reruns, reloads and sessions, and die with the process (so a lease runs out and
another server resumes its job). Judge runs are claimed by a thread of this process (they
wait on the endpoint); report jobs (review_app/services/reports/report_store.py: seconds to
minutes of computing in Python) by a child process, ``python -m review_app.ui.launch
--report-worker <server pid>``, so that they do not hold the interpreter the pages run
in (at a lower priority: nice 10); it is started again if it dies, and exits within a
second of the server.
``REVIEW_APP_JOB_WORKER=0`` turns both off; ``REVIEW_APP_JOB_LEASE_SECONDS`` sets their
lease (default 60). It also serves Streamlit's page with the early-key listener in its
head (review_app/ui/page_head.py).

A thread imports what the pages import as the server starts (:func:`warm_pages`): the
first visit after a restart would otherwise wait seconds for pandas, pyarrow, Altair and
the services to load before it draws a report that is stored already.
"""

from __future__ import annotations

import ast
import importlib
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

JOB_WORKER_ENV = "REVIEW_APP_JOB_WORKER"
JOB_LEASE_ENV = "REVIEW_APP_JOB_LEASE_SECONDS"
REPORT_WORKER_FLAG = "--report-worker"
RESTART_SECONDS = 5.0
REPORT_WORKER_NICE = 10


def _lease() -> float:
    from review_app.services.jobs.runner import LEASE_SECONDS

    return float(os.environ.get(JOB_LEASE_ENV) or LEASE_SECONDS)


def _report_worker(server_pid: int) -> None:
    """The child process: a worker for report jobs, until the server is gone. It runs at
    a lower priority than the server: on a busy machine the pages go first."""
    from review_app.services.job_kinds import REPORT_KINDS
    from review_app.services.jobs.runner import start_process_worker
    from review_app.services.operations.database import database_url, open_database

    os.nice(REPORT_WORKER_NICE)

    url = database_url()
    start_process_worker(open_database(url), url=url, lease_seconds=_lease(), kinds=REPORT_KINDS)
    while os.getppid() == server_pid:
        time.sleep(1.0)
    # The server is gone: leave at once (a report being computed is computed again by
    # another worker once its lease runs out).
    os._exit(0)


def _endpoint_worker() -> None:
    """This server's worker thread for the jobs that wait on a judge endpoint."""
    from review_app.services.job_kinds import ENDPOINT_KINDS
    from review_app.services.jobs.runner import start_process_worker
    from review_app.services.operations.database import database_url, open_database

    url = database_url()
    start_process_worker(open_database(url), url=url, lease_seconds=_lease(), kinds=ENDPOINT_KINDS)


def _keep_report_worker() -> None:
    """A thread of the server: the report worker's child process, started again if it dies."""
    while True:
        child = subprocess.Popen(
            [sys.executable, "-m", "review_app.ui.launch", REPORT_WORKER_FLAG, str(os.getpid())]
        )
        child.wait()
        time.sleep(RESTART_SECONDS)


WARMED = "review-app: the pages' modules are imported"
"""The line the server writes on stderr once :func:`warm_pages` is done."""

FIRST_USE = ("pandas", "pyarrow", "altair", "narwhals")
"""What Streamlit imports when a page first draws a table or a chart."""


def page_modules() -> list[str]:
    """The modules the entry script and the pages import at their top (read from their
    source: running a page draws it), and :data:`FIRST_USE`. A name imported from a
    module (``from x import Name``) is listed as ``x.Name`` too, in case it is one."""
    ui = Path(__file__).resolve().parent
    names = set(FIRST_USE)
    for path in [ui / "app.py", *sorted((ui / "views").glob("*.py"))]:
        for node in ast.parse(path.read_text(encoding="utf-8")).body:
            if isinstance(node, ast.Import):
                names.update(alias.name for alias in node.names)
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                names.add(node.module)
                names.update(f"{node.module}.{alias.name}" for alias in node.names)
    # Not the app's own UI modules nor Streamlit's: importing them outside a script run
    # declares the keyboard component before the runtime exists, and the review page's
    # component then never loads (its frame is not served).
    return sorted(n for n in names if not n.startswith(("review_app.ui", "streamlit")))


def warm_pages() -> None:
    """Import :func:`page_modules` (the server's thread, before the first visit)."""
    started = time.perf_counter()
    for name in page_modules():
        try:
            importlib.import_module(name)
        except ImportError:  # a class or function imported from a module, not a module
            continue
    took = time.perf_counter() - started
    print(f"{WARMED} ({took:.1f} s)", file=sys.stderr, flush=True)


def main() -> None:
    if len(sys.argv) == 3 and sys.argv[1] == REPORT_WORKER_FLAG:
        _report_worker(int(sys.argv[2]))
        return
    if os.environ.get(JOB_WORKER_ENV, "1") != "0":
        # The job kinds import the judging services: in a thread, so the server listens
        # without waiting for them.
        threading.Thread(target=_endpoint_worker, name="job-worker-start", daemon=True).start()
        threading.Thread(target=_keep_report_worker, name="report-worker", daemon=True).start()
    from streamlit.web import cli

    threading.Thread(target=warm_pages, name="warm-pages", daemon=True).start()
    from review_app.ui.page_head import install

    install()  # label keys pressed before the first run are kept (ui/page_head.py)
    sys.argv = ["streamlit", *sys.argv[1:]]
    sys.exit(cli.main())


if __name__ == "__main__":
    main()
