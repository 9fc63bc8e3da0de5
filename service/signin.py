"""Sign-in for the web pages when reads require a token (``reads_require_token``).

A browser cannot send ``Authorization: Bearer`` from a link, and the pages run no script
(strict CSP), so the token travels once in a server-side form: ``POST /signin`` checks it
and sets it as the ``ppl_audit_token`` cookie that :func:`service.auth.read_access`
accepts — ``HttpOnly`` (no script can read it), ``SameSite=Strict`` (no other site's
link or form sends it), ``Secure`` when the page came over HTTPS, path ``/``, 12 hours.
A page refused for want of a token answers ``401`` with this form instead of JSON.
The cookie only opens reads: writes still need the ``Authorization`` header (WriteGate).
"""
from __future__ import annotations

from pathlib import Path
from typing import Annotated

from fastapi import APIRouter, Form, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response
from fastapi.templating import Jinja2Templates

from service.auth import SessionDep
from service.db import tokens as token_repo

router = APIRouter(include_in_schema=False)
templates = Jinja2Templates(directory=str(Path(__file__).parent / "templates"))
COOKIE = "ppl_audit_token"
COOKIE_SECONDS = 12 * 3600
#: Longest token accepted from the form (ours are ~48 characters).
MAX_TOKEN_CHARS = 200


def safe_next(target: str | None) -> str:
    """Where to go after signing in: a path on this site only (no open redirect)."""
    if (not target or not target.startswith("/") or target.startswith("//")
            or "\\" in target or any(ord(c) < 32 for c in target)):
        return "/"
    return target


def is_page(request: Request) -> bool:
    """A browser page read (not the API, the docs or a download)."""
    path = request.url.path
    return request.method in ("GET", "HEAD") and not path.startswith(("/api/", "/docs",
                                                                      "/openapi", "/static/"))


def signin_page(request: Request, *, status_code: int = 401, message: str | None = None,
                next_path: str | None = None) -> HTMLResponse:
    target = next_path if next_path is not None else request.url.path + (
        f"?{request.url.query}" if request.url.query else "")
    return templates.TemplateResponse(request, "signin.html", {
        "next": safe_next(target), "message": message, "live": False}, status_code=status_code)


@router.get("/signin", response_class=HTMLResponse)
def signin_form(request: Request, next: str = "/"):
    return signin_page(request, status_code=200, next_path=next)


@router.post("/signin")
def signin(request: Request, session: SessionDep,
           token: Annotated[str, Form(max_length=MAX_TOKEN_CHARS)],
           next: Annotated[str, Form(max_length=2000)] = "/") -> Response:
    row = token_repo.authenticate(session, token.strip(), request.app.state.settings.secret)
    if row is None:
        return signin_page(request, message="That token is unknown or revoked.", next_path=next)
    session.commit()  # last_used_at
    response = RedirectResponse(safe_next(next), status_code=303)
    response.set_cookie(COOKIE, token.strip(), max_age=COOKIE_SECONDS, path="/", httponly=True,
                        samesite="strict", secure=request.url.scheme == "https")
    return response


@router.post("/signout")
def signout() -> Response:
    response = RedirectResponse("/signin", status_code=303)
    response.delete_cookie(COOKIE, path="/", httponly=True, samesite="strict")
    return response
