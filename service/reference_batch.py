"""`ppl-audit batch posteriordb --database PATH --pymc-from database` (issue 10).

Reads a user's posteriordb checkout and audits each posterior's own PyMC implementation
(``models/info/<model>.info.json`` → ``model_implementations.pymc``) against its
reference draws (``workers.reference_audit``), one after the other. A posterior without
a PyMC implementation or without reference draws gets an ``error`` row saying so; the
report has the corpus batch's shape (a row per posterior, SPEC §4 summary).
"""
from __future__ import annotations

import time

from rich.console import Console

from workers import compare
from workers.compare import batch_summary
from workers.errors import InvalidRequest
from workers.settings import AuditSettings


def _missing(name: str, reason: str) -> dict:
    return {"name": name, "kind": "reference", "verdict": compare.ERROR, "reason": reason,
            "error": {"code": "invalid_request", "message": reason},
            "scope_verdicts": {}, "scopes": {}}


def entry(evidence: dict, seconds: float) -> dict:
    """One posterior's row: the PyMC-vs-reference verdict is the posterior's verdict."""
    full = (evidence.get("scopes") or {}).get("full") or {}
    return {"posterior": evidence["name"], "audit_id": None, "verdict": evidence["verdict"],
            "reason": evidence.get("reason"),
            "scopes": {"full": {"verdict": full.get("verdict"), "reason": full.get("reason"),
                                "hints": full.get("hints", [])}} if full else {},
            "reference": {"pymc_vs_reference": full.get("verdict") if full else None,
                          "lazyppl_vs_reference": None, "lazyppl_vs_pymc": None},
            "seconds": round(seconds, 2), "reused": False}


def run_reference_batch(database: str, names: list[str] | None, settings: AuditSettings,
                        *, console: Console, progress_factory=None) -> dict:
    """Audit every posterior of ``database`` (or ``names``) against its reference."""
    from corpus.loader import load_data, load_reference, open_database, pymc_implementation
    from workers.reference_audit import ReferenceAuditRequest, run_reference_audit

    try:
        db = open_database(database)
    except (OSError, ValueError) as err:
        raise InvalidRequest(f"--database {database}: {err}") from None
    available = sorted(db.posterior_names())
    if names:
        unknown = [n for n in names if n not in available]
        if unknown:
            raise InvalidRequest(f"not in the database: {', '.join(unknown)}")
    entries, evidences = [], []
    started = time.monotonic()
    todo = names or available
    for i, name in enumerate(todo, 1):
        t0 = time.monotonic()
        prefix = f"[{i}/{len(todo)}] {name}: "
        source = pymc_implementation(name, db)
        try:
            reference = load_reference(name, db)
        except (FileNotFoundError, ValueError) as err:
            reference, why = None, str(err)
        if source is None:
            evidence = _missing(name, "the database has no PyMC implementation "
                                      "(model_implementations.pymc) of this posterior")
        elif reference is None:
            evidence = _missing(name, why)
        else:
            request = ReferenceAuditRequest(name=name, pymc_source=source, posterior=name,
                                            reference=reference, data=load_data(name, db),
                                            settings=settings)
            if progress_factory is not None:
                with progress_factory(prefix) as progress:
                    evidence, _ = run_reference_audit(request, progress=progress)
            else:
                evidence, _ = run_reference_audit(request)
        row = entry(evidence, time.monotonic() - t0)
        console.print(f"{prefix}{row['verdict']} in {row['seconds']:.0f} s", highlight=False)
        entries.append(row)
        evidences.append(evidence)
    return {"source": "posteriordb", "database": str(db.path), "pymc_from": "database",
            "posteriors": entries, "summary": batch_summary(evidences),
            "settings": settings.model_dump(mode="json"),
            "seconds": round(time.monotonic() - started, 1)}
