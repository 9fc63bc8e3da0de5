"""The audit's worker steps against the database; Celery tasks are thin wrappers.

Each step is safe to run twice (a re-delivered task after a lost worker): it locks the
audit row, checks the status and what is already stored, and only then works or
writes. The long part (fitting) runs with no transaction open; its result is written
in one transaction after the checks are repeated under the lock, so a scope is stored
once even when two workers raced on it. Steps return what should be enqueued next,
and the caller enqueues it after the commit.
"""
from __future__ import annotations

import datetime as dt
import logging
import threading
import time
import uuid
from dataclasses import dataclass
from typing import Callable

from sqlalchemy.orm import Session, sessionmaker

from service.db import audits as audit_repo
from service.db import batches as batch_repo
from service.db import work as work_repo
from service.db.base import utcnow
from service.db.models import FINAL_STATUSES
from service.errors import audit_outcome
from service.submission import Submission, create_audit
from workers import compare, pipeline
from workers.settings import AuditSettings

log = logging.getLogger("ppl_audit.steps")
Sessions = sessionmaker[Session]
FINAL = FINAL_STATUSES  # done, failed, cancelled: nothing more runs or is stored


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


@dataclass(frozen=True)
class Stopped:
    """The claim ended the audit (poison work); ``batch_id`` needs updating."""

    batch_id: uuid.UUID | None


@dataclass(frozen=True)
class Lease:
    """Who claims (``work.owner_name``), for how long (s), and after how many lost
    attempts the unit is poison."""

    owner: str
    seconds: float = 90.0
    max_lost: int = 3


def lost_reason(n: int) -> str:
    return (f"stopped after {n} attempts: each one killed its worker process or hit the "
            "task's hard time limit before storing a result")


def claim_scope(sessions: Sessions, audit_id: uuid.UUID, scope: str,
                lease: Lease | None = None) -> ScopeJob | Stopped | None:
    """Take the scope's lease, mark the audit running and return the job; None if there
    is nothing to do (finished, or another live worker holds it); :class:`Stopped` when
    its previous holders vanished ``lease.max_lost`` times (the audit is then failed)."""
    lease = lease or Lease(work_repo.owner_name(None))
    with sessions.begin() as s:
        audit = audit_repo.lock_audit(s, audit_id)
        if audit is None or audit.status in FINAL:
            return None
        if audit_repo.has_scope_result(s, audit_id, scope):
            return None
        unit = work_repo.lock_scope(s, audit_id, scope)
        if unit is None:
            log.error("audit %s has no scope %r", audit_id, scope)
            return None
        now = utcnow()
        decision = work_repo.claim_decision(
            unit.lease_owner, unit.lease_expires_at, now, lease.owner,
            unit.lease_owner is not None and work_repo.holder_is_dead(unit.lease_owner))
        if decision == work_repo.BUSY:
            return None
        if decision == work_repo.TAKE_LOST:
            unit.lost_attempts += 1
            audit_repo.add_event(s, audit_id=audit_id, batch_id=audit.batch_id, kind="lost",
                                 message=f"scope {scope}: holder {unit.lease_owner} vanished "
                                 f"(lost attempt {unit.lost_attempts})")
            if unit.lost_attempts >= lease.max_lost:
                reason = lost_reason(unit.lost_attempts)
                unit.lease_owner = unit.lease_expires_at = None
                audit_repo.set_status(s, audit, "failed", verdict=compare.ERROR, reason=reason,
                                      error={"code": "lost", "message": reason,
                                             "details": {"scope": scope,
                                                         "lost_attempts": unit.lost_attempts}})
                return Stopped(audit.batch_id)
        work_repo.take_scope_lease(unit, lease.owner, now, lease.seconds)
        audit_repo.add_event(s, audit_id=audit_id, batch_id=audit.batch_id, kind="picked",
                             message=f"scope {scope} picked up by {lease.owner} "
                             f"(attempt {unit.attempts})",
                             data={"scope": scope, "owner": lease.owner, "attempt": unit.attempts})
        data = audit_repo.scope_data(s, audit_id, scope)
        if audit.status == "queued":
            audit_repo.set_status(s, audit, "running")
        return ScopeJob(audit_id, scope, audit.pymc_program.source, audit.lazyppl_program.source,
                        data, audit.parameters, AuditSettings.model_validate(audit.settings),
                        audit.posterior)


