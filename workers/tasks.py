"""Celery tasks: keyword-only, IDs in, thin wrappers around :mod:`service.steps`.

Every database step is retried in place through a lost connection for
``work.db_retry_seconds`` (``service.db_retry``), so a fitted scope is not refitted
because PostgreSQL restarted; past that, Celery retries the task with backoff, and
past that the reconciler re-sends it. A user error is a result (verdict ``error``),
and any other exception marks the audit ``failed`` with a generic reason after being
logged. A scope claims a lease first and renews it while fitting
(``steps.LeaseKeeper``), which also watches for a cancel: then the scope's sandboxed
runs are killed and nothing is stored. Its fits get at most ``celery.scope_wall_seconds``.
"""
from __future__ import annotations

import logging
import uuid
from functools import lru_cache

import kombu.exceptions
import redis.exceptions
import sqlalchemy.exc
from celery.exceptions import SoftTimeLimitExceeded
from celery.signals import task_postrun, worker_process_init

from service.db import make_engine, make_session_factory
from service.db import work as work_repo
from service.db_retry import DatabaseRetry
from workers.celery_app import TASK_BATCH, TASK_FINISH, TASK_SCOPE, CeleryDispatcher, app
from workers.errors import ResourceLimit
from workers.stop import kill_own_runs

log = logging.getLogger("ppl_audit.tasks")
INFRASTRUCTURE = (sqlalchemy.exc.OperationalError, sqlalchemy.exc.InterfaceError,
                  kombu.exceptions.OperationalError, redis.exceptions.ConnectionError)
RETRY = dict(autoretry_for=INFRASTRUCTURE, retry_backoff=2, retry_backoff_max=120,
             retry_jitter=True, max_retries=app.ppl_settings.celery.max_retries)
WORK = app.ppl_settings.work
db = DatabaseRetry(WORK.db_retry_seconds)


class _LazySteps:
    """``service.steps`` imported on first use: it pulls in the pipeline (ArviZ, ~300 MB),
    which only the pool process that runs a task needs, not the worker's parent."""

    def __getattr__(self, name):
        from service import steps as module

        return getattr(module, name)


steps = _LazySteps()


@worker_process_init.connect
def _preload_pipeline(**_) -> None:
    """Each pool process loads the pipeline as it starts, not on its first task, and
    starts its first standby PyMC session."""
    import service.steps  # noqa: F401

    _refill_standby()


@lru_cache(maxsize=1)
def standby():
    """This pool process's standby PyMC session (``celery.pymc_standby``), or None."""
    if not app.ppl_settings.celery.pymc_standby:
        return None
    from workers.pymc_runner.session import Standby

    return Standby()


def _refill_standby() -> None:
    """Start the next standby session, for audits with default settings (others start
    their own). Never fails the task: without a standby a scope starts its session."""
    keeper = standby()
    if keeper is None:
        return
    try:
        from workers.pymc_runner.session import limits_for
        from workers.settings import AuditSettings

        settings = steps.scope_settings(AuditSettings(), app.ppl_settings.celery.scope_wall_seconds)
        keeper.refill(limits_for(settings))
    except Exception:  # noqa: BLE001
        log.warning("could not start a standby PyMC session", exc_info=True)


@lru_cache(maxsize=1)
def sessions():
    """This process's session factory (created lazily, after the prefork)."""
    return make_session_factory(make_engine(app.ppl_settings.database_url))


def _after_audit_stopped(batch_id) -> None:
    if batch_id is not None:
        db(steps.update_batch, sessions(), batch_id)


def _lease(task) -> "steps.Lease":
    return steps.Lease(work_repo.owner_name(task.request.id), WORK.lease_seconds,
                       WORK.max_lost_attempts)


@app.task(name=TASK_SCOPE, bind=True, **RETRY)
def run_audit_scope(self, *, audit_id: str, scope: str) -> str:
    """Fit both programs on one scope and store the result once."""
    aid, lease = uuid.UUID(audit_id), _lease(self)
    job = db(steps.claim_scope, sessions(), aid, scope, lease)
    if isinstance(job, steps.Stopped):  # poison: its holders vanished max_lost times
        _after_audit_stopped(job.batch_id)
        return "failed"
    if job is None:
        if db(steps.needs_finish, sessions(), aid):  # redelivered after its scope was stored
            CeleryDispatcher(app).finish(aid)
        return "skipped"
    keeper = steps.LeaseKeeper(sessions(), job, lease, WORK.heartbeat_seconds,
                               WORK.cancel_check_seconds, kill_own_runs)
    pymc_sessions = standby().take if standby() is not None else None
    try:
        with keeper:
            outcome = steps.fit_scope(
                job, steps.progress_recorder(sessions(), aid, cancelled=keeper.cancelled),
                app.ppl_settings.celery.scope_wall_seconds, pymc_sessions)
    except steps.Cancelled:
        return _cancelled(aid, scope, lease)
    except INFRASTRUCTURE:
        try:  # let the retry (maybe in another pool process) claim it without waiting
            steps.release_scope(sessions(), aid, scope, lease.owner)
        except Exception:
            pass  # the lease then expires and the retry or the reconciler takes over
        raise
    except SoftTimeLimitExceeded:  # backstop: the wall cap above normally ends fits first
        _after_audit_stopped(db(steps.fail, sessions(), aid, ResourceLimit(
            "the worker's time limit for one scope was reached", limit="timeout")))
        return "timeout"
    except Exception as err:  # a bug or an unexpected failure: log with context, fail the audit
        if keeper.cancelled.is_set():  # a fit killed by the cancellation, not a failure
            return _cancelled(aid, scope, lease)
        log.exception("scope %r of audit %s failed unexpectedly", scope, audit_id)
        _after_audit_stopped(db(steps.fail, sessions(), aid, err))
        return "failed"
    if keeper.cancelled.is_set():  # its fits were killed: nothing worth storing
        return _cancelled(aid, scope, lease)
    # save_scope re-reads the status under the row lock: a result that raced a cancel
    # is refused there
    if db(steps.save_scope, sessions(), job, outcome):
        CeleryDispatcher(app).finish(aid)
    return outcome.evidence.get("verdict", "?")


@task_postrun.connect
def _after_task(sender=None, **_) -> None:
    """After a scope (which closed the standby it took), start the next standby."""
    if getattr(sender, "name", None) == TASK_SCOPE:  # the sender is the bound task
        _refill_standby()


def _cancelled(aid: uuid.UUID, scope: str, lease) -> str:
    """The scope's audit was cancelled mid-fit: give up the lease, store nothing."""
    try:
        steps.release_scope(sessions(), aid, scope, lease.owner)
    except Exception:
        log.warning("could not release the lease of cancelled %s/%s", aid, scope, exc_info=True)
    log.info("scope %r of audit %s stopped: the audit was cancelled", scope, aid)
    return "cancelled"


@app.task(name=TASK_FINISH, **RETRY)
def finish_audit(*, audit_id: str) -> str:
    """Pair verdict from the stored scopes; closes the batch when it was the last audit."""
    _after_audit_stopped(db(steps.finish, sessions(), uuid.UUID(audit_id)))
    return "finished"


@app.task(name=TASK_BATCH, bind=True, **RETRY)
def run_batch(self, *, batch_id: str) -> str:
    """Fan a posteriordb batch out into one audit per posterior."""
    from corpus.loader import load

    db(steps.fan_out_batch, sessions(), uuid.UUID(batch_id), load,
       CeleryDispatcher(app).scope, _lease(self))
    return "fanned out"
