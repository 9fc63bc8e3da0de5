"""Per-token quotas and cancellation of audits and batches (issue 13, Build item 3).

Who may cancel: **the token that submitted the work** (a batch's audits belong to the
batch's token). Work with no recorded token (submitted by the local CLI, or before
tokens were recorded) may be cancelled by any write token. Another token gets ``403``.

Quotas count a token's ``queued``/``running`` work: audits it submitted directly
(``limits.token_open_audits``; the audits a batch fans out are bounded by the batch
quota instead) and batches (``limits.token_open_batches``). Checks run under a lock on
the token's row after the new row is inserted, so concurrent submissions of one token
cannot both slip under the cap.

Cancelling moves the audit to ``cancelled`` under its row lock and logs who (token id,
never its name) and when in its event log. Queued scope tasks then find it final and
do nothing; a fitting worker notices within ``work.cancel_check_seconds`` and kills its
sandboxed runs (``steps.LeaseKeeper``); a result that arrives afterwards is refused
under the same lock (``steps.save_scope``); the reconciler only re-sends open work.
"""
from __future__ import annotations

import uuid
from dataclasses import dataclass

import sqlalchemy as sa
from sqlalchemy.orm import Session

from service.db import audits as audit_repo
from service.db import batches as batch_repo
from service.db.models import FINAL_STATUSES, ApiToken, Audit, Batch

OPEN = ("queued", "running")
#: one identical-batch check at a time (PostgreSQL transaction-level advisory lock)
BATCH_LOCK_KEY = 0x7070_6C5F_6261_7463 & 0x7FFF_FFFF_FFFF_FFFF  # "ppl_batc"


@dataclass(frozen=True)
class Refusal:
    """Why a cancel or a submission is refused: HTTP status and message."""

    status: int
    message: str


def lock_token(session: Session, token_id: int) -> None:
    """Serialise the quota checks of one token until the transaction ends."""
    session.execute(sa.select(ApiToken.id).where(ApiToken.id == token_id).with_for_update())


def open_audits(session: Session, token_id: int) -> int:
    """Audits the token submitted directly that are queued or running."""
    return session.scalar(sa.select(sa.func.count()).select_from(Audit).where(
        Audit.token_id == token_id, Audit.batch_id.is_(None), Audit.status.in_(OPEN))) or 0


def open_batches(session: Session, token_id: int) -> int:
    return session.scalar(sa.select(sa.func.count()).select_from(Batch).where(
        Batch.token_id == token_id, Batch.status.in_(OPEN))) or 0


def quota_message(kind: str, count: int, cap: int, setting: str) -> str | None:
    """None within the quota, else the 429's message (``count`` includes the new one)."""
    if count <= cap:
        return None
    return (f"this token already has {count - 1} {kind} queued or running; the operator's "
            f"quota is {cap} (PPL_AUDIT_LIMITS__{setting.upper()}): wait for one to finish "
            "or cancel one")


def identical_open_batch(session: Session, *, source: str, posteriors: list[str],
                         settings: dict) -> Batch | None:
    """A queued or running batch, of any token, with the same source, posteriors and
    resolved settings. On PostgreSQL takes an advisory lock held until the caller's
    transaction ends, so two identical submissions at once make one batch."""
    if session.get_bind().dialect.name == "postgresql":
        session.execute(sa.select(sa.func.pg_advisory_xact_lock(BATCH_LOCK_KEY)))
    rows = session.scalars(sa.select(Batch).where(Batch.status.in_(OPEN), Batch.source == source)
                           .order_by(Batch.created_at))
    return next((b for b in rows if list(b.posteriors) == list(posteriors)
                 and b.settings == settings), None)


def _may_cancel(owner: int | None, token_id: int) -> bool:
    return owner is None or owner == token_id


def cancel_audit(session: Session, audit_id: uuid.UUID, token_id: int) -> Audit | Refusal:
    """Cancel one audit (the caller commits). Cancelling a cancelled audit again is a
    no-op; a finished one is ``409``."""
    audit = audit_repo.lock_audit(session, audit_id)
    if audit is None:
        return Refusal(404, f"no audit {audit_id}")
    if not _may_cancel(audit.token_id, token_id):
        return Refusal(403, "only the token that submitted this audit (or its batch) may "
                            "cancel it")
    if audit.status == "cancelled":
        return audit
    if audit.status in FINAL_STATUSES:
        return Refusal(409, f"audit {audit_id} already ended {audit.status}")
    _cancel(session, audit, token_id)
    return audit


def _cancel(session: Session, audit: Audit, token_id: int) -> None:
    message = f"cancelled by token #{token_id}"
    audit_repo.set_status(session, audit, "cancelled", reason=message, message=message)
    audit_repo.add_event(session, audit_id=audit.id, batch_id=audit.batch_id, kind="cancelled",
                         message=message, data={"token_id": token_id})


def cancel_batch(session: Session, batch_id: uuid.UUID, token_id: int) -> Batch | Refusal:
    """Cancel a batch and every audit of it still queued or running (the caller commits).
    A fan-out in progress stops at its next posterior (``steps.fan_out_batch``)."""
    batch = batch_repo.lock_batch(session, batch_id)
    if batch is None:
        return Refusal(404, f"no batch {batch_id}")
    if not _may_cancel(batch.token_id, token_id):
        return Refusal(403, "only the token that submitted this batch may cancel it")
    if batch.status == "cancelled":
        return batch
    if batch.status in FINAL_STATUSES:
        return Refusal(409, f"batch {batch_id} already ended {batch.status}")
    message = f"cancelled by token #{token_id}"
    batch_repo.set_batch_status(session, batch, "cancelled", message=message)
    audit_repo.add_event(session, batch_id=batch.id, kind="cancelled", message=message,
                         data={"token_id": token_id})
    ids = session.scalars(sa.select(Audit.id).where(Audit.batch_id == batch_id,
                                                    Audit.status.in_(OPEN)).order_by(Audit.id))
    for audit_id in list(ids):  # locked one by one in a fixed order
        audit = audit_repo.lock_audit(session, audit_id)
        if audit is not None and audit.status in OPEN:
            _cancel(session, audit, token_id)
    return batch
