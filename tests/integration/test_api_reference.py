"""Issue 10: the REST reference audit (a request with `reference` instead of `lazyppl`),
through the app and the worker steps run in this process (real PyMC in the sandbox)."""
from __future__ import annotations

import uuid
from pathlib import Path

import pytest

from service import steps

pytestmark = pytest.mark.integration

SPEC_PROGRAM = (Path(__file__).resolve().parents[1] / "fixtures" / "eight_schools"
                / "model.py").read_text()
POSTERIOR = "eight_schools-eight_schools_noncentered"
CHEAP = {"pymc": {"chains": 4, "tune": 500, "draws": 500}}


def _body(**kw):
    return {"name": "reference audit", "pymc": {"source": SPEC_PROGRAM},
            "reference": POSTERIOR, "settings": CHEAP, **kw}


@pytest.mark.slow
def test_a_reference_audit_runs_through_the_worker_steps_and_agrees(
        client, auth_headers, db_sessions):
    r = client.post("/api/v1/audits", json=_body(), headers=auth_headers)
    assert r.status_code == 202, r.text
    audit_id = uuid.UUID(r.json()["id"])
    job = steps.claim_scope(db_sessions, audit_id, "full")
    assert job is not None and job.lazyppl_source == "" and job.posterior == POSTERIOR
    outcome = steps.fit_scope(job, lambda *a, **k: None)
    assert steps.save_scope(db_sessions, job, outcome)
    steps.finish(db_sessions, audit_id)
    audit = client.get(f"/api/v1/audits/{audit_id}").json()
    assert audit["verdict"] == "agree", audit["reason"]
    evidence = audit["evidence"]
    assert evidence["kind"] == "reference" and evidence["reference"] == POSTERIOR
    assert sorted(evidence["scopes"]["full"]["compared"])[:2] == ["mu", "tau"]
    assert client.get(f"/audits/{audit_id}").status_code == 200


@pytest.mark.parametrize("change,word", [
    ({"lazyppl": {"source": "module Model (model) where"}}, "exactly one"),
    ({"reference": None}, "exactly one"),
    ({"scopes": {"visible": {"J": 1}}}, "only scope"),
    ({"reference": "no-such-posterior"}, "no-such-posterior"),
])
def test_malformed_reference_requests_are_422_and_store_nothing(
        client, auth_headers, row_counts, change, word):
    before = row_counts()
    r = client.post("/api/v1/audits", json=_body(**change), headers=auth_headers)
    assert r.status_code == 422 and word in r.text, r.text
    after = row_counts()
    after.pop("api_tokens"), before.pop("api_tokens")
    assert after == before


def test_a_potential_under_strict_is_an_error_audit_naming_it(client, auth_headers):
    source = SPEC_PROGRAM.replace("return m", "pm.Potential('p', 0.0)\n    return m")
    r = client.post("/api/v1/audits", json=_body(pymc={"source": source}),
                    headers=auth_headers)
    assert r.status_code == 202, r.text
    assert r.json()["verdict"] == "error" and "pm.Potential" in r.json()["reason"]
