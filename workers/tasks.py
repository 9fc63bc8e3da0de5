"""Celery tasks: keyword-only, IDs in, thin wrappers around :mod:`service.steps`.

Only infrastructure errors (database or broker unreachable) are retried, with
exponential backoff; a user error is a result (verdict ``error``), and any other
exception marks the audit ``failed`` with a generic reason after being logged.
"""
from __future__ import annotations

import logging
import uuid
from functools import lru_cache

import kombu.exceptions
import redis.exceptions
import sqlalchemy.exc
from celery.exceptions import SoftTimeLimitExceeded
from celery.signals import worker_process_init

from service.db import make_engine, make_session_factory
from workers.celery_app import TASK_BATCH, TASK_FINISH, TASK_SCOPE, CeleryDispatcher, app
from workers.errors import ResourceLimit

log = logging.getLogger("ppl_audit.tasks")
INFRASTRUCTURE = (sqlalchemy.exc.OperationalError, sqlalchemy.exc.InterfaceError,
                  kombu.exceptions.OperationalError, redis.exceptions.ConnectionError)
RETRY = dict(autoretry_for=INFRASTRUCTURE, retry_backoff=2, retry_backoff_max=120,
             retry_jitter=True, max_retries=app.ppl_settings.celery.max_retries)


class _LazySteps:
    """``service.steps`` imported on first use: it pulls in the pipeline (ArviZ, ~300 MB),
    which only the pool process that runs a task needs, not the worker's parent."""

    def __getattr__(self, name):
        from service import steps as module

        return getattr(module, name)


steps = _LazySteps()


@worker_process_init.connect
def _preload_pipeline(**_) -> None:
    """Each pool process loads the pipeline as it starts, not on its first task."""
    import service.steps  # noqa: F401


@lru_cache(maxsize=1)
def sessions():
    """This process's session factory (created lazily, after the prefork)."""
    return make_session_factory(make_engine(app.ppl_settings.database_url))


def _after_audit_stopped(batch_id) -> None:
    if batch_id is not None:
        steps.update_batch(sessions(), batch_id)


@app.task(name=TASK_SCOPE, **RETRY)
def run_audit_scope(*, audit_id: str, scope: str) -> str:
    """Fit both programs on one scope and store the result once."""
    aid = uuid.UUID(audit_id)
    job = steps.claim_scope(sessions(), aid, scope)
    if job is None:
        if steps.needs_finish(sessions(), aid):  # redelivered after its scope was stored
            CeleryDispatcher(app).finish(aid)
        return "skipped"
    try:
        outcome = steps.fit_scope(job, steps.progress_recorder(sessions(), aid))
    except INFRASTRUCTURE:
        raise
    except SoftTimeLimitExceeded:
        _after_audit_stopped(steps.fail(sessions(), aid, ResourceLimit(
            "the worker's time limit for one scope was reached", limit="timeout")))
        return "timeout"
    except Exception as err:  # a bug or an unexpected failure: log with context, fail the audit
        log.exception("scope %r of audit %s failed unexpectedly", scope, audit_id)
        _after_audit_stopped(steps.fail(sessions(), aid, err))
        return "failed"
    if steps.save_scope(sessions(), job, outcome):
        CeleryDispatcher(app).finish(aid)
    return outcome.evidence.get("verdict", "?")


@app.task(name=TASK_FINISH, **RETRY)
def finish_audit(*, audit_id: str) -> str:
    """Pair verdict from the stored scopes; closes the batch when it was the last audit."""
    _after_audit_stopped(steps.finish(sessions(), uuid.UUID(audit_id)))
    return "finished"


@app.task(name=TASK_BATCH, **RETRY)
def run_batch(*, batch_id: str) -> str:
    """Fan a posteriordb batch out into one audit per posterior."""
    from corpus.loader import load

    steps.fan_out_batch(sessions(), uuid.UUID(batch_id), load, CeleryDispatcher(app).scope)
    return "fanned out"
