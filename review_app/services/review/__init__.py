"""What policy owners read about their reviewers: agreement reports, reviewer reliability and
agreement over time.

Modules:

- ``agreement_reports``: inter-rater agreement of the labels of one rubric version, and the
  dashboard's data (``agreement_report``, ``dashboard_data``, ``confusion_between``);
- ``reliability``: which reviewer to trust on which codes, and agreement over time
  (``reliability_report``, ``agreement_over_time_report``).
"""
