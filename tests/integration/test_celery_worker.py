"""The service end to end with a real Celery worker process on Redis and PostgreSQL:
submission over HTTP, polling to done, rows stored once, and a worker SIGKILLed in
the middle of a fit (the audit still completes exactly once).
"""
import json
import os
import signal
import time
from pathlib import Path

import pytest
import sqlalchemy as sa

from tests.conftest import wait_for

pytestmark = [pytest.mark.integration, pytest.mark.slow, pytest.mark.usefixtures("no_leftover_work")]

FIX = Path(__file__).resolve().parents[1] / "fixtures" / "eight_schools"
#: small runs for tests where the verdict is not the point (gates may fail: inconclusive)
TINY = {"pymc": {"chains": 2, "tune": 200, "draws": 200, "backend": "pymc",
                 "retry_target_accepts": []},
        "lazyppl": {"chains": 2, "warmup": 2000, "draws": 200, "thin": 2},
        "budget": {"max_looks": 1}}


def pair(scopes=("visible", "full"), settings=None, name="eight schools", **kw) -> dict:
    body = {"name": name, "pymc": {"source": (FIX / "model.py").read_text()},
            "lazyppl": {"source": (FIX / "Model.hs").read_text()},
            "scopes": {s: json.loads((FIX / f"{s}.json").read_text()) for s in scopes}, **kw}
    if settings is not None:
        body["settings"] = settings
    return body


def poll_done(client, url, timeout):
    def finished():
        body = client.get(url).json()
        return body if body["status"] in ("done", "failed") else None
    return wait_for(finished, timeout, interval=1.0, what=f"{url} to finish")


def stored(db_sessions, audit_id) -> dict:
    """Rows of one audit per table, and how many distinct keys they cover."""
    q = {
        "fits": "SELECT count(*), count(DISTINCT (scope, language, look)) FROM fits",
        "comparisons": "SELECT count(*), count(DISTINCT (scope, pair, parameter)) FROM comparisons",
        "scope_results": "SELECT count(*), count(DISTINCT scope) FROM scope_results",
        "scope_done_events": "SELECT count(*), count(DISTINCT message) FROM events "
                             "WHERE kind = 'scope_done' AND audit_id = :a",
    }
    out = {}
    with db_sessions() as s:
        for name, sql in q.items():
            if "WHERE" not in sql:
                sql += " WHERE audit_id = :a"
            out[name] = tuple(s.execute(sa.text(sql), {"a": audit_id}).one())
    return out


def assert_stored_once(db_sessions, audit):
    rows = stored(db_sessions, audit["id"])
    for table, (total, distinct) in rows.items():
        assert total == distinct, f"duplicate {table}: {rows}"
    scopes = audit["evidence"]["scopes"]
    looks = sum(len(ev["looks"]) for ev in scopes.values())
    assert rows["fits"][0] == 2 * looks
    assert rows["scope_results"][0] == len(scopes)
    assert rows["comparisons"][0] == sum(len(ev["comparisons"]) for ev in scopes.values())
    return rows


def test_spec_eight_schools_pair_agrees_over_http(client, auth_headers, start_worker, db_sessions):
    """Issue 3 acceptance: the SPEC pair, default settings, through API + worker."""
    start_worker("accept")
    r = client.post("/api/v1/audits", json=pair(), headers=auth_headers)
    assert r.status_code == 202, r.text
    assert r.json()["status"] == "queued"
    audit = poll_done(client, r.json()["url"], timeout=900)
    assert audit["status"] == "done"
    assert audit["verdict"] == "agree", audit["reason"]
    assert {s["scope"]: s["verdict"] for s in audit["scopes"]} == {"visible": "agree", "full": "agree"}
    full = audit["evidence"]["scopes"]["full"]
    assert full["uncompared_pymc"] == ["theta_trans"]
    assert_stored_once(db_sessions, audit)
    # the draws come back as NetCDF that ArviZ reads
    nc = client.get(audit["fits"][0]["netcdf"])
    assert nc.status_code == 200 and nc.content[:4] == b"\x89HDF"


