"""Alembic environment: the URL comes from the service settings, never alembic.ini.

Precedence: ``config.attributes["connection"]`` (an open connection, used by tests and
``ppl-audit db upgrade``), ``config.attributes["database_url"]``, ``-x database_url=``,
then ``Settings().database_url``.
"""
from __future__ import annotations

from alembic import context
from sqlalchemy.engine import Connection

from service.db import Base, make_engine

config = context.config
target_metadata = Base.metadata


def _database_url() -> str:
    url = config.attributes.get("database_url") or context.get_x_argument(as_dictionary=True).get(
        "database_url"
    )
    if url:
        return url
    from service.config import get_settings

    return get_settings().database_url


def _configure(connection: Connection) -> None:
    context.configure(
        connection=connection,
        target_metadata=target_metadata,
        compare_type=True,
        # SQLite cannot ALTER most things; batch mode rewrites the table instead
        render_as_batch=connection.dialect.name == "sqlite",
    )


def run_migrations_offline() -> None:
    context.configure(url=_database_url(), target_metadata=target_metadata,
                      literal_binds=True, compare_type=True)
    with context.begin_transaction():
        context.run_migrations()


def run_migrations_online() -> None:
    connection = config.attributes.get("connection")
    if connection is not None:
        _configure(connection)
        with context.begin_transaction():
            context.run_migrations()
        return
    engine = make_engine(_database_url())
    try:
        with engine.connect() as conn:
            _configure(conn)
            with context.begin_transaction():
                context.run_migrations()
    finally:
        engine.dispose()


if context.is_offline_mode():
    run_migrations_offline()
else:
    run_migrations_online()
