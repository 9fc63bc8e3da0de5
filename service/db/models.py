"""The schema: audits and what they produce, batches, tokens, the event log.

Programs and data sets are stored once, keyed by the SHA-256 of their content
(programs: UTF-8 source; data: canonical JSON, sorted keys, no whitespace). Unique
constraints make every worker step idempotent: a re-delivered task finds its rows
already there and writes nothing twice.
"""
from __future__ import annotations

import datetime as dt
import uuid
from typing import Any

import sqlalchemy as sa
from sqlalchemy.orm import Mapped, mapped_column, relationship

from service.db.base import Base, utcnow

AUDIT_STATUSES = ("queued", "running", "done", "failed", "cancelled")
VERDICTS = ("agree", "inconclusive", "disagree", "error")
BATCH_STATUSES = ("queued", "running", "done", "failed", "cancelled")
#: statuses after which nothing more runs or is stored
FINAL_STATUSES = ("done", "failed", "cancelled")

Timestamp = sa.DateTime(timezone=True)


def _in(column: str, values: tuple[str, ...]) -> str:
    return f"{column} IN ({', '.join(repr(v) for v in values)})"


class Program(Base):
    __tablename__ = "programs"
    id: Mapped[int] = mapped_column(primary_key=True)
    sha256: Mapped[str] = mapped_column(sa.String(64), unique=True)
    language: Mapped[str] = mapped_column(sa.String(16))
    source: Mapped[str] = mapped_column(sa.Text)
    created_at: Mapped[dt.datetime] = mapped_column(Timestamp, default=utcnow)


class Dataset(Base):
    __tablename__ = "datasets"
    id: Mapped[int] = mapped_column(primary_key=True)
    sha256: Mapped[str] = mapped_column(sa.String(64), unique=True)
    data: Mapped[dict[str, Any]]
    created_at: Mapped[dt.datetime] = mapped_column(Timestamp, default=utcnow)


class Batch(Base):
    __tablename__ = "batches"
    __table_args__ = (sa.CheckConstraint(_in("status", BATCH_STATUSES), name="status"),)
    id: Mapped[uuid.UUID] = mapped_column(primary_key=True, default=uuid.uuid4)
    source: Mapped[str] = mapped_column(sa.String(32))
    posteriors: Mapped[list[Any]]
    settings: Mapped[dict[str, Any]]
    status: Mapped[str] = mapped_column(sa.String(16), default="queued", index=True)
    summary: Mapped[dict[str, Any] | None]
    created_at: Mapped[dt.datetime] = mapped_column(Timestamp, default=utcnow)
    updated_at: Mapped[dt.datetime] = mapped_column(Timestamp, default=utcnow, onupdate=utcnow)
    # the fan-out is a unit of work: see AuditScope for the lease columns
    dispatched_at: Mapped[dt.datetime | None] = mapped_column(Timestamp, default=utcnow)
    lease_owner: Mapped[str | None] = mapped_column(sa.String(200))
    lease_expires_at: Mapped[dt.datetime | None] = mapped_column(Timestamp)
    # the API token that submitted it (quotas, who may cancel); None from the CLI
    token_id: Mapped[int | None] = mapped_column(
        sa.ForeignKey("api_tokens.id", ondelete="SET NULL"), index=True)

    audits: Mapped[list[Audit]] = relationship(back_populates="batch", order_by="Audit.name")


