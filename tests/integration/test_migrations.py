"""Migrations against a real PostgreSQL database: upgrade from empty, models match,
downgrade to base (its own throwaway database, so the shared one is untouched)."""
import secrets

import pytest
import sqlalchemy as sa

from service.db import migrate
from tests.conftest import PG

pytestmark = pytest.mark.integration


@pytest.fixture
def empty_database():
    name = f"ppl_audit_mig_{secrets.token_hex(4)}"
    admin = sa.create_engine(f"{PG}/postgres", isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.execute(sa.text(f'CREATE DATABASE "{name}"'))
    yield f"{PG}/{name}"
    with admin.connect() as conn:
        conn.execute(sa.text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
    admin.dispose()


def _tables(url):
    engine = sa.create_engine(url)
    try:
        return set(sa.inspect(engine).get_table_names())
    finally:
        engine.dispose()


def test_upgrade_from_empty_then_models_match_then_downgrade_to_base(empty_database):
    url = empty_database
    assert _tables(url) == set()
    migrate.upgrade(url)
    assert migrate.current_revision(url) is not None
    assert {"audits", "fits", "comparisons", "api_tokens", "events"} <= _tables(url)
    assert migrate.model_differences(url) == []
    migrate.downgrade(url, "base")
    assert migrate.current_revision(url) is None
    assert _tables(url) == {"alembic_version"}
    migrate.upgrade(url)  # and back up again: the downgrade left nothing behind
    assert migrate.model_differences(url) == []


def test_a_model_change_without_a_migration_is_detected(empty_database):
    migrate.upgrade(empty_database)
    engine = sa.create_engine(empty_database)
    with engine.begin() as conn:
        conn.execute(sa.text("ALTER TABLE audits DROP COLUMN reason"))
    engine.dispose()
    diffs = migrate.model_differences(empty_database)
    assert any(d[0] == "add_column" and d[3].name == "reason" for d in diffs), diffs


def test_sqlite_uses_the_same_migrations(tmp_path):
    url = f"sqlite:///{tmp_path / 'local.sqlite3'}"
    migrate.upgrade(url)
    assert migrate.model_differences(url) == []
