"""The service commands: `ppl-audit token create` prints a working token once and
stores only its hash; `ppl-audit db upgrade` creates and migrates a database."""
import os
import secrets
import subprocess
import sys

import pytest
import sqlalchemy as sa

from tests.conftest import PG, ROOT

pytestmark = pytest.mark.integration


def ppl(*args, env):
    return subprocess.run([sys.executable, "-m", "service.cli", *args], cwd=ROOT,
                          env={**os.environ, **env}, capture_output=True, text=True, timeout=120)


def test_token_create_prints_a_token_that_authenticates(service_env, client, db_sessions):
    out = ppl("token", "create", "cli-test", env=service_env)
    assert out.returncode == 0, out.stderr
    token = out.stdout.strip()
    assert token.startswith("ppla_") and len(token) > 40
    assert "shown only this once" in out.stderr
    with db_sessions() as s:
        hashes = s.scalars(sa.text("SELECT token_hash FROM api_tokens WHERE name = 'cli-test'")).all()
    assert len(hashes) == 1 and token not in hashes[0]
    r = client.post("/api/v1/batches", json={"source": "posteriordb", "posteriors": ["nope"]},
                    headers={"Authorization": f"Bearer {token}"})
    assert r.status_code == 422  # past authentication: the posterior is unknown
    listed = ppl("token", "list", env=service_env).stdout
    assert "cli-test" in listed and token not in listed


def test_db_upgrade_creates_and_migrates_the_database(service_env):
    name = f"ppl_audit_cli_{secrets.token_hex(4)}"
    env = {**service_env, "PPL_AUDIT_DATABASE_URL": f"{PG}/{name}"}
    try:
        out = ppl("db", "upgrade", env=env)
        assert out.returncode == 0, out.stderr
        assert "created the database" in out.stderr and "schema revision:" in out.stdout
        again = ppl("db", "upgrade", env=env)
        assert again.returncode == 0 and "created" not in again.stderr
    finally:
        admin = sa.create_engine(f"{PG}/postgres", isolation_level="AUTOCOMMIT")
        with admin.connect() as c:
            c.execute(sa.text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        admin.dispose()


def test_a_default_secret_outside_development_refuses_to_start(service_env):
    env = {**service_env, "PPL_AUDIT_ENVIRONMENT": "production", "PPL_AUDIT_SECRET": ""}
    env.pop("PPL_AUDIT_SECRET")
    out = subprocess.run([sys.executable, "-m", "service.cli", "token", "list"], cwd=ROOT,
                         env={k: v for k, v in {**os.environ, **env}.items()
                              if k != "PPL_AUDIT_SECRET"},
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 2
    assert "PPL_AUDIT_SECRET must be set" in out.stderr
