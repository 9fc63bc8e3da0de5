"""Request body size limit as a pure ASGI middleware.

A declared ``Content-Length`` above the limit is refused before the body is read; a
body sent without one (chunked) is counted as it streams and refused as soon as it
passes the limit. Either way the answer is ``413`` with a message naming the limit.
"""
from __future__ import annotations

import json

from starlette.exceptions import HTTPException


class BodyTooLarge(HTTPException):
    """Raised while streaming; an HTTPException so that FastAPI's body parser passes it on."""

    def __init__(self, max_bytes: int) -> None:
        super().__init__(413, f"request body is larger than the limit of {max_bytes} bytes")


class BodySizeLimit:
    def __init__(self, app, max_bytes: int) -> None:
        self.app = app
        self.max_bytes = max_bytes

    async def _refuse(self, send, size: str) -> None:
        body = json.dumps({"message": f"request body {size}is larger than the limit of "
                                      f"{self.max_bytes} bytes", "errors": []}).encode()
        await send({"type": "http.response.start", "status": 413,
                    "headers": [(b"content-type", b"application/json"),
                                (b"content-length", str(len(body)).encode())]})
        await send({"type": "http.response.body", "body": body})

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = dict(scope.get("headers") or [])
        declared = headers.get(b"content-length")
        if declared is not None:
            try:
                length = int(declared)
            except ValueError:
                length = -1
            if length > self.max_bytes:
                await self._refuse(send, f"({length} bytes) ")
                return
        received = 0
        started = False

        async def limited_receive():
            nonlocal received
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > self.max_bytes:
                    raise BodyTooLarge(self.max_bytes)
            return message

        async def tracking_send(message):
            nonlocal started
            if message["type"] == "http.response.start":
                started = True
            await send(message)

        try:
            await self.app(scope, limited_receive, tracking_send)
        except BodyTooLarge:
            if not started:
                await self._refuse(send, "")
