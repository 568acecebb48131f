"""mrtr_trio handlers hosted by FastMCP (`mrtr_trio.fastmcp`) and by the SDK's MCPServer
(`mrtr_trio.mcpserver`): each flow asks the same things and ends the same way as on an App, in
both eras, and what only a hosting framework can get wrong (its seal around our token, its way
with errors, its principal) is checked here.

In-process servers run on the test's loop: trio, and for the tests that take `anyio_backend`
asyncio too (App only on trio). tests/test_fastmcp_processes.py serves the same handlers from
real FastMCP and MCPServer processes on asyncio.
"""

from __future__ import annotations

import json
from typing import Any

import httpx2
import mcp_types as types
import pytest
import trio
from fastmcp import FastMCP
from fastmcp.server.auth.providers.jwt import StaticTokenVerifier
from mcp import Client, MCPError
from mcp.client.streamable_http import streamable_http_client
from mcp.server.auth.settings import AuthSettings
from mcp.server.mcpserver import MCPServer
from mcp.server.request_state import AESGCMRequestStateCodec, RequestStateSecurity

import mrtr_trio.fastmcp
import mrtr_trio.mcpserver
from mrtr_trio import Context, Runtime, done, elicit
from mrtr_trio.mcp._host import bind_bytes
from mrtr_trio.mcp._transports import serve_http
from mrtr_trio.testing import assert_eras_agree

from . import fastmcp_app, flows
from .hosts import Answers, call_with_mcp_client, free_port
from .loops import LOOPS

KEY = b"\x11" * 32
CALLBACKS = Answers().mcp_callbacks()
CALLS: list[tuple[str, str, dict[str, Any]]] = [
    ("tool", "single_ask", {"who": "Ada"}),
    ("tool", "batch_of_three", {}),
    ("tool", "wizard", {"title": "Order"}),
    ("tool", "decline_or_cancel", {}),
    ("tool", "with_pause", {"n": 2}),
    ("tool", "return_confirm", {"action": "ship"}),
    ("tool", "return_chunked_sum", {"numbers": [1, 2, 3, 4, 5]}),
    ("tool", "asks_everything", {"topic": "jazz"}),
    ("tool", "wizard", {"title": 3}),  # invalid arguments: a tool execution error
    ("prompt", fastmcp_app.CONFORMANCE_PROMPT, {}),
]
RESOURCE_CALL = ("resource", "test://shelf", {})
#: Flows that ask a batch: a legacy session asks its requests concurrently.
CONCURRENT = {"batch_of_three"}


#: Each host under each loop it serves on (App serves on trio only).
HOSTS_AND_LOOPS = pytest.mark.parametrize(
    ("host", "anyio_backend"),
    [("app", "trio")] + [(host, loop) for host in ("fastmcp", "mcpserver") for loop in LOOPS],
)


def in_process(host: str) -> Any:
    """What `mcp.Client` talks to in-process for each host."""
    if host == "app":
        return fastmcp_app.app.server
    if host == "fastmcp":
        return fastmcp_app.fastmcp_server._mcp_server
    return fastmcp_app.mcpserver


def canonical(value: Any) -> str:
    return json.dumps(value, sort_keys=True)


