"""The reconciler: the database is the record of work, the broker only delivers it.

Every ``ppl-audit worker`` runs :func:`reconcile` at start and every
``work.reconcile_seconds`` (``workers/watchdog.py``). One pass finds open units of work
whose delivery was lost and sends them again:

* a scope never picked up since it was dispatched (no lease) whose message is in
  neither the broker's queue nor its unacknowledged set, ``dispatch_grace_seconds``
  after it was sent (the broker lost its queue: Redis restarted empty, ``FLUSHDB``);
* a scope whose lease expired (its holder was killed, hit the hard time limit, hung,
  or gave up after a long database outage), unless its message already waits in the
  queue (a pool process that died has its task requeued at once);
* an audit whose scopes are all stored but which is not closed (its finish was lost);
* a batch whose fan-out stopped (lease expired or never taken) or whose audits all
  finished without the batch being closed.

Sending twice is harmless (the steps re-check under a row lock and store once); the
poison bound lives in the claim (:func:`service.steps.claim_scope`). Task ids are
fixed per unit (:func:`scope_task_id` …), so "is its message in the broker?" is a set
lookup. On PostgreSQL one reconciler runs at a time (transaction-level advisory lock).
"""
from __future__ import annotations

import datetime as dt
import json
import logging
import uuid
from dataclasses import dataclass, field
from typing import Protocol

import sqlalchemy as sa
from sqlalchemy.orm import Session, sessionmaker

from service.db import work as work_repo

log = logging.getLogger("ppl_audit.reconcile")
ADVISORY_KEY = 0x7070_6C5F_6175_6474 & 0x7FFF_FFFF_FFFF_FFFF  # "ppl_audt", fits a bigint


def scope_task_id(audit_id: uuid.UUID, scope: str) -> str:
    return f"scope:{audit_id}:{scope}"


def finish_task_id(audit_id: uuid.UUID) -> str:
    return f"finish:{audit_id}"


def batch_task_id(batch_id: uuid.UUID) -> str:
    return f"batch:{batch_id}"


@dataclass(frozen=True)
class BrokerView:
    """Task ids waiting in the queue, and those delivered but not yet acknowledged."""

    queued: frozenset[str] = frozenset()
    unacked: frozenset[str] = frozenset()

    def holds(self, task_id: str) -> bool:
        return task_id in self.queued or task_id in self.unacked


def _message_id(raw: bytes | str) -> str | None:
    try:
        message = json.loads(raw)
    except (ValueError, TypeError):
        return None
    if isinstance(message, list):  # unacked entries are [message, exchange, routing key]
        message = message[0] if message else {}
    headers = message.get("headers") or {} if isinstance(message, dict) else {}
    return headers.get("id") or (message.get("properties") or {}).get("correlation_id")


def redis_broker_view(client, queue: str, unacked_key: str = "unacked") -> BrokerView:
    """Read the task ids of Celery's Redis transport (kombu): the queue is a list of JSON
    messages (one list per priority step: ``queue``, ``queue\\x06\\x163`` …), the
    unacknowledged ones a hash. O(messages); a few hundred cost a few ms."""
    keys = [k for k in client.scan_iter(match=f"{queue}*", count=1000)
            if k.decode() == queue or k.decode().startswith(f"{queue}\x06\x16")]
    queued = {i for k in keys for i in map(_message_id, client.lrange(k, 0, -1)) if i}
    unacked = {i for i in map(_message_id, client.hvals(unacked_key)) if i}
    return BrokerView(frozenset(queued), frozenset(unacked))


class Sender(Protocol):
    def scope(self, audit_id: uuid.UUID, scope: str) -> None: ...
    def finish(self, audit_id: uuid.UUID) -> None: ...
    def batch(self, batch_id: uuid.UUID) -> None: ...


@dataclass
class Pass:
    """What one reconciler pass sent (ids), or why it did nothing."""

    scopes: list[tuple[uuid.UUID, str]] = field(default_factory=list)
    finishes: list[uuid.UUID] = field(default_factory=list)
    batches: list[uuid.UUID] = field(default_factory=list)
    skipped: str | None = None

    @property
    def sent(self) -> int:
        return len(self.scopes) + len(self.finishes) + len(self.batches)


def _lock(s: Session) -> bool:
    if s.get_bind().dialect.name != "postgresql":
        return True
    return bool(s.scalar(sa.select(sa.func.pg_try_advisory_xact_lock(ADVISORY_KEY))))


def lost_scopes(units: list[work_repo.OpenScope], broker: BrokerView, now: dt.datetime,
                grace: float) -> list[work_repo.OpenScope]:
    """The open scopes to send again (pure; the rules in the module docstring)."""
    out = []
    for u in units:
        task_id = scope_task_id(u.audit_id, u.scope)
        if u.lease_owner is not None:
            if u.lease_expires_at is not None and u.lease_expires_at > now:
                continue  # a live holder
            if task_id in broker.queued:
                continue  # already requeued (pool process lost), a worker will take it
        else:
            if broker.holds(task_id):
                continue
            if u.dispatched_at is not None and (now - u.dispatched_at).total_seconds() < grace:
                continue  # just sent: the message may be between publish and the list
        out.append(u)
    return out


def reconcile(sessions: sessionmaker[Session], sender: Sender, broker: BrokerView,
              now: dt.datetime, grace: float) -> Pass:
    """One pass: find lost work, mark it dispatched, commit, then send it."""
    done = Pass()
    stale = now - dt.timedelta(seconds=grace)
    with sessions.begin() as s:
        if not _lock(s):
            done.skipped = "another reconciler is running"
            return done
        for u in lost_scopes(work_repo.open_scopes(s), broker, now, grace):
            work_repo.mark_scope_dispatched(s, u.audit_id, u.scope, now)
            done.scopes.append((u.audit_id, u.scope))
        for audit_id in work_repo.audits_ready_to_finish(s, stale):
            if not broker.holds(finish_task_id(audit_id)):
                done.finishes.append(audit_id)
        for batch, created, finished in work_repo.open_batches(s):
            if broker.holds(batch_task_id(batch.id)):
                continue
            if batch.lease_owner is not None and batch.lease_expires_at is not None \
                    and batch.lease_expires_at > now:
                continue
            if batch.dispatched_at is not None and batch.dispatched_at > stale:
                continue
            if created < len(batch.posteriors) or finished == created:
                batch.dispatched_at = now
                done.batches.append(batch.id)
    for audit_id, scope in done.scopes:
        sender.scope(audit_id, scope)
    for audit_id in done.finishes:
        sender.finish(audit_id)
    for batch_id in done.batches:
        sender.batch(batch_id)
    if done.sent:
        log.warning("reconciler re-sent %d scope(s), %d finish(es), %d batch(es)",
                    len(done.scopes), len(done.finishes), len(done.batches))
    return done
