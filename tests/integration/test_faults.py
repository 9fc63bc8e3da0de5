"""Issue 12 acceptance: nothing lost when Redis or PostgreSQL fails, with a real worker.

* the broker loses its queue (a Redis of the test's own, killed and restarted empty)
  with one audit running and two queued → all reach ``done``, same verdict and numbers
  as an audit run before the fault, each result stored once;
* PostgreSQL connections refused for 30 s (a TCP proxy the test cuts; the machine's
  PostgreSQL keeps running) mid-audit → all reach ``done``, stored once;
* fits that outlast a tiny task time limit → the scope ends ``inconclusive`` with the
  reason recorded and no process left;
* a unit that kills its worker every time → ``failed`` after 3 attempts.
Each prints the seconds from the fault's end to the last audit finished.
"""
import os
import signal
import time

import pytest
import sqlalchemy as sa

from service import steps
from tests.conftest import wait_for
from tests.faults import OwnRedis, TcpProxy, descendants
from tests.integration.test_celery_worker import TINY, _mid_fit, assert_stored_once, pair, stored

pytestmark = [pytest.mark.integration, pytest.mark.slow, pytest.mark.usefixtures("no_leftover_work")]

#: a quick reconciler, so a test waits seconds, not minutes; PPL_AUDIT_TEST_DEFAULT_WORK=1
#: keeps the defaults (lease 90 s, pass every 30 s, grace 30 s) to measure recovery times
FAST_RECONCILER = {} if os.environ.get("PPL_AUDIT_TEST_DEFAULT_WORK") else {
    "PPL_AUDIT_WORK__LEASE_SECONDS": "12", "PPL_AUDIT_WORK__HEARTBEAT_SECONDS": "2",
    "PPL_AUDIT_WORK__RECONCILE_SECONDS": "3", "PPL_AUDIT_WORK__DISPATCH_GRACE_SECONDS": "5"}


def _status(db_sessions, ids) -> dict:
    with db_sessions() as s:
        rows = s.execute(sa.text("SELECT id, status FROM audits WHERE id = ANY(:ids)"),
                         {"ids": list(ids)}).all()
    return {str(i): st for i, st in rows}


def _all_finished(db_sessions, ids):
    st = _status(db_sessions, ids)
    return len(st) == len(ids) and all(v in ("done", "failed") for v in st.values())


def _numbers(audit) -> list:
    """Verdicts and d/r of every row: equal when two runs drew the same samples."""
    return [(s["verdict"], [(c["parameter"], round(c["d"], 9), round(c["r"], 9))
                            for c in audit["evidence"]["scopes"][s["scope"]]["comparisons"]])
            for s in audit["scopes"]]


def _submit(client, headers, n, name):
    ids = []
    for i in range(n):
        r = client.post("/api/v1/audits", json=pair(scopes=("visible",), settings=TINY,
                                                     name=f"{name} {i}"), headers=headers)
        assert r.status_code == 202, r.text
        ids.append(r.json()["id"])
    return ids


@pytest.fixture
def own_redis(tmp_path):
    server = OwnRedis(tmp_path)
    yield server
    server.stop()


def test_broker_restarted_empty_every_audit_still_completes_once(
        own_redis, service_settings, auth_headers, start_worker, db_sessions):
    from fastapi.testclient import TestClient

    from service.api import create_app

    app = create_app(service_settings.model_copy(update={"broker_url": own_redis.url}))
    start_worker("broker-fault", env={**FAST_RECONCILER, "PPL_AUDIT_BROKER_URL": own_redis.url})
    with TestClient(app) as client:
        control = _submit(client, auth_headers, 1, "broker control")[0]
        wait_for(lambda: _all_finished(db_sessions, [control]), 400, 1, "the control audit")
        ids = _submit(client, auth_headers, 3, "broker fault")
        wait_for(lambda: _mid_fit(client, f"/api/v1/audits/{ids[0]}"), 300, 1, "a fit to start")
        assert list(_status(db_sessions, ids[1:]).values()) == ["queued", "queued"]
        own_redis.kill()  # the queue (two messages) and the unacknowledged one are gone
        time.sleep(3)
        own_redis.start()
        fault_end = time.monotonic()
        wait_for(lambda: _all_finished(db_sessions, ids), 600, 1, "every audit to finish")
        print(f"broker restarted empty: all finished {time.monotonic() - fault_end:.0f} s later")
        with db_sessions() as s:  # the two queued ones were re-sent by the reconciler
            resent = s.scalar(sa.text(
                "SELECT count(*) FROM audit_scopes sc JOIN audits a ON a.id = sc.audit_id "
                "WHERE a.id = ANY(:ids) AND sc.dispatched_at > a.created_at + interval '3 s'"),
                {"ids": ids[1:]})
        assert resent == 2
        reference = _numbers(client.get(f"/api/v1/audits/{control}").json())
        for aid in ids:
            audit = client.get(f"/api/v1/audits/{aid}").json()
            assert audit["status"] == "done", audit["reason"]
            assert _numbers(audit) == reference
            assert_stored_once(db_sessions, audit)
    app.state.engine.dispose()


