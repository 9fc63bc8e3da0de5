"""Repository of the audit aggregate: audits, their scopes, fits, comparisons, events.

Every write that a worker step makes goes through here, and each is idempotent: the
caller locks the audit row (:func:`lock_audit`, ``SELECT … FOR UPDATE``; a no-op on
SQLite, where writers are serialised anyway), checks what already exists, and writes
under the unique constraints of :mod:`service.db.models`.
"""
from __future__ import annotations

import datetime as dt
import hashlib
import json
import math
import uuid
from typing import Any, Iterable

import sqlalchemy as sa
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session, selectinload

from service.db.base import utcnow
from service.db.draws import encode_draws
from service.db.models import (
    FINAL_STATUSES, Audit, AuditScope, Comparison, Dataset, Event, FitRecord, Program, ScopeResult,
)


def sha256_text(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def canonical_json(data: Any) -> str:
    """The hashed form of a data set: sorted keys, no whitespace, NaN refused."""
    return json.dumps(data, sort_keys=True, separators=(",", ":"), allow_nan=False)


def _get_or_create(session: Session, model, sha: str, **values) -> Any:
    row = session.scalar(sa.select(model).where(model.sha256 == sha))
    if row is not None:
        return row
    try:
        with session.begin_nested():  # savepoint: a concurrent insert of the same content
            row = model(sha256=sha, **values)
            session.add(row)
    except IntegrityError:
        row = session.scalar(sa.select(model).where(model.sha256 == sha))
    return row


def store_program(session: Session, language: str, source: str) -> Program:
    """The program row for ``source``, created once per content hash."""
    return _get_or_create(session, Program, sha256_text(f"{language}\n{source}"),
                          language=language, source=source)


def store_dataset(session: Session, data: dict) -> Dataset:
    """The data-set row for ``data``, created once per hash of its canonical JSON."""
    return _get_or_create(session, Dataset, sha256_text(canonical_json(data)), data=data)


def add_event(session: Session, *, audit_id=None, batch_id=None, kind: str,
              from_status: str | None = None, to_status: str | None = None,
              message: str | None = None, data: dict | None = None) -> None:
    session.add(Event(audit_id=audit_id, batch_id=batch_id, kind=kind, from_status=from_status,
                      to_status=to_status, message=message, data=data))


def create_audit(session: Session, *, name: str, pymc_source: str, lazyppl_source: str,
                 scopes: dict[str, dict], parameters: list[str] | None, settings: dict,
                 source: str = "api", posterior: str | None = None,
                 batch_id: uuid.UUID | None = None) -> Audit:
    """A queued audit with its programs and data sets (stored once by content hash)."""
    audit = Audit(
        id=uuid.uuid4(), name=name, status="queued", settings=settings, parameters=parameters,
        pymc_program=store_program(session, "pymc", pymc_source),
        lazyppl_program=store_program(session, "lazyppl", lazyppl_source),
        source=source, posterior=posterior, batch_id=batch_id,
    )
    for position, (scope, data) in enumerate(scopes.items()):
        audit.scopes.append(AuditScope(scope=scope, position=position,
                                       dataset=store_dataset(session, data)))
    session.add(audit)
    session.flush()
    add_event(session, audit_id=audit.id, batch_id=batch_id, kind="created", to_status="queued")
    return audit


def get_audit(session: Session, audit_id: uuid.UUID, *, full: bool = False) -> Audit | None:
    query = sa.select(Audit).where(Audit.id == audit_id)
    if full:
        query = query.options(
            selectinload(Audit.scopes).selectinload(AuditScope.dataset),
            selectinload(Audit.scope_results),
            selectinload(Audit.pymc_program), selectinload(Audit.lazyppl_program),
        )
    return session.scalar(query)


def lock_audit(session: Session, audit_id: uuid.UUID) -> Audit | None:
    """The audit row, locked until the transaction ends (FOR UPDATE on PostgreSQL)."""
    return session.scalar(
        sa.select(Audit).where(Audit.id == audit_id).with_for_update().execution_options(
            populate_existing=True)
    )


def status_of(session: Session, audit_id: uuid.UUID) -> str | None:
    return session.scalar(sa.select(Audit.status).where(Audit.id == audit_id))


def list_audits(session: Session, *, verdict: str | None = None, status: str | None = None,
                batch_id: uuid.UUID | None = None, limit: int = 50,
                offset: int = 0) -> tuple[list[Audit], int]:
    """A page of audits, newest first, and the total number matching the filters."""
    where = []
    if verdict:
        where.append(Audit.verdict == verdict)
    if status:
        where.append(Audit.status == status)
    if batch_id:
        where.append(Audit.batch_id == batch_id)
    total = session.scalar(sa.select(sa.func.count()).select_from(Audit).where(*where)) or 0
    rows = session.scalars(
        sa.select(Audit).where(*where).order_by(Audit.created_at.desc(), Audit.id)
        .limit(limit).offset(offset)
    ).all()
    return list(rows), total


def _aware(t: dt.datetime | None) -> dt.datetime | None:
    """SQLite hands back naive datetimes; every stored time is UTC."""
    return t.replace(tzinfo=dt.timezone.utc) if t is not None and t.tzinfo is None else t


def set_status(session: Session, audit: Audit, status: str, *, verdict: str | None = None,
               reason: str | None = None, error: dict | None = None,
               evidence: dict | None = None, message: str | None = None) -> None:
    """Move ``audit`` to ``status`` and log the change (timestamps kept in step)."""
    previous = audit.status
    now = utcnow()
    audit.status = status
    if status == "running" and audit.started_at is None:
        audit.started_at = now
    if status in FINAL_STATUSES:
        audit.finished_at = now
        created, started = _aware(audit.created_at), _aware(audit.started_at)
        audit.timings = {
            "total": (now - created).total_seconds() if created else None,
            "running": (now - started).total_seconds() if started else None,
            "queued": (started - created).total_seconds() if started and created else None,
        }
    if verdict is not None:
        audit.verdict = verdict
    if reason is not None:
        audit.reason = reason
    if error is not None:
        audit.error = error
    if evidence is not None:
        audit.evidence = evidence
    if previous != status or verdict is not None:
        add_event(session, audit_id=audit.id, batch_id=audit.batch_id, kind="status",
                  from_status=previous, to_status=status, message=message or reason,
                  data={"verdict": verdict} if verdict else None)


def scope_data(session: Session, audit_id: uuid.UUID, scope: str) -> dict | None:
    return session.scalar(
        sa.select(Dataset.data).join(AuditScope, AuditScope.dataset_id == Dataset.id)
        .where(AuditScope.audit_id == audit_id, AuditScope.scope == scope)
    )


def scope_names(session: Session, audit_id: uuid.UUID) -> list[str]:
    return list(session.scalars(
        sa.select(AuditScope.scope).where(AuditScope.audit_id == audit_id)
        .order_by(AuditScope.position)
    ))


def scope_results(session: Session, audit_id: uuid.UUID) -> dict[str, ScopeResult]:
    rows = session.scalars(sa.select(ScopeResult).where(ScopeResult.audit_id == audit_id))
    return {r.scope: r for r in rows}


def has_scope_result(session: Session, audit_id: uuid.UUID, scope: str) -> bool:
    return session.scalar(
        sa.select(sa.func.count()).select_from(ScopeResult)
        .where(ScopeResult.audit_id == audit_id, ScopeResult.scope == scope)
    ) > 0


def _num(x: Any) -> float | None:
    try:
        x = float(x)
    except (TypeError, ValueError):
        return None
    return x if math.isfinite(x) else None


def comparison_rows(scope_evidence: dict) -> Iterable[tuple[str, dict]]:
    """(pair, row) from a scope's evidence (docs/ARCHITECTURE.md, "Evidence format"):
    LazyPPL vs PyMC rows under ``comparisons``; for posteriordb posteriors also
    ``reference.pymc_vs_reference`` and ``reference.lazyppl_vs_reference`` rows."""
    # a reference audit's scope compares PyMC with the reference (no LazyPPL side)
    main = "pymc_vs_reference" if scope_evidence.get("kind") == "reference" else "lazyppl_vs_pymc"
    for row in scope_evidence.get("comparisons") or []:
        yield main, row
    reference = scope_evidence.get("reference") or {}
    for pair in ("pymc_vs_reference", "lazyppl_vs_reference"):
        for row in (reference.get(pair) or {}).get("comparisons") or []:
            yield pair, row


def _fit_items(fits) -> list[tuple[str, int, Any]]:
    """(language, look, Fit) from {(language, look): Fit} or [(look, Fit) | Fit, ...]."""
    if isinstance(fits, dict):
        return sorted(((lang, look, f) for (lang, look), f in fits.items()),
                      key=lambda t: (t[0], t[1]))
    out = []
    for item in fits:
        look, fit = item if isinstance(item, tuple) else (0, item)
        out.append((fit.language, look, fit))
    return out


def store_scope_outcome(session: Session, audit: Audit, scope: str, evidence: dict,
                        fits, seconds: float | None = None) -> ScopeResult:
    """Write one scope's result, its fits and its per-parameter rows. ``fits`` is
    ``{(language, look): Fit}`` (as ``pipeline.ScopeOutcome.fits``) or a list of
    ``(look, Fit)``. The caller holds the audit's lock and has checked that the scope
    has no result yet."""
    for language, look, fit in _fit_items(fits):
        session.add(FitRecord(
            audit_id=audit.id, scope=scope, language=language, look=look, chains=fit.n_chains,
            draws_per_chain=fit.n_draws, draws=encode_draws(fit.draws),
            summary=json_safe({"divergences": fit.divergences, "sampler": fit.sampler,
                               "stats": fit.stats, "timings": fit.timings,
                               "versions": fit.versions, "reportable": fit.reportable,
                               "names": list(fit.draws)}),
        ))
    for pair, row in comparison_rows(evidence):
        d_lo, d_hi = (row.get("D") or (None, None))[:2]
        r_lo, r_hi = (row.get("R") or (None, None))[:2]
        session.add(Comparison(
            audit_id=audit.id, scope=scope, pair=pair, parameter=row["parameter"],
            d=_num(row.get("d")), d_lo=_num(d_lo), d_hi=_num(d_hi), r=_num(row.get("r")),
            r_lo=_num(r_lo), r_hi=_num(r_hi), verdict=row.get("verdict", "inconclusive"),
            detail=json_safe({k: v for k, v in row.items() if k not in ("parameter", "verdict")}),
        ))
    result = ScopeResult(audit_id=audit.id, scope=scope,
                         verdict=evidence.get("verdict", "inconclusive"),
                         evidence=json_safe(evidence),
                         seconds=_num(seconds if seconds is not None else evidence.get("seconds")))
    session.add(result)
    add_event(session, audit_id=audit.id, batch_id=audit.batch_id, kind="scope_done",
              message=f"scope {scope}: {result.verdict}", data={"scope": scope})
    return result


def fit_record(session: Session, audit_id: uuid.UUID, scope: str, language: str) -> FitRecord | None:
    """The last look of one program's fit on one scope."""
    return session.scalar(
        sa.select(FitRecord).where(FitRecord.audit_id == audit_id, FitRecord.scope == scope,
                                   FitRecord.language == language)
        .order_by(FitRecord.look.desc()).limit(1)
    )


def fit_index(session: Session, audit_id: uuid.UUID) -> list[tuple[str, str, int, int, int]]:
    """(scope, language, look, chains, draws) of every stored fit, without the draws."""
    rows = session.execute(
        sa.select(FitRecord.scope, FitRecord.language, FitRecord.look, FitRecord.chains,
                  FitRecord.draws_per_chain).where(FitRecord.audit_id == audit_id)
        .order_by(FitRecord.scope, FitRecord.language, FitRecord.look)
    )
    return [tuple(r) for r in rows]


def comparisons(session: Session, audit_id: uuid.UUID) -> list[Comparison]:
    return list(session.scalars(
        sa.select(Comparison).where(Comparison.audit_id == audit_id)
        .order_by(Comparison.scope, Comparison.pair, Comparison.id)
    ))


def events(session: Session, audit_id: uuid.UUID) -> list[Event]:
    return list(session.scalars(
        sa.select(Event).where(Event.audit_id == audit_id).order_by(Event.id)))


def json_safe(value: Any) -> Any:
    """Plain JSON (no NaN/inf: those become null; tuples lists; numpy scalars floats)."""
    if isinstance(value, dict):
        return {str(k): json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [json_safe(v) for v in value]
    if isinstance(value, bool) or value is None or isinstance(value, str):
        return value
    if isinstance(value, int):
        return value
    if hasattr(value, "tolist"):  # numpy scalar / array
        return json_safe(value.tolist())
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    return str(value)
