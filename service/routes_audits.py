"""``/api/v1/audits``: submit a translation pair, read its status and evidence."""
from __future__ import annotations

import logging
import os
import uuid
from typing import Annotated, Literal

from fastapi import APIRouter, HTTPException, Query, Request, Response
from fastapi.exceptions import RequestValidationError
from fastapi.responses import FileResponse
from starlette.background import BackgroundTask

from service import cancel, limits, present
from service.auth import ReadAccess, SessionDep, WriteToken
from service.db import audits as audit_repo
from service.db.draws import UnservableDraws, check_stored, decode_draws, netcdf_file
from service.schemas import Accepted, AuditIn, Page, Problem
from service.submission import create_audit, enqueue_scopes, submission_from
from workers.errors import InvalidRequest
from workers.settings import AuditSettings

log = logging.getLogger("ppl_audit.api")
router = APIRouter(prefix="/api/v1/audits", tags=["audits"])
BROKER_DOWN = "could not queue the audit: the job broker is unreachable"
Verdict = Literal["agree", "inconclusive", "disagree", "error"]
Status = Literal["queued", "running", "done", "failed", "cancelled"]
ERRORS = {401: {"model": Problem}, 413: {"model": Problem}, 422: {"model": Problem},
          429: {"model": Problem}}


def _quota(request: Request, count: int) -> None:
    """429 with Retry-After when ``count`` (the token's open audits, the new one
    included) is above the operator's per-token quota."""
    caps = request.app.state.settings.limits
    message = cancel.quota_message("audits", count, caps.token_open_audits, "token_open_audits")
    if message:
        raise HTTPException(429, message,
                            headers={"Retry-After": str(caps.quota_retry_after_seconds)})


@router.post("", status_code=202, response_model=Accepted, responses=ERRORS,
             summary="Submit a translation pair")
def submit_audit(body: AuditIn, request: Request, session: SessionDep, token: WriteToken,
                 response: Response) -> Accepted:
    """Verify both programs (nothing runs), store the audit and queue one task per scope.

    A program refused by its verifier is recorded as an audit with verdict ``error``
    and its reason (still ``202``: the audit exists and says why). A malformed request
    is a ``422`` and nothing is stored or queued.
    """
    settings = body.settings or AuditSettings()
    over = limits.over_caps(settings, request.app.state.settings.limits,
                            scopes=len(body.scopes or {}), parameters=len(body.parameters or []))
    if over:  # a 422 like any invalid field, one error per exceeded cap
        raise RequestValidationError([o.as_error() for o in over])
    early = cancel.open_audits(session, token.id) + 1
    session.rollback()  # hand the connection back while the programs are verified
    _quota(request, early)  # a cheap early refusal; the count under the lock below decides
    try:
        sub = submission_from(body)
        audit, queue = create_audit(session, sub)
    except InvalidRequest as err:
        session.rollback()
        raise HTTPException(422, str(err)) from None
    audit.token_id = token.id
    session.flush()
    cancel.lock_token(session, token.id)  # the authoritative count, new audit included
    if queue:
        try:
            _quota(request, cancel.open_audits(session, token.id))
        except HTTPException:
            session.rollback()
            raise
    audit_repo.add_event(session, audit_id=audit.id, kind="submitted",
                         message=f"submitted with token #{token.id}")
    session.commit()
    if queue:
        try:
            enqueue_scopes(request.app.state.dispatcher, audit)
        except Exception:
            log.exception("could not queue audit %s", audit.id)
            audit_repo.set_status(session, audit_repo.lock_audit(session, audit.id), "failed",
                                  verdict="error", reason=BROKER_DOWN)
            session.commit()
            raise HTTPException(503, f"{BROKER_DOWN}; audit {audit.id} was recorded as failed") from None
    response.headers["Location"] = f"/api/v1/audits/{audit.id}"
    return Accepted(id=audit.id, status=audit.status, verdict=audit.verdict, reason=audit.reason,
                    url=f"/api/v1/audits/{audit.id}", page=f"/audits/{audit.id}")


