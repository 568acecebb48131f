"""What a hostile or careless client can no longer do to everyone else (issue 22): hold idle
connections open, exhaust file descriptors, flood the log."""

from __future__ import annotations

import collections
import json
import logging
import secrets
import socket
import time
from functools import partial

import httpx2
import mcp_types
import pytest
import trio
from mcp import Client

from mrtr_trio import Context, Runtime, done, elicit, step
from mrtr_trio._errors import StepInProgress
from mrtr_trio.mcp import App
from mrtr_trio.mcp._log import CLIENT_LOG_BURST, log_failure

from . import apps
from .clients import text_of
from .processes import http_server, port_of
from .raw import INITIALIZE, VERSION
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


async def _response(stream: trio.SocketStream, request: bytes) -> None:
    """Send *request* and read its whole (200) response."""
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


async def _seconds_until_closed(stream: trio.SocketStream, request: bytes) -> float:
    """Send *request*, read its whole response, then time how long the server keeps the idle
    connection open."""
    await _response(stream, request)
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


async def test_a_connection_the_client_closed_is_let_go_at_once(nursery: trio.Nursery) -> None:
    # The keep-alive timeout is long: the server must not wait for it to let go of a
    # connection whose client has gone (its task, buffers and socket, in CLOSE-WAIT).
    url = await nursery.start(partial(apps.app.serve_http, "127.0.0.1", 0, keep_alive_timeout=30))
    headers = dict(MODERN_HEADERS, **{"Mcp-Method": "tools/call", "Mcp-Name": "counts"})
    stream = await trio.open_tcp_stream("127.0.0.1", port_of(url))
    async with stream:
        await _response(stream, _request(MODERN_CALL, headers))
        await trio.sleep(0.2)  # the server is done with the response: the connection is idle
        await stream.send_eof()  # the client is done: the server reads its end
        with trio.move_on_after(5) as waited:
            while await stream.receive_some():
                pass
    assert not waited.cancelled_caught, "the server held the closed connection open"


def _served_or_refused(sock: socket.socket) -> str:
    """``"served"`` (a 200 came back), ``"refused"`` (closed without a response) or
    ``"waiting"`` (nothing within 5 seconds)."""
    sock.settimeout(5)
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


# ------------------------------------------------------------------ bodies held at once


def _chunked_head(headers: dict[str, str]) -> bytes:
    lines = ["POST /mcp HTTP/1.1", "Host: 127.0.0.1", "Transfer-Encoding: chunked"]
    lines += [f"{name}: {value}" for name, value in headers.items()]
    return ("\r\n".join(lines) + "\r\n\r\n").encode()


def _chunk(data: bytes) -> bytes:
    return b"%x\r\n%s\r\n" % (len(data), data)


async def _response_head(stream: trio.SocketStream, within: float) -> bytes | None:
    """The response's status line and headers, or `None` if none came *within* seconds."""
    received = b""
    with trio.move_on_after(within):
        while b"\r\n\r\n" not in received:
            chunk = await stream.receive_some()
            if not chunk:
                break
            received += chunk
        return received.partition(b"\r\n\r\n")[0]
    return None


async def test_bodies_held_at_once_are_bounded_across_requests(nursery: trio.Nursery) -> None:
    knobs = {"max_body_size": 1000, "max_buffered_bytes": 2500}
    url = await nursery.start(partial(apps.app.serve_http, "127.0.0.1", 0, **knobs))
    headers = dict(MODERN_HEADERS, **{"Mcp-Method": "tools/call", "Mcp-Name": "counts"})
    call = json.dumps(MODERN_CALL).encode()
    first_chunk = call + b" " * (900 - len(call))  # valid JSON once the body ends
    streams = [await trio.open_tcp_stream("127.0.0.1", port_of(url)) for _ in range(3)]
    try:
        for stream in streams:  # three slow bodies, 900 bytes each so far: 2,700 > 2,500
            await stream.send_all(_chunked_head(headers) + _chunk(first_chunk))
            await trio.sleep(0.1)
        third = await _response_head(streams[2], within=3)
        assert third is not None, "the body over the budget was not refused"
        assert third.startswith(b"HTTP/1.1 503") and b"retry-after: 1" in third.lower(), third
        for stream in streams[:2]:  # those within the budget are served once they end
            await stream.send_all(b"0\r\n\r\n")
            head = await _response_head(stream, within=10)
            assert head is not None and head.startswith(b"HTTP/1.1 200"), head
    finally:
        for stream in streams:
            await stream.aclose()