class Audit(Base):
    """One translation pair audited on one or more scopes."""

    __tablename__ = "audits"
    __table_args__ = (
        sa.CheckConstraint(_in("status", AUDIT_STATUSES), name="status"),
        sa.CheckConstraint(f"verdict IS NULL OR {_in('verdict', VERDICTS)}", name="verdict"),
        # a batch fans out one audit per posterior; a re-delivered run_batch must not add more
        sa.UniqueConstraint("batch_id", "posterior"),
    )
    id: Mapped[uuid.UUID] = mapped_column(primary_key=True, default=uuid.uuid4)
    name: Mapped[str] = mapped_column(sa.String(200))
    status: Mapped[str] = mapped_column(sa.String(16), default="queued", index=True)
    verdict: Mapped[str | None] = mapped_column(sa.String(16), index=True)
    reason: Mapped[str | None] = mapped_column(sa.Text)
    error: Mapped[dict[str, Any] | None]  # {"code", "message", "details"} of an AuditError
    pymc_program_id: Mapped[int] = mapped_column(sa.ForeignKey("programs.id"))
    lazyppl_program_id: Mapped[int] = mapped_column(sa.ForeignKey("programs.id"))
    parameters: Mapped[list[Any] | None]
    settings: Mapped[dict[str, Any]]  # resolved AuditSettings, defaults filled in
    evidence: Mapped[dict[str, Any] | None]  # pair verdict + evidence (SPEC §4)
    timings: Mapped[dict[str, Any] | None]  # seconds: queued, running, total
    source: Mapped[str] = mapped_column(sa.String(32), default="api")  # api | posteriordb | cli
    posterior: Mapped[str | None] = mapped_column(sa.String(200))
    batch_id: Mapped[uuid.UUID | None] = mapped_column(
        sa.ForeignKey("batches.id", ondelete="CASCADE"), index=True
    )
    created_at: Mapped[dt.datetime] = mapped_column(Timestamp, default=utcnow, index=True)
    updated_at: Mapped[dt.datetime] = mapped_column(Timestamp, default=utcnow, onupdate=utcnow)
    started_at: Mapped[dt.datetime | None] = mapped_column(Timestamp)
    finished_at: Mapped[dt.datetime | None] = mapped_column(Timestamp)
    # the API token that submitted it, or its batch (quotas, who may cancel); None: CLI
    token_id: Mapped[int | None] = mapped_column(
        sa.ForeignKey("api_tokens.id", ondelete="SET NULL"), index=True)

    pymc_program: Mapped[Program] = relationship(foreign_keys=[pymc_program_id])
    lazyppl_program: Mapped[Program] = relationship(foreign_keys=[lazyppl_program_id])
    batch: Mapped[Batch | None] = relationship(back_populates="audits")
    scopes: Mapped[list[AuditScope]] = relationship(
        back_populates="audit", order_by="AuditScope.position", cascade="all, delete-orphan"
    )
    scope_results: Mapped[list[ScopeResult]] = relationship(
        order_by="ScopeResult.scope", cascade="all, delete-orphan"
    )


class AuditScope(Base):
    """A scope as submitted (its name and data set) and the unit of work that fits it.

    The database, not the broker, records the work (service/README.md, "Guarantees"):
    ``dispatched_at`` is when its task was last sent; a worker that claims it writes
    ``lease_owner`` (``host:pid:task id``) and keeps ``lease_expires_at`` in the future
    while it fits; ``picked_at`` is the last claim. ``attempts`` counts claims,
    ``lost_attempts`` those whose holder vanished without releasing the lease (killed,
    hard time limit). The scope is finished when it has a ``scope_results`` row.
    """

    __tablename__ = "audit_scopes"
    __table_args__ = (sa.UniqueConstraint("audit_id", "scope"),)
    id: Mapped[int] = mapped_column(primary_key=True)
    audit_id: Mapped[uuid.UUID] = mapped_column(sa.ForeignKey("audits.id", ondelete="CASCADE"))
    scope: Mapped[str] = mapped_column(sa.String(100))
    position: Mapped[int]
    dataset_id: Mapped[int] = mapped_column(sa.ForeignKey("datasets.id"))
    dispatched_at: Mapped[dt.datetime | None] = mapped_column(Timestamp, default=utcnow)
    picked_at: Mapped[dt.datetime | None] = mapped_column(Timestamp)
    lease_owner: Mapped[str | None] = mapped_column(sa.String(200))
    lease_expires_at: Mapped[dt.datetime | None] = mapped_column(Timestamp)
    attempts: Mapped[int] = mapped_column(default=0, server_default="0")
    lost_attempts: Mapped[int] = mapped_column(default=0, server_default="0")

    audit: Mapped[Audit] = relationship(back_populates="scopes")
    dataset: Mapped[Dataset] = relationship()


class ScopeResult(Base):
    """The evidence of one scope (gates, rows, verdict), written once per (audit, scope)."""

    __tablename__ = "scope_results"
    __table_args__ = (
        sa.UniqueConstraint("audit_id", "scope"),
        sa.CheckConstraint(_in("verdict", VERDICTS), name="verdict"),
    )
    id: Mapped[int] = mapped_column(primary_key=True)
    audit_id: Mapped[uuid.UUID] = mapped_column(sa.ForeignKey("audits.id", ondelete="CASCADE"))
    scope: Mapped[str] = mapped_column(sa.String(100))
    verdict: Mapped[str] = mapped_column(sa.String(16))
    evidence: Mapped[dict[str, Any]]
    seconds: Mapped[float | None]
    created_at: Mapped[dt.datetime] = mapped_column(Timestamp, default=utcnow)


