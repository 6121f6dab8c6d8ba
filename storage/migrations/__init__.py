"""Alembic migrations, applied by every command on start.

Modules:

- ``upgrade``: the schema brought to the head revision (``upgrade_database``), with a quick
  check that spares loading Alembic when it is current;
- ``env``: Alembic's environment script (the tables of :mod:`storage.models`, the
  connection it is handed);
- ``versions``: one script per schema revision.
"""
