"""The team and its work: people and roles, the team page, queues and assignments, audit
samples.

Modules:

- ``people``: the team's people: listing, adding, roles, deactivation and reactivation
  (``list_people``, ``add_person``, ``set_role``, ``deactivate_person``);
- ``rights``: what a change of someone's rights would do, before it is applied
  (``preview_rights_change``, ``rights_of``);
- ``team``: the team as a policy owner sees it (``team_view``);
- ``queue``: reviewers' queues and how policy owners fill them (``queue_page``,
  ``next_case``, ``assign_cases``, ``informative_queue``);
- ``audit_samples``: turns drawn uniformly at random, so that their gold is a random
  sample (``draw_audit_sample``, ``audited_units``).
"""