@pytest.mark.parametrize("call", [*CALLS, RESOURCE_CALL], ids=lambda c: f"{c[0]}-{c[1]}")
async def test_each_flow_is_the_same_on_every_host_in_both_eras(
    call: tuple[str, str, dict[str, Any]], anyio_backend: str
) -> None:
    """The testing kit's era-equivalence, across hosts: one call asks the client the same
    requests and ends with the same result whether App (the reference, on a legacy session),
    FastMCP or MCPServer serves it, on a legacy session or on 2026-07-28. Under asyncio, where
    App does not run, FastMCP's legacy transcript is the reference (equal to App's under
    trio)."""
    kind, name, arguments = call
    hosts = ["app"] if anyio_backend == "trio" else []
    hosts += ["fastmcp"] + (["mcpserver"] if kind != "resource" else [])
    seen = {}
    for host in hosts:
        for mode in ("legacy", "2026-07-28"):
            transcript, version = await call_with_mcp_client(
                in_process(host), mode, kind, name, arguments
            )
            assert version == ("2025-11-25" if mode == "legacy" else mode)
            seen[host, mode] = transcript
    reference = seen.pop((hosts[0], "legacy"))
    assert (
        reference.asked or name == "return_chunked_sum" or "invalid" in json.dumps(reference.result)
    )
    for where, transcript in seen.items():
        if name in CONCURRENT:  # a legacy batch is asked concurrently: in any order
            assert sorted(map(canonical, transcript.asked)) == sorted(
                map(canonical, reference.asked)
            ), where
        else:
            assert transcript.asked == reference.asked, where
        if kind == "tool" and name == "wizard" and arguments["title"] == 3:
            # Each framework words its own argument errors; what matters is that it is one.
            assert transcript.result["isError"] is True, (where, transcript.result)
            continue
        assert transcript.result == reference.result, where


@pytest.mark.parametrize("name", [name for name, _ in fastmcp_app.FLOWS])
async def test_each_served_flow_passes_the_kits_era_check(name: str) -> None:
    handler = dict(fastmcp_app.FLOWS)[name]
    [arguments, *_] = [c[2] for c in CALLS if c[1] == name]
    await assert_eras_agree(handler, arguments, flows.happy_answer, runtime=Runtime([KEY]))


# ------------------------------------------------------------------------ the seal around ours


def _sealed_server(security: RequestStateSecurity) -> FastMCP[Any]:
    server: FastMCP[Any] = FastMCP("sealed", request_state_security=security)
    mrtr_trio.fastmcp.tool(server, "wizard", runtime=Runtime([KEY]))(flows.wizard)
    return server


async def _first_round(
    target: Any, name: str, arguments: dict[str, Any]
) -> types.InputRequiredResult:
    async with Client(target, mode="2026-07-28", **Answers().mcp_callbacks()) as client:
        result = await client.session.call_tool(name, arguments, allow_input_required=True)
    assert isinstance(result, types.InputRequiredResult)
    return result


async def test_our_token_travels_inside_fastmcps_seal_and_what_that_costs() -> None:
    """FastMCP's boundary seals mrtr_trio's token: opened with the boundary's key, its claims
    carry our token verbatim, which verifies for the same call. The nesting's size cost is
    printed (docs/fastmcp.md quotes it) and bounded."""
    seal_key = b"\x22" * 32
    server = _sealed_server(RequestStateSecurity(keys=[seal_key]))
    arguments = {"title": "Order"}
    sealed = await _first_round(server._mcp_server, "wizard", arguments)
    app = fastmcp_app.app
    ours = await _first_round(app.server, "wizard", arguments)
    assert sealed.request_state is not None and ours.request_state is not None
    assert sealed.request_state.startswith("v1.")  # the SDK boundary's AES-GCM envelope
    claims = json.loads(AESGCMRequestStateCodec([seal_key]).unseal(sealed.request_state))
    inner = claims["s"]
    assert claims["t"] == "wizard" and claims["m"] == "tools/call"
    bind = bind_bytes("tools/call", "wizard", arguments, "sealed", None)
    info = Runtime([KEY]).inspect(flows.wizard, arguments, inner, bind=bind)
    assert info.pending_keys == ("input-0",)
    # The same round's token minted by App (another audience: another tag, same size).
    assert abs(len(inner) - len(ours.request_state)) <= 2
    overhead = len(sealed.request_state) - len(inner)
    print(
        f"\nrequestState after one round: App {len(ours.request_state)} chars, "
        f"mrtr_trio's inside FastMCP's seal {len(inner)}, sealed {len(sealed.request_state)} "
        f"(+{overhead}, x{len(sealed.request_state) / len(inner):.2f})"
    )
    assert 150 <= overhead <= 400, overhead


