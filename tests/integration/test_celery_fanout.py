"""Batches fan out (issue 11, item 4): a posteriordb batch's scopes are separate Celery
tasks, so two workers share one batch, and what they store does not depend on which
worker ran which scope. Real workers on PostgreSQL and Redis; small settings (the
verdicts are not the point, the draws are). The timing side is benchmarks/fanout.py.
"""
import hashlib
from pathlib import Path

import pytest
import sqlalchemy as sa

from service.db.draws import decode_draws
from tests.conftest import wait_for

pytestmark = [pytest.mark.integration, pytest.mark.slow, pytest.mark.usefixtures("no_leftover_work")]

#: the two smallest data sets of the quickest posteriors in reports/corpus.json
POSTERIORS = ["eight_schools-eight_schools_noncentered", "mesquite-logmesquite_logvolume"]
#: one look, few draws, PyMC's own NUTS (its C code comes from the warm compile cache)
SMALL = {"pymc": {"chains": 2, "tune": 200, "draws": 200, "backend": "pymc",
                  "retry_target_accepts": []},
         "lazyppl": {"chains": 2, "warmup": 2000, "draws": 200, "thin": 2},
         "budget": {"max_looks": 1}}


def _run_batch(client, auth_headers) -> str:
    r = client.post("/api/v1/batches", json={"source": "posteriordb", "posteriors": POSTERIORS,
                                             "settings": SMALL}, headers=auth_headers)
    assert r.status_code == 202, r.text
    url = r.json()["url"]

    def finished():
        body = client.get(url).json()
        return body if body["status"] in ("done", "failed", "cancelled") else None
    body = wait_for(finished, 600, interval=1.0, what=f"batch {url} to finish")
    assert body["status"] == "done", body
    return body["id"]


def _stored(db_sessions, batch_id: str) -> dict:
    """Per posterior: verdicts, and per (scope, language, look) a hash of the draws."""
    out: dict = {}
    with db_sessions() as s:
        for posterior, verdict in s.execute(sa.text(
                "SELECT posterior, verdict FROM audits WHERE batch_id = :b"), {"b": batch_id}):
            out[posterior] = {"verdict": verdict}
        for posterior, scope, verdict in s.execute(sa.text(
                "SELECT a.posterior, r.scope, r.verdict FROM scope_results r JOIN audits a "
                "ON a.id = r.audit_id WHERE a.batch_id = :b"), {"b": batch_id}):
            out[posterior][scope] = verdict
        for posterior, scope, language, look, blob in s.execute(sa.text(
                "SELECT a.posterior, f.scope, f.language, f.look, f.draws FROM fits f JOIN "
                "audits a ON a.id = f.audit_id WHERE a.batch_id = :b"), {"b": batch_id}):
            h = hashlib.sha256()
            for name, values in sorted(decode_draws(blob).items()):
                h.update(name.encode() + values.tobytes())
            out[posterior][f"{scope}/{language}/{look}"] = h.hexdigest()
    return out


def _picked_by(db_sessions, batch_id: str) -> dict[str, int]:
    """Scope -> pid of the pool process that claimed it (``host:pid:task`` lease owner)."""
    with db_sessions() as s:
        rows = s.execute(sa.text(
            "SELECT a.posterior, e.message FROM events e JOIN audits a ON a.id = e.audit_id "
            "WHERE a.batch_id = :b AND e.kind = 'picked'"), {"b": batch_id}).all()
    # "scope visible picked up by host:pid:task (attempt 1)"
    return {f"{p}/{m.split()[1]}": int(m.split(" by ")[1].split(":")[1]) for p, m in rows}


def _pool(worker) -> set[int]:
    return {int(c) for c in Path(f"/proc/{worker.pid}/task/{worker.pid}/children").read_text().split()}


def test_two_workers_share_a_batch_and_store_what_one_worker_stores(
        client, auth_headers, start_worker, db_sessions):
    """catches: a batch run as one task (or scopes pinned to the worker that fanned it
    out), and seeds or draws that depend on the worker or on what ran before in it."""
    first = start_worker("fan-one")
    alone = _run_batch(client, auth_headers)
    one_worker = _picked_by(db_sessions, alone)
    assert len(one_worker) == 2 * len(POSTERIORS)
    assert set(one_worker.values()) <= _pool(first)

    second = start_worker("fan-two")
    wait_for(lambda: b" ready." in Path(second.log_path).read_bytes(), 120,
             what="the second worker to be ready")
    shared = _run_batch(client, auth_headers)
    two_workers = _picked_by(db_sessions, shared)
    assert len(two_workers) == 2 * len(POSTERIORS)
    ran = {w: sorted(k for k, pid in two_workers.items() if pid in _pool(proc))
           for w, proc in (("first", first), ("second", second))}
    assert ran["first"] and ran["second"], f"one worker ran the whole batch: {ran}"
    assert sorted(ran["first"] + ran["second"]) == sorted(two_workers)

    by_one, by_two = _stored(db_sessions, alone), _stored(db_sessions, shared)
    assert set(by_one) == set(POSTERIORS)
    for posterior in POSTERIORS:  # 2 scopes x 2 languages x 1 look of draws, 3 verdicts
        assert len(by_one[posterior]) == 1 + 2 + 4, by_one[posterior]
    assert by_two == by_one
