"""Legacy HTTP and stdio sessions that end well (issue 9, fixes 3 and 4): a client that drops
its connection mid-round has its flow closed at once; a client that answers with something the
SDK drops fails its round at once with -32602 naming the request; idle sessions close and their
number is capped."""

from __future__ import annotations

import json
import subprocess
import sys
from functools import partial
from pathlib import Path
from typing import Any

import pytest
import trio

from mrtr_trio.mcp._sessions import SessionGuard
from mrtr_trio.mcp._transports import serve_http

from . import apps
from .processes import APP_FILE, close, initialize, receive, send, stdio_server
from .raw import INITIALIZE, legacy_session


async def _first_request(messages: Any) -> dict[str, Any]:
    async for message in messages:
        if "method" in message:
            return message
    raise AssertionError("the call ended without asking")


async def test_a_dropped_legacy_connection_closes_the_flow_within_a_second(
    nursery: trio.Nursery,
) -> None:
    url = await nursery.start(apps.app.serve_http, "127.0.0.1", 0)
    apps.reset_accounting()
    async with legacy_session(url) as session:
        call = session.call("tools/call", {"name": "tracked", "arguments": {"tag": "drop"}})
        async with call as messages:
            assert (await _first_request(messages))["method"] == "elicitation/create"
        # The connection is gone: no DELETE, no notifications/cancelled.
        with trio.fail_after(5):  # (a loaded machine; an unclosed flow never finishes)
            await apps.all_closed()
        assert apps.FINALISED == apps.STARTED
        # The session itself still serves.
        response = await session.call_tool("counts", {"count": 2})
        assert response["result"]["content"][0]["text"] == "n=4"


async def test_a_legacy_flow_answered_to_the_end_is_not_cancelled(nursery: trio.Nursery) -> None:
    url = await nursery.start(apps.app.serve_http, "127.0.0.1", 0)
    async with legacy_session(url) as session:
        body = {"name": "deploy", "arguments": {"service": "api"}}
        async with session.call("tools/call", body) as messages:
            async for message in messages:
                if message.get("method") == "elicitation/create":
                    await session.answer(
                        message["id"], {"action": "accept", "content": {"confirm": False}}
                    )
                elif "method" not in message:
                    assert message["result"]["content"][0]["text"] == "Cancelled"
                    break


LEGACY_ANSWERS = {
    "elicitation/create": {"action": "accept", "content": {"confirm": True}},
    "sampling/createMessage": {
        "role": "assistant",
        "content": {"type": "text", "text": "notes"},
        "model": "m",
    },
    "roots/list": {"roots": []},
}


async def test_a_late_duplicate_answer_does_not_fail_the_next_round_and_the_watch_ends(
    nursery: trio.Nursery,
) -> None:
    asgi = apps.app.asgi()
    guard = asgi
    while not isinstance(guard, SessionGuard):  # under the layers in front of it
        guard = guard._app  # type: ignore[attr-defined]
    url = await nursery.start(serve_http, asgi, "127.0.0.1", 0, "/mcp")
    async with legacy_session(url) as session:
        call = {"name": "deploy", "arguments": {"service": "api"}}
        answered: list[Any] = []
        with trio.fail_after(10):
            async with session.call("tools/call", call) as messages:
                async for message in messages:
                    if "method" not in message:
                        result = message
                        break
                    if "id" not in message:
                        continue  # a notification
                    if answered:  # the second round: the first answer arrives again, late
                        await session.answer(answered[0], LEGACY_ANSWERS["elicitation/create"])
                    await session.answer(message["id"], LEGACY_ANSWERS[message["method"]])
                    answered.append(message["id"])
        assert "result" in result, result
        assert result["result"]["content"][0]["text"] == "Deployed api to staging (0 roots): notes"
        for _ in range(500):  # the call's POST ends just after its result
            if not guard._watches:
                break
            await trio.sleep(0.01)
        assert guard._watches == {}  # every request settled: the session's watch is forgotten


