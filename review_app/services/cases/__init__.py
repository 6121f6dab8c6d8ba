"""Conversations: reading and importing case files, the case table, one case turn by turn.

Modules:

- ``case_views``: cases as reviewers and engineers see them: listings by lane, one case
  turn by turn (``load_case_view``, ``case_fingerprint``, ``list_cases``);
- ``case_window``: which turns of a long conversation the review page draws;
- ``importing``: importing case files into the database (``import_records``,
  ``import_paths``);
- ``file_import``: what every file import shares: the file's hash for the audit log;
- ``case_rows``: a validated case as the rows that store it;
- ``case_selection``: the cases a command names, by lane and/or by id.
"""
