"""Which database the faces use, opened (and migrated) once per process."""

from __future__ import annotations

from sqlalchemy import Engine

import storage.engine


def database_url(explicit: str | None = None) -> str:
    """``--db``, else ``$REVIEW_APP_DATABASE_URL``, else the default SQLite file."""
    return storage.engine.database_url(explicit)


def open_database(url: str | None = None) -> Engine:
    """The process's engine for ``url`` (see :func:`database_url`), migrated on first use."""
    return storage.engine.shared_engine(url)
