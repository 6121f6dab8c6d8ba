"""Files in and out of the database across features: uploads, labeled fixture exports, label
files and the demo.

Use cases by module:

- ``uploads``: ``validate_upload``, ``import_upload``, ``import_label_upload``,
  ``import_verdict_upload``, ``zip_export``
- ``export``: ``export_data``
- ``labels_io``: ``import_labels``, ``export_labels_csv``
- ``demo``: ``load_demo``
"""
