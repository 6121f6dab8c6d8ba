from __future__ import annotations

from typing import Any

from alembic import context

import storage.models

config = context.config
target_metadata = storage.models.define_all()


def run_migrations() -> None:
    connection = config.attributes.get("connection")
    if connection is None:
        from storage.engine import create_database_engine

        engine = create_database_engine(config.get_main_option("sqlalchemy.url") or None)
        with engine.begin() as connection:
            _run(connection)
        return
    _run(connection)


def _run(connection: Any) -> None:
    # The partial indexes' predicates as this dialect's options (autogenerate renders them)
    storage.models.declare_partial_indexes(connection.dialect.name)
    context.configure(
        connection=connection,
        target_metadata=target_metadata,
        render_as_batch=True,
        compare_type=True,
    )
    with context.begin_transaction():
        context.run_migrations()


run_migrations()
