"""The FastAPI application factory: REST resources (SPEC §5), the web pages, limits and
the one place where errors become HTTP answers.

Run with ``ppl-audit serve`` or ``uvicorn --factory service.api:create_app``.
"""
from __future__ import annotations

import json
import logging

import sqlalchemy as sa
from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

from service import routes_audits, routes_batches, signin, web
from service.config import Settings, get_settings
from service.db import make_engine, make_session_factory
from service.auth import ReadAccess
from service.db import tokens as token_repo
from service.http_guard import SecurityHeaders, WriteGate, csp_allowing_inline_scripts
from service.http_limits import BodySizeLimit
from service.submission import Dispatcher

log = logging.getLogger("ppl_audit.api")
VERSION = "0.1.0"


class ProblemResponse(JSONResponse):
    """Error bodies as ASCII JSON: a message may quote a lone surrogate from the request,
    which UTF-8 cannot encode (that was a 500)."""

    def render(self, content) -> bytes:
        return json.dumps(content, ensure_ascii=True, allow_nan=False).encode("ascii")


def _where(loc) -> str:
    parts = [str(p) for p in loc if p not in ("body",)]
    return ".".join(parts) or "body"


def validation_message(errors: list[dict]) -> str:
    """One readable sentence per field error, e.g. ``settings.pymc.chainz: unknown key``."""
    out = []
    for e in errors:
        kind, msg = e.get("type", ""), e.get("msg", "")
        if kind == "json_invalid":
            ctx = e.get("ctx", {}).get("error", "")
            out.append(f"the request body is not valid JSON ({ctx})")
            continue
        if kind == "extra_forbidden":
            msg = "unknown key (not allowed here)"
        elif kind == "missing":
            msg = "required field is missing"
        out.append(f"{_where(e.get('loc', ()))}: {msg.removeprefix('Value error, ')}")
    return "; ".join(out) or "invalid request"


def _plain(errors: list[dict]) -> list[dict]:
    """Validation errors without the offending input echoed back (it may be huge)."""
    return [{"loc": list(e.get("loc", ())), "type": e.get("type"),
             "msg": e.get("msg")} for e in errors]


def _mount_api_docs(app: FastAPI) -> None:
    """Swagger UI at /docs from the installed swagger-ui-bundle, so it works offline."""
    from fastapi.openapi.docs import get_swagger_ui_html
    from fastapi.staticfiles import StaticFiles
    from swagger_ui_bundle import swagger_ui_path

    app.mount("/static/swagger-ui", StaticFiles(directory=str(swagger_ui_path)), name="swagger-ui")

    @app.get("/docs", include_in_schema=False)
    def docs():
        page = get_swagger_ui_html(openapi_url=app.openapi_url, title="ppl-audit API",
                                   swagger_js_url="/static/swagger-ui/swagger-ui-bundle.js",
                                   swagger_css_url="/static/swagger-ui/swagger-ui.css",
                                   swagger_favicon_url="/static/swagger-ui/favicon-32x32.png")
        # the page starts Swagger UI with one inline script: allow exactly that one
        page.headers["Content-Security-Policy"] = csp_allowing_inline_scripts(
            page.body.decode())
        return page


def service_health(sessions, dispatcher, settings: Settings) -> dict:
    """The health report (shared by the API and ``ppl-audit status``)."""
    from service.db import work as work_repo
    from service.db.base import utcnow

    db_ok = broker_ok = True
    work = None
    try:
        with sessions() as s:
            work = work_repo.health(s, utcnow(), 3 * settings.work.reconcile_seconds)
    except Exception:
        db_ok = False
    try:
        queued = dispatcher.queue_length() if hasattr(dispatcher, "queue_length") else None
    except Exception:
        broker_ok, queued = False, None
    return {"database": db_ok, "broker": broker_ok, "queued_tasks": queued, "work": work,
            "version": VERSION}


def create_app(settings: Settings | None = None, *, dispatcher: Dispatcher | None = None) -> FastAPI:
    settings = settings or get_settings()
    engine = make_engine(settings.database_url)
    if dispatcher is None:
        from workers.celery_app import CeleryDispatcher, create_celery

        dispatcher = CeleryDispatcher(create_celery(settings))

    app = FastAPI(
        title="ppl-audit", version=VERSION,
        description="Do a PyMC program and a LazyPPL program define the same posterior? "
                    "Submit translation pairs and posteriordb batches; read verdicts with evidence.",
        docs_url=None, redoc_url=None,  # FastAPI's pages load Swagger UI from a CDN
    )
    _mount_api_docs(app)
    app.state.settings = settings
    app.state.engine = engine
    app.state.sessions = make_session_factory(engine)
    app.state.dispatcher = dispatcher

    def token_id(plaintext: str) -> int | None:
        with app.state.sessions() as session:
            row = token_repo.authenticate(session, plaintext, settings.secret)
            session.commit()  # last_used_at
            return None if row is None else row.id

    # outermost last: headers on every answer, then the size limit, then the token check
    # before any body is read
    app.add_middleware(WriteGate, token_id=token_id,
                       max_parsing=settings.max_parsing_requests,
                       wait_seconds=settings.parsing_wait_seconds)
    app.add_middleware(BodySizeLimit, max_bytes=settings.max_body_bytes)
    app.add_middleware(SecurityHeaders)

    @app.exception_handler(RequestValidationError)
    async def _invalid(request: Request, exc: RequestValidationError):
        errors = exc.errors()
        return ProblemResponse({"message": validation_message(errors), "errors": _plain(errors)},
                               status_code=422)

    @app.exception_handler(StarletteHTTPException)
    async def _http(request: Request, exc: StarletteHTTPException):
        if exc.status_code == 401 and signin.is_page(request):  # a browser: offer the form
            return signin.signin_page(request)
        return ProblemResponse({"message": str(exc.detail), "errors": []},
                               status_code=exc.status_code, headers=getattr(exc, "headers", None))

    @app.exception_handler(sa.exc.OperationalError)
    @app.exception_handler(sa.exc.TimeoutError)
    async def _database_unavailable(request: Request, exc: Exception):
        # the database is down, overloaded or out of connections: a retry may succeed
        log.warning("database unavailable on %s %s: %s", request.method, request.url.path,
                    str(exc).splitlines()[0])
        return JSONResponse({"message": "the database is unavailable right now; retry shortly",
                             "errors": []}, status_code=503, headers={"Retry-After": "5"})

    @app.exception_handler(Exception)
    async def _unexpected(request: Request, exc: Exception):
        log.exception("unexpected error on %s %s", request.method, request.url.path)
        return JSONResponse({"message": "internal error (logged for the operators)", "errors": []},
                            status_code=500)

    @app.get("/api/v1/health", tags=["service"],
             summary="Database and broker reachable? Live workers, queue depth, stuck work",
             dependencies=[ReadAccess])
    def health() -> dict:
        """``queued_tasks``: messages in the broker's queue; ``work``: live workers
        (heartbeat within 3 reconciler intervals), open scopes queued / running, leases
        expired, the oldest waiting audit's age (since submission) and the oldest running
        scope's (since pick-up), in seconds (service/README.md, "Guarantees")."""
        return service_health(app.state.sessions, dispatcher, settings)

    app.include_router(routes_audits.router)
    app.include_router(routes_batches.router)
    app.include_router(signin.router)
    app.include_router(web.router)
    return app
