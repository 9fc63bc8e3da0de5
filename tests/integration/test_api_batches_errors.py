"""SPEC §5 through the HTTP API (issue 10, item 4): a batch's JSON (progress, summary,
links) and the batch list, ``"posteriors": "all"``, a LazyPPL program refused by its
lint and one GHC cannot compile, each recorded as an ``error`` audit.

The app here sends its tasks to a private queue no worker reads (deleted afterwards),
and the worker steps run in this process; every audit and batch a test creates is
finished before it ends, so no worker or reconciler of a later test picks it up."""
from __future__ import annotations

import json
import secrets
import uuid
from pathlib import Path

import pytest
import sqlalchemy as sa

from service import steps
from service.db import audits as audit_repo
from service.db import batches as batch_repo
from tests.conftest import delete_queue
from workers import compare, pipeline

pytestmark = pytest.mark.integration

FIX = Path(__file__).resolve().parents[1] / "fixtures" / "eight_schools"
EIGHT = "eight_schools-eight_schools_noncentered"


@pytest.fixture(scope="module")
def private(service_settings, broker_url):
    """A TestClient whose dispatcher sends to a queue of its own."""
    from fastapi.testclient import TestClient

    from service.api import create_app

    queue = f"ppl-audit-private-{secrets.token_hex(4)}"
    settings = service_settings.model_copy(update={"celery": service_settings.celery.model_copy(
        update={"queue": queue})})
    app = create_app(settings)
    with TestClient(app) as c:
        yield c
    app.state.engine.dispose()
    delete_queue(broker_url, queue)


@pytest.fixture
def closes(db_sessions):
    """``closes(batch_id=…, audit_id=…)``: marks them failed at teardown if still open."""
    batches, audits = [], []

    def register(batch_id=None, audit_id=None):
        (batches if batch_id else audits).append(uuid.UUID(str(batch_id or audit_id)))
    yield register
    with db_sessions.begin() as s:
        for bid in batches:
            audits += [a.id for a in batch_repo.batch_audits(s, bid)]
            b = batch_repo.lock_batch(s, bid)
            if b.status not in ("done", "failed"):
                batch_repo.set_batch_status(s, b, "failed", message="test teardown")
        for aid in audits:
            a = audit_repo.lock_audit(s, aid)
            if a.status not in ("done", "failed"):
                audit_repo.set_status(s, a, "failed", verdict="error", reason="test teardown")


def _outcome(scope: str, reference_disagrees: bool):
    """Synthetic fits (no sampler); on ``full`` optionally a PyMC fit off the reference."""
    import numpy as np

    from workers.fit import Fit

    rng = np.random.default_rng(len(scope))
    names = ["mu", "tau"]
    lazy = Fit("lazyppl", {n: rng.normal(0, 1, (4, 1000)) for n in names}, reportable=names)
    pymc = Fit("pymc", {n: rng.normal(0, 1, (4, 1000)) for n in names}, reportable=names)
    main = compare.compare_draws(lazy.draws, pymc.draws, names, compare.Rule(),
                                 labels=("lazyppl", "pymc"))
    ev = {"scope": scope, **pipeline.comparison_evidence(main, ("lazyppl", "pymc")),
          "looks": [{"look": 1}], "seconds": 1.0, "lazyppl_vs_pymc": main.verdict}
    if reference_disagrees:
        ref = {n: rng.normal(1.0, 1, (10, 1000)) for n in names}
        vs_ref = compare.compare_draws(pymc.draws, ref, names, compare.Rule(),
                                       labels=("pymc", "reference"))
        ev["verdict"], ev["reason"] = pipeline._scope_decision(main, vs_ref)
        ev["reference"] = {"pymc_vs_reference": pipeline.comparison_evidence(
            vs_ref, ("pymc", "reference"))}
    return pipeline.ScopeOutcome(pipeline.jsonable(ev), {("pymc", 1): pymc, ("lazyppl", 1): lazy})


