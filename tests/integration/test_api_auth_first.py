"""Authenticate before work (issue 13), through a real uvicorn server on loopback.

A client sends the request head of a large POST and holds the body back: an anonymous
or wrong-token writer must be answered 401 at once, without the server waiting for (let
alone parsing) the body; an authenticated writer is let through to the parser. Writes
whose bodies are being read are limited globally.
"""
import socket
import threading
import time

import pytest

pytestmark = pytest.mark.integration


@pytest.fixture
def serve(service_settings):
    """``serve(**setting_overrides)`` -> port of a real uvicorn serving a fresh app."""
    import uvicorn

    from service.api import create_app

    running = []

    def start(**overrides) -> int:
        app = create_app(service_settings.model_copy(update=overrides))
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port,
                                               log_level="warning", lifespan="off"))
        thread = threading.Thread(target=server.run, daemon=True)
        thread.start()
        deadline = time.monotonic() + 20
        while not server.started:
            assert time.monotonic() < deadline, "uvicorn did not start"
            time.sleep(0.05)
        running.append((server, thread, app))
        return port

    yield start
    for server, thread, app in running:
        server.should_exit = True
        thread.join(timeout=10)
        app.state.engine.dispose()


def head_only(port: int, token: str | None, length: int = 5_000_000) -> socket.socket:
    """Send the head of a POST of ``length`` bytes, and no body."""
    sock = socket.create_connection(("127.0.0.1", port), timeout=5)
    auth = f"Authorization: Bearer {token}\r\n" if token else ""
    sock.sendall((f"POST /api/v1/audits HTTP/1.1\r\nHost: test\r\n{auth}"
                  f"Content-Type: application/json\r\nContent-Length: {length}\r\n\r\n").encode())
    return sock


def answer(sock: socket.socket, timeout: float) -> bytes:
    """What the server sends within ``timeout`` s (b"" if nothing)."""
    sock.settimeout(timeout)
    try:
        return sock.recv(65536)
    except socket.timeout:
        return b""


@pytest.mark.parametrize("token", [None, "ppla_not-a-real-token"])
def test_an_unauthenticated_large_post_is_refused_before_its_body_is_read(serve, token):
    port = serve()
    with head_only(port, token) as sock:
        t = time.perf_counter()
        reply = answer(sock, 5)
        took = time.perf_counter() - t
    assert reply.startswith(b"HTTP/1.1 401"), reply[:200]
    assert b"www-authenticate: bearer" in reply.lower()
    assert took < 2, f"answered after {took:.2f} s"


def test_an_authenticated_post_goes_on_to_read_its_body(serve, api_token):
    port = serve()
    with head_only(port, api_token) as sock:
        assert answer(sock, 1.5) == b"", "the server answered before the body arrived"


def test_bodies_handled_at_once_are_limited(serve, api_token, auth_headers):
    import httpx

    port = serve(max_parsing_requests=1, parsing_wait_seconds=1.0)
    with head_only(port, api_token):  # holds the only slot: its body never comes
        time.sleep(0.3)
        r = httpx.post(f"http://127.0.0.1:{port}/api/v1/audits", json={"name": "x"},
                       headers=auth_headers, timeout=10)
        assert r.status_code == 503, r.text
        assert r.headers["retry-after"] and "retry shortly" in r.json()["message"]
    # once the slot is free the next write is handled (and validated)
    time.sleep(0.5)
    r = httpx.post(f"http://127.0.0.1:{port}/api/v1/audits", json={"name": "x"},
                   headers=auth_headers, timeout=10)
    assert r.status_code == 422, r.text
