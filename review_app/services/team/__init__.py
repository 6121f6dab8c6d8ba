"""People and roles: sign-in, actors and authorization, the team page's use cases.

Use cases by module:

- ``people``: ``actor_for_job``, ``authorize``, ``sign_in``, ``list_people``, ``add_person``,
  ``set_role``, ``deactivate_person``, ``reactivate_person``
- ``team``: ``team_view``
"""
