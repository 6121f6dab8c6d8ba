"""Rubric versions in the database: the catalog synced from rubric files, and labels carried to
a new version.

Use cases by module:

- ``rubric_catalog``: ``sync_rubrics``, ``has_labels``
- ``rubric_carry``: ``publish_rubric``, ``re_review_queue``, ``carry_history``
- ``rubric_keys``: ``key_map_for`` (which key labels with which code), ``rubric_with_keys``
"""
