"""Real wires: the official mcp.Client over stdio pipes and over HTTP on loopback, with the
client under trio and under asyncio, in both eras."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path
from typing import Any

import httpx2
import pytest
import trio
from mcp import Client, StdioServerParameters

from . import apps
from .clients import CALLBACKS, text_of
from .processes import APP_FILE

MODES = ["legacy", "2026-07-28"]
EXPECTED = "Deployed api to prod (1 roots): Paris"
MODERN_HEADERS = {
    "Content-Type": "application/json",
    "Accept": "application/json, text/event-stream",
    "MCP-Protocol-Version": "2026-07-28",
}
MODERN_META = {
    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
    "io.modelcontextprotocol/clientCapabilities": {"elicitation": {}, "sampling": {}, "roots": {}},
}
#: A modern `server/discover` request, and its headers.
DISCOVER = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "server/discover",
    "params": {"_meta": MODERN_META},
}
DISCOVER_HEADERS = dict(MODERN_HEADERS, **{"Mcp-Method": "server/discover"})


def stdio_server() -> StdioServerParameters:
    return StdioServerParameters(
        command=sys.executable, args=["-m", "mrtr_trio._cli", "serve", f"{APP_FILE}:app"]
    )


async def deploy_over(target: Any, mode: str) -> str:
    async with Client(target, mode=mode, **CALLBACKS) as client:
        result = await client.call_tool("deploy", {"service": "api", "env": "prod"})
        return text_of(result)


@pytest.mark.parametrize("mode", MODES)
async def test_stdio_subprocess_with_a_trio_client(mode: str) -> None:
    with trio.fail_after(30):
        assert await deploy_over(stdio_server(), mode) == EXPECTED


def test_stdio_subprocess_with_an_asyncio_client() -> None:
    async def both() -> list[str]:
        return [await deploy_over(stdio_server(), mode) for mode in MODES]

    assert asyncio.run(asyncio.wait_for(both(), 60)) == [EXPECTED, EXPECTED]


@pytest.mark.parametrize("mode", MODES)
async def test_http_loopback_with_a_trio_client(nursery: trio.Nursery, mode: str) -> None:
    url = await nursery.start(apps.app.serve_http, "127.0.0.1", 0)
    assert url.startswith("http://127.0.0.1:") and url.endswith("/mcp")
    with trio.fail_after(30):
        assert await deploy_over(url, mode) == EXPECTED


async def test_http_loopback_with_an_asyncio_client(nursery: trio.Nursery) -> None:
    url = await nursery.start(apps.app.serve_http, "127.0.0.1", 0)

    async def both() -> list[str]:
        return [await deploy_over(url, mode) for mode in MODES]

    results = await trio.to_thread.run_sync(lambda: asyncio.run(asyncio.wait_for(both(), 30)))
    assert results == [EXPECTED, EXPECTED]


@pytest.mark.parametrize(("stateless", "json_response"), [(True, False), (False, True)])
async def test_legacy_without_a_back_channel_names_the_fix(
    nursery: trio.Nursery, stateless: bool, json_response: bool
) -> None:
    url = await nursery.start(
        lambda task_status: apps.app.serve_http(
            "127.0.0.1",
            0,
            stateless=stateless,
            json_response=json_response,
            task_status=task_status,
        )
    )
    with trio.fail_after(30):
        async with Client(url, mode="legacy", **CALLBACKS) as client:
            result = await client.call_tool("deploy", {"service": "api"})
            assert result.is_error
            assert "no back channel" in text_of(result)
            assert "stateless=False and json_response=False" in text_of(result)
            steps = await client.call_tool("only_steps", {"n": 4})  # steps need no channel
            assert text_of(steps) == "doubled=8"
        # The same server serves the same handler to a modern client.
        assert await deploy_over(url, "2026-07-28") == EXPECTED


async def test_http_client_disconnect_mid_round_closes_the_generator(nursery: trio.Nursery) -> None:
    url = await nursery.start(apps.app.serve_http, "127.0.0.1", 0)
    for mode in MODES:
        apps.reset_accounting()
        async with Client(url, mode=mode, **CALLBACKS) as client:
            with trio.move_on_after(1) as scope:
                await client.call_tool("tracked", {"tag": mode})
            assert scope.cancelled_caught
        with trio.fail_after(10):
            await apps.all_closed()
        assert apps.FINALISED == apps.STARTED, mode


# ---------------------------------------------------------------- raw modern HTTP


async def post(url: str, method: str, params: dict[str, Any], name: str | None = None) -> Any:
    headers = dict(MODERN_HEADERS, **{"Mcp-Method": method})
    if name is not None:
        headers["Mcp-Name"] = name
    body = {"jsonrpc": "2.0", "id": 7, "method": method, "params": {**params, "_meta": MODERN_META}}
    async with httpx2.AsyncClient(timeout=10) as http:
        response = await http.post(url, json=body, headers=headers)
    return response.status_code, response.json()


async def test_raw_modern_wire(nursery: trio.Nursery) -> None:
    url = await nursery.start(apps.app.serve_http, "127.0.0.1", 0)
    call = {"name": "deploy", "arguments": {"service": "api"}}

    status, body = await post(url, "tools/call", {**call, "requestState": 12345}, "deploy")
    assert status == 400
    assert body["error"] == {
        "code": -32602,
        "message": "Invalid or expired requestState",
        "data": {"reason": "invalid_request_state"},
    }

    status, body = await post(
        url, "tools/call", {**call, "inputResponses": {"input-0": 12345}}, "deploy"
    )
    assert status == 400 and body["error"]["code"] == -32602
    assert "'input-0'" in body["error"]["message"]

    extra = {"input-0": {"action": "accept", "content": {"confirm": False}}, "junk": {"x": 1}}
    status, body = await post(url, "tools/call", {**call, "inputResponses": extra}, "deploy")
    assert status == 200
    assert body["result"]["content"][0]["text"] == "Cancelled"  # unknown keys are ignored

    status, body = await post(url, "tools/call", call, "deploy")
    result = body["result"]
    assert result["resultType"] == "input_required"
    assert result["inputRequests"]["input-0"]["method"] == "elicitation/create"
    assert 40 < len(result["requestState"]) < 120
    assert result["_meta"]["io.modelcontextprotocol/serverInfo"]["name"] == "interop"

    for method in ("tools/list", "prompts/list", "resources/list", "resources/templates/list"):
        status, body = await post(url, method, {})
        assert status == 200
        assert body["result"]["resultType"] == "complete"
        assert isinstance(body["result"]["ttlMs"], int) and body["result"]["cacheScope"] in (
            "public",
            "private",
        )

    status, body = await post(url, "server/discover", {})
    assert "2026-07-28" in body["result"]["supportedVersions"]
    assert set(body["result"]["capabilities"]) >= {"tools", "prompts", "resources"}


async def test_only_loopback_hosts_are_accepted(nursery: trio.Nursery) -> None:
    url = await nursery.start(apps.app.serve_http, "127.0.0.1", 0)
    body, headers = DISCOVER, DISCOVER_HEADERS
    async with httpx2.AsyncClient(timeout=10) as http:
        evil = await http.post(url, json=body, headers={**headers, "Host": "evil.example.com"})
        good = await http.post(url, json=body, headers=headers)
    assert 400 <= evil.status_code < 500
    assert good.status_code == 200


async def test_asgi_apps_are_fresh_per_call_and_honour_allowed_hosts(nursery: trio.Nursery) -> None:
    from mrtr_trio.mcp._transports import serve_http

    # Two apps from one App served at once: each has its own session manager (one app
    # object served twice would fail its lifespan).
    loopback = await nursery.start(serve_http, apps.app.asgi(), "127.0.0.1", 0, "/mcp")
    public = await nursery.start(
        serve_http, apps.app.asgi(allowed_hosts=["example.com"]), "127.0.0.1", 0, "/mcp"
    )
    body, headers = DISCOVER, DISCOVER_HEADERS
    async with httpx2.AsyncClient(timeout=10) as http:
        named = await http.post(public, json=body, headers={**headers, "Host": "example.com"})
        foreign = await http.post(loopback, json=body, headers={**headers, "Host": "example.com"})
        local = await http.post(loopback, json=body, headers=headers)
    assert named.status_code == 200
    assert 400 <= foreign.status_code < 500
    assert local.status_code == 200


async def test_cli_rejects_a_target_that_is_not_an_app(tmp_path: Path) -> None:
    from mrtr_trio._cli import load_app

    script = tmp_path / "server.py"
    script.write_text("app = 42\n")
    with pytest.raises(SystemExit, match=r"is not a mrtr_trio\.mcp\.App"):
        load_app(f"{script}:app")
    with pytest.raises(SystemExit, match="no such file"):
        load_app(f"{tmp_path / 'missing.py'}:app")
