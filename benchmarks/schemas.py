"""A PostgreSQL schema of its own for a test or a benchmark run: created empty, its URL
handed over, dropped afterwards (so runs on one server never see each other's tables)."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from urllib.parse import quote


@contextmanager
def schema_of_its_own(server_url: str, *, prefix: str = "t_") -> Iterator[str]:
    """The URL of a new, empty schema on the server at ``server_url`` (its
    ``search_path``), dropped with everything in it on exit."""
    from sqlalchemy import create_engine, text

    schema = f"{prefix}{uuid.uuid4().hex[:12]}"
    admin = create_engine(server_url)
    with admin.begin() as connection:
        connection.execute(text(f"CREATE SCHEMA {schema}"))
    separator = "&" if "?" in server_url else "?"
    try:
        yield f"{server_url}{separator}options={quote(f'-csearch_path={schema}')}"
    finally:
        with admin.begin() as connection:
            connection.execute(text(f"DROP SCHEMA {schema} CASCADE"))
        admin.dispose()
