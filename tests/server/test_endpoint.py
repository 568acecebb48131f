"""The bare Streamable HTTP endpoint under `App.asgi()` (`mrtr_trio.mcp._endpoint`): what
Starlette's router gave it before, kept: its path with or without a trailing slash, after the
scope's `root_path`; 404 elsewhere; a lifespan that runs the SDK's session manager, and says
so when it cannot."""

from __future__ import annotations

from typing import Any

import httpx2
import pytest
import trio
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager

from mrtr_trio.mcp._endpoint import Endpoint
from mrtr_trio.mcp._transports import serve_http

from . import apps
from .test_transports import DISCOVER
from .test_transports import DISCOVER_HEADERS as HEADERS


async def test_the_path_is_served_with_or_without_a_slash_and_nothing_else_is(
    nursery: trio.Nursery,
) -> None:
    url = await nursery.start(serve_http, apps.app.asgi(path="/rpc"), "127.0.0.1", 0, "/rpc")
    async with httpx2.AsyncClient(timeout=10) as http:
        plain = await http.post(url, json=DISCOVER, headers=HEADERS)
        slash = await http.post(url + "/", json=DISCOVER, headers=HEADERS)
        elsewhere = await http.post(url.replace("/rpc", "/mcp"), json=DISCOVER, headers=HEADERS)
    assert plain.status_code == 200 and "result" in plain.json()
    assert slash.status_code == 200 and "result" in slash.json()
    assert elsewhere.status_code == 404 and elsewhere.text == "Not Found"


def test_the_path_is_matched_after_the_root_path() -> None:
    endpoint = Endpoint(StreamableHTTPSessionManager(app=apps.app.server), "/mcp")
    assert endpoint._matches({"path": "/api/mcp", "root_path": "/api"})
    assert endpoint._matches({"path": "/mcp", "root_path": ""})
    assert not endpoint._matches({"path": "/api/other", "root_path": "/api"})
    assert not endpoint._matches({"path": "/api/mcp", "root_path": ""})


async def _lifespan(endpoint: Endpoint, sent: list[dict[str, Any]]) -> None:
    incoming = iter([{"type": "lifespan.startup"}, {"type": "lifespan.shutdown"}])

    async def receive() -> dict[str, Any]:
        await trio.lowlevel.checkpoint()
        return next(incoming)

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    await endpoint({"type": "lifespan"}, receive, send)


async def test_the_lifespan_runs_the_session_manager_once_and_reports_a_second_run() -> None:
    endpoint = Endpoint(StreamableHTTPSessionManager(app=apps.app.server), "/mcp")
    first: list[dict[str, Any]] = []
    await _lifespan(endpoint, first)
    assert [m["type"] for m in first] == [
        "lifespan.startup.complete",
        "lifespan.shutdown.complete",
    ]
    second: list[dict[str, Any]] = []
    with pytest.raises(RuntimeError):
        await _lifespan(endpoint, second)  # the SDK's manager runs once per instance
    assert [m["type"] for m in second] == ["lifespan.startup.failed"]
    assert "once" in second[0]["message"]
