"""Per-token quotas and cancellation (issue 13, Build item 3) through the real app
against PostgreSQL and Redis, without a worker: the quota answers 429 with
Retry-After, only the submitting token cancels, a cancelled audit is never claimed,
re-sent by the reconciler or given a late result, an identical "all" batch is answered
with the open one, and the page's cancel form (no script) works with a token field.
The worker side (a running fit killed) is in test_cancel_worker.py."""
import datetime as dt
import re
import uuid

import pytest
import sqlalchemy as sa

from service import steps
from service.db import tokens
from service.db.base import utcnow
from service.db.models import AuditScope, Event
from service.reconcile import BrokerView, reconcile
from tests.integration.test_api import pair

pytestmark = pytest.mark.integration
HOUR = dt.timedelta(hours=1)


@pytest.fixture
def new_token(db_sessions, service_settings):
    """``new_token()`` -> (id, headers) of a fresh token (no open work counted yet)."""
    def make():
        with db_sessions.begin() as s:
            row, plaintext = tokens.create_token(s, f"cancel-{uuid.uuid4().hex[:6]}",
                                                 service_settings.secret)
            return row.id, {"Authorization": f"Bearer {plaintext}"}, plaintext
    return make


@pytest.fixture
def app_with(service_settings):
    """``app_with(**caps)`` -> TestClient of an app with changed limits."""
    from fastapi.testclient import TestClient

    from service.api import create_app

    made = []

    def make(**caps):
        limits = service_settings.limits.model_copy(update=caps)
        app = create_app(service_settings.model_copy(update={"limits": limits}))
        client = TestClient(app, follow_redirects=False)
        made.append((app, client))
        return client

    yield make
    for app, client in made:
        client.close()
        app.state.engine.dispose()


class Recorder:
    """A reconciler sender that only records what it would send."""

    def __init__(self):
        self.sent = []

    def scope(self, a, sc): self.sent.append((a, sc))
    def finish(self, a): self.sent.append((a, "finish"))
    def batch(self, b): self.sent.append((b, "batch"))


def _events(db_sessions, audit_id):
    with db_sessions() as s:
        return s.scalars(sa.select(Event).where(Event.audit_id == audit_id)
                         .order_by(Event.id)).all()


def test_the_audit_quota_answers_429_with_retry_after_and_frees_on_cancel(app_with, new_token):
    client = app_with(token_open_audits=2, quota_retry_after_seconds=45)
    _, headers, _ = new_token()
    ids = [client.post("/api/v1/audits", json=pair(), headers=headers) for _ in range(2)]
    assert [r.status_code for r in ids] == [202, 202], ids[-1].text
    over = client.post("/api/v1/audits", json=pair(), headers=headers)
    assert over.status_code == 429, over.text
    assert over.headers["retry-after"] == "45"
    assert "PPL_AUDIT_LIMITS__TOKEN_OPEN_AUDITS" in over.json()["message"]
    _, other, _ = new_token()  # the quota is per token
    extra = client.post("/api/v1/audits", json=pair(), headers=other)
    assert extra.status_code == 202
    gone = client.delete(ids[0].json()["url"], headers=headers)
    assert gone.status_code == 200 and gone.json()["status"] == "cancelled", gone.text
    again = client.post("/api/v1/audits", json=pair(), headers=headers)
    assert again.status_code == 202, again.text
    for r, h in ((ids[1], headers), (extra, other), (again, headers)):  # nothing left queued
        assert client.delete(r.json()["url"], headers=h).status_code == 200


def test_the_batch_quota_answers_429(app_with, new_token):
    client = app_with(token_open_batches=1)
    _, headers, _ = new_token()
    first = client.post("/api/v1/batches", headers=headers,
                        json={"source": "posteriordb", "posteriors": ["arK-arK"]})
    assert first.status_code == 202, first.text
    over = client.post("/api/v1/batches", headers=headers,
                       json={"source": "posteriordb", "posteriors": ["arma-arma11"]})
    assert over.status_code == 429 and over.headers["retry-after"], over.text
    assert "TOKEN_OPEN_BATCHES" in over.json()["message"]
    assert client.delete(first.json()["url"], headers=headers).json()["status"] == "cancelled"
    ok = client.post("/api/v1/batches", headers=headers,
                     json={"source": "posteriordb", "posteriors": ["arma-arma11"]})
    assert ok.status_code == 202, ok.text
    assert client.delete(ok.json()["url"], headers=headers).status_code == 200


