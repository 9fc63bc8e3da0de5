"""Server-rendered results pages: audits list, audit, batches list, batch.

Pages re-render themselves every few seconds while something is queued or running
(a meta refresh: no JavaScript build, nothing to install).
"""
from __future__ import annotations

import json
import math
import uuid
from pathlib import Path
from typing import Annotated, Literal

from fastapi import APIRouter, Form, HTTPException, Query, Request
from fastapi.responses import HTMLResponse, RedirectResponse
from fastapi.templating import Jinja2Templates
from markupsafe import Markup

from service import density, present
from service.auth import ReadAccess, SessionDep
from service.db import audits as audit_repo
from service.db import batches as batch_repo
from service.db import tokens as token_repo
from service.plots import scope_plots

router = APIRouter(include_in_schema=False, dependencies=[ReadAccess])
templates = Jinja2Templates(directory=str(Path(__file__).parent / "templates"))
PER_PAGE = 25


def _fmt(x, digits: int = 3) -> str:
    if x is None or (isinstance(x, float) and not math.isfinite(x)):
        return "–"
    if isinstance(x, (int, float)):
        return f"{x:.{digits}g}" if abs(x) < 1e5 else f"{x:.3e}"
    return str(x)


def _interval(iv) -> str:
    if not iv or len(iv) < 2 or iv[0] is None or iv[1] is None:
        return "–"
    return f"[{_fmt(iv[0])}, {_fmt(iv[1])}]"


templates.env.filters["num"] = _fmt
templates.env.filters["whole"] = lambda x: "–" if x is None else f"{x:.0f}"
templates.env.filters["interval"] = _interval
templates.env.filters["pretty"] = lambda v: json.dumps(v, indent=2, sort_keys=True, default=str)
templates.env.filters["short"] = lambda s: (s or "")[:12]
templates.env.filters["ts"] = lambda s: (s or "").replace("T", " ")[:19]


def _live(status: str) -> bool:
    return status in ("queued", "running")


@router.get("/", response_class=HTMLResponse)
def audits_page(request: Request, session: SessionDep,
                verdict: Literal["agree", "inconclusive", "disagree", "error", ""] = "",
                status: Literal["queued", "running", "done", "failed", "cancelled", ""] = "",
                page: Annotated[int, Query(ge=1, le=100000)] = 1):
    rows, total = audit_repo.list_audits(session, verdict=verdict or None, status=status or None,
                                         limit=PER_PAGE, offset=(page - 1) * PER_PAGE)
    batches, _ = batch_repo.list_batches(session, limit=5)
    audits = [present.audit_summary(a) for a in rows]
    return templates.TemplateResponse(request, "audits.html", {
        "audits": audits, "total": total, "page": page,
        "pages": max(1, math.ceil(total / PER_PAGE)), "verdict": verdict, "status": status,
        "batches": [present.batch_summary_row(b) for b in batches],
        "live": any(_live(a["status"]) for a in audits),
    })


@router.get("/audits/{audit_id}", response_class=HTMLResponse)
def audit_page(request: Request, audit_id: uuid.UUID, session: SessionDep):
    audit = audit_repo.get_audit(session, audit_id, full=True)
    if audit is None:
        raise HTTPException(404, f"no audit {audit_id}")
    detail = present.audit_detail(session, audit)
    rule = (audit.settings or {}).get("rule", {})
    for scope in detail["scopes"]:
        ev = scope["evidence"] or {}
        rows = ev.get("comparisons") or []
        scope["plots"] = [Markup(svg) for svg in scope_plots(rows, rule)] if rows else []
        caps = request.app.state.settings.limits
        scope["densities"] = [Markup(svg) for svg in density.scope_overlays(
            session, audit, scope["scope"], ev, max_scalars=caps.scalars, max_mb=caps.output_mb)]
        ref = ev.get("reference") or {}
        scope["reference_plots"] = []
        for pair in ("pymc_vs_reference", "lazyppl_vs_reference"):
            ref_rows = (ref.get(pair) or {}).get("comparisons") or []
            if ref_rows:
                scope["reference_plots"].append((pair.replace("_", " "), ref.get(pair),
                                                 [Markup(s) for s in scope_plots(ref_rows, rule)]))
    progress = [e for e in detail["events"] if e["kind"] == "progress"]
    return templates.TemplateResponse(request, "audit.html", {
        "a": detail, "rule": rule, "live": _live(audit.status),
        "last_progress": progress[-1]["message"] if progress else None,
        "pymc_source": audit.pymc_program.source, "lazyppl_source": audit.lazyppl_program.source,
    })