@pytest.mark.parametrize("response_sent", [True, False], ids=["answered", "unanswered"])
async def test_a_call_whose_stream_breaks_is_cancelled_only_if_its_response_never_went_out(
    response_sent: bool,
) -> None:
    """The client hangs up before the SSE stream's end: after the call's response that is
    no reason to cancel it (official clients do so in a fifth of legacy trips over loopback)."""
    posted: list[Any] = []
    events = [{"jsonrpc": "2.0", "id": 0, "method": "elicitation/create", "params": {}}]
    if response_sent:
        events.append({"jsonrpc": "2.0", "id": 7, "result": {"content": []}})

    async def sdk(scope: Any, receive: Any, send: Any) -> None:  # a stand-in for the SDK's app
        posted.append(json.loads((await receive())["body"]))
        if len(posted) > 1:
            return  # a notification told by the guard
        await send({"type": "http.response.start", "status": 200, "headers": []})
        for event in events:
            chunk = f"event: message\r\ndata: {json.dumps(event)}\r\n\r\n".encode()
            await send({"type": "http.response.body", "body": chunk, "more_body": True})
        # ...and the stream ends here, its final empty body never sent: the client hung up.

    await _post_a_call(SessionGuard(sdk, max_body_size=1 << 20))
    told = [m.get("method") for m in posted[1:]]
    if response_sent:
        assert told == []
    else:
        assert told == ["notifications/cancelled"]
        assert posted[1]["params"]["requestId"] == 7


async def test_a_request_the_server_cancels_on_a_calls_stream_is_forgotten_at_once() -> None:
    """A `notifications/cancelled` from the server on a call's SSE stream reaches the session's
    watch with its params: the request it names is settled there and then (an answer to it is
    late, not wrong), not only when the stream ends."""
    idle: list[bool] = []
    ask = {"jsonrpc": "2.0", "id": 0, "method": "elicitation/create", "params": {}}
    cancel = {
        "jsonrpc": "2.0",
        "method": "notifications/cancelled",
        "params": {"requestId": 0, "reason": "timed out"},
    }

    async def sdk(scope: Any, receive: Any, send: Any) -> None:  # a stand-in for the SDK's app
        await receive()
        await send({"type": "http.response.start", "status": 200, "headers": []})
        for event in (ask, cancel):
            chunk = f"event: message\r\ndata: {json.dumps(event)}\r\n\r\n".encode()
            await send({"type": "http.response.body", "body": chunk, "more_body": True})
            idle.append(guard._watches["s1"].idle)
        await send({"type": "http.response.body", "body": b"", "more_body": False})

    guard = SessionGuard(sdk, max_body_size=1 << 20)
    await _post_a_call(guard)
    assert idle == [False, True]


async def _post_a_call(guard: SessionGuard) -> None:
    """POST a legacy `tools/call` (id 7, session `s1`) through *guard*, discarding what it
    sends back."""

    async def receive() -> dict[str, Any]:
        call = {"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": {"name": "t"}}
        return {"type": "http.request", "body": json.dumps(call).encode(), "more_body": False}

    async def send(message: Any) -> None:
        pass

    headers = [(b"mcp-session-id", b"s1"), (b"mcp-protocol-version", b"2025-11-25")]
    scope = {"type": "http", "method": "POST", "path": "/mcp", "headers": headers}
    with trio.fail_after(5):
        await guard(scope, receive, send)


JUNK = [
    pytest.param(b'{"jsonrpc":"2.0","id":ID,"result":null}', "not a JSON-RPC response", id="null"),
    pytest.param(b"this is not json", "not readable JSON", id="not-json"),
    pytest.param(b"[" * 3000 + b"]" * 3000, "not readable JSON", id="too-deep"),
    pytest.param(
        b'{"jsonrpc":"2.0","id":987654,"result":{"action":"accept","content":{"name":"x"}}}',
        "never sent",
        id="wrong-id",
    ),
    pytest.param(b'{"jsonrpc":"2.0","id":ID}', "not a JSON-RPC response", id="no-result"),
    pytest.param(
        b'{"jsonrpc":"2.0","id":ID,"result":{"action":"accept","content":{"name":[1]}}}',
        "is malformed",
        id="bad-content",
    ),
]


@pytest.mark.parametrize(("junk", "reason"), JUNK)
async def test_a_junk_legacy_answer_over_http_fails_the_round_at_once(
    nursery: trio.Nursery, junk: bytes, reason: str
) -> None:
    url = await nursery.start(apps.app.serve_http, "127.0.0.1", 0)
    async with legacy_session(url) as session:
        with trio.fail_after(10):  # round_timeout is 600 s: "at once" is anything far below
            call = session.call("tools/call", {"name": "fails_after_asking", "arguments": {}})
            async with call as messages:
                request = await _first_request(messages)
                await session.post(junk.replace(b"ID", str(request["id"]).encode()))
                response = await anext(messages)
        error = response["error"]
        assert error["code"] == -32602
        assert "the client's answer to the elicitation 'Name?'" in error["message"]
        assert reason in error["message"]
        # The session keeps serving.
        assert (await session.call_tool("counts", {"count": 1}))["result"]["content"][0][
            "text"
        ] == "n=2"


