"""The reconciler inside every ``ppl-audit worker``: a thread of the worker's main
process, started when the worker is ready, that runs :func:`service.reconcile.reconcile`
at once and then every ``work.reconcile_seconds``, and records the worker's heartbeat.

A thread of the main process rather than a beat-scheduled task: it needs no pool slot
(a worker busy fitting for minutes still reconciles), no schedule file and no extra
process. Its engine uses no connection pool, so pool processes forked later never
inherit an open database socket; each pass opens one connection (≈ 5 queries).
"""
from __future__ import annotations

import logging
import threading

from celery.signals import worker_ready, worker_shutdown
from sqlalchemy.pool import NullPool

from service.db import make_engine, make_session_factory
from service.db import work as work_repo
from service.db.base import utcnow
from service.reconcile import reconcile

log = logging.getLogger("ppl_audit.watchdog")


class Watchdog:
    """``run_once()`` is one reconciler pass plus a heartbeat; ``start()`` loops it."""

    def __init__(self, app, name: str) -> None:
        from workers.celery_app import CeleryDispatcher

        self.app, self.name = app, name
        self.work = app.ppl_settings.work
        self.engine = make_engine(app.ppl_settings.database_url, poolclass=NullPool)
        self.sessions = make_session_factory(self.engine)
        self.dispatcher = CeleryDispatcher(app)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="ppl-audit-reconciler",
                                        daemon=True)

    def run_once(self):
        with self.sessions.begin() as s:
            work_repo.beat(s, self.name, utcnow())
        broker = self.dispatcher.broker_view()
        return reconcile(self.sessions, self.dispatcher, broker, utcnow(),
                         self.work.dispatch_grace_seconds)

    def _loop(self) -> None:
        while True:
            try:
                self.run_once()
            except Exception as err:  # database or broker down: try again next interval
                log.warning("reconciler pass failed: %s: %s", type(err).__name__,
                            str(err).splitlines()[0][:200] if str(err) else "")
            if self._stop.wait(self.work.reconcile_seconds):
                return

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=10)
        try:
            with self.sessions.begin() as s:
                work_repo.forget_worker(s, self.name)
        except Exception:
            pass
        self.engine.dispose()


_running: list[Watchdog] = []


@worker_ready.connect
def _start(sender=None, **_) -> None:
    from workers.celery_app import app

    dog = Watchdog(app, getattr(sender, "hostname", None) or work_repo.owner_name(None))
    dog.start()
    _running.append(dog)


@worker_shutdown.connect
def _stop(**_) -> None:
    while _running:
        _running.pop().stop()
