"""Cancellation against a real worker (issue 13, Build item 3): a cancelled queued audit
never runs, and cancelling a running audit kills its sandboxed processes within
seconds; the audit ends ``cancelled``, nothing of it is stored, and who and when are in
its event log."""
import time
import uuid
from pathlib import Path

import pytest
import sqlalchemy as sa

from sandbox import mode as sandbox_mode
from service.db import tokens
from tests.conftest import wait_for
from tests.faults import descendants
from tests.integration.test_celery_worker import pair

pytestmark = [pytest.mark.integration, pytest.mark.slow, pytest.mark.usefixtures("no_leftover_work")]
#: long enough that the fits still run when the test cancels them (minutes if left alone)
LONG = {"pymc": {"chains": 2, "tune": 3000, "draws": 5000, "backend": "pymc",
                 "retry_target_accepts": []},
        "lazyppl": {"chains": 2, "warmup": 200000, "draws": 5000, "thin": 20},
        "budget": {"max_looks": 1}}
KILLED_WITHIN = 10.0  # seconds; cancel_check_seconds is 1 s


def _runs(worker_pid: int) -> list[int]:
    """Processes below the worker's pool processes: its sandboxed runs (bwrap and all
    inside it)."""
    pool = Path(f"/proc/{worker_pid}/task/{worker_pid}/children").read_text().split()
    return [p for child in pool for p in descendants(int(child))]


def test_cancel_queued_work_never_runs_and_running_fits_are_killed_within_seconds(
        client, db_sessions, service_settings, start_worker):
    with db_sessions.begin() as s:
        row, plaintext = tokens.create_token(s, "cancel-worker", service_settings.secret)
        token_id, headers = row.id, {"Authorization": f"Bearer {plaintext}"}
    queued = client.post("/api/v1/audits", headers=headers,
                         json=pair(scopes=("visible",), settings=LONG, name="cancelled queued"))
    assert client.delete(queued.json()["url"], headers=headers).json()["status"] == "cancelled"
    running = client.post("/api/v1/audits", headers=headers,
                          json=pair(scopes=("visible",), settings=LONG, name="cancelled running"))
    url = running.json()["url"]
    worker = start_worker("cancel")
    # both fits under way: sandboxed processes below the pool process
    wait_for(lambda: len(_runs(worker.pid)) >= 2 and client.get(url).json()["status"] == "running",
             300, interval=0.5, what="the worker to start both fits")
    time.sleep(2)  # let them settle into sampling (past the sandbox start)
    runs = _runs(worker.pid)
    assert runs, "the fits ended before the test could cancel them"
    names = {Path(f"/proc/{p}/comm").read_text().strip() for p in runs
             if Path(f"/proc/{p}/comm").exists()}
    assert "bwrap" in names or sandbox_mode() != "bwrap", names
    print(f"{len(runs)} sandboxed processes: {sorted(names)}")
    started = time.monotonic()
    r = client.delete(url, headers=headers)
    assert r.status_code == 200 and r.json()["status"] == "cancelled", r.text
    # the runs seen before the cancel must go; the pool process then starts a fresh
    # standby PyMC session (served nobody, issue 11), which is not the audit's
    wait_for(lambda: not set(_runs(worker.pid)) & set(runs), KILLED_WITHIN, interval=0.2,
             what="the cancelled audit's sandboxed processes to be killed")
    killed_after = time.monotonic() - started
    print(f"sandboxed processes gone {killed_after:.1f} s after DELETE")
    assert worker.poll() is None, "the worker itself must survive"
    # the task ends without storing anything, and gives its lease back
    log = Path(worker.log_path)
    wait_for(lambda: "'cancelled'" in log.read_text(errors="replace"), 60,
             what="the scope task to end 'cancelled'")
    aid = uuid.UUID(running.json()["id"])
    with db_sessions() as s:
        for table in ("scope_results", "fits", "comparisons"):
            assert s.scalar(sa.text(f"SELECT count(*) FROM {table} WHERE audit_id = :a"),
                            {"a": aid}) == 0, table
        assert s.scalar(sa.text("SELECT lease_owner FROM audit_scopes WHERE audit_id = :a"),
                        {"a": aid}) is None
    audit = client.get(url).json()
    assert audit["status"] == "cancelled" and audit["verdict"] is None
    assert [e for e in audit["events"] if e["to"] == "cancelled"
            and e["message"] == f"cancelled by token #{token_id}"]
    assert "cancel-worker" not in str(audit["events"])  # the token id, never its name
    # the audit cancelled while queued was never picked up
    first = client.get(queued.json()["url"]).json()
    assert first["status"] == "cancelled"
    assert not [e for e in first["events"] if e["kind"] in ("picked", "progress")], first["events"]
    assert first["last_picked_at"] is None
