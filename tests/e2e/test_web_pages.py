"""The results pages in headless Chromium (Debian's, driven by Playwright), rendered
from real stored results: a real server and worker process run a real audit and a
posteriordb batch. Screenshots go to ``test-artifacts/``.
"""
import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from tests.conftest import ROOT, wait_for

pytestmark = [pytest.mark.integration, pytest.mark.slow]

FIX = ROOT / "tests" / "fixtures" / "eight_schools"
ARTIFACTS = ROOT / "test-artifacts"
CHROMIUM = os.environ.get("PPL_AUDIT_CHROMIUM", "/usr/bin/chromium")
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync"]
SMALL = {"pymc": {"chains": 2, "tune": 300, "draws": 300, "backend": "pymc", "retry_target_accepts": []},
         "lazyppl": {"chains": 2, "warmup": 3000, "draws": 300, "thin": 4},
         "budget": {"max_looks": 1}}
POSTERIOR = "eight_schools-eight_schools_noncentered"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def server(service_env, tmp_path_factory):
    """A real ``ppl-audit serve`` on a free loopback port, and one worker."""
    port = _free_port()
    logs = tmp_path_factory.mktemp("e2e")
    env = {**os.environ, **service_env}
    procs = [subprocess.Popen([sys.executable, "-m", "service.cli", *args], cwd=ROOT, env=env,
                              stdout=open(logs / f"{args[0]}.log", "wb"),
                              stderr=subprocess.STDOUT, start_new_session=True)
             for args in (["serve", "--port", str(port), "--log-level", "warning"],
                          ["worker", "--hostname", "e2e@%h"])]
    base = f"http://127.0.0.1:{port}"

    def healthy():
        try:
            return httpx.get(f"{base}/api/v1/health", timeout=2).status_code == 200
        except httpx.HTTPError:
            return False
    wait_for(healthy, 60, what="the server to answer")
    yield base
    for p in procs:
        p.terminate()
    for p in procs:
        try:
            p.wait(timeout=20)
        except subprocess.TimeoutExpired:
            p.kill()


@pytest.fixture(scope="module")
def browser():
    from playwright.sync_api import sync_playwright

    ARTIFACTS.mkdir(exist_ok=True)
    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=FLAGS)
        yield b
        b.close()


@pytest.fixture(scope="module")
def results(server, auth_headers):
    """A finished audit and a finished one-posterior batch, submitted over HTTP."""
    body = {"name": "eight schools (web test)",
            "pymc": {"source": (FIX / "model.py").read_text()},
            "lazyppl": {"source": (FIX / "Model.hs").read_text()},
            "scopes": {s: json.loads((FIX / f"{s}.json").read_text()) for s in ("visible", "full")},
            "settings": SMALL}
    with httpx.Client(base_url=server, headers=auth_headers, timeout=30) as c:
        audit = c.post("/api/v1/audits", json=body)
        assert audit.status_code == 202, audit.text
        batch = c.post("/api/v1/batches", json={"source": "posteriordb", "posteriors": [POSTERIOR],
                                                 "settings": SMALL})
        assert batch.status_code == 202, batch.text
        audit_id, batch_id = audit.json()["id"], batch.json()["id"]
        live_page = c.get(f"/audits/{audit_id}").text  # while queued or running
        wait_for(lambda: c.get(f"/api/v1/audits/{audit_id}").json()["status"] in ("done", "failed"),
                 600, interval=2, what="the audit")
        wait_for(lambda: c.get(f"/api/v1/batches/{batch_id}").json()["status"] == "done",
                 600, interval=2, what="the batch")
    return {"audit": audit_id, "batch": batch_id, "live_page": live_page}


def test_a_running_audit_page_refreshes_itself(results):
    assert 'http-equiv="refresh"' in results["live_page"]


def test_audits_list(browser, server, results):
    page = browser.new_page(viewport={"width": 1280, "height": 900})
    page.goto(f"{server}/")
    row = page.locator("tr", has_text="eight schools (web test)")
    assert row.count() >= 1
    assert row.first.locator(".badge").inner_text() in ("agree", "inconclusive", "disagree")
    page.click("text=agree >> nth=0")  # a verdict filter link works
    page.screenshot(path=str(ARTIFACTS / "audits-list.png"), full_page=True)
    page.goto(f"{server}/")
    page.screenshot(path=str(ARTIFACTS / "audits-list.png"), full_page=True)
    page.close()


