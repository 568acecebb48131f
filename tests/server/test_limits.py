"""The HTTP limits and their knobs (issue 9, fix 5): the listen backlog, the largest body, the
keep-alive timeout, on ``App.serve_http`` and on the command line."""

from __future__ import annotations

import errno
import inspect
import secrets
import select
import socket
import time
from functools import partial

import httpx2
import pytest
import trio

from mrtr_trio._cli import _parser
from mrtr_trio.mcp import App, _transports

from . import apps
from .processes import http_server, port_of
from .raw import INITIALIZE
from .test_transports import MODERN_HEADERS, MODERN_META


def _connections_the_kernel_accepts(port: int, count: int) -> int:
    """Open *count* connections at once while the server cannot accept any (this blocks the
    trio thread on purpose), and count those the kernel completes: past the listen backlog it
    drops the handshakes, which real clients then see as resets and timeouts."""
    sockets = []
    try:
        for _ in range(count):
            sock = socket.socket()
            sock.setblocking(False)
            assert sock.connect_ex(("127.0.0.1", port)) in (0, errno.EINPROGRESS)
            sockets.append(sock)
        established: set[socket.socket] = set()
        deadline = time.monotonic() + 0.5
        while time.monotonic() < deadline and len(established) < count:
            _, writable, _ = select.select(
                [], [s for s in sockets if s not in established], [], 0.05
            )
            established.update(
                s for s in writable if s.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR) == 0
            )
        return len(established)
    finally:
        for sock in sockets:
            sock.close()


@pytest.mark.parametrize(("backlog", "accepted"), [(None, 300), (50, 51)])
async def test_the_listen_backlog_holds_a_burst_of_connections(
    nursery: trio.Nursery, backlog: int | None, accepted: int
) -> None:
    knobs = {} if backlog is None else {"backlog": backlog}
    url = await nursery.start(partial(apps.app.serve_http, "127.0.0.1", 0, **knobs))
    got = _connections_the_kernel_accepts(port_of(url), 300)
    if backlog is None:
        assert got == accepted  # the default queues a burst of 300 (hypercorn's 100 did not)
    else:
        assert got <= accepted  # the knob reaches the socket


async def test_bodies_over_the_limit_are_refused_before_parsing(nursery: trio.Nursery) -> None:
    url = await nursery.start(partial(apps.app.serve_http, "127.0.0.1", 0, max_body_size=1000))
    headers = dict(MODERN_HEADERS, **{"Mcp-Method": "tools/call", "Mcp-Name": "counts"})
    body = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "tools/call",
        "params": {
            "name": "counts",
            "arguments": {"count": 1, "label": "x" * 2000},
            "_meta": MODERN_META,
        },
    }
    async with httpx2.AsyncClient(timeout=10) as http:
        big = await http.post(url, json=body, headers=headers)
        body["params"]["arguments"]["label"] = "x"
        small = await http.post(url, json=body, headers=headers)
    assert big.status_code == 413
    assert small.status_code == 200 and small.json()["result"]["content"][0]["text"] == "x=2"


async def test_idle_keep_alive_connections_close_after_the_timeout(nursery: trio.Nursery) -> None:
    url = await nursery.start(partial(apps.app.serve_http, "127.0.0.1", 0, keep_alive_timeout=0.5))
    stream = await trio.open_tcp_stream("127.0.0.1", port_of(url))
    async with stream:
        await stream.send_all(b"GET /nowhere HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
        response = b""
        with trio.fail_after(5):
            while b"\r\n\r\n" not in response:
                response += await stream.receive_some()
            assert response.startswith(b"HTTP/1.1 404")
            started = trio.current_time()
            while await stream.receive_some():  # the server closes the idle connection
                pass
        assert 0.3 < trio.current_time() - started < 3


def test_the_defaults_carry_a_thousand_simultaneous_flows() -> None:
    assert _transports.BACKLOG >= 1000
    assert _transports.MAX_SESSIONS >= 1000
    assert _transports.KEEP_ALIVE_TIMEOUT > 5  # longer than clients keep pooled connections


def test_the_command_line_has_a_knob_for_each_http_limit_of_serve_http() -> None:
    keywords = inspect.signature(App.serve_http).parameters
    defaults = _parser().parse_args(["serve", "f.py"])
    assert {name: getattr(defaults, name) for name in defaults.http_limits} == {
        name: keywords[name].default for name in defaults.http_limits
    }
    given = _parser().parse_args(
        ["serve", "f.py", "--backlog", "50", "--max-body-size", "1000", "--keep-alive-timeout",
         "0.5", "--session-idle-timeout", "0.25", "--max-sessions", "1",
         "--max-sessions-per-client", "2", "--session-first-use-timeout", "3",
         "--max-buffered-bytes", "4000"]
    )  # fmt: skip
    assert {name: getattr(given, name) for name in given.http_limits} == {
        "backlog": 50,
        "max_body_size": 1000,
        "keep_alive_timeout": 0.5,
        "session_idle_timeout": 0.25,
        "max_sessions": 1,
        "max_sessions_per_client": 2,
        "session_first_use_timeout": 3.0,
        "max_buffered_bytes": 4000,
    }


def test_the_command_line_passes_the_limits_to_the_server() -> None:
    limits = ["--backlog", "50", "--max-body-size", "1000", "--keep-alive-timeout", "0.5",
              "--session-idle-timeout", "0.5", "--max-sessions", "1"]  # fmt: skip
    with http_server(secrets.token_bytes(32), 0, *limits) as served:
        oversized = httpx2.post(served.url, content=b"x" * 2000, headers=MODERN_HEADERS, timeout=10)
        assert oversized.status_code == 413
        legacy = {
            "Content-Type": "application/json",
            "Accept": "application/json, text/event-stream",
        }
        first, second = (
            httpx2.post(served.url, json=INITIALIZE, headers=legacy, timeout=10) for _ in range(2)
        )
        assert (first.status_code, second.status_code) == (200, 503)  # --max-sessions 1
        time.sleep(1.5)  # --session-idle-timeout 0.5 closes the first session: its place is free
        again = httpx2.post(served.url, json=INITIALIZE, headers=legacy, timeout=10)
        assert again.status_code == 200
        with socket.create_connection(("127.0.0.1", served.port), timeout=10) as idle:
            idle.sendall(b"GET /nowhere HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
            assert idle.recv(65536).startswith(b"HTTP/1.1 404")
            started = time.monotonic()
            while idle.recv(65536):  # --keep-alive-timeout 0.5 closes the idle connection
                pass
            assert time.monotonic() - started < 5  # the default is 30 s
