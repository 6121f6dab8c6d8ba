"""Work that runs later: stored background jobs, leased by a worker, resumable, stoppable.

Use cases by module:

- ``runner``: ``start_judge_job``, ``job_status``, ``list_jobs``, ``stop_job``, ``run_worker``,
  ``start_process_worker``
"""