def test_audit_page_with_forest_plots(browser, server, results):
    page = browser.new_page(viewport={"width": 1280, "height": 900})
    page.goto(f"{server}/audits/{results['audit']}")
    assert page.locator("h1").inner_text() == "eight schools (web test)"
    plots = page.locator("svg.forest")
    assert plots.count() == 4  # d and SD ratio, for each of the two scopes
    first = plots.first
    assert first.locator("circle").count() == 8  # mu, tau, theta[1..6] on visible
    assert first.bounding_box()["width"] > 300
    assert page.locator("text=Provenance").count() == 1
    assert page.locator("td", has_text="sha256").count() >= 3
    assert "refresh" not in (page.locator("meta[http-equiv]").count() and "refresh" or "")
    page.screenshot(path=str(ARTIFACTS / "audit-page.png"), full_page=True)
    page.close()


def test_batch_page_with_summary(browser, server, results):
    page = browser.new_page(viewport={"width": 1280, "height": 900})
    page.goto(f"{server}/batches/{results['batch']}")
    assert page.locator("text=posteriors agree (all scopes)").count() == 1
    assert page.locator("text=|d| over all compared parameters").count() == 1
    link = page.locator("a", has_text=POSTERIOR)
    assert link.count() == 1
    # the four checks: LazyPPL↔PyMC per scope, PyMC↔reference, LazyPPL↔reference
    headers = page.locator("th").all_inner_texts()
    assert {"LazyPPL vs PyMC", "PyMC vs reference", "LazyPPL vs reference"} <= set(headers)
    row = page.locator("tr", has=link).inner_text()
    assert "visible" in row and "full" in row
    page.screenshot(path=str(ARTIFACTS / "batch-page.png"), full_page=True)
    link.click()
    page.wait_for_load_state()
    assert page.locator("text=posteriordb reference draws").count() >= 1
    page.screenshot(path=str(ARTIFACTS / "batch-audit-page.png"), full_page=True)
    page.close()


def test_api_docs_render_without_a_network(browser, server):
    """/docs serves Swagger UI from the installed package (this machine has no CDN)."""
    page = browser.new_page(viewport={"width": 1280, "height": 900})
    page.goto(f"{server}/docs")
    page.wait_for_selector(".opblock", timeout=30_000)
    assert page.locator(".opblock", has_text="/api/v1/audits").count() >= 2
    page.screenshot(path=str(ARTIFACTS / "api-docs.png"), full_page=False)
    page.close()


def test_no_page_breaks_the_content_security_policy(browser, server, results):
    """Every page and /docs render under the service's CSP with no violation reported
    (no inline script, no blocked resource); the headers are there in the browser."""
    page = browser.new_page(viewport={"width": 1280, "height": 900})
    messages: list[str] = []
    page.on("console", lambda m: messages.append(m.text))
    page.on("pageerror", lambda e: messages.append(str(e)))
    for path in ("/", "/batches", f"/audits/{results['audit']}", f"/batches/{results['batch']}",
                 "/docs"):
        response = page.goto(f"{server}{path}")
        headers = response.all_headers()
        assert "frame-ancestors 'none'" in headers["content-security-policy"]
        assert headers["x-content-type-options"] == "nosniff"
        if path == "/docs":
            page.wait_for_selector(".opblock", timeout=30_000)  # its hashed script ran
    page.close()
    violations = [m for m in messages if "Content Security Policy" in m or "Refused to" in m]
    assert not violations, violations


def test_the_cancel_form_works_in_chromium_under_the_csp(browser, server, auth_headers):
    """The page's cancel link leads to a plain form (no script): typing the token and
    submitting it cancels the audit and lands back on its page, with no CSP violation."""
    body = {"name": "cancelled from the page",
            "pymc": {"source": (FIX / "model.py").read_text()},
            "lazyppl": {"source": (FIX / "Model.hs").read_text()},
            "scopes": {"visible": json.loads((FIX / "visible.json").read_text())},
            "settings": {**SMALL, "lazyppl": {**SMALL["lazyppl"], "warmup": 200000, "thin": 20}}}
    audit_id = httpx.post(f"{server}/api/v1/audits", json=body, headers=auth_headers,
                          timeout=30).json()["id"]
    page = browser.new_page(viewport={"width": 1280, "height": 900})
    messages: list[str] = []
    page.on("console", lambda m: messages.append(m.text))
    page.goto(f"{server}/audits/{audit_id}")
    page.click("a.cancel")
    page.fill("input[name=token]", auth_headers["Authorization"].removeprefix("Bearer "))
    page.click("button[type=submit]")
    page.wait_for_url(f"{server}/audits/{audit_id}")
    assert "cancelled" in page.inner_text(".verdict-box")
    page.screenshot(path=str(ARTIFACTS / "audit-cancelled.png"), full_page=True)
    page.close()
    assert httpx.get(f"{server}/api/v1/audits/{audit_id}").json()["status"] == "cancelled"
    violations = [m for m in messages if "Content Security Policy" in m or "Refused to" in m]
    assert not violations, violations
