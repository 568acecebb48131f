"""What a hostile or careless client can no longer do to everyone else (issue 22): hold idle
connections open, exhaust file descriptors, flood the log."""

from __future__ import annotations

import collections
import json
import secrets
import socket
import time
from functools import partial

import pytest
import trio

from . import apps
from .processes import http_server, port_of
from .raw import INITIALIZE
from .test_transports import MODERN_HEADERS, MODERN_META

MODERN_CALL = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "tools/call",
    "params": {"name": "counts", "arguments": {"count": 1}, "_meta": MODERN_META},
}


def _request(body: dict[str, object], headers: dict[str, str]) -> bytes:
    content = json.dumps(body).encode()
    lines = ["POST /mcp HTTP/1.1", "Host: 127.0.0.1", f"Content-Length: {len(content)}"]
    lines += [f"{name}: {value}" for name, value in headers.items()]
    return ("\r\n".join(lines) + "\r\n\r\n").encode() + content


async def _seconds_until_closed(stream: trio.SocketStream, request: bytes) -> float:
    """Send *request*, read its whole response, then time how long the server keeps the idle
    connection open."""
    await stream.send_all(request)
    received = b""
    with trio.fail_after(10):
        while b"\r\n\r\n" not in received:
            received += await stream.receive_some()
        head, _, rest = received.partition(b"\r\n\r\n")
        assert head.startswith(b"HTTP/1.1 200"), head
        if b"transfer-encoding: chunked" in head.lower():
            while not rest.endswith(b"0\r\n\r\n"):
                rest += await stream.receive_some()
    started = trio.current_time()
    with trio.move_on_after(5):
        while await stream.receive_some():
            pass
        return trio.current_time() - started
    return float("inf")


@pytest.mark.parametrize(
    ("what", "body", "headers"),
    [
        (
            "a modern call",
            MODERN_CALL,
            dict(MODERN_HEADERS, **{"Mcp-Method": "tools/call", "Mcp-Name": "counts"}),
        ),
        (
            "a legacy initialize",
            INITIALIZE,
            {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"},
        ),
    ],
)
async def test_a_used_connection_closes_at_the_keep_alive_timeout(
    nursery: trio.Nursery, what: str, body: dict[str, object], headers: dict[str, str]
) -> None:
    url = await nursery.start(partial(apps.app.serve_http, "127.0.0.1", 0, keep_alive_timeout=0.5))
    stream = await trio.open_tcp_stream("127.0.0.1", port_of(url))
    async with stream:
        idle = await _seconds_until_closed(stream, _request(body, headers))
    assert idle < 3, f"the connection that carried {what} stayed open"


def _served_or_refused(sock: socket.socket) -> str:
    """``"served"`` (a 200 came back), ``"refused"`` (closed without a response) or
    ``"waiting"`` (nothing within a second)."""
    sock.settimeout(1)
    try:
        data = sock.recv(65536)
    except ConnectionResetError:
        return "refused"
    except TimeoutError:
        return "waiting"
    if not data:
        return "refused"
    assert data.startswith(b"HTTP/1.1 200"), data[:100]
    return "served"


def test_out_of_file_descriptors_refuses_new_connections_with_one_log_line() -> None:
    headers = dict(MODERN_HEADERS, **{"Mcp-Method": "tools/call", "Mcp-Name": "counts"})
    request = _request(MODERN_CALL, headers)
    options = ("--keep-alive-timeout", "3")
    with http_server(secrets.token_bytes(32), 0, *options, open_files=48) as served:
        clients = []
        try:
            for _ in range(60):  # more than the server can hold open
                sock = socket.create_connection(("127.0.0.1", served.port), timeout=5)
                sock.sendall(request)
                clients.append(sock)
            outcomes = collections.Counter(_served_or_refused(sock) for sock in clients)
            # Those the server had descriptors for are served; the others are closed at once,
            # not left waiting in the listen queue for as long as the idle ones stay open.
            assert outcomes["served"] > 10 and outcomes["refused"] > 10, outcomes
            assert outcomes["waiting"] == 0, outcomes
            time.sleep(4)  # the idle connections close at the keep-alive timeout
            with socket.create_connection(("127.0.0.1", served.port), timeout=5) as fresh:
                fresh.sendall(request)
                assert _served_or_refused(fresh) == "served"
        finally:
            for sock in clients:
                sock.close()
        logged = "".join(served.stderr)
    assert "Traceback" not in logged, logged
    lines = [line for line in served.stderr if "out of file descriptors" in line]
    assert len(lines) == 1, logged  # one line per interval (10 s), not one per refusal
    assert "WARNING" in lines[0] and "EMFILE" in lines[0], lines