def test_a_batch_resumes_after_the_broker_lost_its_queue(
        own_redis, service_settings, auth_headers, start_worker, db_sessions):
    from fastapi.testclient import TestClient

    from service.api import create_app

    app = create_app(service_settings.model_copy(update={"broker_url": own_redis.url}))
    start_worker("batch-fault", env={**FAST_RECONCILER, "PPL_AUDIT_BROKER_URL": own_redis.url})
    names = ["eight_schools-eight_schools_noncentered", "kidiq-kidscore_momhs"]
    with TestClient(app) as client:
        r = client.post("/api/v1/batches", json={"source": "posteriordb", "posteriors": names,
                                                 "settings": TINY}, headers=auth_headers)
        assert r.status_code == 202, r.text
        url = r.json()["url"]

        def fitting():
            audits = client.get(url).json()["audits"]
            return len(audits) == 2 and any(_mid_fit(client, a["url"]) for a in audits)
        wait_for(fitting, 300, 1, "the batch to fan out and start fitting")
        own_redis.kill()
        own_redis.start()
        fault_end = time.monotonic()
        batch = wait_for(lambda: (lambda b: b if b["status"] == "done" else None)(
            client.get(url).json()), 900, 2, "the batch to finish")
        print(f"batch: finished {time.monotonic() - fault_end:.0f} s after the broker came back")
        with db_sessions() as s:  # the reconciler re-sent what the broker lost
            resent = s.scalar(sa.text(
                "SELECT count(*) FROM audit_scopes sc JOIN audits a ON a.id = sc.audit_id "
                "WHERE a.batch_id = :b AND sc.dispatched_at > a.created_at + interval '3 s'"),
                {"b": batch["id"]})
        assert resent >= 1
        assert batch["progress"]["done"] == 2 and batch["summary"]["total"] == 2
        for a in batch["audits"]:
            audit = client.get(a["url"]).json()
            assert audit["status"] == "done", audit["reason"]
            rows = stored(db_sessions, audit["id"])  # (rows, distinct keys) per table
            assert all(total == distinct for total, distinct in rows.values()), rows
            assert rows["scope_results"][0] == 2
    app.state.engine.dispose()


def test_database_refused_for_30_s_mid_audit_every_audit_completes_once(
        client, auth_headers, start_worker, db_sessions, database_url):
    url = sa.engine.make_url(database_url)
    proxy = TcpProxy((url.host, url.port or 5432))
    through_proxy = url.set(host="127.0.0.1", port=proxy.port).render_as_string(hide_password=False)
    try:
        start_worker("db-fault", env={**FAST_RECONCILER, "PPL_AUDIT_DATABASE_URL": through_proxy})
        ids = _submit(client, auth_headers, 3, "database fault")
        wait_for(lambda: _mid_fit(client, f"/api/v1/audits/{ids[0]}"), 300, 1, "a fit to start")
        proxy.cut()
        time.sleep(30)
        proxy.restore()
        fault_end = time.monotonic()
        wait_for(lambda: _all_finished(db_sessions, ids), 600, 1, "every audit to finish")
        print(f"database back after 30 s: all finished {time.monotonic() - fault_end:.0f} s later")
        for aid in ids:
            audit = client.get(f"/api/v1/audits/{aid}").json()
            assert audit["status"] == "done", audit["reason"]
            assert_stored_once(db_sessions, audit)
    finally:
        proxy.close()