async def test_a_chunked_body_over_the_limit_is_refused_before_it_ends(
    nursery: trio.Nursery,
) -> None:
    url = await nursery.start(partial(apps.app.serve_http, "127.0.0.1", 0, max_body_size=1000))
    headers = dict(MODERN_HEADERS, **{"Mcp-Method": "tools/call", "Mcp-Name": "counts"})
    async with await trio.open_tcp_stream("127.0.0.1", port_of(url)) as stream:
        await stream.send_all(_chunked_head(headers) + _chunk(b" " * 600) + _chunk(b" " * 600))
        head = await _response_head(stream, within=3)  # the body has not ended
        assert head is not None and head.startswith(b"HTTP/1.1 413"), head


# ------------------------------------------------------------------ legacy session slots

LEGACY = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}


def _by_header(scope: dict[str, object]) -> object:
    """A slot key that stands for an authenticated principal: the `X-Client` header."""
    return dict(scope["headers"]).get(b"x-client")  # type: ignore[call-overload]


async def _initialize(http: httpx2.AsyncClient, url: str, client: str) -> httpx2.Response:
    return await http.post(url, json=INITIALIZE, headers=dict(LEGACY, **{"X-Client": client}))


async def _use(http: httpx2.AsyncClient, url: str, session: str) -> httpx2.Response:
    headers = dict(LEGACY, **{"Mcp-Session-Id": session, "MCP-Protocol-Version": VERSION})
    await http.post(
        url, json={"jsonrpc": "2.0", "method": "notifications/initialized"}, headers=headers
    )
    return await http.post(
        url, json={"jsonrpc": "2.0", "id": 2, "method": "tools/list"}, headers=headers
    )


async def test_session_slots_are_fair_per_client_and_the_503_says_when_to_retry(
    nursery: trio.Nursery,
) -> None:
    knobs = {"max_sessions": 4, "max_sessions_per_client": 3, "session_key": _by_header}
    url = await nursery.start(partial(apps.app.serve_http, "127.0.0.1", 0, **knobs))
    async with httpx2.AsyncClient(timeout=10) as http:
        for _ in range(3):
            opened = await _initialize(http, url, "greedy")
            assert opened.status_code == 200
            assert (await _use(http, url, opened.headers["mcp-session-id"])).status_code == 200
        refused = await _initialize(http, url, "greedy")
        assert refused.status_code == 503, refused.text  # its share is taken ...
        assert int(refused.headers["retry-after"]) >= 1
        assert "for this client" in refused.json()["error"]["message"]
        other = await _initialize(http, url, "polite")
        assert other.status_code == 200  # ... while another client still gets a session
        full = await _initialize(http, url, "third")
        assert full.status_code == 503 and "retry-after" in full.headers  # max_sessions


async def test_sessions_unused_after_initialize_lose_their_slot(nursery: trio.Nursery) -> None:
    knobs = {"max_sessions": 3, "session_first_use_timeout": 0.5}
    url = await nursery.start(partial(apps.app.serve_http, "127.0.0.1", 0, **knobs))
    async with httpx2.AsyncClient(timeout=10) as http:
        used = (await _initialize(http, url, "a")).headers["mcp-session-id"]
        assert (await _use(http, url, used)).status_code == 200
        idle = [(await _initialize(http, url, "a")).headers["mcp-session-id"] for _ in range(2)]
        refused = await _initialize(http, url, "a")
        assert refused.status_code == 503
        assert 1 <= int(refused.headers["retry-after"]) <= 1  # the unused ones' deadline
        await trio.sleep(0.7)
        assert (await _initialize(http, url, "a")).status_code == 200  # the unused made room
        for session in idle:
            assert (await _use(http, url, session)).status_code == 404  # they were closed
        assert (await _use(http, url, used)).status_code == 200  # the used one kept its slot


# ------------------------------------------------------------------ JSON-response mode

blocking = App("blocking", runtime=Runtime([secrets.token_bytes(32)]))
#: Set when the call tagged so has started its step, and when its generator is closed.
BLOCKED: dict[str, trio.Event] = {}
CLOSED: dict[str, trio.Event] = {}


@blocking.tool()
async def blocks(ctx: Context, tag: str):  # type: ignore[no-untyped-def]
    """Runs a step that never ends; notes when its generator is closed."""
    BLOCKED[tag].set()
    try:
        yield step(trio.sleep_forever)
        yield done("never")
    finally:
        CLOSED[tag].set()


