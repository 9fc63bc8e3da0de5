"""Repository of units of work: audit scopes and batch fan-outs, their leases, and the
workers' heartbeats.

A unit is *open* while its audit (or batch) is ``queued``/``running`` and it has no
result. A worker that claims a unit writes ``lease_owner`` = :func:`owner_name` and an
expiry, renews it while working (:func:`renew_scope_lease`) and clears it when the
unit ends. The reconciler (:mod:`service.reconcile`) reads open units with
:func:`open_scopes`, :func:`audits_ready_to_finish` and :func:`open_batches`.
All times are UTC (``timestamptz``).
"""
from __future__ import annotations

import datetime as dt
import os
import socket
import uuid
from dataclasses import dataclass

import sqlalchemy as sa
from sqlalchemy.orm import Session

from service.db.models import FINAL_STATUSES, Audit, AuditScope, Batch, ScopeResult, WorkerHeartbeat

OPEN = ("queued", "running")


def owner_name(task_id: str | None) -> str:
    """``host:pid:task id`` of the calling process: who holds a lease."""
    return f"{socket.gethostname()}:{os.getpid()}:{task_id or '-'}"


def _parse_owner(owner: str) -> tuple[str, int | None, str]:
    host, _, rest = owner.partition(":")
    pid, _, task = rest.partition(":")
    return host, int(pid) if pid.isdigit() else None, task


def holder_is_dead(owner: str) -> bool:
    """True when ``owner`` is a process of this host that no longer runs (a pool process
    killed or recycled); False when it runs or lives on another host (unknown here)."""
    host, pid, _ = _parse_owner(owner)
    if host != socket.gethostname() or pid is None:
        return False
    try:
        with open(f"/proc/{pid}/stat") as f:  # a zombie still answers kill(pid, 0)
            return f.read().rsplit(")", 1)[1].split()[0] in ("Z", "X")
    except (FileNotFoundError, ProcessLookupError, IndexError):
        return True


TAKE, TAKE_LOST, BUSY = "take", "take_lost", "busy"


def claim_decision(lease_owner: str | None, lease_expires_at: dt.datetime | None,
                   now: dt.datetime, me: str, holder_dead: bool) -> str:
    """Whether a worker ``me`` may claim a unit (pure; unit-tested).

    ``take``: nobody holds it, or this very process does (a retry, or its previous run
    here ended without releasing). ``take_lost``: the holder vanished without releasing
    (process gone, or lease expired: killed, hard time limit, hung); this counts as a
    lost attempt. ``busy``: another live holder's lease runs; leave it alone.
    """
    if lease_owner is None or lease_owner == me:
        return TAKE
    if _parse_owner(lease_owner)[:2] == _parse_owner(me)[:2]:
        return TAKE
    if holder_dead or lease_expires_at is None or lease_expires_at <= now:
        return TAKE_LOST
    return BUSY


def lock_scope(session: Session, audit_id: uuid.UUID, scope: str) -> AuditScope | None:
    return session.scalar(
        sa.select(AuditScope).where(AuditScope.audit_id == audit_id, AuditScope.scope == scope)
        .with_for_update().execution_options(populate_existing=True))


def take_scope_lease(unit: AuditScope, owner: str, now: dt.datetime, lease_seconds: float) -> None:
    unit.lease_owner = owner
    unit.lease_expires_at = now + dt.timedelta(seconds=lease_seconds)
    unit.picked_at = now
    unit.attempts += 1


def release_scope_lease(session: Session, audit_id: uuid.UUID, scope: str, owner: str | None = None) -> None:
    """Clear the lease (only ``owner``'s, when given)."""
    where = [AuditScope.audit_id == audit_id, AuditScope.scope == scope]
    if owner is not None:
        where.append(AuditScope.lease_owner == owner)
    session.execute(sa.update(AuditScope).where(*where).values(lease_owner=None, lease_expires_at=None))


def renew_scope_lease(session: Session, audit_id: uuid.UUID, scope: str, owner: str,
                      now: dt.datetime, lease_seconds: float) -> bool:
    """Push the expiry of ``owner``'s lease; False if it no longer holds it."""
    n = session.execute(
        sa.update(AuditScope).where(AuditScope.audit_id == audit_id, AuditScope.scope == scope,
                                    AuditScope.lease_owner == owner)
        .values(lease_expires_at=now + dt.timedelta(seconds=lease_seconds))).rowcount
    return n > 0


