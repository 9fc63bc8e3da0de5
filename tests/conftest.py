"""Shared fixtures for tests that need the real services (kept generic).

* ``database_url`` — a throwaway PostgreSQL database ``ppl_audit_test_<random>`` on
  127.0.0.1:5432 (user postgres, trust auth), migrated to head once per test session
  and dropped afterwards. Override the server with ``PPL_AUDIT_TEST_PG``.
* ``broker_url`` / ``celery_queue`` — Redis on 127.0.0.1:6379 (``PPL_AUDIT_TEST_REDIS``),
  with a queue name unique to this test session so parallel runs never share work.
* ``service_settings`` — a ``service.config.Settings`` for those, environment "test".
* ``service_env`` — the same settings as ``PPL_AUDIT_*`` variables, for subprocesses.
* ``db_sessions`` — a SQLAlchemy session factory on the test database.
* ``app`` / ``client`` — the FastAPI app (real Celery dispatcher) and a TestClient.
* ``api_token`` / ``auth_headers`` — a fresh API token and its Authorization header.
* ``row_counts`` — a function returning {table: row count}; ``queue_length`` — a
  function returning how many tasks wait in this session's queue.
* ``start_worker`` — starts a real ``ppl-audit worker`` subprocess (stopped at teardown).

In CI (``CI=true``) a test skipped for want of GHC fails instead (tests/ci_gate.py).
"""
from __future__ import annotations

import os
import secrets
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.ci_gate import pytest_runtest_makereport  # noqa: F401  (CI: no GHC is a failure)

ROOT = Path(__file__).resolve().parents[1]
PG = os.environ.get("PPL_AUDIT_TEST_PG", "postgresql+psycopg://postgres@127.0.0.1:5432")
REDIS = os.environ.get("PPL_AUDIT_TEST_REDIS", "redis://127.0.0.1:6379/14")
TABLES = ("programs", "datasets", "audits", "audit_scopes", "scope_results", "fits",
          "comparisons", "batches", "api_tokens", "events")


def delete_queue(broker_url: str, queue: str) -> None:
    """Remove a test queue and the routing keys kombu keeps for it in Redis."""
    import redis

    client = redis.Redis.from_url(broker_url)
    client.delete(queue, f"_kombu.binding.{queue}", f"_kombu.binding_permanent.{queue}")
    client.close()


