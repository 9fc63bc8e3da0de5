"""What a user sees when reads require a token (issue 10, item 5): the pages answer with
a sign-in form (no script: the pages' CSP allows none inline) that sets an HttpOnly,
SameSite=Strict cookie the read gate accepts; the API keeps answering JSON."""
from __future__ import annotations

import re

import pytest

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def locked(service_settings):
    from fastapi.testclient import TestClient

    from service.api import create_app

    app = create_app(service_settings.model_copy(update={"reads_require_token": True}))
    with TestClient(app) as c:
        yield c
    app.state.engine.dispose()


def test_a_page_without_a_token_is_the_sign_in_form(locked):
    """catches: the 401 handler answering pages with JSON (a browser user is stuck)."""
    locked.cookies.clear()
    r = locked.get("/batches?page=2")
    assert r.status_code == 401 and r.headers["content-type"].startswith("text/html")
    html = r.text
    assert re.search(r'<form[^>]*method="post"[^>]*action="/signin"', html)
    assert 'name="token"' in html and 'type="password"' in html
    assert 'name="next" value="/batches?page=2"' in html
    assert "<script" not in html and "script-src 'self'" in r.headers["content-security-policy"]
    api = locked.get("/api/v1/audits")
    assert api.status_code == 401 and api.headers["content-type"].startswith("application/json")


def test_signing_in_sets_a_strict_httponly_cookie_the_pages_accept(locked, api_token):
    """catches: a cookie readable by script or sent cross-site, or one the read gate
    does not accept."""
    locked.cookies.clear()
    r = locked.post("/signin", data={"token": api_token, "next": "/batches"},
                    follow_redirects=False)
    assert r.status_code == 303 and r.headers["location"] == "/batches"
    cookie = r.headers["set-cookie"]
    assert cookie.startswith(f"ppl_audit_token={api_token};")
    assert "HttpOnly" in cookie and "SameSite=strict" in cookie.replace("Strict", "strict")
    assert "Path=/" in cookie and "Max-Age=43200" in cookie
    assert locked.get("/batches").status_code == 200
    assert locked.get("/").status_code == 200
    # the cookie opens reads only: a write still needs the Authorization header
    w = locked.post("/api/v1/batches", json={"source": "posteriordb", "posteriors": ["x"]})
    assert w.status_code == 401
    out = locked.post("/signout", follow_redirects=False)
    assert out.status_code == 303 and 'ppl_audit_token=""' in out.headers["set-cookie"]
    locked.cookies.clear()
    assert locked.get("/").status_code == 401


def test_a_wrong_token_shows_the_form_again_and_sets_nothing(locked):
    """catches: any token accepted, or a cookie set before the token is checked."""
    locked.cookies.clear()
    r = locked.post("/signin", data={"token": "ppla_not-a-real-token", "next": "/"},
                    follow_redirects=False)
    assert r.status_code == 401 and "unknown or revoked" in r.text
    assert "set-cookie" not in r.headers


@pytest.mark.parametrize("target", ["//evil.example/x", "https://evil.example/", "\\\\evil",
                                    "/\\evil.example", "javascript:alert(1)"])
def test_after_signing_in_only_local_paths_are_followed(locked, api_token, target):
    """catches: an open redirect through ``next``."""
    r = locked.post("/signin", data={"token": api_token, "next": target}, follow_redirects=False)
    assert r.status_code == 303 and r.headers["location"] == "/"
