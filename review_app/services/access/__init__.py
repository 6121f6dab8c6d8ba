"""Who may act: actors, sign-in, the role checks every service makes, and which cases a
reviewer may open. The bottom floor of the services.

Modules:

- ``actors``: who is acting and in which role, signed in or the local operator, and the
  role check every service makes (``sign_in``, ``operator_actor``, ``actor_for_job``,
  ``authorize``);
- ``case_access``: which cases a reviewer may open: only those in their queue
  (``may_open_case``, ``check_case_access``).
"""