@router.get("/batches", response_class=HTMLResponse)
def batches_page(request: Request, session: SessionDep,
                 page: Annotated[int, Query(ge=1, le=100000)] = 1):
    rows, total = batch_repo.list_batches(session, limit=PER_PAGE, offset=(page - 1) * PER_PAGE)
    batches = [present.batch_summary_row(b) for b in rows]
    return templates.TemplateResponse(request, "batches.html", {
        "batches": batches, "total": total, "page": page,
        "pages": max(1, math.ceil(total / PER_PAGE)),
        "live": any(_live(b["status"]) for b in batches)})


@router.get("/batches/{batch_id}", response_class=HTMLResponse)
def batch_page(request: Request, batch_id: uuid.UUID, session: SessionDep):
    batch = batch_repo.get_batch(session, batch_id)
    if batch is None:
        raise HTTPException(404, f"no batch {batch_id}")
    detail = present.batch_detail(session, batch)
    return templates.TemplateResponse(request, "batch.html", {
        "b": detail, "live": _live(batch.status)})


# ---- cancel forms (no script: a plain form posting the token; the token is the proof) ----

PLURAL = {"audit": "audits", "batch": "batches"}


def _cancel_page(request: Request, kind: str, row, error: str | None = None,
                 status_code: int = 200) -> HTMLResponse:
    path = f"/{PLURAL[kind]}/{row.id}"
    return templates.TemplateResponse(request, "cancel.html", {
        "kind": kind, "id": str(row.id), "status": row.status, "back": path,
        "name": getattr(row, "name", None) or "", "action": f"{path}/cancel", "error": error,
        "live": False}, status_code=status_code)


def _row(session, kind: str, row_id: uuid.UUID):
    row = (audit_repo.get_audit(session, row_id) if kind == "audit"
           else batch_repo.get_batch(session, row_id))
    if row is None:
        raise HTTPException(404, f"no {kind} {row_id}")
    return row


@router.get("/audits/{audit_id}/cancel", response_class=HTMLResponse)
def cancel_audit_page(request: Request, audit_id: uuid.UUID, session: SessionDep):
    return _cancel_page(request, "audit", _row(session, "audit", audit_id))


@router.get("/batches/{batch_id}/cancel", response_class=HTMLResponse)
def cancel_batch_page(request: Request, batch_id: uuid.UUID, session: SessionDep):
    return _cancel_page(request, "batch", _row(session, "batch", batch_id))


def _cancel_form(request: Request, session, kind: str, row_id: uuid.UUID, token: str):
    from service.routes_audits import cancel_and_update
    from service.routes_batches import cancel_batch_now

    live = token_repo.authenticate(session, token.strip(), request.app.state.settings.secret)
    if live is None:
        session.rollback()
        return _cancel_page(request, kind, _row(session, kind, row_id),
                            "the API token is unknown or revoked", 401)
    token_id = live.id
    session.commit()
    try:
        if kind == "audit":
            cancel_and_update(request, session, row_id, token_id)
        else:
            cancel_batch_now(session, row_id, token_id)
    except HTTPException as err:
        if err.status_code == 404:
            raise
        return _cancel_page(request, kind, _row(session, kind, row_id), str(err.detail),
                            err.status_code)
    return RedirectResponse(f"/{PLURAL[kind]}/{row_id}", status_code=303)


@router.post("/audits/{audit_id}/cancel", response_class=HTMLResponse)
def cancel_audit_form(request: Request, audit_id: uuid.UUID, session: SessionDep,
                      token: Annotated[str, Form(max_length=200)]):
    return _cancel_form(request, session, "audit", audit_id, token)


@router.post("/batches/{batch_id}/cancel", response_class=HTMLResponse)
def cancel_batch_form(request: Request, batch_id: uuid.UUID, session: SessionDep,
                      token: Annotated[str, Form(max_length=200)]):
    return _cancel_form(request, session, "batch", batch_id, token)
