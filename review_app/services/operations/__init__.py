"""Running the house: the database, backups and the audit log.

Use cases by module:

- ``database``: (building blocks for the use cases above)
- ``backup``: (building blocks for the use cases above)
- ``audit``: ``audit_entries``
"""