async def test_a_token_verified_by_the_seal_still_needs_our_signature() -> None:
    """Two servers sharing the boundary's key but not mrtr_trio's: a token the first minted
    passes the second's seal (same name, same audience) and is refused by our signature."""
    seal = RequestStateSecurity(keys=[b"\x33" * 32])
    first = _sealed_server(seal)
    second: FastMCP[Any] = FastMCP("sealed", request_state_security=seal)
    mrtr_trio.fastmcp.tool(second, "wizard", runtime=Runtime([b"\x44" * 32]))(flows.wizard)
    arguments = {"title": "Order"}
    state = (await _first_round(first._mcp_server, "wizard", arguments)).request_state
    answer = {"input-0": {"action": "accept", "content": {"name": "Ada"}}}
    async with Client(second._mcp_server, mode="2026-07-28", **CALLBACKS) as client:
        with pytest.raises(MCPError) as raised:
            await client.session.call_tool(
                "wizard", arguments, input_responses=answer, request_state=state,
                allow_input_required=True,
            )  # fmt: skip
    assert raised.value.error.code == -32602
    assert raised.value.error.message == "Invalid or expired requestState"


# ------------------------------------------------------------------------- errors, as on App


@HOSTS_AND_LOOPS
async def test_a_malformed_answer_is_a_protocol_error_on_every_host(
    host: str, anyio_backend: str
) -> None:
    """A malformed answer is a JSON-RPC -32602 (DESIGN §3), never an `isError` result, though
    FastMCP makes an `isError` result of anything else a tool raises."""
    target = in_process(host)
    first = await _first_round(target, "single_ask", {"who": "Ada"})
    async with Client(target, mode="2026-07-28", **CALLBACKS) as client:
        with pytest.raises(MCPError) as raised:
            await client.session.call_tool(
                "single_ask", {"who": "Ada"}, request_state=first.request_state,
                input_responses={"input-0": {"action": "accept"}},  # a form accept without content
                allow_input_required=True,
            )  # fmt: skip
    assert raised.value.error.code == -32602, raised.value.error
    assert "content" in raised.value.error.message, raised.value.error.message


@HOSTS_AND_LOOPS
async def test_a_malformed_answer_to_a_prompt_is_a_protocol_error_on_every_host(
    host: str, anyio_backend: str
) -> None:
    """A prompt's flow that fails on a malformed answer answers the -32602 it stands for
    (DESIGN §3) on every host, not the internal error a framework makes of what a prompt
    raises."""
    prompt = fastmcp_app.CONFORMANCE_PROMPT
    async with Client(in_process(host), mode="2026-07-28", **CALLBACKS) as client:
        first = await client.session.get_prompt(prompt, {}, allow_input_required=True)
        assert isinstance(first, types.InputRequiredResult)
        (key,) = first.input_requests
        with pytest.raises(MCPError) as raised:
            await client.session.get_prompt(
                prompt, {}, request_state=first.request_state,
                input_responses={key: {"action": "accept"}},  # a form accept without content
                allow_input_required=True,
            )  # fmt: skip
    assert raised.value.error.code == -32602, raised.value.error
    assert "content" in raised.value.error.message, raised.value.error.message


@pytest.mark.parametrize(
    ("host", "anyio_backend"), [("app", "trio")] + [("fastmcp", loop) for loop in LOOPS]
)
async def test_a_malformed_answer_to_a_resource_is_a_protocol_error(
    host: str, anyio_backend: str
) -> None:
    """As for a prompt, on the hosts that serve mrtr_trio resources."""
    uri = RESOURCE_CALL[1]
    async with Client(in_process(host), mode="2026-07-28", **CALLBACKS) as client:
        first = await client.session.read_resource(uri, allow_input_required=True)
        assert isinstance(first, types.InputRequiredResult)
        (key,) = first.input_requests
        with pytest.raises(MCPError) as raised:
            await client.session.read_resource(
                uri, request_state=first.request_state,
                input_responses={key: {"action": "accept"}},  # a form accept without content
                allow_input_required=True,
            )  # fmt: skip
    assert raised.value.error.code == -32602, raised.value.error
    assert "content" in raised.value.error.message, raised.value.error.message