@dataclass(frozen=True)
class OpenScope:
    audit_id: uuid.UUID
    scope: str
    lease_owner: str | None
    lease_expires_at: dt.datetime | None
    dispatched_at: dt.datetime | None


def open_scopes(session: Session) -> list[OpenScope]:
    """Scopes of queued/running audits that have no result yet."""
    done = sa.exists().where(ScopeResult.audit_id == AuditScope.audit_id,
                             ScopeResult.scope == AuditScope.scope)
    rows = session.execute(
        sa.select(AuditScope.audit_id, AuditScope.scope, AuditScope.lease_owner,
                  AuditScope.lease_expires_at, AuditScope.dispatched_at)
        .join(Audit, Audit.id == AuditScope.audit_id)
        .where(Audit.status.in_(OPEN), ~done))
    return [OpenScope(*r) for r in rows]


def mark_scope_dispatched(session: Session, audit_id: uuid.UUID, scope: str, now: dt.datetime) -> None:
    session.execute(sa.update(AuditScope).where(AuditScope.audit_id == audit_id,
                                                AuditScope.scope == scope)
                    .values(dispatched_at=now))


def audits_ready_to_finish(session: Session, stored_before: dt.datetime) -> list[uuid.UUID]:
    """Open audits whose every scope has a result, the last stored before ``stored_before``
    (their finish step was lost, or is about to run)."""
    missing = (sa.select(AuditScope.id).where(AuditScope.audit_id == Audit.id)
               .where(~sa.exists().where(ScopeResult.audit_id == AuditScope.audit_id,
                                         ScopeResult.scope == AuditScope.scope)))
    last = (sa.select(sa.func.max(ScopeResult.created_at))
            .where(ScopeResult.audit_id == Audit.id).scalar_subquery())
    return list(session.scalars(
        sa.select(Audit.id).where(Audit.status.in_(OPEN), ~sa.exists(missing),
                                  last.is_not(None), last < stored_before)))


def open_batches(session: Session) -> list[tuple[Batch, int, int]]:
    """(batch, audits created, audits finished) of every queued/running batch."""
    created = (sa.select(sa.func.count(Audit.id)).where(Audit.batch_id == Batch.id)
               .scalar_subquery())
    finished = (sa.select(sa.func.count(Audit.id))
                .where(Audit.batch_id == Batch.id, Audit.status.in_(FINAL_STATUSES))
                .scalar_subquery())
    return [tuple(r) for r in session.execute(
        sa.select(Batch, created, finished).where(Batch.status.in_(OPEN)))]


def beat(session: Session, name: str, now: dt.datetime) -> None:
    """Record that worker ``name`` (this process) is alive."""
    row = session.get(WorkerHeartbeat, name)
    if row is None:
        session.add(WorkerHeartbeat(name=name, host=socket.gethostname(), pid=os.getpid(),
                                    started_at=now, seen_at=now))
    else:
        row.seen_at = now


def forget_worker(session: Session, name: str) -> None:
    session.execute(sa.delete(WorkerHeartbeat).where(WorkerHeartbeat.name == name))


def health(session: Session, now: dt.datetime, live_within: float) -> dict:
    """Stuck-work figures: live workers (heartbeat within ``live_within`` s), open units,
    how many have an expired lease, and in seconds the age of the oldest audit with a
    scope waiting for a worker (since submission, re-sends do not reset it) and of the
    oldest running scope (since it was picked up)."""
    live = session.scalar(sa.select(sa.func.count()).select_from(WorkerHeartbeat).where(
        WorkerHeartbeat.seen_at > now - dt.timedelta(seconds=live_within))) or 0
    units = open_scopes(session)
    queued = [u for u in units if u.lease_owner is None]
    running = [u for u in units if u.lease_owner is not None]
    picked = dict(session.execute(
        sa.select(AuditScope.id, AuditScope.picked_at).join(Audit, Audit.id == AuditScope.audit_id)
        .where(Audit.status == "running", AuditScope.lease_owner.is_not(None))).all())
    waiting = {u.audit_id for u in queued}
    created = session.scalar(sa.select(sa.func.min(Audit.created_at))
                             .where(Audit.id.in_(waiting))) if waiting else None
    def age(t):
        return round((now - t).total_seconds(), 1) if t is not None else None

    return {
        "live_workers": int(live),
        "queued_units": len(queued),
        "running_units": len(running),
        "expired_leases": sum(1 for u in running if u.lease_expires_at is None
                              or u.lease_expires_at <= now),
        "oldest_queued_seconds": age(created),
        "oldest_running_seconds": age(min((t for t in picked.values() if t), default=None)),
    }
