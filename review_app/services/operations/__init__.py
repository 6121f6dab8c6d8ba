"""Running the house: the database, backups and the audit log.

Modules:

- ``database``: which database the faces use, opened (and migrated) once per process
  (``open_database``);
- ``backup``: copies of the whole database (``backup_database``, ``restore_database``);
- ``audit``: the audit log as its readers see it (``audit_entries``);
- ``page_run``: reads made once per page run, reused while the page draws
  (``one_token_read``, ``run_memo``).
"""
