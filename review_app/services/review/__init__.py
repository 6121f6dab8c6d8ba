"""What policy owners read about their reviewers: agreement reports, reviewer reliability and
agreement over time.

Use cases by module:

- ``agreement_reports``: ``load_label_columns``, ``label_token``, ``agreement_report``,
  ``dashboard_data``, ``confusion_between``
- ``reliability``: ``reliability_report``, ``agreement_over_time_report``
"""
