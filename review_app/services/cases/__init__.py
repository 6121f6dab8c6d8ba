"""Conversations in and out: reading and importing case files, uploads, the case table, exports
and the demo.

Use cases by module:

- ``cases``: ``may_open_case``, ``load_case_view``, ``case_fingerprint``, ``list_cases``
- ``importing``: ``import_records``, ``import_paths``
- ``file_import``: (building blocks for the use cases above)
- ``uploads``: ``validate_upload``, ``import_upload``, ``import_label_upload``,
  ``import_verdict_upload``, ``zip_export``
- ``case_rows``: (building blocks for the use cases above)
- ``case_selection``: (building blocks for the use cases above)
- ``export``: ``export_data``
- ``demo``: ``load_demo``
"""