async def test_a_failing_handler_is_a_tool_error_and_a_failing_prompt_a_jsonrpc_error(
    anyio_backend: str,
) -> None:
    server: FastMCP[Any] = FastMCP("failing")
    runtime = Runtime([KEY])

    async def broken(ctx: Context, n: int):
        answer = yield elicit("Go?", flows.CONFIRM)
        yield done(1 // (n - n) if answer.accepted else 0)

    mrtr_trio.fastmcp.tool(server, runtime=runtime)(broken)
    mrtr_trio.fastmcp.prompt(server, runtime=runtime)(broken)
    answers = {"input-0": {"action": "accept", "content": {"confirm": True}}}
    async with Client(server._mcp_server, mode="2026-07-28", **CALLBACKS) as client:
        result = await client.session.call_tool(
            "broken", {"n": 1}, input_responses=answers, allow_input_required=True
        )
        assert isinstance(result, types.CallToolResult) and result.is_error
        assert "by zero" in result.content[0].text  # type: ignore[union-attr]
        with pytest.raises(MCPError) as raised:
            await client.session.get_prompt(
                "broken", {"n": "1"}, input_responses=answers, allow_input_required=True
            )
    assert raised.value.error.code == -32603


# ---------------------------------------------------------------------------- registration


def test_registration_is_checked() -> None:
    server: FastMCP[Any] = FastMCP("checks")
    with pytest.raises(TypeError, match="with parentheses"):
        mrtr_trio.fastmcp.tool(server, flows.single_ask)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="FastMCP server first"):
        mrtr_trio.fastmcp.tool(MCPServer("other"))
    with pytest.raises(TypeError, match="MCPServer first"):
        mrtr_trio.mcpserver.tool(server)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="plain URI"):
        mrtr_trio.fastmcp.resource(server, "test://items/{id}")
    with pytest.raises(TypeError, match="async def"):
        mrtr_trio.fastmcp.tool(server)(lambda: None)