@router.get("", response_model=Page, dependencies=[ReadAccess], summary="List audits")
def list_audits(session: SessionDep,
                verdict: Verdict | None = None, status: Status | None = None,
                batch_id: uuid.UUID | None = None,
                limit: Annotated[int, Query(ge=1, le=200)] = 50,
                offset: Annotated[int, Query(ge=0, le=10_000_000)] = 0) -> Page:
    """Newest first; ``total`` counts every audit matching the filters."""
    rows, total = audit_repo.list_audits(session, verdict=verdict, status=status,
                                         batch_id=batch_id, limit=limit, offset=offset)
    return Page(items=[present.audit_summary(a) for a in rows], total=total,
                limit=limit, offset=offset)


@router.get("/{audit_id}", dependencies=[ReadAccess], responses={404: {"model": Problem}},
            summary="Status, verdict and evidence of one audit")
def get_audit(audit_id: uuid.UUID, session: SessionDep) -> dict:
    audit = audit_repo.get_audit(session, audit_id, full=True)
    if audit is None:
        raise HTTPException(404, f"no audit {audit_id}")
    return present.audit_detail(session, audit)


@router.get("/{audit_id}/fits/{scope}/{language}.nc", dependencies=[ReadAccess],
            responses={200: {"content": {"application/x-netcdf": {}}}, 404: {"model": Problem}},
            response_class=Response, summary="Draws of one fit as NetCDF (ArviZ InferenceData)")
def download_fit(audit_id: uuid.UUID, scope: str, language: Literal["pymc", "lazyppl", "reference"],
                 session: SessionDep, request: Request) -> Response:
    """Refused (422, naming the reason) when the stored names are not dense SPEC §2.3
    names or the draws exceed the operator's scalar or output caps: checked from the
    archive's headers before anything is decoded. The file is streamed from disk."""
    record = audit_repo.fit_record(session, audit_id, scope, language)
    if record is None:
        raise HTTPException(404, f"no {language} fit of scope {scope!r} in audit {audit_id}")
    caps = request.app.state.settings.limits
    try:
        check_stored(record.draws, max_scalars=caps.scalars, max_mb=caps.output_mb)
    except UnservableDraws as err:
        raise HTTPException(422, f"the stored {language} fit cannot be downloaded: {err}") from None
    attrs = {"ppl_audit_audit": str(audit_id), "ppl_audit_scope": scope,
             "ppl_audit_language": language, "ppl_audit_look": record.look}
    path = netcdf_file(decode_draws(record.draws), attrs, max_scalars=caps.scalars)
    filename = f"{audit_id}-{scope}-{language}.nc"
    return FileResponse(path, media_type="application/x-netcdf", filename=filename,
                        content_disposition_type="attachment",
                        background=BackgroundTask(os.unlink, path))


@router.delete("/{audit_id}", responses={403: {"model": Problem}, 404: {"model": Problem},
                                         409: {"model": Problem}},
               summary="Cancel an audit")
def cancel_audit(audit_id: uuid.UUID, request: Request, session: SessionDep,
                 token: WriteToken) -> dict:
    """Cancel a queued or running audit: queued scopes never run, running fits are
    killed within seconds, and the audit ends ``cancelled`` with the token id and time
    in its event log. Only the submitting token may cancel (``service/cancel.py``);
    cancelling a cancelled audit again answers the same; a finished one is ``409``."""
    return cancel_and_update(request, session, audit_id, token.id)


def cancel_and_update(request: Request, session, audit_id: uuid.UUID, token_id: int) -> dict:
    """Shared by the API and the page's cancel form."""
    from service import steps  # the batch's closing step (imports the pipeline)

    result = cancel.cancel_audit(session, audit_id, token_id)
    if isinstance(result, cancel.Refusal):
        session.rollback()
        raise HTTPException(result.status, result.message)
    batch_id, answer = result.batch_id, present.audit_summary(result)
    session.commit()
    if batch_id is not None:  # it may have been the batch's last open audit
        steps.update_batch(request.app.state.sessions, batch_id)
    return answer