def fit_scope(job: ScopeJob, progress: pipeline.Progress,
              wall_seconds: float | None = None, pymc_sessions=None) -> pipeline.ScopeOutcome:
    """Run the pipeline on one scope (long; no transaction open). ``wall_seconds`` caps
    the audit's ``budget.wall_seconds`` (the task's time limit): the sandbox kills fits
    that pass it and the scope ends ``inconclusive``, budget spent. ``pymc_sessions``
    (limits -> PymcSession, e.g. ``Standby.take``) gives the scope's PyMC session, which
    is closed with the scope; without it the pipeline starts its own."""
    from service.submission import is_reference_audit

    settings = scope_settings(job.settings, wall_seconds)
    from workers.pymc_runner.session import limits_for

    session = pymc_sessions(limits_for(settings)) if pymc_sessions else None
    try:
        if is_reference_audit(job.lazyppl_source, job.posterior):
            return _fit_reference_scope(job, progress, session)
        reference = None
        if job.posterior and job.scope == "full":
            from corpus.loader import load_reference

            reference = load_reference(job.posterior)
        outcome = pipeline.run_scope(job.pymc_source, job.lazyppl_source, job.scope,
                                     job.data, job.parameters, settings, reference, progress,
                                     pymc_session=session)
    finally:
        if session is not None:
            session.close()
    if settings is not job.settings:  # provenance: the task's limit bounded this scope
        outcome.evidence["wall_seconds_cap"] = wall_seconds
    return outcome


def scope_settings(settings, wall_seconds: float | None):
    """The audit's settings with ``budget.wall_seconds`` capped at the task's limit
    (the same object when the cap does not bind)."""
    if wall_seconds is None or wall_seconds >= settings.budget.wall_seconds:
        return settings
    return settings.model_copy(update={"budget": settings.budget.model_copy(
        update={"wall_seconds": wall_seconds})})


class Cancelled(Exception):
    """The audit was cancelled while this worker fitted it (raised by the progress
    callback between fits, so no further look starts)."""


class LeaseKeeper:
    """While the fit runs, a thread renews the claimed scope's lease every ``interval``
    seconds and reads the audit's status every ``cancel_check`` seconds. Database errors
    are logged and retried at the next beat (an outage shorter than the lease costs
    nothing). Once the audit is ``cancelled`` it sets :attr:`cancelled` (the progress
    callback then raises :class:`Cancelled`) and calls ``on_cancel`` at every further
    check until the fit ends (``workers.stop.kill_own_runs``: a run started between two
    checks is killed at the next one). Use as a context manager."""

    def __init__(self, sessions: Sessions, job: ScopeJob, lease: Lease, interval: float,
                 cancel_check: float | None = None,
                 on_cancel: Callable[[], object] | None = None) -> None:
        self.sessions, self.job, self.lease, self.interval = sessions, job, lease, interval
        self.cancel_check = min(interval, cancel_check or interval)
        self.on_cancel = on_cancel
        self.cancelled = threading.Event()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="lease-keeper", daemon=True)

    def _run(self) -> None:
        renewed = time.monotonic()
        while not self._stop.wait(self.cancel_check):
            try:
                if not self.cancelled.is_set() and audit_status(
                        self.sessions, self.job.audit_id) == "cancelled":
                    log.warning("audit %s cancelled: stopping its fits", self.job.audit_id)
                    self.cancelled.set()
                if self.cancelled.is_set():
                    if self.on_cancel is not None:
                        self.on_cancel()
                    continue  # a cancelled scope's lease is not renewed
                if time.monotonic() - renewed < self.interval:
                    continue
                renewed = time.monotonic()
                with self.sessions.begin() as s:
                    held = work_repo.renew_scope_lease(s, self.job.audit_id, self.job.scope,
                                                       self.lease.owner, utcnow(), self.lease.seconds)
                if not held:
                    log.warning("lease of %s/%s taken over", self.job.audit_id, self.job.scope)
            except Exception:
                log.warning("could not renew the lease of %s/%s", self.job.audit_id,
                            self.job.scope, exc_info=True)

    def __enter__(self) -> "LeaseKeeper":
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join(timeout=5)


def audit_status(sessions: Sessions, audit_id: uuid.UUID) -> str | None:
    """The audit's status now (one indexed read, no lock)."""
    with sessions() as s:
        return audit_repo.status_of(s, audit_id)


def release_scope(sessions: Sessions, audit_id: uuid.UUID, scope: str, owner: str) -> None:
    """Give up ``owner``'s lease without a result (e.g. before an infrastructure retry)."""
    with sessions.begin() as s:
        work_repo.release_scope_lease(s, audit_id, scope, owner)


def _fit_reference_scope(job: ScopeJob, progress: pipeline.Progress,
                         session=None) -> pipeline.ScopeOutcome:
    """A reference audit's only scope: the PyMC program against posteriordb's draws."""
    from corpus.loader import load_reference
    from workers.reference_audit import ReferenceAuditRequest, run_reference_scope

    request = ReferenceAuditRequest(name=job.posterior, pymc_source=job.pymc_source,
                                    posterior=job.posterior,
                                    reference=load_reference(job.posterior), data=job.data,
                                    parameters=job.parameters, settings=job.settings)
    evidence, fits = run_reference_scope(request, progress, pymc_session=session)
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
        work_repo.release_scope_lease(s, job.audit_id, job.scope)
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


