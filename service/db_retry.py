"""Retrying a database step through a lost connection (PostgreSQL restarting, a network
cut). Only connection-level errors are retried: ``OperationalError`` (could not
connect, server closed the connection, deadlock) and ``InterfaceError``; every step
retried this way is idempotent (row lock + status re-check), so running it again
after a failure whose commit may or may not have landed is safe.
"""
from __future__ import annotations

import logging
import random
import time
from typing import Callable, TypeVar

import sqlalchemy.exc

log = logging.getLogger("ppl_audit.db_retry")
T = TypeVar("T")
CONNECTION_ERRORS = (sqlalchemy.exc.OperationalError, sqlalchemy.exc.InterfaceError)


class DatabaseRetry:
    """``retry(fn, *args)`` calls ``fn`` until it returns, waiting 0.5, 1, 2 … up to
    ``cap`` seconds (±25 % jitter) between attempts for at most ``budget`` seconds in
    all; after that the last connection error propagates (Celery then retries the task,
    and the reconciler re-dispatches it if that fails too)."""

    def __init__(self, budget: float = 300.0, first: float = 0.5, cap: float = 10.0,
                 sleep: Callable[[float], None] = time.sleep) -> None:
        self.budget, self.first, self.cap, self.sleep = budget, first, cap, sleep

    def __call__(self, fn: Callable[..., T], *args, **kwargs) -> T:
        deadline = time.monotonic() + self.budget
        delay, attempt = self.first, 1
        while True:
            try:
                return fn(*args, **kwargs)
            except CONNECTION_ERRORS as err:
                wait = delay * random.uniform(0.75, 1.25)
                if time.monotonic() + wait > deadline:
                    raise
                log.warning("database unreachable in %s (attempt %d, next in %.1f s): %s",
                            getattr(fn, "__name__", fn), attempt, wait,
                            str(err).splitlines()[0][:200])
                self.sleep(wait)
                delay, attempt = min(self.cap, delay * 2), attempt + 1