class FitRecord(Base):
    """One program's draws on one scope. ``draws`` is ``np.savez_compressed`` bytes of
    {scalar name: float64 (chains, draws)}; ``summary`` holds the Fit's provenance."""

    __tablename__ = "fits"
    __table_args__ = (sa.UniqueConstraint("audit_id", "scope", "language", "look"),)
    id: Mapped[int] = mapped_column(primary_key=True)
    audit_id: Mapped[uuid.UUID] = mapped_column(sa.ForeignKey("audits.id", ondelete="CASCADE"))
    scope: Mapped[str] = mapped_column(sa.String(100))
    language: Mapped[str] = mapped_column(sa.String(16))  # pymc | lazyppl | reference
    look: Mapped[int] = mapped_column(default=0)  # sequential look / attempt index
    chains: Mapped[int]
    draws_per_chain: Mapped[int]
    draws: Mapped[bytes] = mapped_column(sa.LargeBinary)
    summary: Mapped[dict[str, Any]]
    created_at: Mapped[dt.datetime] = mapped_column(Timestamp, default=utcnow)


class Comparison(Base):
    """One row of SPEC §4: parameter θ on one scope, candidate vs baseline.

    d is in units of the baseline posterior SD; r = s_candidate / s_baseline.
    ``pair`` names candidate and baseline: ``lazyppl_vs_pymc`` (the audit itself),
    ``pymc_vs_reference`` and ``lazyppl_vs_reference`` (posteriordb's reference draws).
    """

    __tablename__ = "comparisons"
    __table_args__ = (
        sa.UniqueConstraint("audit_id", "scope", "pair", "parameter"),
        sa.CheckConstraint(_in("verdict", VERDICTS), name="verdict"),
    )
    id: Mapped[int] = mapped_column(primary_key=True)
    audit_id: Mapped[uuid.UUID] = mapped_column(sa.ForeignKey("audits.id", ondelete="CASCADE"))
    scope: Mapped[str] = mapped_column(sa.String(100))
    pair: Mapped[str] = mapped_column(sa.String(32), default="lazyppl_vs_pymc")
    parameter: Mapped[str] = mapped_column(sa.String(200))
    d: Mapped[float | None]
    d_lo: Mapped[float | None]
    d_hi: Mapped[float | None]
    r: Mapped[float | None]
    r_lo: Mapped[float | None]
    r_hi: Mapped[float | None]
    verdict: Mapped[str] = mapped_column(sa.String(16))
    detail: Mapped[dict[str, Any]]  # means, sds, mcse, ESS, R-hat of both fits


class ApiToken(Base):
    """An API token: only its HMAC-SHA256 (keyed by the service secret) is stored."""

    __tablename__ = "api_tokens"
    id: Mapped[int] = mapped_column(primary_key=True)
    name: Mapped[str] = mapped_column(sa.String(100))
    token_hash: Mapped[str] = mapped_column(sa.String(64), unique=True)
    created_at: Mapped[dt.datetime] = mapped_column(Timestamp, default=utcnow)
    revoked_at: Mapped[dt.datetime | None] = mapped_column(Timestamp)
    last_used_at: Mapped[dt.datetime | None] = mapped_column(Timestamp)


class WorkerHeartbeat(Base):
    """A running ``ppl-audit worker`` (its reconciler writes ``seen_at`` every tick);
    health and ``ppl-audit status`` count the workers seen recently."""

    __tablename__ = "worker_heartbeats"
    name: Mapped[str] = mapped_column(sa.String(200), primary_key=True)
    host: Mapped[str] = mapped_column(sa.String(200))
    pid: Mapped[int]
    started_at: Mapped[dt.datetime] = mapped_column(Timestamp, default=utcnow)
    seen_at: Mapped[dt.datetime] = mapped_column(Timestamp, default=utcnow)


class Event(Base):
    """State-change log: who moved which audit or batch from what to what, when."""

    __tablename__ = "events"
    id: Mapped[int] = mapped_column(primary_key=True)
    audit_id: Mapped[uuid.UUID | None] = mapped_column(
        sa.ForeignKey("audits.id", ondelete="CASCADE"), index=True
    )
    batch_id: Mapped[uuid.UUID | None] = mapped_column(
        sa.ForeignKey("batches.id", ondelete="CASCADE"), index=True
    )
    kind: Mapped[str] = mapped_column(sa.String(32))  # created, status, scope_done, retry...
    from_status: Mapped[str | None] = mapped_column(sa.String(16))
    to_status: Mapped[str | None] = mapped_column(sa.String(16))
    message: Mapped[str | None] = mapped_column(sa.Text)
    data: Mapped[dict[str, Any] | None]
    created_at: Mapped[dt.datetime] = mapped_column(Timestamp, default=utcnow)
