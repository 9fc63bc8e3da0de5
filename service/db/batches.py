"""Repository of the batch aggregate: a posteriordb batch and the audits it fans out."""
from __future__ import annotations

import uuid

import sqlalchemy as sa
from sqlalchemy.orm import Session

from service.db.audits import add_event
from service.db.models import Audit, Batch, ScopeResult


def create_batch(session: Session, *, source: str, posteriors: list[str], settings: dict,
                 token_id: int | None = None) -> Batch:
    batch = Batch(id=uuid.uuid4(), source=source, posteriors=posteriors, settings=settings,
                  status="queued", token_id=token_id)
    session.add(batch)
    session.flush()
    add_event(session, batch_id=batch.id, kind="created", to_status="queued",
              data={"posteriors": len(posteriors)})
    return batch


def get_batch(session: Session, batch_id: uuid.UUID) -> Batch | None:
    return session.get(Batch, batch_id)


def lock_batch(session: Session, batch_id: uuid.UUID) -> Batch | None:
    return session.scalar(sa.select(Batch).where(Batch.id == batch_id).with_for_update()
                          .execution_options(populate_existing=True))


def list_batches(session: Session, *, limit: int = 50, offset: int = 0) -> tuple[list[Batch], int]:
    total = session.scalar(sa.select(sa.func.count()).select_from(Batch)) or 0
    rows = session.scalars(sa.select(Batch).order_by(Batch.created_at.desc())
                           .limit(limit).offset(offset)).all()
    return list(rows), total


def batch_audits(session: Session, batch_id: uuid.UUID) -> list[Audit]:
    return list(session.scalars(sa.select(Audit).where(Audit.batch_id == batch_id)
                                .order_by(Audit.posterior, Audit.name)))


def stored_scope_seconds(session: Session, posteriors: list[str]) -> dict[tuple[str, str], float]:
    """(posterior, scope) -> the seconds its most recently stored result took, over every
    posteriordb audit of these posteriors in this database (any batch, any program
    version): the fan-out's estimate of how long a scope will take."""
    rows = session.execute(
        sa.select(Audit.posterior, ScopeResult.scope, ScopeResult.seconds)
        .join(ScopeResult, ScopeResult.audit_id == Audit.id)
        .where(Audit.source == "posteriordb", Audit.posterior.in_(posteriors),
               ScopeResult.seconds.is_not(None))
        .order_by(ScopeResult.created_at.desc(), ScopeResult.id.desc())).all()
    out: dict[tuple[str, str], float] = {}
    for posterior, scope, seconds in rows:
        out.setdefault((posterior, scope), float(seconds))
    return out


def audit_for_posterior(session: Session, batch_id: uuid.UUID, posterior: str) -> Audit | None:
    return session.scalar(sa.select(Audit).where(Audit.batch_id == batch_id,
                                                 Audit.posterior == posterior))


def set_batch_status(session: Session, batch: Batch, status: str, *,
                     summary: dict | None = None, message: str | None = None) -> None:
    previous = batch.status
    batch.status = status
    if summary is not None:
        batch.summary = summary
    if previous != status:
        add_event(session, batch_id=batch.id, kind="status", from_status=previous,
                  to_status=status, message=message)


def progress(audits: list[Audit], expected: int) -> dict:
    """Counts by status and the fraction finished (done, failed or cancelled) of ``expected`` audits."""
    counts = {s: 0 for s in ("queued", "running", "done", "failed", "cancelled")}
    for a in audits:
        counts[a.status] = counts.get(a.status, 0) + 1
    finished = counts["done"] + counts["failed"] + counts["cancelled"]
    return {"expected": expected, "created": len(audits), **counts,
            "finished": finished, "fraction": (finished / expected) if expected else 1.0}