def progress_recorder(sessions: Sessions, audit_id: uuid.UUID, min_interval: float = 1.0,
                      cancelled: threading.Event | None = None) -> pipeline.Progress:
    """A pipeline progress callback that logs steps as events (at most one a second) and
    raises :class:`Cancelled` once ``cancelled`` is set (before each fit and compare)."""
    last = [0.0]

    def record(event: str, **info) -> None:
        if cancelled is not None and cancelled.is_set():
            raise Cancelled(str(audit_id))
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
                  enqueue: Callable[[uuid.UUID, str], None],
                  lease: Lease | None = None) -> None:
    """Create one audit per posterior not yet created (unique (batch, posterior)), and
    enqueue its scopes after each commit. The batch's lease is renewed per posterior
    (the reconciler re-sends a batch whose fan-out stopped with its lease expired).

    Longest first (``longest_first``): posteriors and their scopes are created and
    enqueued in the order of the seconds this database stored for them before, so the
    long scopes do not start last and leave the other workers idle at the end; what is
    stored does not depend on the order (seeds and draws are per scope)."""
    lease = lease or Lease(work_repo.owner_name(None))

    def hold(batch) -> None:
        batch.lease_owner = lease.owner
        batch.lease_expires_at = utcnow() + dt.timedelta(seconds=lease.seconds)

    with sessions.begin() as s:
        batch = batch_repo.lock_batch(s, batch_id)
        if batch is None or batch.status in FINAL:
            return
        batch_repo.set_batch_status(s, batch, "running")
        hold(batch)
        posteriors, settings = list(batch.posteriors), AuditSettings.model_validate(batch.settings)
        seconds = batch_repo.stored_scope_seconds(s, posteriors)
    for name in longest_first(posteriors, seconds):
        with sessions.begin() as s:
            batch = batch_repo.lock_batch(s, batch_id)
            if batch is None or batch.status in FINAL:
                return  # cancelled mid fan-out: no further audit is created
            hold(batch)
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
                scopes=entry.scopes, parameters=entry.parameters,
                # the translation's meta.json settings (e.g. its PyMC profile) on top
                settings=entry.settings(settings),
                source="posteriordb", posterior=name, batch_id=batch_id))
            audit.token_id = batch.token_id  # the batch's submitter may cancel it
            scopes = longest_scopes_first(name, [sc.scope for sc in audit.scopes],
                                          seconds) if queue else []
            audit_id = audit.id
        for scope in scopes:
            enqueue(audit_id, scope)
    with sessions.begin() as s:
        batch = batch_repo.lock_batch(s, batch_id)
        if batch is not None:
            batch.lease_owner = batch.lease_expires_at = None
    update_batch(sessions, batch_id)


def longest_first(posteriors: list[str], seconds: dict[tuple[str, str], float]) -> list[str]:
    """The posteriors by the longest of their scopes' stored ``seconds`` ((posterior,
    scope) -> seconds), longest first (LPT scheduling: k workers then end close together
    instead of waiting on a long scope that started last). A posterior with no stored
    scope comes before all others (it may be long), in the given order: with no history,
    the order is the submitter's."""
    longest: dict[str, float] = {}
    for (posterior, _), value in seconds.items():
        longest[posterior] = max(value, longest.get(posterior, value))
    return _by_seconds(posteriors, longest)


def longest_scopes_first(posterior: str, scopes: list[str],
                         seconds: dict[tuple[str, str], float]) -> list[str]:
    """One posterior's scopes, as ``longest_first`` orders posteriors."""
    return _by_seconds(scopes, {scope: value for (name, scope), value in seconds.items()
                                if name == posterior})


def _by_seconds(items: list[str], seconds: dict[str, float]) -> list[str]:
    """``items`` without stored seconds first (given order), then the others longest
    first (a stable sort: ties keep the given order)."""
    return sorted(items, key=lambda item: (item in seconds, -seconds.get(item, 0.0)))


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
        # cancelled audits have no verdict: left out of the summary, not counted as errors
        batch_repo.set_batch_status(s, batch, "done", summary=batch_summary(
            [a for a in audits if a.status != "cancelled"]))


def batch_summary(audits) -> dict:
    """SPEC §4 batch summary over finished audits (see workers.compare.batch_summary)."""
    return compare.batch_summary([
        {"verdict": a.verdict or compare.ERROR,
         "scopes": (a.evidence or {}).get("scopes") or {}} for a in audits])
