"""A raw Streamable HTTP client for the legacy (2025-11-25) era: it speaks the wire by hand, so
tests can drop connections mid-round and answer with anything at all."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import aclosing, asynccontextmanager
from typing import Any

import httpx2

VERSION = "2025-11-25"
CAPABILITIES = {"elicitation": {"form": {}, "url": {}}, "sampling": {}, "roots": {}}
#: The opening request of a legacy session.
INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": VERSION,
        "capabilities": CAPABILITIES,
        "clientInfo": {"name": "raw", "version": "0"},
    },
}


class LegacySession:
    """One legacy session on *url*: ``initialize``d, with its ``Mcp-Session-Id``."""

    def __init__(self, http: httpx2.AsyncClient, url: str, session_id: str) -> None:
        self.http = http
        self.url = url
        self.session_id = session_id
        self._ids = 100

    @property
    def headers(self) -> dict[str, str]:
        return {
            "Content-Type": "application/json",
            "Accept": "application/json, text/event-stream",
            "MCP-Protocol-Version": VERSION,
            "Mcp-Session-Id": self.session_id,
        }

    async def post(self, body: bytes | dict[str, Any]) -> httpx2.Response:
        """POST one message (or raw bytes) on the session and return the response."""
        content = body if isinstance(body, bytes) else json.dumps(body).encode()
        return await self.http.post(self.url, content=content, headers=self.headers)

    async def answer(self, request_id: Any, result: Any) -> httpx2.Response:
        """Answer a server-to-client request with *result* (any JSON, valid or not)."""
        return await self.post({"jsonrpc": "2.0", "id": request_id, "result": result})

    @asynccontextmanager
    async def call(
        self, method: str, params: dict[str, Any]
    ) -> AsyncIterator[AsyncIterator[dict[str, Any]]]:
        """POST a request and yield the JSON-RPC messages of its SSE response as they come.
        Leaving the block early drops the connection (no DELETE, no cancel)."""
        self._ids += 1
        body = {"jsonrpc": "2.0", "id": self._ids, "method": method, "params": params}
        async with self.http.stream(
            "POST", self.url, content=json.dumps(body).encode(), headers=self.headers
        ) as response:
            assert response.status_code == 200, response.status_code
            async with aclosing(_messages(response)) as messages:
                yield messages

    async def call_tool(self, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
        """A whole ``tools/call`` that asks nothing of the client: its response message."""
        async with self.call("tools/call", {"name": name, "arguments": arguments}) as messages:
            async for message in messages:
                if "method" not in message:
                    return message
        raise AssertionError("the stream ended without a response")


async def _messages(response: httpx2.Response) -> AsyncIterator[dict[str, Any]]:
    async for line in response.aiter_lines():
        if line.startswith("data:") and line[5:].strip():
            yield json.loads(line[5:])


@asynccontextmanager
async def legacy_session(url: str, **client: Any) -> AsyncIterator[LegacySession]:
    """An initialized legacy session (closed with DELETE at the end)."""
    async with httpx2.AsyncClient(timeout=30, **client) as http:
        headers = {
            "Content-Type": "application/json",
            "Accept": "application/json, text/event-stream",
        }
        response = await http.post(url, json=INITIALIZE, headers=headers)
        assert response.status_code == 200, f"{response.status_code}: {response.text}"
        session = LegacySession(http, url, response.headers["mcp-session-id"])
        await session.post({"jsonrpc": "2.0", "method": "notifications/initialized"})
        try:
            yield session
        finally:
            await http.delete(url, headers=session.headers)
