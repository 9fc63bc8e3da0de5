"""The audit's worker steps against the database; Celery tasks are thin wrappers.

Each step is safe to run twice (a re-delivered task after a lost worker): it locks the
audit row, checks the status and what is already stored, and only then works or
writes. The long part (fitting) runs with no transaction open; its result is written
in one transaction after the checks are repeated under the lock, so a scope is stored
once even when two workers raced on it. Steps return what should be enqueued next,
and the caller enqueues it after the commit.
"""
from __future__ import annotations

import logging
import time
import uuid
from dataclasses import dataclass
from typing import Callable

from sqlalchemy.orm import Session, sessionmaker

from service.db import audits as audit_repo
from service.db import batches as batch_repo
from service.errors import audit_outcome
from service.submission import Submission, create_audit
from workers import compare, pipeline
from workers.settings import AuditSettings

log = logging.getLogger("ppl_audit.steps")
Sessions = sessionmaker[Session]
FINAL = ("done", "failed")


@dataclass(frozen=True)
class ScopeJob:
    """What one scope task needs, read from the database under the lock."""

    audit_id: uuid.UUID
    scope: str
    pymc_source: str
    lazyppl_source: str
    data: dict
    parameters: list[str] | None
    settings: AuditSettings
    posterior: str | None


def claim_scope(sessions: Sessions, audit_id: uuid.UUID, scope: str) -> ScopeJob | None:
    """Mark the audit running and return the job, or None if there is nothing to do."""
    with sessions.begin() as s:
        audit = audit_repo.lock_audit(s, audit_id)
        if audit is None or audit.status in FINAL:
            return None
        if audit_repo.has_scope_result(s, audit_id, scope):
            return None
        data = audit_repo.scope_data(s, audit_id, scope)
        if data is None:
            log.error("audit %s has no scope %r", audit_id, scope)
            return None
        if audit.status == "queued":
            audit_repo.set_status(s, audit, "running")
        return ScopeJob(audit_id, scope, audit.pymc_program.source, audit.lazyppl_program.source,
                        data, audit.parameters, AuditSettings.model_validate(audit.settings),
                        audit.posterior)


def fit_scope(job: ScopeJob, progress: pipeline.Progress) -> pipeline.ScopeOutcome:
    """Run the pipeline on one scope (long; no transaction open)."""
    from service.submission import is_reference_audit

    if is_reference_audit(job.lazyppl_source, job.posterior):
        return _fit_reference_scope(job, progress)
    reference = None
    if job.posterior and job.scope == "full":
        from corpus.loader import load_reference

        reference = load_reference(job.posterior)
    return pipeline.run_scope(job.pymc_source, job.lazyppl_source, job.scope, job.data,
                              job.parameters, job.settings, reference, progress)


def _fit_reference_scope(job: ScopeJob, progress: pipeline.Progress) -> pipeline.ScopeOutcome:
    """A reference audit's only scope: the PyMC program against posteriordb's draws."""
    from corpus.loader import load_reference
    from workers.reference_audit import ReferenceAuditRequest, run_reference_scope

    request = ReferenceAuditRequest(name=job.posterior, pymc_source=job.pymc_source,
                                    posterior=job.posterior,
                                    reference=load_reference(job.posterior), data=job.data,
                                    parameters=job.parameters, settings=job.settings)
    evidence, fits = run_reference_scope(request, progress)
    return pipeline.ScopeOutcome(evidence, {("pymc", look): f for look, f in fits.items()})


def save_scope(sessions: Sessions, job: ScopeJob, outcome: pipeline.ScopeOutcome) -> bool:
    """Store the scope's evidence, fits and rows once. True when every scope of the audit
    has a result (the caller then enqueues :func:`finish`)."""
    with sessions.begin() as s:
        audit = audit_repo.lock_audit(s, job.audit_id)
        if audit is None or audit.status in FINAL:
            return False
        if not audit_repo.has_scope_result(s, job.audit_id, job.scope):
            audit_repo.store_scope_outcome(s, audit, job.scope, outcome.evidence, outcome.fits)
            s.flush()
        done = audit_repo.scope_results(s, job.audit_id)
        return set(done) >= set(audit_repo.scope_names(s, job.audit_id))


def needs_finish(sessions: Sessions, audit_id: uuid.UUID) -> bool:
    """True when every scope is stored but the audit is not closed (e.g. its worker died
    between storing the last scope and enqueueing finish)."""
    with sessions() as s:
        audit = audit_repo.get_audit(s, audit_id)
        if audit is None or audit.status in FINAL:
            return False
        return set(audit_repo.scope_results(s, audit_id)) >= set(audit_repo.scope_names(s, audit_id))


