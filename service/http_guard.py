"""Pure ASGI middleware that runs before any request body is read (issue 13).

* :class:`WriteGate` — a write to the API (any method but GET/HEAD/OPTIONS under
  ``/api/``) must carry a live bearer token, checked from the raw headers before the
  body is received, so an anonymous client cannot make the service read and parse
  megabytes. Authenticated writes then pass a global limit on how many request bodies
  are being received at once (a semaphore held from the first read of the body until
  its last chunk, after which FastAPI parses it on the event loop; a writer that cannot
  get a slot within ``wait_seconds`` gets ``503`` with ``Retry-After``). The live token's
  id goes to the route in ``scope["state"]["api_token_id"]`` (``service.auth``).
* :class:`SecurityHeaders` — CSP, ``nosniff``, ``X-Frame-Options``, ``Referrer-Policy``
  on every answer; a route that sets its own CSP (``/docs``, which hashes its one inline
  script) keeps it.
"""
from __future__ import annotations

import asyncio
import base64
import hashlib
import json
import logging
import re
from typing import Callable

import anyio

log = logging.getLogger("ppl_audit.api")

SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})
MISSING = ("an API token is required: send 'Authorization: Bearer <token>' "
           "(create one with `ppl-audit token create NAME`)")
UNKNOWN = "the API token is unknown or revoked"

#: No script but our own files; inline style is allowed (the pages use style attributes)
#: and cannot run code. Nothing may frame the pages.
CSP = ("default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; "
       "img-src 'self' data:; object-src 'none'; base-uri 'none'; form-action 'self'; "
       "frame-ancestors 'none'")
HEADERS = [(b"x-content-type-options", b"nosniff"), (b"x-frame-options", b"DENY"),
           (b"referrer-policy", b"no-referrer")]


def csp_allowing_inline_scripts(html: str) -> str:
    """:data:`CSP` with each inline ``<script>`` of ``html`` allowed by its SHA-256."""
    hashes = [base64.b64encode(hashlib.sha256(body.encode()).digest()).decode()
              for body in re.findall(r"<script>(.*?)</script>", html, re.S)]
    allowed = " ".join(f"'sha256-{h}'" for h in hashes)
    return CSP.replace("script-src 'self'", f"script-src 'self' {allowed}".rstrip())


async def _answer(send, status: int, message: str, headers: list[tuple[bytes, bytes]]) -> None:
    body = json.dumps({"message": message, "errors": []}).encode()
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", b"application/json"),
                            (b"content-length", str(len(body)).encode()),
                            (b"connection", b"close"), *headers]})
    await send({"type": "http.response.body", "body": body})


class WriteGate:
    """``token_id(plaintext) -> int | None`` (the live token's id) is called in a worker
    thread (it queries the database); at most ``max_parsing`` bodies are received at once."""

    def __init__(self, app, token_id: Callable[[str], int | None], max_parsing: int,
                 wait_seconds: float = 10.0) -> None:
        self.app = app
        self.token_id = token_id
        self.max_parsing = max_parsing
        self.wait_seconds = wait_seconds
        self._slots: asyncio.Semaphore | None = None  # made on the serving event loop
        # token checks get their own threads: sharing the routes' pool (40 threads) let
        # waiting checks starve requests that already hold a database connection
        self._threads: anyio.CapacityLimiter | None = None

    async def __call__(self, scope, receive, send) -> None:
        if (scope["type"] != "http" or scope["method"] in SAFE_METHODS
                or not scope["path"].startswith("/api/")):
            await self.app(scope, receive, send)
            return
        token = _bearer(scope)
        challenge = [(b"www-authenticate", b"Bearer")]
        if token is None:
            await _answer(send, 401, MISSING, challenge)
            return
        if self._threads is None:
            self._threads = anyio.CapacityLimiter(self.max_parsing)
        try:
            live = await anyio.to_thread.run_sync(self.token_id, token, limiter=self._threads)
        except Exception as err:  # database down: the same answer as the routes give
            log.warning("token check failed: %s", str(err).splitlines()[0] if str(err) else err)
            await _answer(send, 503, "the database is unavailable right now; retry shortly",
                          [(b"retry-after", b"5")])
            return
        if live is None:
            await _answer(send, 401, UNKNOWN, challenge)
            return
        scope.setdefault("state", {})["api_token_id"] = live
        if self._slots is None:
            self._slots = asyncio.Semaphore(self.max_parsing)
        try:
            await asyncio.wait_for(self._slots.acquire(), self.wait_seconds)
        except asyncio.TimeoutError:
            await _answer(send, 503, f"the service is receiving {self.max_parsing} submissions "
                                     "already; retry shortly", [(b"retry-after", b"2")])
            return
        held = True

        def release() -> None:
            nonlocal held
            if held:
                held = False
                self._slots.release()

        async def counted_receive():
            message = await receive()
            if message["type"] != "http.request" or not message.get("more_body", False):
                release()  # the whole body is in: parsing is on the event loop, one at a time
            return message

        try:
            await self.app(scope, counted_receive, send)
        finally:
            release()


def _bearer(scope) -> str | None:
    for name, value in scope.get("headers") or []:
        if name == b"authorization":
            scheme, _, credentials = value.decode("latin-1").partition(" ")
            credentials = credentials.strip()
            if scheme.lower() == "bearer" and credentials:
                return credentials
            return None
    return None


class SecurityHeaders:
    def __init__(self, app) -> None:
        self.app = app

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def with_headers(message):
            if message["type"] == "http.response.start":
                headers = list(message.get("headers") or [])
                present = {k.lower() for k, _ in headers}
                extra = [(k, v) for k, v in HEADERS if k not in present]
                if b"content-security-policy" not in present:
                    extra.append((b"content-security-policy", CSP.encode()))
                message = {**message, "headers": headers + extra}
            await send(message)

        await self.app(scope, receive, with_headers)