def test_only_the_submitting_token_cancels_and_who_and_when_are_logged(
        client, new_token, db_sessions):
    owner_id, owner, _ = new_token()
    _, stranger, _ = new_token()
    url = client.post("/api/v1/audits", json=pair(), headers=owner).json()["url"]
    assert client.delete(url).status_code == 401
    refused = client.delete(url, headers=stranger)
    assert refused.status_code == 403, refused.text
    assert client.get(url).json()["status"] == "queued"
    before = utcnow()
    r = client.delete(url, headers=owner)
    assert r.status_code == 200 and r.json()["status"] == "cancelled"
    assert client.delete(url, headers=owner).status_code == 200  # idempotent
    audit = client.get(url).json()
    assert audit["status"] == "cancelled" and audit["finished_at"]
    assert audit["reason"] == f"cancelled by token #{owner_id}"
    cancelled = [e for e in _events(db_sessions, uuid.UUID(audit["id"])) if e.kind == "cancelled"]
    assert len(cancelled) == 1 and cancelled[0].data == {"token_id": owner_id}
    assert cancelled[0].created_at >= before
    logged = [e for e in audit["events"] if e["to"] == "cancelled"]
    assert logged and f"#{owner_id}" in logged[0]["message"] and logged[0]["at"]
    assert client.delete(f"/api/v1/audits/{uuid.uuid4()}", headers=owner).status_code == 404


def test_a_finished_audit_cannot_be_cancelled(client, new_token):
    _, headers, _ = new_token()
    body = pair()
    body["pymc"] = {"source": "import os\n"}  # refused by the verifier: ends done at once
    r = client.post("/api/v1/audits", json=body, headers=headers)
    assert r.status_code == 202 and r.json()["status"] == "done", r.text
    assert client.delete(r.json()["url"], headers=headers).status_code == 409


def test_a_cancelled_audit_is_never_claimed_resent_or_given_a_late_result(
        client, new_token, db_sessions):
    from tests.integration.test_celery_steps import _outcome

    _, headers, _ = new_token()
    aid = uuid.UUID(client.post("/api/v1/audits", json=pair(), headers=headers).json()["id"])
    # a worker claimed it, then vanished (lease long expired) ...
    job = steps.claim_scope(db_sessions, aid, "visible", steps.Lease("elsewhere:4242:t1", 1))
    assert isinstance(job, steps.ScopeJob)
    assert client.delete(f"/api/v1/audits/{aid}", headers=headers).status_code == 200
    with db_sessions.begin() as s:
        s.execute(sa.update(AuditScope).where(AuditScope.audit_id == aid)
                  .values(dispatched_at=utcnow() - HOUR, lease_expires_at=utcnow() - HOUR))
    sender = Recorder()
    result = reconcile(db_sessions, sender, BrokerView(), utcnow() + HOUR, 0)
    assert not result.skipped
    assert [x for x in sender.sent if x[0] == aid] == []
    # ... a re-delivered task does nothing, and the late result of the first is refused
    assert steps.claim_scope(db_sessions, aid, "visible", steps.Lease("rescuer:7:t1")) is None
    assert steps.save_scope(db_sessions, job, _outcome("visible")) is False
    with db_sessions() as s:
        assert s.scalar(sa.text("SELECT count(*) FROM scope_results WHERE audit_id = :a"),
                        {"a": aid}) == 0
        assert s.scalar(sa.text("SELECT count(*) FROM fits WHERE audit_id = :a"), {"a": aid}) == 0
    assert client.get(f"/api/v1/audits/{aid}").json()["status"] == "cancelled"