@pytest.fixture(scope="session")
def database_url():
    import sqlalchemy as sa

    from service.db.migrate import upgrade

    name = f"ppl_audit_test_{secrets.token_hex(4)}"
    admin = sa.create_engine(f"{PG}/postgres", isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.execute(sa.text(f'CREATE DATABASE "{name}"'))
    url = f"{PG}/{name}"
    try:
        upgrade(url)
        yield url
    finally:
        with admin.connect() as conn:
            conn.execute(sa.text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        admin.dispose()


@pytest.fixture(scope="session")
def broker_url():
    return REDIS


@pytest.fixture(scope="session")
def celery_queue(broker_url):
    import redis

    queue = f"ppl-audit-test-{secrets.token_hex(4)}"
    yield queue
    delete_queue(broker_url, queue)


@pytest.fixture(scope="session")
def service_env(database_url, broker_url, celery_queue):
    """Environment for service subprocesses; tight limits so a lost worker's task comes
    back within the test (visibility timeout just above the hard limit)."""
    return {
        "PPL_AUDIT_ENVIRONMENT": "test",
        "PPL_AUDIT_SECRET": "test-secret-" + "x" * 20,
        "PPL_AUDIT_DATABASE_URL": database_url,
        "PPL_AUDIT_BROKER_URL": broker_url,
        "PPL_AUDIT_CELERY__QUEUE": celery_queue,
        "PPL_AUDIT_CELERY__TASK_TIME_LIMIT": os.environ.get("PPL_AUDIT_TEST_TASK_LIMIT", "150"),
        "PPL_AUDIT_CELERY__VISIBILITY_TIMEOUT": os.environ.get("PPL_AUDIT_TEST_VISIBILITY", "160"),
    }


@pytest.fixture(scope="session")
def service_settings(service_env):
    from service.config import Settings

    env = {k.removeprefix("PPL_AUDIT_").lower(): v for k, v in service_env.items()
           if "__" not in k}
    # One token serves the whole session, whose tests leave audits and batches open:
    # per-token quotas are tested with apps of their own (test_cancel.py).
    return Settings(**env, celery={
        "queue": service_env["PPL_AUDIT_CELERY__QUEUE"],
        "task_time_limit": int(service_env["PPL_AUDIT_CELERY__TASK_TIME_LIMIT"]),
        "visibility_timeout": int(service_env["PPL_AUDIT_CELERY__VISIBILITY_TIMEOUT"])},
        limits={"token_open_audits": 10_000, "token_open_batches": 10_000})


@pytest.fixture(scope="session")
def db_sessions(database_url):
    from service.db import make_engine, make_session_factory

    engine = make_engine(database_url)
    yield make_session_factory(engine)
    engine.dispose()


@pytest.fixture(scope="session")
def app(service_settings):
    from service.api import create_app

    application = create_app(service_settings)
    yield application
    application.state.engine.dispose()


@pytest.fixture(scope="session")
def client(app):
    from fastapi.testclient import TestClient

    with TestClient(app) as c:
        yield c


@pytest.fixture(scope="session")
def api_token(db_sessions, service_settings):
    from service.db import tokens

    with db_sessions.begin() as s:
        _, plaintext = tokens.create_token(s, "tests", service_settings.secret)
    return plaintext


@pytest.fixture(scope="session")
def auth_headers(api_token):
    return {"Authorization": f"Bearer {api_token}"}


@pytest.fixture
def row_counts(db_sessions):
    import sqlalchemy as sa

    def count() -> dict[str, int]:
        with db_sessions() as s:
            return {t: s.scalar(sa.text(f"SELECT count(*) FROM {t}")) for t in TABLES}
    return count


@pytest.fixture
def queue_length(broker_url, celery_queue):
    import redis

    client = redis.Redis.from_url(broker_url)
    yield lambda: int(client.llen(celery_queue))
    client.close()


@pytest.fixture
def start_worker(service_env, tmp_path):
    """``start_worker(name, env=overrides)`` -> Popen of a real worker (its log file at
    ``.log_path``); every one still running is stopped at teardown."""
    procs: list[subprocess.Popen] = []

    def start(name: str = "w1", concurrency: int = 1, env: dict | None = None) -> subprocess.Popen:
        log = open(tmp_path / f"worker-{name}-{len(procs)}.log", "wb")
        env = {**os.environ, **service_env, **(env or {})}
        proc = subprocess.Popen(
            [sys.executable, "-m", "service.cli", "worker", f"--concurrency={concurrency}",
             f"--hostname={name}-{secrets.token_hex(3)}@%h", "--log-level=INFO"],
            cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        proc.log_path = log.name
        procs.append(proc)
        return proc

    yield start
    for proc in procs:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGTERM)
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()


@pytest.fixture
def no_leftover_work(db_sessions, broker_url, celery_queue):
    """Cancel every audit and batch still open in the session's database and empty the
    session's queue, before a test that starts a worker. Earlier API tests leave their
    submissions queued (no worker ran then); a worker's reconciler re-sends them all at
    start and works through them before the test's own audit (the SPEC pair waited
    ~270 s behind them in CI). Prints how many it cancelled."""
    import redis
    import sqlalchemy as sa

    from service.cancel import OPEN
    from service.db import audits as audit_repo
    from service.db import batches as batch_repo
    from service.db.models import Audit, Batch

    message = "left open by an earlier test: cancelled before a worker test"
    with db_sessions.begin() as s:
        batches = s.scalars(sa.select(Batch).where(Batch.status.in_(OPEN))
                            .order_by(Batch.id).with_for_update()).all()
        for batch in batches:
            batch_repo.set_batch_status(s, batch, "cancelled", message=message)
        audits = s.scalars(sa.select(Audit).where(Audit.status.in_(OPEN))
                           .order_by(Audit.id).with_for_update()).all()
        for audit in audits:
            audit_repo.set_status(s, audit, "cancelled", reason=message, message=message)
    client = redis.Redis.from_url(broker_url)
    client.delete(celery_queue)
    client.close()
    if audits or batches:
        print(f"no_leftover_work: cancelled {len(audits)} audit(s), {len(batches)} batch(es)")


def wait_for(predicate, timeout: float, interval: float = 0.5, what: str = "condition",
             log: str | None = None):
    """Poll ``predicate`` until it returns something truthy; fail after ``timeout`` s,
    with the last 60 lines of the file ``log`` (a worker's log) in the message if given."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            tail = ""
            if log is not None:
                with open(log, errors="replace") as f:
                    tail = "\n--- last lines of " + log + " ---\n" + "".join(f.readlines()[-60:])
            raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}{tail}")
        time.sleep(interval)


@pytest.fixture
def broken_bwrap(monkeypatch):
    """``PPL_AUDIT_BWRAP`` pointing at a real bubblewrap that passes the start-up probe
    but cannot build the view of any real run (a bind of a missing path added to every
    command line with ``--remount-ro``, which only real runs have): bubblewrap then exits
    1 with its own message, as a program that failed would. In a directory the sandbox
    user (nobody) can traverse, since the parent drops to it before bubblewrap starts."""
    import shutil
    import tempfile

    real = shutil.which("bwrap")
    if real is None:
        pytest.skip("bubblewrap is not installed")
    folder = Path(tempfile.mkdtemp(prefix="ppl-audit-bwrap-", dir="/tmp"))
    folder.chmod(0o755)
    wrapper = folder / "bwrap"
    wrapper.write_text("#!/bin/sh\n"
                       'case " $* " in *" --remount-ro "*)\n'
                       f'  exec {real} --ro-bind /no/such/ppl-audit/path /mnt "$@";;\n'
                       "esac\n"
                       f'exec {real} "$@"\n')
    wrapper.chmod(0o755)
    monkeypatch.setenv("PPL_AUDIT_BWRAP", str(wrapper))
    yield wrapper
    shutil.rmtree(folder, ignore_errors=True)
