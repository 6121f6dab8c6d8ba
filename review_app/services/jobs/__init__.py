"""Work that runs later: stored background jobs, leased by a worker, resumable, stoppable.

Modules:

- ``runner``: the leased runner: jobs stored, claimed under a lease, stopped, and run by
  the handler their kind registered (``register_job_kind``, ``job_status``, ``list_jobs``,
  ``stop_job``, ``run_worker``, ``start_process_worker``).
"""
