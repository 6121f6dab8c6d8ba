"""The version of Role Review (``review-app --version``, the fixtures' exporter line)."""

VERSION = "0.1.0"