def test_an_identical_all_batch_is_answered_with_the_open_one(client, new_token, db_sessions):
    _, first, _ = new_token()
    _, second, _ = new_token()
    body = {"source": "posteriordb", "posteriors": "all",
            "settings": {"seed": 777001, "budget": {"max_looks": 1}}}
    made = client.post("/api/v1/batches", json=body, headers=first)
    assert made.status_code == 202, made.text
    same = client.post("/api/v1/batches", json=body, headers=second)  # any token
    assert same.status_code == 200 and same.json()["id"] == made.json()["id"], same.text
    other = client.post("/api/v1/batches", headers=first,
                        json={**body, "settings": {"seed": 777002, "budget": {"max_looks": 1}}})
    assert other.status_code == 202 and other.json()["id"] != made.json()["id"]
    # a fan-out that runs after the cancel creates nothing
    assert client.delete(made.json()["url"], headers=second).status_code == 403
    assert client.delete(made.json()["url"], headers=first).json()["status"] == "cancelled"
    steps.fan_out_batch(db_sessions, uuid.UUID(made.json()["id"]), lambda n: 1 / 0,
                        lambda a, s: None)
    assert client.get(made.json()["url"]).json()["audits"] == []
    again = client.post("/api/v1/batches", json=body, headers=first)
    assert again.status_code == 202 and again.json()["id"] != made.json()["id"]
    for r in (other, again):
        assert client.delete(r.json()["url"], headers=first).status_code == 200


def test_the_cancel_form_needs_the_token_and_has_no_script(app_with, new_token):
    client = app_with()
    _, headers, plaintext = new_token()
    r = client.post("/api/v1/audits", json=pair(), headers=headers)
    page = client.get(r.json()["page"]).text
    assert f'href="/audits/{r.json()["id"]}/cancel"' in page
    form = client.get(f'/audits/{r.json()["id"]}/cancel')
    assert form.status_code == 200 and "<script" not in form.text
    assert re.search(r'<form method="post" action="/audits/[0-9a-f-]+/cancel">', form.text)
    assert "script-src 'self'" in form.headers["content-security-policy"]
    wrong = client.post(f'/audits/{r.json()["id"]}/cancel', data={"token": "nope"})
    assert wrong.status_code == 401 and "unknown or revoked" in wrong.text
    assert client.get(r.json()["url"]).json()["status"] == "queued"
    done = client.post(f'/audits/{r.json()["id"]}/cancel', data={"token": plaintext})
    assert done.status_code == 303 and done.headers["location"] == r.json()["page"]
    assert client.get(r.json()["url"]).json()["status"] == "cancelled"
    assert "Cancel this audit" not in client.get(r.json()["page"]).text
    b = client.post("/api/v1/batches", headers=headers,
                    json={"source": "posteriordb", "posteriors": ["arK-arK"]})
    assert f'href="/batches/{b.json()["id"]}/cancel"' in client.get(b.json()["page"]).text
    done = client.post(f'/batches/{b.json()["id"]}/cancel', data={"token": plaintext})
    assert done.status_code == 303
    assert client.get(b.json()["url"]).json()["status"] == "cancelled"


def test_a_batch_cancel_cancels_its_open_audits_which_belong_to_its_token(client, new_token):
    from corpus.loader import load

    token_id, owner, _ = new_token()
    _, stranger, _ = new_token()
    for names, via in ((["arK-arK", "arma-arma11"], "batch"), (["arK-arK"], "audit")):
        b = client.post("/api/v1/batches", headers=owner,
                        json={"source": "posteriordb", "posteriors": names})
        assert b.status_code == 202, b.text
        batch_id = uuid.UUID(b.json()["id"])
        steps.fan_out_batch(client.app.state.sessions, batch_id, load, lambda a, s: None)
        audits = client.get(b.json()["url"]).json()["audits"]
        assert len(audits) == len(names) and {a["status"] for a in audits} == {"queued"}
        first = f"/api/v1/audits/{audits[0]['id']}"
        assert client.delete(first, headers=stranger).status_code == 403
        if via == "batch":
            assert client.delete(b.json()["url"], headers=owner).json()["status"] == "cancelled"
            batch = client.get(b.json()["url"]).json()
            assert batch["status"] == "cancelled"
            assert batch["progress"]["cancelled"] == len(names)
        else:  # its only audit cancelled: the batch closes, the cancelled audit not an error
            assert client.delete(first, headers=owner).json()["status"] == "cancelled"
            batch = client.get(b.json()["url"]).json()
            assert batch["status"] == "done" and batch["summary"]["posteriors"]["error"] == 0
        for a in batch["audits"]:
            detail = client.get(f"/api/v1/audits/{a['id']}").json()
            assert detail["status"] == "cancelled"
            assert detail["reason"] == f"cancelled by token #{token_id}"