def _kill_group(proc):
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait(timeout=10)


def _mid_fit(client, url):
    """True once the worker has started fitting (a progress event names a fit)."""
    events = client.get(url).json()["events"]
    return any(e["kind"] == "progress" and e["message"].startswith("fit") for e in events)


#: Redis hands a lost worker's unacknowledged task to another worker only after the
#: visibility timeout; these tests shorten it (and the hard limit under it) to keep fast.
#: The hard limit must still cover a tiny scope on a loaded 2-core machine (~15–60 s).
#: The reconciler re-sends a unit whose lease expired: a 30 s lease (default 90) brings
#: the rescue forward (104 s for the whole test with the default lease); a redelivery
#: of the original message later finds the scope stored and is skipped (idempotent steps).
QUICK_REDELIVERY = {"PPL_AUDIT_CELERY__TASK_TIME_LIMIT": "150",
                    "PPL_AUDIT_CELERY__VISIBILITY_TIMEOUT": "160",
                    "PPL_AUDIT_WORK__LEASE_SECONDS": "30", "PPL_AUDIT_WORK__HEARTBEAT_SECONDS": "10",
                    "PPL_AUDIT_WORK__RECONCILE_SECONDS": "10"}


def test_worker_killed_mid_fit_the_audit_completes_exactly_once(
        client, auth_headers, start_worker, db_sessions):
    first = start_worker("doomed", env=QUICK_REDELIVERY)
    r = client.post("/api/v1/audits", json=pair(scopes=("visible",), settings=TINY,
                                                 name="killed mid-fit"), headers=auth_headers)
    url = r.json()["url"]
    wait_for(lambda: _mid_fit(client, url), 300, what="the first worker to start fitting")
    _kill_group(first)  # SIGKILL: the task is neither acked nor rejected
    assert client.get(url).json()["status"] == "running"
    started = time.monotonic()
    start_worker("rescuer", env=QUICK_REDELIVERY)
    visibility = int(QUICK_REDELIVERY["PPL_AUDIT_CELERY__VISIBILITY_TIMEOUT"])
    audit = poll_done(client, url, timeout=visibility + 300)
    assert audit["status"] == "done" and audit["verdict"] in ("agree", "inconclusive"), audit["reason"]
    assert_stored_once(db_sessions, audit)
    print(f"redelivered and finished {time.monotonic() - started:.0f} s after the kill")


def test_pool_process_killed_mid_fit_is_requeued_at_once(
        client, auth_headers, start_worker, db_sessions):
    """reject_on_worker_lost: the parent sees its child die and requeues the task."""
    worker = start_worker("child-killed")
    r = client.post("/api/v1/audits", json=pair(scopes=("visible",), settings=TINY,
                                                 name="pool child killed"), headers=auth_headers)
    url = r.json()["url"]
    wait_for(lambda: _mid_fit(client, url), 300, what="the worker to start fitting")
    children = Path(f"/proc/{worker.pid}/task/{worker.pid}/children").read_text().split()
    assert children, "the prefork pool has no child process"
    for child in children:
        os.kill(int(child), signal.SIGKILL)
    audit = poll_done(client, url, timeout=300)
    assert audit["status"] == "done", audit["reason"]
    assert_stored_once(db_sessions, audit)


def test_a_program_error_is_a_result_not_a_retry(client, auth_headers, start_worker, db_sessions):
    start_worker("errors")
    source = (FIX / "model.py").read_text().replace('data["sigma"]', 'data["sigmas"]')
    r = client.post("/api/v1/audits", json=pair(scopes=("visible",), settings=TINY,
                                                 name="missing field", pymc={"source": source}),
                    headers=auth_headers)
    audit = poll_done(client, r.json()["url"], timeout=300)
    assert audit["status"] == "done" and audit["verdict"] == "error"
    assert "sigmas" in audit["reason"]
    with db_sessions() as s:
        retries = s.scalar(sa.text("SELECT count(*) FROM events WHERE audit_id = :a AND "
                                   "kind = 'status' AND to_status = 'running'"), {"a": audit["id"]})
    assert retries == 1
