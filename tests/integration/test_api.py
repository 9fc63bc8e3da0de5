"""The REST API against real PostgreSQL and Redis (no worker needed here): auth, input
validation with messages, body limit, refused programs, paging and filters, 404s.

Every refused request must leave the database and the broker queue untouched.
"""
import json
import uuid
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration

FIX = Path(__file__).resolve().parents[1] / "fixtures" / "eight_schools"


def pair(**overrides) -> dict:
    body = {
        "name": "eight schools",
        "pymc": {"source": (FIX / "model.py").read_text()},
        "lazyppl": {"source": (FIX / "Model.hs").read_text()},
        "scopes": {"visible": json.loads((FIX / "visible.json").read_text())},
    }
    body.update(overrides)
    return body


@pytest.fixture
def unchanged(row_counts, queue_length):
    """Asserts at the end of the test that nothing was stored or queued."""
    before, queued = row_counts(), queue_length()
    yield
    after = row_counts()
    after.pop("api_tokens"), before.pop("api_tokens")
    assert after == before, "a refused request stored rows"
    assert queue_length() == queued, "a refused request queued a task"


def test_submitting_without_a_token_is_401(client, unchanged):
    r = client.post("/api/v1/audits", json=pair())
    assert r.status_code == 401
    assert "API token is required" in r.json()["message"]
    assert r.headers["www-authenticate"] == "Bearer"


def test_a_wrong_token_is_401(client, unchanged):
    r = client.post("/api/v1/audits", json=pair(),
                    headers={"Authorization": "Bearer ppla_not-a-real-token"})
    assert r.status_code == 401
    assert r.json()["message"] == "the API token is unknown or revoked"


def test_a_revoked_token_is_401(client, db_sessions, service_settings, unchanged):
    from service.db import tokens

    with db_sessions.begin() as s:
        _, plaintext = tokens.create_token(s, "to-revoke", service_settings.secret)
    with db_sessions.begin() as s:
        assert tokens.revoke_token(s, "to-revoke") == 1
    r = client.post("/api/v1/batches", json={"source": "posteriordb", "posteriors": "all"},
                    headers={"Authorization": f"Bearer {plaintext}"})
    assert r.status_code == 401


def test_tokens_are_stored_only_as_hashes(db_sessions, api_token):
    import sqlalchemy as sa

    with db_sessions() as s:
        stored = s.scalars(sa.text("SELECT token_hash FROM api_tokens")).all()
    assert api_token not in stored and all(len(h) == 64 for h in stored)


@pytest.mark.parametrize("body, expected", [
    ('{"name": "x", "pymc": ', "not valid JSON"),
    (json.dumps({"name": "x"}), "pymc: required field is missing"),
    (json.dumps(pair(scopes="visible")), "scopes: Input should be a valid dictionary"),
    (json.dumps(pair(name=12)), "name: Input should be a valid string"),
    (json.dumps(pair(settings={"pymc": {"chainz": 4}})), "settings.pymc.chainz: unknown key"),
    (json.dumps(pair(settings={"rule": {"k": -1}})), "settings.rule.k: Input should be greater than 0"),
    (json.dumps(pair(scopes={})), "scopes: Dictionary should have at least 1 item"),
    (json.dumps(pair(colour="red")), "colour: unknown key"),
    (json.dumps(pair(parameters=["mu", "mu"])), "parameters lists a name twice"),
    (json.dumps(pair(name="bad\u0000name")), "name contains a NUL character"),
    ('{"name": "x", "pymc": {"source": "a"}, "lazyppl": {"source": "b"}, '
     '"scopes": {"s": {"y": NaN}}}', "only finite numbers"),
])
def test_invalid_input_is_422_with_a_message_and_nothing_queued(
        client, auth_headers, unchanged, body, expected):
    r = client.post("/api/v1/audits", content=body,
                    headers={**auth_headers, "Content-Type": "application/json"})
    assert r.status_code == 422, r.text
    assert expected in r.json()["message"], r.json()["message"]


