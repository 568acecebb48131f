"""Pins for what mrtr_trio.mcp._sdk relies on in the ``mcp`` SDK (2.3) beyond its documented
handler API: if an upgrade changes one of these, this fails before the features do."""

from __future__ import annotations

import mcp_types as types
from mcp.server.lowlevel import Server
from mcp.shared.inbound import NAME_BEARING_METHODS, decode_header_value
from mcp_types.methods import SPEC_CLIENT_METHODS

from mrtr_trio.mcp._sdk import invalid_header_annotation


def test_tasks_methods_are_ours_to_route_and_check() -> None:
    # The SDK neither knows tasks/* (so registered handlers get them, others are -32601) ...
    assert not {m for m in SPEC_CLIENT_METHODS if m.startswith("tasks/")}
    # ... nor checks their Mcp-Name header, which mrtr_trio therefore does itself.
    assert not {m for m in NAME_BEARING_METHODS if m.startswith("tasks/")}


def test_header_values_decode_strictly() -> None:
    assert decode_header_value("=?base64?SGVsbG8=?=") == "Hello"
    assert decode_header_value("=?base64?SGVsbG8?=") is None  # bad padding
    assert decode_header_value("=?base64?SGVs!!!bG8=?=") is None  # not the alphabet
    assert decode_header_value("task-abc") == "task-abc"


def test_x_mcp_header_annotations_are_checked() -> None:
    good = {"type": "object", "properties": {"r": {"type": "string", "x-mcp-header": "Region"}}}
    assert invalid_header_annotation(good) is None
    bad = {"type": "object", "properties": {"r": {"type": "number", "x-mcp-header": "Region"}}}
    assert "integer/string/boolean" in (invalid_header_annotation(bad) or "")


def test_server_extensions_are_what_discover_advertises() -> None:
    server: Server = Server("pins")
    assert server.extensions == {}
    server.extensions["x.example/y"] = {}
    capabilities = server.get_capabilities()
    assert isinstance(capabilities, types.ServerCapabilities)
    assert capabilities.extensions == {"x.example/y": {}}


def test_the_session_ended_race_is_logged_where_mrtr_trio_filters_it() -> None:
    import inspect

    import mcp.server.streamable_http as transport

    from mrtr_trio.mcp._sdk import SDK_RACE_LOGGER, SDK_RACE_MESSAGE

    assert transport.logger.name == SDK_RACE_LOGGER
    assert f'logger.exception("{SDK_RACE_MESSAGE}")' in inspect.getsource(transport)


async def test_middleware_runs_first_with_the_raw_params() -> None:
    # mrtr_trio's requestState guard and inputResponses lift rely on Server.middleware (marked
    # provisional in mcp 2.3) running before params are validated, with ctx.params a dict.
    from typing import Any

    from mcp import Client

    from mrtr_trio.mcp._sdk import add_middleware

    seen: list[Any] = []

    async def record(ctx: Any, call_next: Any) -> Any:
        if ctx.method == "tools/call":
            seen.append(ctx.params)
        return await call_next(ctx)

    async def call_tool(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
        return types.CallToolResult(content=[])

    async def list_tools(ctx: Any, params: Any) -> types.ListToolsResult:
        return types.ListToolsResult(tools=[types.Tool(name="t", input_schema={"type": "object"})])

    server: Server[Any] = Server("pins", on_call_tool=call_tool, on_list_tools=list_tools)
    add_middleware(server, record)
    async with Client(server, mode="2026-07-28") as client:
        await client.call_tool("t", {"x": 1})
    assert len(seen) == 1 and isinstance(seen[0], dict) and seen[0]["arguments"] == {"x": 1}


def test_the_session_manager_keeps_its_sessions_where_session_slots_look() -> None:
    # mrtr_trio.mcp._slots counts open legacy sessions and ends unused ones through these.
    from mcp.server.streamable_http_manager import StreamableHTTPSessionManager

    manager = StreamableHTTPSessionManager(app=Server("pins"))
    assert manager._server_instances == {}
    assert callable(manager._discard_session)


async def test_a_session_asks_on_its_requests_own_back_channel_where_legacy_asker_sends() -> None:
    # mrtr_trio.mcp._sdk.send_related_request sends on `_request_outbound`: the channel the
    # SDK's typed send_request picks for a request related to the one being served.
    from mcp.server.session import ServerSession
    from mcp.shared.message import ServerMessageMetadata

    sent: list[tuple[str, object]] = []

    class Channel:
        async def send_raw_request(self, method: str, params: object, opts: object) -> object:
            sent.append((method, params))
            return {"roots": []}

    class Connection:
        protocol_version = "2025-11-25"

    channel = Channel()
    session = ServerSession(channel, Connection())  # type: ignore[arg-type]
    assert session._request_outbound is channel
    await session.send_request(
        types.ListRootsRequest(),
        types.ListRootsResult,
        metadata=ServerMessageMetadata(related_request_id=1),
    )
    assert sent == [("roots/list", None)]