def test_fits_outlasting_the_task_time_limit_end_the_scope_with_a_reason(
        service_settings, auth_headers, start_worker, db_sessions):
    from fastapi.testclient import TestClient

    from service.api import create_app

    # no standby PyMC session: after the task the pool process would start a fresh one,
    # which the check below (nothing left but the pool processes) would count
    worker = start_worker("time-limit", env={**FAST_RECONCILER,
                                             "PPL_AUDIT_CELERY__TASK_TIME_LIMIT": "90",
                                             "PPL_AUDIT_CELERY__VISIBILITY_TIMEOUT": "100",
                                             "PPL_AUDIT_CELERY__PYMC_STANDBY": "false"})
    endless = {**TINY, "lazyppl": {"chains": 2, "warmup": 10_000_000, "draws": 100_000,
                                   "thin": 10_000}}
    # an operator who allows fits this long (the default caps refuse them with a 422)
    limits = service_settings.limits.model_copy(update={"lazyppl_steps": 10**13,
                                                        "final_draws": 10**6})
    app = create_app(service_settings.model_copy(update={"limits": limits}))
    with TestClient(app) as client:
        r = client.post("/api/v1/audits", json=pair(scopes=("visible",), settings=endless,
                                                     name="outlasts its time limit"),
                        headers=auth_headers)
        assert r.status_code == 202, r.text
        audit = wait_for(lambda: (lambda a: a if a["status"] in ("done", "failed") else None)(
            client.get(r.json()["url"]).json()), 300, 1, "the audit to stop")
    app.state.engine.dispose()
    assert audit["status"] == "done" and audit["verdict"] == "inconclusive", audit
    scope = audit["evidence"]["scopes"]["visible"]
    assert scope["reason"].startswith("budget spent") and scope["wall_seconds_cap"] == 51
    assert scope["error"]["details"]["limit"] == "timeout"
    # nothing but the worker's own pool processes is left (the fits were killed)
    own = open(f"/proc/{worker.pid}/cmdline", "rb").read()
    left = [p for p in descendants(worker.pid) if open(f"/proc/{p}/cmdline", "rb").read() != own]
    assert left == []


def test_a_unit_that_kills_its_worker_every_time_ends_failed_after_3_attempts(
        client, auth_headers, start_worker, db_sessions):
    worker = start_worker("poison", env=FAST_RECONCILER)
    r = client.post("/api/v1/audits", json=pair(scopes=("visible",), settings=TINY,
                                                 name="kills its worker"), headers=auth_headers)
    aid = r.json()["id"]

    def picked(attempt):
        """The owner of the ``attempt``-th claim, from the audit's events (a poll of the
        scope's row could miss a claim that ended between two looks)."""
        with db_sessions() as s:
            rows = s.execute(sa.text("SELECT data FROM events WHERE audit_id = :a AND "
                                     "kind = 'picked' ORDER BY id"), {"a": aid}).scalars().all()
        return rows[attempt - 1]["owner"] if len(rows) >= attempt else None

    for attempt in (1, 2, 3):  # each claim's process dies (as an OOM kill or a segfault would)
        owner = wait_for(lambda: picked(attempt), 300, 0.2, f"claim {attempt}",
                         log=worker.log_path)
        os.kill(int(owner.split(":")[1]), signal.SIGKILL)
    audit = wait_for(lambda: (lambda a: a if a["status"] in ("done", "failed") else None)(
        client.get(r.json()["url"]).json()), 300, 1, "the audit to fail")
    assert (audit["status"], audit["reason"]) == ("failed", steps.lost_reason(3))
    time.sleep(10)  # several reconciler passes: never sent again
    with db_sessions() as s:
        attempts, lost = s.execute(sa.text("SELECT attempts, lost_attempts FROM audit_scopes "
                                           "WHERE audit_id = :a"), {"a": aid}).one()
    assert (attempts, lost) == (3, 3)
