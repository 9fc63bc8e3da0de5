"""The Celery application (Redis broker) and the dispatcher the API uses to send work.

Delivery guarantees: a task is acknowledged only after it finished (``acks_late``) and
is requeued when its worker process dies (``task_reject_on_worker_lost``); each worker
process reserves one task at a time (prefetch 1) because one audit step keeps two cores
busy. After a whole worker is lost, Redis redelivers its unacknowledged task once the
visibility timeout passes, which is set above the hard time limit so that a task
still running is never handed to a second worker. The steps are idempotent, so a
redelivered task writes nothing twice.

The broker is only the delivery: each unit's state and lease live in the database,
and the reconciler every worker runs (``workers/watchdog.py``) re-sends what a broker
failure lost. Task ids are fixed per unit (``service.reconcile.scope_task_id`` …), so
the reconciler can tell whether a unit's message is still in the broker.

Start a worker with ``ppl-audit worker`` (or ``celery -A workers.celery_app worker``).
"""
from __future__ import annotations

import uuid

from celery import Celery

from service.config import Settings, get_settings
from service.reconcile import BrokerView, batch_task_id, finish_task_id, redis_broker_view, scope_task_id

TASK_SCOPE = "ppl_audit.run_audit_scope"
TASK_FINISH = "ppl_audit.finish_audit"
TASK_BATCH = "ppl_audit.run_batch"


def create_celery(settings: Settings) -> Celery:
    limits = settings.celery
    # tasks are imported by the worker only; the API sends them by name
    app = Celery("ppl_audit", broker=settings.broker_url, backend=settings.result_backend,
                 include=["workers.tasks", "workers.watchdog"])
    app.conf.update(
        task_acks_late=True,
        task_reject_on_worker_lost=True,
        worker_prefetch_multiplier=1,
        task_time_limit=limits.task_time_limit,
        task_soft_time_limit=limits.soft_time_limit,
        broker_transport_options={"visibility_timeout": limits.effective_visibility_timeout},
        result_backend_transport_options={"visibility_timeout": limits.effective_visibility_timeout},
        task_default_queue=limits.queue,
        task_serializer="json",
        accept_content=["json"],
        result_serializer="json",
        task_ignore_result=settings.result_backend is None,
        broker_connection_retry_on_startup=True,
        worker_hijack_root_logger=False,
        # one task per child process at a time; recycle children to bound memory growth
        worker_max_tasks_per_child=50,
        task_track_started=True,
        # A pool process loads the pipeline (tasks._preload_pipeline) before it reports
        # up; with arviz 0.23.4 that import alone takes 4.6 s here, over billiard's 4 s
        # default, so every replacement of a killed pool process was killed in turn and
        # the worker never ran another task (test_pool_process_killed_mid_fit...).
        worker_proc_alive_timeout=60.0,
    )
    app.ppl_settings = settings  # read by workers.tasks for the database URL
    return app


class CeleryDispatcher:
    """Sends steps by task name, so the API does not import the worker code."""

    def __init__(self, app: Celery) -> None:
        self.app = app

    def scope(self, audit_id: uuid.UUID, scope: str) -> None:
        self.app.send_task(TASK_SCOPE, kwargs={"audit_id": str(audit_id), "scope": scope},
                           task_id=scope_task_id(audit_id, scope))

    def finish(self, audit_id: uuid.UUID) -> None:
        self.app.send_task(TASK_FINISH, kwargs={"audit_id": str(audit_id)},
                           task_id=finish_task_id(audit_id))

    def batch(self, batch_id: uuid.UUID) -> None:
        self.app.send_task(TASK_BATCH, kwargs={"batch_id": str(batch_id)},
                           task_id=batch_task_id(batch_id))

    def broker_view(self) -> BrokerView:
        """Task ids in the queue and delivered-but-unacknowledged (Redis transport)."""
        with self.app.connection_for_write() as conn:
            return redis_broker_view(conn.default_channel.client, self.app.conf.task_default_queue)

    def queue_length(self) -> int:
        """Messages waiting in the broker's queue (Redis list length)."""
        with self.app.connection_for_write() as conn:
            client = conn.default_channel.client
            return int(client.llen(self.app.conf.task_default_queue))


app = create_celery(get_settings())
