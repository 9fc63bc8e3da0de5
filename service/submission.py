"""Turning a validated request into queued work, shared by the API and the batch task.

Order matters for "nothing queued on invalid input": validation happens before this
module is called; here the programs are verified (cheap, nothing executes), the audit
is stored, the transaction commits, and only then are its scope tasks sent. A program
refused by the verifier is stored as an audit with verdict ``error`` and never queued.
"""
from __future__ import annotations

import logging
import uuid
from dataclasses import dataclass
from typing import Callable, Protocol

from sqlalchemy.orm import Session

from service.db import audits as audit_repo
from service.db.models import Audit
from service.errors import audit_outcome
from workers import pipeline
from workers.errors import AuditError, InvalidRequest
from workers.pipeline import AuditRequest
from workers.settings import AuditSettings

log = logging.getLogger("ppl_audit.service")


class Dispatcher(Protocol):
    """Sends work to the workers. The API and the batch task depend on this only."""

    def scope(self, audit_id: uuid.UUID, scope: str) -> None: ...
    def batch(self, batch_id: uuid.UUID) -> None: ...


@dataclass(frozen=True)
class Submission:
    name: str
    pymc_source: str
    lazyppl_source: str
    scopes: dict[str, dict]
    parameters: list[str] | None
    settings: AuditSettings
    source: str = "api"
    posterior: str | None = None
    batch_id: uuid.UUID | None = None


def submission_from(body) -> Submission:
    """The submission of a ``POST /api/v1/audits`` body (``schemas.AuditIn``). A reference
    audit (``reference`` instead of ``lazyppl``) is stored with an empty LazyPPL program
    and the posterior's name; its scope ``full`` defaults to the posterior's data."""
    settings = body.settings or AuditSettings()
    if body.reference is None:
        return Submission(name=body.name, pymc_source=body.pymc.source,
                          lazyppl_source=body.lazyppl.source, scopes=body.scopes,
                          parameters=body.parameters, settings=settings)
    from corpus.loader import load_data, reference_posteriors

    if body.reference not in reference_posteriors():
        raise InvalidRequest(f"reference {body.reference!r} is not a posteriordb posterior "
                             "of the shipped corpus")
    scopes = body.scopes or {"full": load_data(body.reference)}
    return Submission(name=body.name, pymc_source=body.pymc.source, lazyppl_source="",
                      scopes=scopes, parameters=body.parameters, settings=settings,
                      posterior=body.reference)


def is_reference_audit(lazyppl_source: str, posterior: str | None) -> bool:
    """A reference audit is stored with no LazyPPL program and its posterior's name."""
    return not lazyppl_source and posterior is not None


def _validate_reference(request: AuditRequest) -> None:
    from workers.reference_audit import ReferenceAuditRequest, validate

    validate(ReferenceAuditRequest(name=request.name, pymc_source=request.pymc_source,
                                   posterior="", reference=None, data=request.scopes["full"],
                                   parameters=request.parameters, settings=request.settings))


def audit_request(sub: Submission, reference=None) -> AuditRequest:
    return AuditRequest(name=sub.name, pymc_source=sub.pymc_source,
                        lazyppl_source=sub.lazyppl_source, scopes=sub.scopes,
                        parameters=sub.parameters, settings=sub.settings, reference=reference)


def create_audit(session: Session, sub: Submission,
                 validate: Callable[[AuditRequest], None] = pipeline.validate) -> tuple[Audit, bool]:
    """Store the audit in the caller's transaction; True if its scopes must be queued.

    ``InvalidRequest`` propagates before anything is stored (the API answers 422). A
    program refused by its verifier is stored as an audit ``done`` with verdict
    ``error``, its reason and evidence, and is not queued.
    """
    request = audit_request(sub)
    if is_reference_audit(sub.lazyppl_source, sub.posterior):
        validate = _validate_reference
    refused: AuditError | None = None
    try:
        validate(request)
    except InvalidRequest:
        raise
    except AuditError as err:
        refused = err
    audit = audit_repo.create_audit(
        session, name=sub.name, pymc_source=sub.pymc_source, lazyppl_source=sub.lazyppl_source,
        scopes=sub.scopes, parameters=sub.parameters, settings=sub.settings.model_dump(mode="json"),
        source=sub.source, posterior=sub.posterior, batch_id=sub.batch_id,
    )
    if refused is not None:
        meta = {"name": sub.name, **pipeline.provenance(request)}
        outcome = audit_outcome(refused)
        audit_repo.set_status(session, audit, outcome.pop("status"), **outcome,
                              evidence=pipeline.error_audit(meta, refused, sub.settings),
                              message=f"refused before running: {refused}")
        return audit, False
    return audit, True


def enqueue_scopes(dispatcher: Dispatcher, audit: Audit) -> None:
    """Send one task per scope (call after the audit's transaction committed)."""
    for scope in audit.scopes:
        dispatcher.scope(audit.id, scope.scope)
