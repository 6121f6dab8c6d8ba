"""Files in and out of the database across features: uploads, labeled fixture exports, label
files and the demo.

Modules:

- ``uploads``: files uploaded through the pages: checked, previewed, imported as the
  command line would (``validate_upload``, ``import_upload``, ``import_label_upload``,
  ``import_verdict_upload``, ``zip_export``);
- ``export``: labeled regression fixtures for CI, label data with context, deepeval cases
  (``export_data``);
- ``labels_io``: human labels in bulk as CSV (``import_labels``, ``export_labels_csv``);
- ``demo``: the bundled sample set behind ``review-app demo`` (``load_demo``).
"""
