"""What a reviewer and a policy owner read: the queue and next case, plain-language readings of
figures, agreement reports.

Use cases by module:

- ``queue``: ``queue_page``, ``open_review_work``, ``next_case``, ``assign_cases``,
  ``informative_queue``
- ``readings``: (building blocks for the use cases above)
- ``agreement_reports``: ``load_label_columns``, ``label_token``, ``agreement_report``,
  ``dashboard_data``, ``confusion_between``
- ``reliability``: ``reliability_report``, ``agreement_over_time_report``
"""
