"""The team and its work: people and roles, the team page, queues and assignments, audit
samples.

Use cases by module:

- ``people``: ``list_people``, ``add_person``, ``set_role``, ``deactivate_person``,
  ``reactivate_person``, ``preview_rights_change``
- ``team``: ``team_view``
- ``queue``: ``queue_page``, ``open_review_work``, ``next_case``, ``assign_cases``,
  ``informative_queue``
- ``audit_samples``: ``draw_audit_sample``, ``draw_uncertainty_sample``, ``uncertainty_sample``,
  ``audited_units``
"""
