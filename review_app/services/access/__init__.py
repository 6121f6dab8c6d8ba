"""Who may act: actors, sign-in, the role checks every service makes, and which cases a
reviewer may open.

Use cases by module:

- ``actors``: ``sign_in``, ``operator_actor``, ``actor_for_job``, ``authorize``
- ``case_access``: ``may_open_case`` (a reviewer opens only the cases in their queue)
"""