def test_batch_json_progress_summary_links_and_list(private, auth_headers, db_sessions, closes):
    """catches: progress, the SPEC §4 summary, the links to each audit or the reference
    check missing from ``GET /api/v1/batches/{id}``, or the batch missing from the list."""
    from corpus.loader import list_posteriors, load

    second = next(n for n in list_posteriors() if n != EIGHT)
    r = private.post("/api/v1/batches", json={"source": "posteriordb",
                                              "posteriors": [EIGHT, second]}, headers=auth_headers)
    assert r.status_code == 202, r.text
    batch_id = r.json()["id"]
    closes(batch_id=batch_id)
    assert r.json()["url"] == f"/api/v1/batches/{batch_id}" == r.headers["location"]
    before = private.get(f"/api/v1/batches/{batch_id}").json()
    assert before["status"] == "queued" and before["progress"]["created"] == 0
    assert before["pending_posteriors"] == [EIGHT, second] and before["summary"] is None

    sent: list[tuple[uuid.UUID, str]] = []
    steps.fan_out_batch(db_sessions, uuid.UUID(batch_id), load, lambda a, s: sent.append((a, s)))
    mid = private.get(f"/api/v1/batches/{batch_id}").json()
    assert mid["progress"] | {"expected": 2, "created": 2, "finished": 0, "fraction": 0.0} == mid["progress"]
    assert mid["pending_posteriors"] == [] and len(mid["audits"]) == 2

    eight_id = next(a["id"] for a in mid["audits"] if a["posterior"] == EIGHT)
    for audit_id, scope in sent:  # the worker's steps, with synthetic fits
        job = steps.claim_scope(db_sessions, audit_id, scope)
        bad_reference = str(audit_id) == eight_id and scope == "full"
        if steps.save_scope(db_sessions, job, _outcome(scope, bad_reference)):
            steps.finish(db_sessions, audit_id)
    steps.update_batch(db_sessions, uuid.UUID(batch_id))

    done = private.get(f"/api/v1/batches/{batch_id}").json()
    assert done["status"] == "done"
    assert done["progress"]["finished"] == 2 and done["progress"]["fraction"] == 1.0
    summary = done["summary"]
    assert summary == steps.batch_summary([a for a in _audits(db_sessions, batch_id)])
    assert summary["posteriors"]["inconclusive"] == 1 and summary["posteriors"]["agree"] == 1
    eight = next(a for a in done["audits"] if a["posterior"] == EIGHT)
    # the corpus batch says PyMC could not serve as baseline and what LazyPPL vs PyMC gave
    assert eight["verdict"] == "inconclusive" and eight["reference_verdict"] == "disagree"
    assert eight["lazyppl_vs_pymc"] == {"visible": "agree", "full": "agree"}
    for a in done["audits"]:
        audit = private.get(a["url"]).json()
        assert audit["id"] == a["id"] and audit["batch_id"] == batch_id
    assert "cannot serve as baseline" in private.get(eight["url"]).json()["reason"]

    listed = private.get("/api/v1/batches", params={"limit": 200}).json()
    row = next(b for b in listed["items"] if b["id"] == batch_id)
    assert row["status"] == "done" and row["summary"] == summary and row["posteriors"] == 2
    assert row["url"] == f"/api/v1/batches/{batch_id}" and listed["total"] >= 1


def _audits(db_sessions, batch_id):
    with db_sessions() as s:
        audits = batch_repo.batch_audits(s, uuid.UUID(batch_id))
        for a in audits:
            s.expunge(a)
        return audits


def test_all_posteriors_means_every_translated_posterior(private, auth_headers, closes):
    """catches: ``"posteriors": "all"`` refused, or expanded to anything but the corpus."""
    from corpus.loader import list_posteriors

    r = private.post("/api/v1/batches", json={"source": "posteriordb", "posteriors": "all"},
                     headers=auth_headers)
    assert r.status_code == 202, r.text
    closes(batch_id=r.json()["id"])
    batch = private.get(r.json()["url"]).json()
    assert batch["posteriors"] == list_posteriors() and len(batch["posteriors"]) > 10
    assert batch["progress"]["expected"] == len(list_posteriors())


def _pair(lazyppl: str, settings: dict | None = None) -> dict:
    return {"name": "lazyppl error", "pymc": {"source": (FIX / "model.py").read_text()},
            "lazyppl": {"source": lazyppl},
            "scopes": {"visible": json.loads((FIX / "visible.json").read_text())},
            **({"settings": settings} if settings else {})}


def test_a_lazyppl_program_refused_by_its_lint_is_an_error_audit(private, auth_headers,
                                                                  db_sessions):
    """catches: the LazyPPL lint skipped at submission (the program would be queued)."""
    source = (FIX / "Model.hs").read_text().replace(
        "import LazyPPL.Bridge", "import LazyPPL.Bridge\nimport System.IO.Unsafe")
    r = private.post("/api/v1/audits", json=_pair(source), headers=auth_headers)
    assert r.status_code == 202, r.text
    assert r.json()["status"] == "done" and r.json()["verdict"] == "error"
    audit = private.get(r.json()["url"]).json()
    assert audit["error"]["code"] == "refused" and "System.IO.Unsafe" in audit["reason"]
    with db_sessions() as s:  # nothing to run: no work unit was leased or queued
        assert s.scalar(sa.text("SELECT count(*) FROM scope_results WHERE audit_id = :a"),
                        {"a": audit["id"]}) == 0


@pytest.mark.slow
def test_a_ghc_compile_error_is_an_error_audit_through_the_api(private, auth_headers,
                                                                db_sessions, closes):
    """catches: a compile failure on the worker recorded as a failed job or a retry instead
    of an ``error`` verdict with GHC's message."""
    source = (FIX / "Model.hs").read_text().replace(
        "mu         <- sample (normal 0 5)", 'mu         <- sample (normal "zero" 5)')
    assert source != (FIX / "Model.hs").read_text()
    cheap = {"pymc": {"chains": 1, "tune": 50, "draws": 50}}
    r = private.post("/api/v1/audits", json=_pair(source, cheap), headers=auth_headers)
    assert r.status_code == 202 and r.json()["status"] == "queued", r.text
    audit_id = uuid.UUID(r.json()["id"])
    closes(audit_id=audit_id)
    job = steps.claim_scope(db_sessions, audit_id, "visible")
    outcome = steps.fit_scope(job, lambda *a, **k: None)
    assert steps.save_scope(db_sessions, job, outcome)
    steps.finish(db_sessions, audit_id)
    audit = private.get(r.json()["url"]).json()
    assert audit["status"] == "done" and audit["verdict"] == "error", audit
    assert audit["error"]["code"] == "compile_error"
    assert "Model.hs:12:32" in audit["reason"] and "normal \"zero\" 5" in audit["reason"]
