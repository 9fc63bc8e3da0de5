"""Issue 13's small findings through the real app (PostgreSQL, Redis): surrogates and
control characters are 422s, names are matched whole, security headers on every page,
no token names in the public event log, health detail behind the read gate, and no
public pepper outside an explicit development environment."""
import json

import pytest

from tests.integration.test_api import pair

pytestmark = pytest.mark.integration


@pytest.fixture
def unchanged(row_counts, queue_length):
    before, queued = row_counts(), queue_length()
    yield
    after = row_counts()
    after.pop("api_tokens"), before.pop("api_tokens")
    assert after == before, "a refused request stored rows"
    assert queue_length() == queued, "a refused request queued a task"


def _raw(body: dict) -> str:
    # json.dumps writes a lone surrogate as the escape "\udfff", as an attacker would send it
    return json.dumps(body)


DATA = {"J": 1, "y": [1.0], "sigma": [1.0]}
BAD = [
    (pair(scopes={"visible": {**DATA, "label": "\udfff"}}), "lone surrogate"),
    (pair(scopes={"visible": {**DATA, "\ud800key": 1}}), "lone surrogate"),
    # pydantic refuses a surrogate in a str field itself ("valid string")
    (pair(name="eight \udfff schools"), "name: "),
    (pair(pymc={"source": "def model(data):\n    pass  # \udfff\n"}), "pymc.source: "),
    (pair(settings={"\udfff": 1}), "settings: "),
    (pair(scopes={"visible": {**DATA, "label": "bell\x07"}}), "control character"),
    (pair(scopes={"visible": {**DATA, "ke\ny": 1}}), "control character"),
    (pair(name="two\nlines"), "control character"),
    (pair(scopes={"visible\n": DATA}), "must match"),
    (pair(scopes={"visible\udfff": DATA}), "must match"),
    (pair(parameters=["mu\n"]), "is not a name"),
]


@pytest.mark.parametrize("body, expected", BAD)
def test_surrogates_control_characters_and_trailing_newlines_are_422(
        client, auth_headers, unchanged, body, expected):
    r = client.post("/api/v1/audits", content=_raw(body),
                    headers={**auth_headers, "Content-Type": "application/json"})
    assert r.status_code == 422, r.text
    assert expected in r.json()["message"], r.json()["message"]


def test_a_surrogate_in_a_batch_posterior_name_is_422(client, auth_headers, unchanged):
    r = client.post("/api/v1/batches", content=_raw({"source": "posteriordb",
                                                     "posteriors": ["eight\udfff"]}),
                    headers={**auth_headers, "Content-Type": "application/json"})
    assert r.status_code == 422, r.text


PAGES = ["/", "/batches", "/api/v1/audits", "/api/v1/health", "/docs", "/openapi.json",
         "/api/v1/audits/00000000-0000-0000-0000-000000000000", "/no-such-page"]


@pytest.mark.parametrize("path", PAGES)
def test_security_headers_on_every_answer(client, path):
    r = client.get(path)
    csp = r.headers.get("content-security-policy", "")
    assert "frame-ancestors 'none'" in csp and "default-src 'self'" in csp, (path, csp)
    assert "'unsafe-inline'" not in csp.split("script-src")[1].split(";")[0], csp
    assert r.headers.get("x-content-type-options") == "nosniff"
    assert r.headers.get("x-frame-options") == "DENY"
    assert r.headers.get("referrer-policy") == "no-referrer"


def test_the_api_docs_inline_script_is_allowed_by_its_hash_only(client):
    import base64
    import hashlib
    import re

    r = client.get("/docs")
    inline = [s for s in re.findall(r"<script>(.*?)</script>", r.text, re.S)]
    assert inline, "the docs page has its inline start-up script"
    csp = r.headers["content-security-policy"]
    for script in inline:
        digest = base64.b64encode(hashlib.sha256(script.encode()).digest()).decode()
        assert f"'sha256-{digest}'" in csp


def test_the_event_log_names_a_token_by_id_not_by_name(client, auth_headers, db_sessions):
    from service.db import tokens

    r = client.post("/api/v1/audits", json=pair(name="whose token"), headers=auth_headers)
    assert r.status_code == 202, r.text
    detail = client.get(r.json()["url"]).text
    page = client.get(r.json()["page"]).text
    with db_sessions() as s:
        token = [t for t in tokens.list_tokens(s) if t.name == "tests"][0]
    for text in (detail, page):
        assert "'tests'" not in text and "token 'tests'" not in text
        assert f"token #{token.id}" in text


def test_health_detail_needs_a_token_when_reads_do(service_settings, api_token):
    from fastapi.testclient import TestClient

    from service.api import create_app

    locked = create_app(service_settings.model_copy(update={"reads_require_token": True}))
    with TestClient(locked) as c:
        r = c.get("/api/v1/health")
        assert r.status_code == 401, r.text
        ok = c.get("/api/v1/health", headers={"Authorization": f"Bearer {api_token}"})
        assert ok.status_code == 200 and ok.json()["database"] is True
    locked.state.engine.dispose()


def test_the_public_pepper_needs_an_explicit_development_environment(monkeypatch, tmp_path):
    from pydantic import ValidationError

    from service.config import DEFAULT_SECRET, Settings

    for name in ("PPL_AUDIT_ENVIRONMENT", "PPL_AUDIT_SECRET"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path))
    service_db = "postgresql+psycopg://u@h:5432/db"
    # nothing set: the service refuses to start
    with pytest.raises(ValidationError, match="PPL_AUDIT_SECRET must be set"):
        Settings(database_url=service_db)
    monkeypatch.setenv("PPL_AUDIT_ENVIRONMENT", "development")
    assert Settings(database_url=service_db).secret == DEFAULT_SECRET
    with pytest.raises(ValidationError, match="PPL_AUDIT_SECRET must be set"):
        Settings(database_url=service_db, environment="test")
    with pytest.raises(ValidationError, match="PPL_AUDIT_SECRET must be set"):
        Settings(database_url=service_db, environment="test", secret=DEFAULT_SECRET)
    # scripts/serve.sh: a pepper file of this machine, made once
    monkeypatch.delenv("PPL_AUDIT_ENVIRONMENT")
    monkeypatch.setenv("PPL_AUDIT_SECRET_FILE", str(tmp_path / "pepper"))
    made = Settings(database_url=service_db).secret
    assert made != DEFAULT_SECRET and Settings(database_url=service_db).secret == made


def test_the_local_sqlite_mode_makes_its_own_pepper(monkeypatch, tmp_path):
    import stat

    from service.config import DEFAULT_SECRET, Settings

    for name in ("PPL_AUDIT_ENVIRONMENT", "PPL_AUDIT_SECRET", "PPL_AUDIT_DATABASE_URL"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path))
    first = Settings().secret
    assert first != DEFAULT_SECRET and len(first) >= 32
    assert Settings().secret == first, "the pepper is kept for the installation"
    files = list(tmp_path.rglob("token-pepper"))
    assert len(files) == 1 and stat.S_IMODE(files[0].stat().st_mode) == 0o600
