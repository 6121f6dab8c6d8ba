"""Heavy results shown on pages, stored per state of the data and recomputed by jobs: the
top floor, over judging, labels and review.

Modules:

- ``report_store``: the reports pages show, each stored per token of the data it reads,
  and the handler of report jobs;
- ``report_jobs``: the queue of reports to compute for the data as it is
  (``queue_report_job``, ``latest_report_job``).
"""
