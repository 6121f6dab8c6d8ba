"""Conversations: reading and importing case files, the case table, one case turn by turn.

Use cases by module:

- ``case_views``: ``load_case_view``, ``case_fingerprint``, ``list_cases``
- ``importing``: ``import_records``, ``import_paths``
- ``file_import``: (building blocks for the use cases above)
- ``case_rows``: (building blocks for the use cases above)
- ``case_selection``: (building blocks for the use cases above)
"""