def test_a_body_over_the_limit_is_413_and_nothing_queued(client, auth_headers, service_settings,
                                                         unchanged):
    huge = pair(scopes={"big": {"y": [1.0] * (service_settings.max_body_bytes // 4)}})
    r = client.post("/api/v1/audits", json=huge, headers=auth_headers)
    assert r.status_code == 413
    assert f"limit of {service_settings.max_body_bytes} bytes" in r.json()["message"]


def test_a_streamed_body_over_the_limit_is_413(client, auth_headers, service_settings, unchanged):
    chunk = b" " * 65536

    def body():
        for _ in range(service_settings.max_body_bytes // len(chunk) + 2):
            yield chunk

    r = client.post("/api/v1/audits", content=body(),
                    headers={**auth_headers, "Content-Type": "application/json"})
    assert r.status_code == 413


def test_a_refused_program_is_recorded_as_an_error_audit_and_not_queued(
        client, auth_headers, row_counts, queue_length):
    before, queued = row_counts(), queue_length()
    source = "import os\n\ndef model(data):\n    return os.system('true')\n"
    r = client.post("/api/v1/audits", json=pair(name="refused", pymc={"source": source}),
                    headers=auth_headers)
    assert r.status_code == 202, r.text
    body = r.json()
    assert body["status"] == "done" and body["verdict"] == "error"
    assert "os" in body["reason"] and "line 1" in body["reason"]
    assert queue_length() == queued
    assert row_counts()["audits"] == before["audits"] + 1
    audit = client.get(body["url"]).json()
    assert audit["verdict"] == "error" and audit["error"]["code"] == "refused"
    assert audit["error"]["details"]["line"] == 1


def test_unknown_audit_is_404_and_a_bad_id_is_422(client):
    assert client.get(f"/api/v1/audits/{uuid.uuid4()}").status_code == 404
    r = client.get("/api/v1/audits/not-a-uuid")
    assert r.status_code == 422 and "audit_id" in r.json()["message"]


def test_list_is_paged_and_filterable(client, auth_headers, db_sessions):
    from service.db import audits as repo

    with db_sessions.begin() as s:
        for i in range(3):
            a = repo.create_audit(s, name=f"paged-{i}", pymc_source="p", lazyppl_source="l",
                                  scopes={"s": {"i": i}}, parameters=None, settings={})
            repo.set_status(s, a, "done", verdict="disagree" if i == 0 else "agree")
    page = client.get("/api/v1/audits", params={"limit": 2, "offset": 0}).json()
    assert len(page["items"]) == 2 and page["total"] >= 3 and page["limit"] == 2
    rest = client.get("/api/v1/audits", params={"limit": 200, "offset": 2}).json()
    assert len(rest["items"]) == page["total"] - 2
    dis = client.get("/api/v1/audits", params={"verdict": "disagree", "limit": 200}).json()
    assert dis["total"] >= 1 and all(a["verdict"] == "disagree" for a in dis["items"])
    done = client.get("/api/v1/audits", params={"status": "done", "limit": 200}).json()
    assert all(a["status"] == "done" for a in done["items"])
    r = client.get("/api/v1/audits", params={"verdict": "maybe"})
    assert r.status_code == 422 and "verdict" in r.json()["message"]


def test_programs_and_data_are_stored_once_by_content_hash(db_sessions):
    import sqlalchemy as sa

    from service.db import audits as repo

    with db_sessions.begin() as s:
        for _ in range(2):
            repo.create_audit(s, name="dedup", pymc_source="same pymc", lazyppl_source="same hs",
                              scopes={"a": {"x": [1, 2]}, "b": {"x": [1, 2]}}, parameters=None,
                              settings={})
    with db_sessions() as s:
        assert s.scalar(sa.text("SELECT count(*) FROM programs WHERE source = 'same pymc'")) == 1
        assert s.scalar(sa.text("""SELECT count(DISTINCT dataset_id) FROM audit_scopes
            JOIN audits ON audits.id = audit_id WHERE audits.name = 'dedup'""")) == 1


def test_unknown_posterior_in_a_batch_is_422(client, auth_headers, unchanged):
    r = client.post("/api/v1/batches", json={"source": "posteriordb", "posteriors": ["nope-nope"]},
                    headers=auth_headers)
    assert r.status_code == 422 and "unknown posterior(s): nope-nope" in r.json()["message"]


def test_batch_body_is_validated(client, auth_headers, unchanged):
    r = client.post("/api/v1/batches", json={"source": "stan-db", "posteriors": "all"},
                    headers=auth_headers)
    assert r.status_code == 422 and "source" in r.json()["message"]


def test_health_reports_database_and_broker(client):
    body = client.get("/api/v1/health").json()
    assert body["database"] is True and body["broker"] is True


def test_reads_can_require_a_token(service_settings, api_token):
    from fastapi.testclient import TestClient

    from service.api import create_app

    locked = create_app(service_settings.model_copy(update={"reads_require_token": True}))
    with TestClient(locked) as c:
        assert c.get("/api/v1/audits").status_code == 401
        assert c.get("/", follow_redirects=False).status_code == 401
        ok = c.get("/api/v1/audits", headers={"Authorization": f"Bearer {api_token}"})
        assert ok.status_code == 200
    locked.state.engine.dispose()


def test_openapi_lists_the_spec_resources(client):
    paths = client.get("/openapi.json").json()["paths"]
    assert {"/api/v1/audits", "/api/v1/audits/{audit_id}", "/api/v1/batches",
            "/api/v1/batches/{batch_id}"} <= set(paths)


def test_api_docs_use_no_cdn(client):
    html = client.get("/docs").text
    assert "/static/swagger-ui/swagger-ui-bundle.js" in html and "cdn" not in html.lower()
    js = client.get("/static/swagger-ui/swagger-ui-bundle.js")
    assert js.status_code == 200 and len(js.content) > 100_000


def test_an_unreachable_broker_is_503_and_the_audit_says_so(service_settings, auth_headers):
    from fastapi.testclient import TestClient

    from service.api import create_app

    # nothing listens on port 1: the broker is down for this app only
    down = create_app(service_settings.model_copy(update={"broker_url": "redis://127.0.0.1:1/0"}))
    down.state.dispatcher.app.conf.broker_connection_retry = False
    down.state.dispatcher.app.conf.broker_connection_max_retries = 0
    with TestClient(down) as c:
        r = c.post("/api/v1/audits", json=pair(name="broker down"), headers=auth_headers)
        assert r.status_code == 503, r.text
        assert "broker is unreachable" in r.json()["message"]
        audit_id = r.json()["message"].split("audit ")[1].split(" ")[0]
        assert c.get(f"/api/v1/audits/{audit_id}").json()["status"] == "failed"
    down.state.engine.dispose()


def test_an_unreachable_database_is_503_not_500(service_settings):
    from fastapi.testclient import TestClient

    from service.api import create_app

    down = create_app(service_settings.model_copy(update={
        "database_url": "postgresql+psycopg://postgres@127.0.0.1:1/none"}))
    with TestClient(down) as c:
        r = c.get("/api/v1/audits")
        assert r.status_code == 503 and "database is unavailable" in r.json()["message"]
        assert c.get("/api/v1/health").json()["database"] is False
    down.state.engine.dispose()