@pytest.mark.parametrize("json_response", [True, False])
async def test_a_dropped_modern_call_is_cancelled_in_either_response_mode(
    nursery: trio.Nursery, json_response: bool
) -> None:
    url = await nursery.start(
        partial(blocking.serve_http, "127.0.0.1", 0, json_response=json_response)
    )
    tag = f"json={json_response}"
    BLOCKED[tag], CLOSED[tag] = trio.Event(), trio.Event()
    call = dict(
        MODERN_CALL, params=dict(MODERN_CALL["params"], name="blocks", arguments={"tag": tag})
    )  # type: ignore[arg-type]
    headers = dict(MODERN_HEADERS, **{"Mcp-Method": "tools/call", "Mcp-Name": "blocks"})
    async with await trio.open_tcp_stream("127.0.0.1", port_of(url)) as stream:
        await stream.send_all(_request(call, headers))
        with trio.fail_after(10):
            await BLOCKED[tag].wait()
    # the client is gone, mid-call
    with trio.move_on_after(3):
        await CLOSED[tag].wait()
    assert CLOSED[tag].is_set(), "the dropped call kept running"


# ------------------------------------------------------------------ what clients put in the log

small_state = App("small-state", runtime=Runtime([secrets.token_bytes(32)], max_state_bytes=2048))
NAME = {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}


@small_state.tool()
async def remembers(ctx: Context):  # type: ignore[no-untyped-def]
    """Asks twice: the second round's requestState carries the first answer."""
    first = yield elicit("Name?", NAME)
    second = yield elicit("And again?", NAME)
    yield done(f"{first.content['name']} {second.content['name']}")


async def _answers_too_big(ctx: object, params: object) -> mcp_types.ElicitResult:
    return mcp_types.ElicitResult(action="accept", content={"name": "x" * 5000})


async def test_an_answer_too_big_for_the_state_is_a_rate_limited_warning(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG, logger="mrtr_trio.mcp")
    async with Client(
        small_state.server, mode="2026-07-28", elicitation_callback=_answers_too_big
    ) as client:
        for _ in range(CLIENT_LOG_BURST + 3):
            result = await client.call_tool("remembers", {})
            assert result.is_error and "max_state_bytes=2048" in text_of(result)
    ours = [
        r for r in caplog.records if r.name == "mrtr_trio.mcp" and "remembers" in r.getMessage()
    ]
    warnings = [r for r in ours if r.levelno == logging.WARNING]
    assert len(warnings) == CLIENT_LOG_BURST, [r.getMessage() for r in warnings]
    assert all("StateTooLarge" in r.getMessage() and r.exc_info is None for r in warnings)
    assert [r for r in ours if r.levelno >= logging.ERROR] == []
    assert len([r for r in ours if r.levelno == logging.DEBUG and "ended" in r.getMessage()]) == 3


def test_a_retry_while_the_step_still_runs_is_a_rate_limited_warning(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG, logger="mrtr_trio.mcp")
    error = StepInProgress("step charge of this flow is still running; retry the request")
    for _ in range(CLIENT_LOG_BURST * 4):
        log_failure("tool", "retried-while-running", error)
    records = [r for r in caplog.records if "retried-while-running" in r.getMessage()]
    warnings = [r for r in records if r.levelno == logging.WARNING]
    assert len(warnings) == CLIENT_LOG_BURST and all(r.exc_info is None for r in warnings)
    assert all(r.levelno in (logging.WARNING, logging.DEBUG) for r in records)


def test_session_slots_key_by_principal_when_authenticated_else_by_address() -> None:
    from mcp.server.auth.middleware.bearer_auth import AuthenticatedUser
    from mcp.server.auth.provider import AccessToken

    from mrtr_trio.mcp._slots import client_key

    def user(subject: str) -> AuthenticatedUser:
        return AuthenticatedUser(AccessToken(token="t", client_id="c", scopes=[], subject=subject))

    address = {"type": "http", "client": ("10.0.0.7", 5555)}
    alice, bob = dict(address, user=user("alice")), dict(address, user=user("bob"))
    assert client_key(alice) != client_key(bob)  # one proxy address, two principals
    assert client_key(alice) == client_key(dict(alice, client=("10.0.0.8", 1)))
    assert client_key(address) == ("address", "10.0.0.7")
