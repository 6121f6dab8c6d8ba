"""Rubric versions in the database: the catalog synced from rubric files, drafts written in
the app, and labels carried to a new version.

Modules:

- ``rubric_catalog``: the rubric versions the application offers, checked against what
  labels used (``sync_rubrics``, ``has_labels``);
- ``rubric_drafts``: a draft of version N+1 written in the app, checked and saved
  (``check_draft``, ``save_draft``, ``preview_publish``);
- ``rubric_carry``: publishing version N+1: carry what still holds, queue for re-review
  what changed (``publish_rubric``, ``re_review_queue``, ``carry_history``);
- ``rubric_keys``: which key labels with which code, as the catalog knows a version's
  history (``key_map_for``, ``rubric_with_keys``).
"""