@pytest.mark.parametrize(("junk", "reason"), JUNK[:4])
def test_a_junk_legacy_answer_over_stdio_fails_the_round_at_once(junk: bytes, reason: str) -> None:
    server = stdio_server()
    try:
        initialize(server)
        send(
            server,
            {
                "jsonrpc": "2.0",
                "id": 2,
                "method": "tools/call",
                "params": {"name": "fails_after_asking", "arguments": {}},
            },
        )
        request = receive(server)
        assert request["method"] == "elicitation/create"
        send(server, junk.replace(b"ID", str(request["id"]).encode()))
        response = receive(server)  # at once: round_timeout (600 s) would hang the test
        assert response["id"] == 2
        assert response["error"]["code"] == -32602
        assert "the client's answer to the elicitation 'Name?'" in response["error"]["message"]
        assert reason in response["error"]["message"]
    finally:
        code, stderr = close(server)
    assert code == 0, stderr


async def test_idle_legacy_sessions_close_and_their_number_is_capped(
    nursery: trio.Nursery,
) -> None:
    serve = partial(apps.app.serve_http, "127.0.0.1", 0, session_idle_timeout=0.5, max_sessions=1)
    url = await nursery.start(serve)
    async with legacy_session(url) as session:
        with pytest.raises(AssertionError, match="503"):
            async with legacy_session(url):
                pass  # a second session is over the cap
        await trio.sleep(1.5)  # idle past the timeout
        response = await session.post({"jsonrpc": "2.0", "id": 5, "method": "tools/list"})
        assert response.status_code == 404  # the session is gone...
    async with legacy_session(url) as again:  # ...and its place is free
        assert (await again.call_tool("counts", {"count": 3}))["result"]["content"][0][
            "text"
        ] == "n=6"


async def test_the_default_session_knobs_are_not_the_sdk_defaults() -> None:
    from mcp.server.streamable_http_manager import (
        DEFAULT_MAX_SESSIONS,
        DEFAULT_SESSION_IDLE_TIMEOUT,
    )

    from mrtr_trio.mcp import _transports

    assert _transports.SESSION_IDLE_TIMEOUT < DEFAULT_SESSION_IDLE_TIMEOUT
    assert _transports.MAX_SESSIONS < DEFAULT_MAX_SESSIONS


def test_a_stdio_client_that_stops_reading_ends_the_server_quietly(tmp_path: Path) -> None:
    marker = tmp_path / "closed"
    server = stdio_server()
    try:
        initialize(server)
        assert server.stdout is not None
        server.stdout.close()  # the client stops reading; stdin stays open
        call = {"name": "marks_its_end", "arguments": {"path": str(marker)}}
        send(server, {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": call})
        code = server.wait(timeout=20)  # the server notices the broken pipe by itself
    finally:
        server.kill()
        code, stderr = close(server)
    assert code == 0, stderr
    assert "Traceback" not in stderr and "BrokenPipeError" not in stderr, stderr
    assert marker.read_text() == "closed"  # the flow was closed on the way out


def test_stray_prints_and_stdin_reads_in_a_handler_miss_the_stdio_wire() -> None:
    server = stdio_server()  # every stream a pipe: read and written without threads
    try:
        initialize(server)
        call = {"name": "stray_output", "arguments": {}}
        send(server, {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": call})
        response = receive(server)  # the next line on the wire is the result, not a print
        assert response["id"] == 2
        assert response["result"]["content"][0]["text"] == "stdin gave b''"  # the null device
        send(server, {"jsonrpc": "2.0", "id": 3, "method": "tools/list"})
        assert receive(server)["id"] == 3  # the wire still works both ways
    finally:
        code, stderr = close(server)
    assert code == 0, stderr
    assert "stray print" in stderr and "stray write" in stderr


def test_stdio_serves_files_too(tmp_path: Path) -> None:
    """Stdin and stdout that are not pipes (files here) are read in a thread and written by
    the SDK's own writer."""
    requests, responses = tmp_path / "requests.jsonl", tmp_path / "responses.jsonl"
    requests.write_text(json.dumps(INITIALIZE) + "\n")
    with requests.open("rb") as stdin, responses.open("wb") as stdout:
        done = subprocess.run(
            [sys.executable, "-m", "mrtr_trio._cli", "serve", f"{APP_FILE}:app"],
            stdin=stdin,
            stdout=stdout,
            stderr=subprocess.PIPE,
            timeout=60,
            check=False,
        )
    assert done.returncode == 0, done.stderr
    (line,) = responses.read_text().splitlines()
    assert json.loads(line)["result"]["serverInfo"]["name"] == "interop"
