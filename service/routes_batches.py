"""``/api/v1/batches``: audit shipped posteriordb posteriors in bulk."""
from __future__ import annotations

import uuid
from typing import Annotated

from fastapi import APIRouter, HTTPException, Query, Request, Response
from fastapi.exceptions import RequestValidationError

from service import cancel, limits, present
from service.auth import ReadAccess, SessionDep, WriteToken
from service.db import batches as batch_repo
from service.schemas import Accepted, BatchIn, Page, Problem
from workers.settings import AuditSettings

router = APIRouter(prefix="/api/v1/batches", tags=["batches"])


def translated_posteriors() -> list[str]:
    """Posteriors of the shipped corpus with both translations (empty if none ship)."""
    try:
        from corpus.loader import list_posteriors
    except ImportError:
        return []
    return list_posteriors()


@router.post("", status_code=202, response_model=Accepted,
             responses={200: {"model": Accepted, "description": "an identical batch of "
                              "\"all\" is already queued or running: that one"},
                        401: {"model": Problem}, 422: {"model": Problem}, 429: {"model": Problem}},
             summary="Start a posteriordb batch")
def submit_batch(body: BatchIn, request: Request, session: SessionDep, token: WriteToken,
                 response: Response) -> Accepted:
    """One audit per posterior, each on the ``visible`` and ``full`` scopes, with the
    PyMC fit on ``full`` also checked against posteriordb's reference draws.

    A batch of ``"all"`` identical (source, settings) to one still queued or running,
    submitted by any token, is answered ``200`` with that batch; beyond the token's
    quota of open batches, ``429`` with ``Retry-After``."""
    settings = body.settings or AuditSettings()
    # each posterior's audit has two scopes, visible and full
    over = limits.over_caps(settings, request.app.state.settings.limits, scopes=2)
    if over:  # a 422 like any invalid field, one error per exceeded cap
        raise RequestValidationError([o.as_error() for o in over])
    known = translated_posteriors()
    names = known if body.posteriors == "all" else list(body.posteriors)
    unknown = [n for n in names if n not in known]
    if unknown:
        raise HTTPException(422, f"unknown posterior(s): {', '.join(unknown[:10])}; "
                                 f"translated posteriors: {', '.join(known) or 'none'}")
    if not names:
        raise HTTPException(422, "the shipped corpus has no translated posterior")
    resolved = settings.model_dump(mode="json")
    if body.posteriors == "all":  # one running "all" batch is enough, whoever asked for it
        same = cancel.identical_open_batch(session, source=body.source, posteriors=names,
                                           settings=resolved)
        if same is not None:
            session.rollback()
            response.status_code = 200
            response.headers["Location"] = f"/api/v1/batches/{same.id}"
            return Accepted(id=same.id, status=same.status, url=f"/api/v1/batches/{same.id}",
                            page=f"/batches/{same.id}")
    batch = batch_repo.create_batch(session, source=body.source, posteriors=names,
                                    settings=resolved, token_id=token.id)
    session.flush()
    cancel.lock_token(session, token.id)
    caps = request.app.state.settings.limits
    message = cancel.quota_message("batches", cancel.open_batches(session, token.id),
                                   caps.token_open_batches, "token_open_batches")
    if message:
        session.rollback()
        raise HTTPException(429, message,
                            headers={"Retry-After": str(caps.quota_retry_after_seconds)})
    session.commit()
    try:
        request.app.state.dispatcher.batch(batch.id)
    except Exception:
        batch_repo.set_batch_status(session, batch_repo.lock_batch(session, batch.id), "failed",
                                    message="the job broker is unreachable")
        session.commit()
        raise HTTPException(503, "could not queue the batch: the job broker is unreachable") from None
    response.headers["Location"] = f"/api/v1/batches/{batch.id}"
    return Accepted(id=batch.id, status=batch.status, url=f"/api/v1/batches/{batch.id}",
                    page=f"/batches/{batch.id}")


@router.get("", response_model=Page, dependencies=[ReadAccess], summary="List batches")
def list_batches(session: SessionDep, limit: Annotated[int, Query(ge=1, le=200)] = 50,
                 offset: Annotated[int, Query(ge=0, le=10_000_000)] = 0) -> Page:
    rows, total = batch_repo.list_batches(session, limit=limit, offset=offset)
    return Page(items=[present.batch_summary_row(b) for b in rows], total=total,
                limit=limit, offset=offset)


@router.get("/{batch_id}", dependencies=[ReadAccess], responses={404: {"model": Problem}},
            summary="Progress, SPEC §4 summary and audits of one batch")
def get_batch(batch_id: uuid.UUID, session: SessionDep) -> dict:
    batch = batch_repo.get_batch(session, batch_id)
    if batch is None:
        raise HTTPException(404, f"no batch {batch_id}")
    return present.batch_detail(session, batch)


@router.delete("/{batch_id}", responses={403: {"model": Problem}, 404: {"model": Problem},
                                         409: {"model": Problem}},
               summary="Cancel a batch and its open audits")
def cancel_batch(batch_id: uuid.UUID, session: SessionDep, token: WriteToken) -> dict:
    """Cancel a queued or running batch: no further audit is fanned out, and every audit
    of it still queued or running is cancelled (running fits killed within seconds).
    Only the submitting token may cancel; cancelling again answers the same."""
    return cancel_batch_now(session, batch_id, token.id)


def cancel_batch_now(session, batch_id: uuid.UUID, token_id: int) -> dict:
    """Shared by the API and the page's cancel form."""
    result = cancel.cancel_batch(session, batch_id, token_id)
    if isinstance(result, cancel.Refusal):
        session.rollback()
        raise HTTPException(result.status, result.message)
    answer = present.batch_summary_row(result)
    session.commit()
    return answer
