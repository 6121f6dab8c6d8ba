"""Running the house: the database, backups, the audit log and background jobs.

Use cases by module:

- ``database``: (building blocks for the use cases above)
- ``backup``: (building blocks for the use cases above)
- ``audit``: ``audit_entries``
- ``jobs``: ``start_judge_job``, ``job_status``, ``list_jobs``, ``stop_job``, ``run_worker``,
  ``start_process_worker``
"""
