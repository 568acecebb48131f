"""Junk answers over MCP, in both eras (issue 9's junk suite): wrong kinds, wrong types, huge,
deep, unknown actions, schema-invalid. A flow never completes on invalid data, the server never
crashes, and it keeps serving.

Modern answers go as ``inputResponses`` of a raw 2026-07-28 retry; legacy answers as the raw
JSON-RPC response to the server's request on a 2025-11-25 session. An answer is either refused
(-32602 naming the request) or, when only the requested schema is unmet, asked again.
"""

from __future__ import annotations

import json
import logging
from typing import Any

import pytest
import trio
from mcp import Client

from . import apps
from .clients import CALLBACKS, text_of
from .raw import legacy_session
from .test_transports import post

DEEP: Any = "x"
for _ in range(500):  # deeper than any JSON parser on the way accepts
    DEEP = [DEEP]
HUGE = "x" * (3 * 1024 * 1024)
TEXT = {"type": "text", "text": "hi"}

#: (tool, junk answer, "refused" or "asked again")
JUNK: list[Any] = [
    # elicitation (tool echo_name asks {"name": string, required})
    ("echo_name", 5, "refused"),
    ("echo_name", "accept", "refused"),
    ("echo_name", None, "refused"),
    ("echo_name", [], "refused"),
    ("echo_name", {}, "refused"),
    ("echo_name", {"action": "maybe"}, "refused"),
    ("echo_name", {"action": 1}, "refused"),
    ("echo_name", {"action": None, "content": {"name": "x"}}, "refused"),
    ("echo_name", {"action": "accept"}, "refused"),
    ("echo_name", {"action": "accept", "content": "x"}, "refused"),
    ("echo_name", {"action": "accept", "content": {"name": {"first": "x"}}}, "refused"),
    ("echo_name", {"action": "accept", "content": {"name": DEEP}}, "refused"),
    ("echo_name", {"action": "accept", "content": {"name": [1, 2]}}, "refused"),
    ("echo_name", {"action": "accept", "content": {"name": 5}}, "asked again"),
    ("echo_name", {"action": "accept", "content": {"name": True}}, "asked again"),
    ("echo_name", {"action": "accept", "content": {}}, "asked again"),
    ("echo_name", {"action": "accept", "content": {"nom": "x" * 100_000}}, "asked again"),
    ("echo_name", {"action": "accept", "content": {"name": 1, "pad": HUGE}}, "asked again"),
    ("echo_name", {"role": "assistant", "content": TEXT, "model": "m"}, "refused"),  # wrong kind
    ("echo_name", {"roots": []}, "refused"),
    # sampling (tool needs_sampling)
    (
        "needs_sampling",
        {"role": "assistant", "content": {"type": "text", "text": 5}, "model": "m"},
        "refused",
    ),
    (
        "needs_sampling",
        {"role": "assistant", "content": {"type": "image"}, "model": "m"},
        "refused",
    ),
    ("needs_sampling", {"role": "assistant", "content": {"type": "x"}, "model": "m"}, "refused"),
    ("needs_sampling", {"role": "assistant", "content": [], "model": "m"}, "refused"),
    ("needs_sampling", {"role": "assistant", "content": [TEXT, 5], "model": "m"}, "refused"),
    ("needs_sampling", {"role": "robot", "content": TEXT, "model": "m"}, "refused"),
    ("needs_sampling", {"role": "assistant", "content": TEXT}, "refused"),
    ("needs_sampling", {"role": "assistant", "content": TEXT, "model": 7}, "refused"),
    (
        "needs_sampling",
        {"role": "assistant", "content": TEXT, "model": "m", "stopReason": 3},
        "refused",
    ),
    (
        "needs_sampling",
        {"role": "assistant", "content": {"type": "text", "text": DEEP}, "model": "m"},
        "refused",
    ),
    ("needs_sampling", {"action": "accept", "content": {"name": "x"}}, "refused"),  # wrong kind
    # roots (tool echo_roots)
    ("echo_roots", {"roots": "file:///x"}, "refused"),
    ("echo_roots", {"roots": [5]}, "refused"),
    ("echo_roots", {"roots": [{"name": "no uri"}]}, "refused"),
    ("echo_roots", {"roots": [{"uri": 5}]}, "refused"),
    ("echo_roots", {"roots": [{"uri": "not a uri"}]}, "refused"),  # roots are file:// URIs
    ("echo_roots", {"roots": [{"uri": "file:///x", "name": 5}]}, "refused"),
    ("echo_roots", {"action": "decline"}, "refused"),  # wrong kind
]
IDS = [f"{tool}-{i}" for i, (tool, _, _) in enumerate(JUNK)]
#: How an error names each tool's request.
ASKED = {
    "echo_name": "the elicitation 'Name?'",
    "needs_sampling": "the sampling request (sampling/createMessage)",
    "echo_roots": "the roots request (roots/list)",
}

