"""Reference audits in a local batch (issue 10): one PyMC program against posteriordb's
reference draws, no LazyPPL side.

`ppl-audit batch posteriordb` runs one of these for a posterior when no LazyPPL program
takes part (``--lazyppl-from none``, or ``--pymc-from database`` on a posterior we have not
translated). The PyMC program is ours (``corpus/translations``) or the database's own
(``models/info/<model>.info.json`` → ``model_implementations.pymc``); data and reference
come from the shipped subset or from a user's checkout (``--database PATH``). The row has
the corpus batch's shape; the audit is stored like one submitted to the API with
``reference`` (no LazyPPL program, the posterior's name), plus the reference draws
themselves when they come from a user's checkout, which the shipped snapshot could not
re-derive.
"""
from __future__ import annotations

from workers import compare
from workers.reference_audit import SCOPE, ReferenceAuditRequest, run_reference_audit
from workers.settings import AuditSettings


def missing(name: str, reason: str) -> dict:
    """The evidence of a posterior that cannot be audited (no program, no reference)."""
    return {"name": name, "kind": "reference", "verdict": compare.ERROR, "reason": reason,
            "error": {"code": "invalid_request", "message": reason},
            "scope_verdicts": {}, "scopes": {}}


def entry(evidence: dict, seconds: float) -> dict:
    """One posterior's row: the PyMC-vs-reference verdict is the posterior's verdict."""
    full = (evidence.get("scopes") or {}).get(SCOPE) or {}
    return {"posterior": evidence["name"], "kind": "reference", "audit_id": evidence.get("id"),
            "verdict": evidence["verdict"], "reason": evidence.get("reason"),
            "scopes": {SCOPE: {"verdict": full.get("verdict"), "reason": full.get("reason"),
                               "hints": full.get("hints", [])}} if full else {},
            "reference": {"pymc_vs_reference": full.get("verdict") if full else None,
                          "lazyppl_vs_reference": None, "lazyppl_vs_pymc": None},
            "seconds": round(seconds, 2), "reused": False}


def request(name: str, pymc_source: str, settings: AuditSettings, db=None
            ) -> ReferenceAuditRequest:
    """The reference audit of ``name``; raises FileNotFoundError/ValueError when the
    database has no reference draws for it."""
    from corpus.loader import load_data, load_reference

    return ReferenceAuditRequest(name=name, pymc_source=pymc_source, posterior=name,
                                 reference=load_reference(name, db), data=load_data(name, db),
                                 settings=settings)


def run(req: ReferenceAuditRequest, progress=None) -> tuple[dict, dict]:
    if progress is None:
        return run_reference_audit(req)
    return run_reference_audit(req, progress=progress)


def store(sessions, req: ReferenceAuditRequest, evidence: dict, fits: dict, *, source: str,
          keep_reference: bool) -> str:
    """Write a finished reference audit (program, data, PyMC fits, rows, verdict) in one
    transaction, as the API stores one; with ``keep_reference`` also the reference draws
    (language ``reference``)."""
    from service.db import audits as repo

    with sessions.begin() as session:
        audit = repo.create_audit(
            session, name=req.name, pymc_source=req.pymc_source, lazyppl_source="",
            scopes={SCOPE: req.data}, parameters=req.parameters,
            settings=req.settings.model_dump(mode="json"), source=source, posterior=req.posterior)
        repo.set_status(session, audit, "running")
        for scope, ev in evidence.get("scopes", {}).items():
            scope_fits = [(look, f) for (s, _lang, look), f in fits.items() if s == scope]
            if keep_reference and scope == SCOPE:
                scope_fits.append((1, req.reference))
            repo.store_scope_outcome(session, audit, scope, ev, scope_fits,
                                     seconds=ev.get("seconds"))
        repo.set_status(session, audit, "done", verdict=evidence["verdict"],
                        reason=evidence.get("reason"), error=evidence.get("error"),
                        evidence=evidence)
        return str(audit.id)

