"""Stored rows as the JSON the API returns (and the web page renders).

``audit_summary`` is the list view; ``audit_detail`` adds the per-scope, per-parameter
evidence of SPEC §4, the fits available for download and the event log.
"""
from __future__ import annotations

from service.db import audits as audit_repo
from service.db import batches as batch_repo
from service.db.models import FINAL_STATUSES, Audit, Batch

API = "/api/v1"


def _iso(t) -> str | None:
    return t.isoformat() if t else None


def audit_summary(a: Audit) -> dict:
    return {
        "id": str(a.id), "name": a.name, "status": a.status, "verdict": a.verdict,
        "reason": a.reason, "source": a.source, "posterior": a.posterior,
        "batch_id": str(a.batch_id) if a.batch_id else None,
        "created_at": _iso(a.created_at), "updated_at": _iso(a.updated_at),
        "started_at": _iso(a.started_at), "finished_at": _iso(a.finished_at),
        "timings": a.timings,
        "url": f"{API}/audits/{a.id}", "page": f"/audits/{a.id}",
    }


def audit_detail(session, a: Audit) -> dict:
    results = audit_repo.scope_results(session, a.id)
    scopes = []
    for sc in a.scopes:
        r = results.get(sc.scope)
        scopes.append({
            "scope": sc.scope, "data_sha256": sc.dataset.sha256,
            "status": "done" if r else ("pending" if a.status not in FINAL_STATUSES else "not run"),
            "verdict": r.verdict if r else None,
            "evidence": r.evidence if r else None,
            # the unit of work (service/README.md, "Guarantees")
            "work": {"dispatched_at": _iso(sc.dispatched_at), "picked_at": _iso(sc.picked_at),
                     "lease_owner": sc.lease_owner,
                     "lease_expires_at": _iso(sc.lease_expires_at),
                     "attempts": sc.attempts, "lost_attempts": sc.lost_attempts},
        })
    picked = [sc.picked_at for sc in a.scopes if sc.picked_at is not None]
    fits = [
        {"scope": scope, "language": lang, "look": look, "chains": chains, "draws": draws,
         "netcdf": f"{API}/audits/{a.id}/fits/{scope}/{lang}.nc"}
        for scope, lang, look, chains, draws in audit_repo.fit_index(session, a.id)
    ]
    return {
        **audit_summary(a),
        "error": a.error,
        "parameters": a.parameters,
        "settings": a.settings,
        "programs": {"pymc": {"sha256": a.pymc_program.sha256},
                     "lazyppl": {"sha256": a.lazyppl_program.sha256}},
        "scopes": scopes,
        "last_picked_at": _iso(max(picked)) if picked else None,
        "evidence": a.evidence,
        "fits": fits,
        "events": [
            {"at": _iso(e.created_at), "kind": e.kind, "from": e.from_status,
             "to": e.to_status, "message": e.message}
            for e in audit_repo.events(session, a.id)
        ],
    }


def batch_detail(session, b: Batch) -> dict:
    audits = batch_repo.batch_audits(session, b.id)
    return {
        "id": str(b.id), "source": b.source, "status": b.status,
        "posteriors": b.posteriors, "settings": b.settings,
        "created_at": _iso(b.created_at), "updated_at": _iso(b.updated_at),
        "progress": batch_repo.progress(audits, len(b.posteriors)),
        "summary": b.summary,
        # while running: the same summary over the audits finished so far
        "summary_so_far": None if b.summary else _partial_summary(audits),
        "pending_posteriors": [n for n in b.posteriors if n not in {a.posterior for a in audits}],
        "audits": [{**audit_summary(a),
                    "scope_verdicts": _in_scope_order(a, (a.evidence or {}).get("scope_verdicts")),
                    "reference_verdict": _reference_verdict(a.evidence),
                    "lazyppl_reference_verdict": _reference_verdict(a.evidence, "lazyppl_vs_reference"),
                    "lazyppl_vs_pymc": _lazyppl_vs_pymc(a)} for a in audits],
        "url": f"{API}/batches/{b.id}", "page": f"/batches/{b.id}",
    }


def _in_scope_order(a: Audit, values: dict | None) -> dict | None:
    """A per-scope dict in submission order (JSONB does not keep key order)."""
    if not values:
        return values
    return {sc.scope: values[sc.scope] for sc in a.scopes if sc.scope in values}


def _reference_verdict(evidence: dict | None, pair: str = "pymc_vs_reference") -> str | None:
    """Did the PyMC (or LazyPPL) fit on ``full`` agree with posteriordb's reference draws?"""
    for scope in ((evidence or {}).get("scopes") or {}).values():
        block = (scope.get("reference") or {}).get(pair)
        if block:
            return block.get("verdict")
    return None


def _lazyppl_vs_pymc(a: Audit) -> dict | None:
    """The LazyPPL↔PyMC comparison's own verdict per scope (the scope verdict differs
    when PyMC failed its reference check and cannot serve as baseline)."""
    scopes = (a.evidence or {}).get("scopes") or {}
    return _in_scope_order(a, {name: ev.get("lazyppl_vs_pymc") for name, ev in scopes.items()}
                           or None)


def _partial_summary(audits) -> dict | None:
    from workers import compare

    # a cancelled audit has no verdict: it is left out of the summary, not counted an error
    finished = [a for a in audits if a.status in ("done", "failed")]
    if not finished:
        return None
    return compare.batch_summary([{"verdict": a.verdict or "error",
                                   "scopes": (a.evidence or {}).get("scopes") or {}}
                                  for a in finished])


def batch_summary_row(b: Batch) -> dict:
    return {"id": str(b.id), "source": b.source, "status": b.status,
            "posteriors": len(b.posteriors), "created_at": _iso(b.created_at),
            "summary": b.summary, "url": f"{API}/batches/{b.id}", "page": f"/batches/{b.id}"}
