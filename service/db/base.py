"""Declarative base, engine and session factory shared by the API, workers and CLI.

PostgreSQL for the service; SQLite (same models) for the local CLI. JSON columns use
JSONB on PostgreSQL.
"""
from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import Any

import sqlalchemy as sa
from sqlalchemy import event
from sqlalchemy.dialects.postgresql import JSONB
from sqlalchemy.engine import Engine
from sqlalchemy.orm import DeclarativeBase, Session, sessionmaker

#: A JSON document: JSONB on PostgreSQL, JSON text elsewhere.
JSONDoc = sa.JSON().with_variant(JSONB(), "postgresql")

NAMING = {
    "ix": "ix_%(column_0_label)s",
    "uq": "uq_%(table_name)s_%(column_0_N_name)s",
    "ck": "ck_%(table_name)s_%(constraint_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}


def utcnow() -> dt.datetime:
    return dt.datetime.now(dt.timezone.utc)


class Base(DeclarativeBase):
    metadata = sa.MetaData(naming_convention=NAMING)
    type_annotation_map = {dict[str, Any]: JSONDoc, list[Any]: JSONDoc}


def make_engine(url: str, **kwargs: Any) -> Engine:
    """An engine for ``url``; SQLite gets foreign keys on and its directory created."""
    if url.startswith("sqlite"):
        path = url.split("///", 1)[-1]
        if path and path != ":memory:":
            Path(path).parent.mkdir(parents=True, exist_ok=True)
        engine = sa.create_engine(url, **kwargs)

        @event.listens_for(engine, "connect")
        def _sqlite_pragmas(dbapi_conn, _record):  # pragma: no cover - trivial
            cur = dbapi_conn.cursor()
            cur.execute("PRAGMA foreign_keys=ON")
            cur.execute("PRAGMA busy_timeout=30000")
            cur.close()

        return engine
    kwargs.setdefault("pool_pre_ping", True)
    return sa.create_engine(url, **kwargs)


def make_session_factory(engine: Engine) -> sessionmaker[Session]:
    return sessionmaker(engine, expire_on_commit=False)


def create_database_if_missing(url: str) -> bool:
    """Create the PostgreSQL database named in ``url`` if absent. True if created."""
    u = sa.engine.make_url(url)
    if not u.drivername.startswith("postgresql"):
        return False
    admin = sa.create_engine(u.set(database="postgres"), isolation_level="AUTOCOMMIT")
    try:
        with admin.connect() as conn:
            exists = conn.scalar(
                sa.text("SELECT 1 FROM pg_database WHERE datname = :n"), {"n": u.database}
            )
            if not exists:
                conn.execute(sa.text(f'CREATE DATABASE "{u.database}"'))
                return True
    finally:
        admin.dispose()
    return False