#: Malformed legacy answers, and what the error must say of the field (mrtr_trio checks a
#: legacy answer itself, as it checks a 2026-07-28 one: the same words in both eras).
FIELDS = [
    ("echo_name", {}, "needs action accept, decline or cancel, got None"),
    (
        "echo_name",
        {"action": "accept", "content": {"name": {"first": "x"}}},
        "content 'name' must be a string, number, boolean or list of strings",
    ),
    ("echo_roots", {"roots": [{"name": "no uri"}]}, "roots[0] must be an object with a string uri"),
    ("needs_sampling", {"role": "assistant", "content": TEXT}, "needs a string model, got None"),
]


@pytest.fixture
async def url(nursery: trio.Nursery) -> str:
    return await nursery.start(apps.app.serve_http, "127.0.0.1", 0)


def _no_errors_logged(caplog: pytest.LogCaptureFixture) -> None:
    errors = [r for r in caplog.records if r.levelno >= logging.ERROR]
    assert not errors, [r.getMessage()[:200] for r in errors]


@pytest.mark.parametrize(("tool", "junk", "expected"), JUNK, ids=IDS)
async def test_junk_modern_answers_never_complete_a_flow(
    url: str, tool: str, junk: Any, expected: str, caplog: pytest.LogCaptureFixture
) -> None:
    call = {"name": tool, "arguments": {}}
    _, first = await post(url, "tools/call", call, tool)
    state = first["result"]["requestState"]
    retry = {**call, "requestState": state, "inputResponses": {"input-0": junk}}
    status, body = await post(url, "tools/call", retry, tool)
    if expected == "refused":
        assert status == 400, body
        if body["error"]["code"] != -32700:  # too deep to parse: the SDK refuses the request
            assert body["error"]["code"] == -32602
            assert "'input-0'" in body["error"]["message"]
    else:
        assert status == 200
        assert body["result"]["resultType"] == "input_required", body
        assert set(body["result"]["inputRequests"]) == {"input-0"}
    _no_errors_logged(caplog)


@pytest.mark.parametrize(("tool", "junk", "expected"), JUNK, ids=IDS)
async def test_junk_legacy_answers_never_complete_a_flow(
    url: str, tool: str, junk: Any, expected: str, caplog: pytest.LogCaptureFixture
) -> None:
    async with legacy_session(url) as session:
        with trio.fail_after(20):
            async with session.call("tools/call", {"name": tool, "arguments": {}}) as messages:
                request = await anext(messages)
                assert "method" in request
                body = json.dumps({"jsonrpc": "2.0", "id": request["id"], "result": junk})
                await session.post(body.encode())
                reply = await anext(messages)
            if expected == "refused":
                assert "error" in reply, reply
                assert reply["error"]["code"] == -32602
                # Named by what it asked: a legacy client never saw the key 'input-0'.
                assert ASKED[tool] in reply["error"]["message"], reply
            else:
                assert reply.get("method") == request["method"], reply  # asked again
                assert reply["params"]["requestedSchema"] == request["params"]["requestedSchema"]
                assert reply["params"]["message"].startswith(request["params"]["message"])
            # The connection dropped mid-round above (for "asked again"); the session serves on.
            done = await session.call_tool("counts", {"count": 1})
            assert done["result"]["content"][0]["text"] == "n=2"
    _no_errors_logged(caplog)


async def test_the_server_keeps_serving_after_junk_in_both_eras(url: str) -> None:
    for tool, junk, _ in JUNK[:: max(1, len(JUNK) // 8)]:
        call = {"name": tool, "arguments": {}}
        _, first = await post(url, "tools/call", call, tool)
        retry = {
            **call,
            "requestState": first["result"]["requestState"],
            "inputResponses": {"input-0": junk},
        }
        await post(url, "tools/call", retry, tool)
    for mode in ("legacy", "2026-07-28"):
        async with Client(url, mode=mode, **CALLBACKS) as client:
            result = await client.call_tool("deploy", {"service": "api", "env": "prod"})
            assert text_of(result) == "Deployed api to prod (1 roots): Paris"
            named = await client.call_tool("echo_name", {})
            assert text_of(named) == "hello Alice"


@pytest.mark.parametrize(("tool", "junk", "field"), FIELDS)
async def test_a_malformed_legacy_answer_names_the_request_and_the_field(
    url: str, tool: str, junk: Any, field: str
) -> None:
    async with legacy_session(url) as session:
        with trio.fail_after(20):
            async with session.call("tools/call", {"name": tool, "arguments": {}}) as messages:
                request = await anext(messages)
                body = json.dumps({"jsonrpc": "2.0", "id": request["id"], "result": junk})
                await session.post(body.encode())
                reply = await anext(messages)
    message = reply["error"]["message"]
    assert message.startswith(f"the client's answer to {ASKED[tool]} is malformed: "), message
    assert field in message and "input-0" not in message, message