def finish(sessions: Sessions, audit_id: uuid.UUID) -> uuid.UUID | None:
    """Pair verdict from the stored scope results; returns the audit's batch id, if any."""
    with sessions.begin() as s:
        audit = audit_repo.lock_audit(s, audit_id)
        if audit is None or audit.status in FINAL:
            return None
        results = audit_repo.scope_results(s, audit_id)
        names = audit_repo.scope_names(s, audit_id)
        if set(results) < set(names):
            return None  # a scope is still running; its task enqueues finish again
        settings = AuditSettings.model_validate(audit.settings)
        request = pipeline.AuditRequest(
            name=audit.name, pymc_source=audit.pymc_program.source,
            lazyppl_source=audit.lazyppl_program.source,
            scopes={sc.scope: sc.dataset.data for sc in audit.scopes},
            parameters=audit.parameters, settings=settings)
        meta = {"name": audit.name, **pipeline.provenance(request)}
        if not request.lazyppl_source and audit.posterior:  # a reference audit
            meta.update(kind="reference", reference=audit.posterior)
        evidence = pipeline.finish_audit(meta, {n: results[n].evidence for n in names}, settings)
        error = next((results[n].evidence.get("error") for n in names
                      if results[n].verdict == compare.ERROR), None)
        audit_repo.set_status(s, audit, "done", verdict=evidence["verdict"],
                              reason=evidence.get("reason"), error=error, evidence=evidence)
        return audit.batch_id


def fail(sessions: Sessions, audit_id: uuid.UUID, err: BaseException) -> uuid.UUID | None:
    """Stop the audit: verdict error with the reason (user error) or failed (anything else)."""
    with sessions.begin() as s:
        audit = audit_repo.lock_audit(s, audit_id)
        if audit is None or audit.status in FINAL:
            return None
        outcome = audit_outcome(err)
        audit_repo.set_status(s, audit, outcome.pop("status"), **outcome)
        return audit.batch_id


def progress_recorder(sessions: Sessions, audit_id: uuid.UUID,
                      min_interval: float = 1.0) -> pipeline.Progress:
    """A pipeline progress callback that logs steps as events (at most one a second)."""
    last = [0.0]

    def record(event: str, **info) -> None:
        now = time.monotonic()
        if event not in ("scope_done",) and now - last[0] < min_interval:
            return
        last[0] = now
        message = f"{event} " + " ".join(f"{k}={v}" for k, v in info.items())
        try:
            with sessions.begin() as s:
                audit_repo.add_event(s, audit_id=audit_id, kind="progress", message=message,
                                     data=audit_repo.json_safe(info))
        except Exception:  # progress is best effort; never fail a fit over it
            log.warning("could not record progress of %s", audit_id, exc_info=True)

    return record


# ---- batches ---------------------------------------------------------------------------

def fan_out_batch(sessions: Sessions, batch_id: uuid.UUID,
                  load_entry: Callable[[str], object],
                  enqueue: Callable[[uuid.UUID, str], None]) -> None:
    """Create one audit per posterior not yet created (unique (batch, posterior)), and
    enqueue its scopes after each commit."""
    with sessions.begin() as s:
        batch = batch_repo.lock_batch(s, batch_id)
        if batch is None or batch.status in FINAL:
            return
        batch_repo.set_batch_status(s, batch, "running")
        posteriors, settings = list(batch.posteriors), AuditSettings.model_validate(batch.settings)
    for name in posteriors:
        with sessions.begin() as s:
            batch_repo.lock_batch(s, batch_id)
            if batch_repo.audit_for_posterior(s, batch_id, name) is not None:
                continue
            try:
                entry = load_entry(name)
            except Exception as err:  # a broken corpus entry must not stall the batch
                log.exception("could not load posterior %r for batch %s", name, batch_id)
                _record_unloadable(s, batch_id, name, settings, err)
                continue
            audit, queue = create_audit(s, Submission(
                name=name, pymc_source=entry.pymc_source, lazyppl_source=entry.lazyppl_source,
                scopes=entry.scopes, parameters=entry.parameters, settings=settings,
                source="posteriordb", posterior=name, batch_id=batch_id))
            scopes = [sc.scope for sc in audit.scopes] if queue else []
            audit_id = audit.id
        for scope in scopes:
            enqueue(audit_id, scope)
    update_batch(sessions, batch_id)


def _record_unloadable(s: Session, batch_id: uuid.UUID, name: str, settings: AuditSettings,
                       err: Exception) -> None:
    """An audit with verdict ``error`` standing for a posterior the corpus could not load."""
    audit = audit_repo.create_audit(s, name=name, pymc_source="", lazyppl_source="", scopes={},
                                    parameters=None, settings=settings.model_dump(mode="json"),
                                    source="posteriordb", posterior=name, batch_id=batch_id)
    reason = f"could not load posterior {name!r} from the shipped corpus: {err}"
    audit_repo.set_status(s, audit, "done", verdict=compare.ERROR, reason=reason,
                          error={"code": "corpus", "message": reason, "details": {}})


def update_batch(sessions: Sessions, batch_id: uuid.UUID) -> None:
    """Close the batch with its SPEC §4 summary once every audit is finished."""
    with sessions.begin() as s:
        batch = batch_repo.lock_batch(s, batch_id)
        if batch is None or batch.status in FINAL:
            return
        audits = batch_repo.batch_audits(s, batch_id)
        if len(audits) < len(batch.posteriors) or any(a.status not in FINAL for a in audits):
            return
        batch_repo.set_batch_status(s, batch, "done", summary=batch_summary(audits))


def batch_summary(audits) -> dict:
    """SPEC §4 batch summary over finished audits (see workers.compare.batch_summary)."""
    return compare.batch_summary([
        {"verdict": a.verdict or compare.ERROR,
         "scopes": (a.evidence or {}).get("scopes") or {}} for a in audits])
