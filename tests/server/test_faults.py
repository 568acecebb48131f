"""Faults (issue 9's fault suite): a client that disconnects mid-round, on each transport and
era; a server restarted between modern rounds, with the same key (the flow continues) and with
another (-32602); a server process killed mid-round."""

from __future__ import annotations

import secrets
import signal
from pathlib import Path
from typing import Any

import httpx2
import pytest
import trio
from mcp import Client
from mcp.shared.exceptions import MCPError

from . import apps
from .clients import CALLBACKS
from .processes import close, http_server, initialize, receive, send, stdio_server
from .test_transports import MODERN_META, post

YES = {"action": "accept", "content": {"confirm": True}}


# ------------------------------------------------------------- disconnects mid-round


# A legacy HTTP client that drops its connection: tests/server/test_sessions.py.


async def test_http_modern_client_disconnect_mid_round_closes_the_flow(
    nursery: trio.Nursery,
) -> None:
    url = await nursery.start(apps.app.serve_http, "127.0.0.1", 0)
    apps.reset_accounting()
    call = {"name": "tracked", "arguments": {"tag": "m"}}
    _, first = await post(url, "tools/call", call, "tracked")
    state = first["result"]["requestState"]
    apps.reset_accounting()  # round 1's generator is closed; count round 2's replay
    retry = {**call, "requestState": state, "inputResponses": {"input-0": YES}}
    with trio.move_on_after(0.3) as scope:  # the round waits in a step; the client leaves
        await post(url, "tools/call", retry, "tracked")
    assert scope.cancelled_caught
    with trio.fail_after(5):  # (a loaded machine; an unclosed flow never finishes)
        await apps.all_closed()
    assert len(apps.STARTED) == 1


@pytest.mark.parametrize("era", ["legacy", "modern"])
def test_stdio_client_disconnect_mid_round_closes_the_flow(era: str, tmp_path: Path) -> None:
    marker = tmp_path / "closed"
    server = stdio_server()
    try:
        if era == "legacy":
            initialize(server)
            call = {"name": "marks_its_end", "arguments": {"path": str(marker)}}
            send(server, {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": call})
            assert receive(server)["method"] == "elicitation/create"  # mid-round
        else:
            call = {
                "name": "waits_then_marks",
                "arguments": {"path": str(marker)},
                "_meta": MODERN_META,
            }
            send(server, {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": call})
            # The round is in its minute-long step; give the request a moment to start it.
            import time

            time.sleep(1)
    finally:
        code, stderr = close(server)  # stdin and stdout closed: the client is gone
    assert code == 0, stderr
    assert "Traceback" not in stderr, stderr
    assert marker.read_text() == "closed"


# ------------------------------------------------------------------------- restarts


async def _round(url: str, state: str | None = None, answers: Any = None) -> tuple[int, Any]:
    params: dict[str, Any] = {"name": "confirm_then_work", "arguments": {"job": "backup"}}
    if state is not None:
        params.update(requestState=state, inputResponses=answers)
    return await post(url, "tools/call", params, "confirm_then_work")


async def test_a_modern_flow_continues_on_a_restarted_server_with_the_same_key() -> None:
    key = secrets.token_bytes(32)
    with http_server(key) as before:
        _, first = await _round(before.url)
        state = first["result"]["requestState"]
    with http_server(key) as after:  # a new process, the same key
        status, done = await _round(after.url, state, {"input-0": YES})
        assert status == 200, done
        text = done["result"]["content"][0]["text"]
        assert text == f"backup: ran ({after.process.pid})"
    with http_server(secrets.token_bytes(32)) as other:  # another key
        status, refused = await _round(other.url, state, {"input-0": YES})
    assert status == 400
    assert refused["error"] == {
        "code": -32602,
        "message": "Invalid or expired requestState",
        "data": {"reason": "invalid_request_state"},
    }


async def test_a_modern_round_lost_with_its_killed_server_is_retried_on_another() -> None:
    key = secrets.token_bytes(32)
    with http_server(key, MRTR_TEST_STEP_DELAY="60") as doomed, http_server(key) as healthy:
        _, first = await _round(doomed.url)
        state = first["result"]["requestState"]
        async with trio.open_nursery() as nursery:

            async def kill_mid_round() -> None:
                await trio.sleep(1)  # the round is in its step
                doomed.process.send_signal(signal.SIGKILL)

            nursery.start_soon(kill_mid_round)
            with pytest.raises(httpx2.TransportError):
                await _round(doomed.url, state, {"input-0": YES})
        # The client retries the same request (same state, same answers) elsewhere.
        status, done = await _round(healthy.url, state, {"input-0": YES})
        assert status == 200, done
        assert done["result"]["content"][0]["text"] == f"backup: ran ({healthy.process.pid})"


async def test_a_legacy_client_learns_at_once_that_its_server_was_killed_mid_round() -> None:
    with http_server(secrets.token_bytes(32)) as served:

        async def elicit_then_kill(ctx: Any, params: Any) -> Any:
            served.process.send_signal(signal.SIGKILL)
            return await CALLBACKS["elicitation_callback"](ctx, params)

        callbacks = {**CALLBACKS, "elicitation_callback": elicit_then_kill}
        # The call fails with the transport's error instead of hanging until round_timeout.
        with trio.fail_after(20), pytest.raises(BaseExceptionGroup) as raised:
            async with Client(served.url, mode="legacy", **callbacks) as client:
                await client.call_tool("deploy", {"service": "api"})
        assert served.process.wait(timeout=5) == -signal.SIGKILL
    assert raised.group_contains(MCPError, match="Connection closed|stream ended", depth=2)