def test_one_runtime_per_server_by_default(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MRTR_TRIO_KEYS", (b"\x55" * 32).hex())
    server: FastMCP[Any] = FastMCP("shared")
    mrtr_trio.fastmcp.tool(server, "a")(flows.single_ask)
    mrtr_trio.fastmcp.tool(server, "b")(flows.wizard)
    runtime = mrtr_trio.fastmcp.runtime_of(server)
    assert runtime.keys == (b"\x55" * 32,)
    assert runtime is mrtr_trio.fastmcp.runtime_of(server)
    assert runtime is not mrtr_trio.fastmcp.runtime_of(FastMCP("other"))


# ------------------------------------------------------------------------------ the principal


async def test_a_token_is_bound_to_fastmcps_authenticated_principal(
    nursery: trio.Nursery,
) -> None:
    """Over FastMCP's own HTTP app with its token verifier, a token minted for one user does not
    verify for another. The boundary's principal binding is switched off here, so that the
    refusal can only be mrtr_trio's (its `bind`)."""
    verifier = StaticTokenVerifier(
        {
            "token-a": {"client_id": "client", "sub": "alice", "scopes": []},
            "token-b": {"client_id": "client", "sub": "bob", "scopes": []},
        }
    )
    security = RequestStateSecurity(keys=[b"\x66" * 32], bind_principal=None)
    server: FastMCP[Any] = FastMCP("guarded", auth=verifier, request_state_security=security)
    mrtr_trio.fastmcp.tool(server, "single_ask", runtime=Runtime([KEY]))(flows.single_ask)
    url = await nursery.start(serve_http, server.http_app(path="/mcp"), "127.0.0.1", 0, "/mcp")
    await _refused_for_another_principal(url)


async def _refused_for_another_principal(url: str) -> None:
    """Alice's token continues Alice's flow; presented by Bob, it is refused."""

    async def call(token: str, **retry: Any) -> Any:
        headers = {"Authorization": f"Bearer {token}"}
        with trio.fail_after(30):
            async with (
                httpx2.AsyncClient(headers=headers, timeout=10) as http,
                Client(
                    streamable_http_client(url, http_client=http), mode="2026-07-28", **CALLBACKS
                ) as client,
            ):
                try:
                    return await client.session.call_tool(
                        "single_ask", {"who": "Ada"}, allow_input_required=True, **retry
                    )
                except MCPError as error:  # inside: the client's task group would wrap it
                    return error

    first = await call("token-a")
    assert isinstance(first, types.InputRequiredResult)
    answer = {"input-0": {"action": "accept", "content": {"name": "Alice"}}}
    retry = {"request_state": first.request_state, "input_responses": answer}
    done_for_alice = await call("token-a", **retry)
    assert done_for_alice.content[0].text == "Hello, Alice!"
    refused = await call("token-b", **retry)
    assert isinstance(refused, MCPError), refused
    assert refused.error.code == -32602
    assert refused.error.message == "Invalid or expired requestState"


# ------------------------------------------------------------------- progress and logs, live


@HOSTS_AND_LOOPS
async def test_a_live_flow_reports_progress_and_logs_on_every_host(
    host: str, anyio_backend: str
) -> None:
    progress: list[tuple[float, float | None, str | None]] = []
    logs: list[Any] = []

    async def on_progress(value: float, total: float | None, message: str | None) -> None:
        progress.append((value, total, message))

    async def on_log(params: types.LoggingMessageNotificationParams) -> None:
        logs.append(params.data)

    async with Client(
        in_process(host), mode="legacy", logging_callback=on_log, **CALLBACKS
    ) as client:
        result = await client.call_tool(
            "asks_everything", {"topic": "jazz"}, progress_callback=on_progress
        )
    assert result.content[0].text == "Alice|Paris|file:///work"  # type: ignore[union-attr]
    assert progress == [(1, 3, "asking for a name"), (2, 3, "listing roots")]
    assert logs == ["got a name for jazz"]


async def test_a_masking_fastmcp_server_masks_its_mrtr_trio_tools_too(anyio_backend: str) -> None:
    """`FastMCP(mask_error_details=True)` hides its own tools' exceptions: an mrtr_trio tool on
    it answers with an error id, not the exception's text (unless told otherwise)."""
    server: FastMCP[Any] = FastMCP("masked", mask_error_details=True)

    async def leaky(ctx: Context):
        raise RuntimeError("db password is hunter2")
        yield  # a generator

    mrtr_trio.fastmcp.tool(server, runtime=Runtime([KEY]))(leaky)
    mrtr_trio.fastmcp.tool(server, "frank", runtime=Runtime([KEY]), mask_errors=False)(leaky)
    async with Client(server._mcp_server, mode="2026-07-28") as client:
        masked = await client.call_tool("leaky", {})
        frank = await client.call_tool("frank", {})
    assert masked.is_error and frank.is_error
    assert "hunter2" not in masked.content[0].text  # type: ignore[union-attr]
    assert "error id" in masked.content[0].text  # type: ignore[union-attr]
    assert "hunter2" in frank.content[0].text  # type: ignore[union-attr]


async def test_a_token_is_bound_to_mcpservers_authenticated_principal(
    nursery: trio.Nursery,
) -> None:
    """The same over MCPServer's own HTTP app with its token verifier (the SDK's auth)."""
    port = free_port()
    url = f"http://127.0.0.1:{port}/mcp"
    verifier = StaticTokenVerifier(
        {
            "token-a": {"client_id": "client", "sub": "alice", "scopes": []},
            "token-b": {"client_id": "client", "sub": "bob", "scopes": []},
        }
    )
    server = MCPServer(
        "guarded",
        token_verifier=verifier,
        auth=AuthSettings(
            issuer_url="https://issuer.invalid",
            resource_server_url=url,
            validate_token_resource=False,  # the static verifier knows no audience
        ),
        request_state_security=RequestStateSecurity(keys=[b"\x66" * 32], bind_principal=None),
    )
    mrtr_trio.mcpserver.tool(server, "single_ask", runtime=Runtime([KEY]))(flows.single_ask)
    await nursery.start(serve_http, server.streamable_http_app(), "127.0.0.1", port, "/mcp")
    await _refused_for_another_principal(url)
