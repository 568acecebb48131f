"""Tool options: a verbatim input schema, header-mapped parameters (SEP-2243) and the task
policy, as registered and as served."""

from __future__ import annotations

from typing import Any, Literal

import httpx2
import pytest
import trio
from mcp import Client

from mrtr_trio import Context, Runtime
from mrtr_trio.mcp import App

SCHEMA = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "type": "object",
    "properties": {"name": {"type": "string"}},
    "if": {"required": ["name"]},
    "then": {"required": ["name"]},
    "additionalProperties": False,
}


def make_app() -> App:
    app = App("options", runtime=Runtime([b"k" * 32]))

    @app.tool(input_schema=SCHEMA)
    async def verbatim(ctx: Context, name: Literal["x", "y"] = "x") -> str:
        return name

    @app.tool(headers={"region": "Region", "count": "Count"})
    async def regional(ctx: Context, region: str, count: int = 1) -> str:
        return f"{region} x{count}"

    return app


async def test_schemas_are_served_as_given_and_annotated() -> None:
    async with Client(make_app().server, mode="2026-07-28") as client:
        tools = {t.name: t for t in (await client.list_tools()).tools}
    assert tools["verbatim"].input_schema == SCHEMA
    properties = tools["regional"].input_schema["properties"]
    assert properties["region"]["x-mcp-header"] == "Region"
    assert properties["count"]["x-mcp-header"] == "Count"
    # Arguments are still checked against the parameters: "z" is a string, as SCHEMA allows,
    # but not one of the Literal's values.
    async with Client(make_app().server, mode="2026-07-28") as client:
        result = await client.call_tool("verbatim", {"name": "z"})
        assert result.is_error
        result = await client.call_tool("verbatim", {"name": "y"})
        assert not result.is_error and result.content[0].text == "y"  # type: ignore[union-attr]


async def test_the_schema_is_built_once_and_never_handed_out_to_edit() -> None:
    app = make_app()
    lookup = app.server.get_tool_input_schema  # what the SDK asks before each tools/call
    assert lookup is not None
    assert lookup("regional") is lookup("regional")  # built at registration, not per call
    listed = await app._list_tools(None, None)
    for tool in listed.tools:  # whatever edits a tools/list result on its way out
        tool.input_schema["properties"].clear()
    assert lookup("regional")["properties"]["region"]["x-mcp-header"] == "Region"  # type: ignore[index]
    assert lookup("verbatim") == SCHEMA


async def post(url: str, arguments: dict[str, Any], headers: dict[str, str]) -> Any:
    body = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "tools/call",
        "params": {
            "name": "regional",
            "arguments": arguments,
            "_meta": {
                "io.modelcontextprotocol/protocolVersion": "2026-07-28",
                "io.modelcontextprotocol/clientCapabilities": {},
            },
        },
    }
    base = {
        "Accept": "application/json, text/event-stream",
        "MCP-Protocol-Version": "2026-07-28",
        "Mcp-Method": "tools/call",
        "Mcp-Name": "regional",
    }
    async with httpx2.AsyncClient(timeout=10) as http:
        response = await http.post(url, json=body, headers={**base, **headers})
    return response.status_code, response.json()


async def test_param_headers_must_match_the_body(nursery: trio.Nursery) -> None:
    url = await nursery.start(make_app().serve_http, "127.0.0.1", 0)
    status, body = await post(
        url, {"region": "eu", "count": 2}, {"Mcp-Param-Region": "eu", "Mcp-Param-Count": "2"}
    )
    assert status == 200 and body["result"]["content"][0]["text"] == "eu x2"
    status, body = await post(
        url, {"region": "Zürich"}, {"Mcp-Param-Region": "=?base64?WsO8cmljaA==?="}
    )
    assert status == 200 and body["result"]["content"][0]["text"] == "Zürich x1"
    for headers in ({"Mcp-Param-Region": "us"}, {}, {"Mcp-Param-Region": "=?base64?ZXU?="}):
        status, body = await post(url, {"region": "eu"}, headers)
        assert status == 400 and body["error"]["code"] == -32020, headers
    # The official client mirrors annotated arguments into the headers by itself.
    async with Client(url) as client:
        result = await client.call_tool("regional", {"region": "ap", "count": 3})
    assert result.content[0].text == "ap x3"  # type: ignore[union-attr]


def test_registration_rejects_what_clients_would_drop() -> None:
    app = App("bad", runtime=Runtime([b"k" * 32]))

    async def fn(ctx: Context, size: float, name: str) -> str:
        return ""

    with pytest.raises(TypeError, match="integer/string/boolean"):
        app.tool(name="a", headers={"size": "Size"})(fn)
    with pytest.raises(TypeError, match="not an RFC 9110 token"):
        app.tool(name="b", headers={"name": "Bad Name"})(fn)
    with pytest.raises(TypeError, match="not a parameter"):
        app.tool(name="c", headers={"missing": "M"})(fn)
    with pytest.raises(TypeError, match="type object"):
        app.tool(name="d", input_schema={"type": "string"})(fn)
    with pytest.raises(ValueError, match="task must be one of"):
        app.tool(name="e", task="sometimes")(fn)  # type: ignore[arg-type]
    assert app.server.extensions == {}
    app.tool(name="f", task="optional")(fn)
    assert app.server.extensions == {"io.modelcontextprotocol/tasks": {}}
