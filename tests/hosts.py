"""Client-side helpers for the cross-host tests: drive one call with the official `mcp.Client` or
FastMCP's `Client`, answering like a user, and keep a transcript (what the client was asked,
in order, and the result) that does not depend on the server that served the call."""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import attrs
import mcp_types as types
from mcp import Client

from .server.clients import fill

ROOT = Path(__file__).resolve().parents[1]
MODES = ("legacy", "2026-07-28", "auto")


@attrs.frozen
class Transcript:
    """What one call looked like from the client: each request it was asked (method and
    params, without the transport's `_meta`), then the result (without `_meta`) or the error."""

    asked: tuple[tuple[str, Any], ...]
    result: Any


def _plain(model: Any) -> Any:
    data = model.model_dump(by_alias=True, mode="json", exclude_none=True)
    if isinstance(data, dict):
        data.pop("_meta", None)
        data.pop("resultType", None)  # stamped by the 2026 wire only
    return data


class Answers:
    """Callbacks for either client that answer like a user (forms filled with
    `tests.server.clients.fill`, "Paris" from the model, one root) and log what was asked."""

    def __init__(self) -> None:
        self.asked: list[tuple[str, Any]] = []

    def elicit(self, params: Any) -> types.ElicitResult:
        self.asked.append(("elicitation/create", _plain(params)))
        schema = getattr(params, "requested_schema", None)
        if schema is None:
            return types.ElicitResult(action="accept")
        if hasattr(schema, "model_dump"):
            schema = schema.model_dump(by_alias=True, exclude_none=True)
        return types.ElicitResult(action="accept", content=fill(schema))

    def sample(self, params: Any) -> types.CreateMessageResult:
        self.asked.append(("sampling/createMessage", _plain(params)))
        text = types.TextContent(type="text", text="Paris")
        return types.CreateMessageResult(role="assistant", content=text, model="test-model")

    def roots(self) -> types.ListRootsResult:
        self.asked.append(("roots/list", None))
        return types.ListRootsResult.model_validate({"roots": [{"uri": "file:///work"}]})

    # The official client's callback shapes.
    def mcp_callbacks(self) -> dict[str, Any]:
        async def on_elicit(ctx: Any, params: Any) -> Any:
            return self.elicit(params)

        async def on_sample(ctx: Any, params: Any) -> Any:
            return self.sample(params)

        async def on_roots(ctx: Any) -> Any:
            return self.roots()

        return {
            "elicitation_callback": on_elicit,
            "sampling_callback": on_sample,
            "list_roots_callback": on_roots,
        }

    # FastMCP's Client's handler shapes.
    def fastmcp_handlers(self) -> dict[str, Any]:
        async def on_elicit(message: str, response_type: Any, params: Any, ctx: Any) -> Any:
            return self.elicit(params)

        async def on_sample(messages: Any, params: Any, ctx: Any) -> Any:
            return self.sample(params)

        async def on_roots(ctx: Any) -> Any:
            return self.roots().roots

        return {
            "elicitation_handler": on_elicit,
            "sampling_handler": on_sample,
            "roots": on_roots,
        }


async def call_with_mcp_client(
    target: Any, mode: str, kind: str, name: str, arguments: dict[str, Any]
) -> tuple[Transcript, str]:
    """One call through the official client (on the test's loop): its transcript and the
    protocol version the client got."""
    answers = Answers()
    async with Client(target, mode=mode, **answers.mcp_callbacks()) as client:  # type: ignore[arg-type]
        try:
            if kind == "tool":
                result: Any = _plain(await client.call_tool(name, arguments))
            elif kind == "prompt":
                result = _plain(await client.get_prompt(name, arguments))
            else:
                result = _plain(await client.read_resource(name))
        except Exception as error:
            result = f"{type(error).__name__}: {error}"
        return Transcript(tuple(answers.asked), result), str(client.protocol_version)


def call_with_fastmcp_client(
    target: Any, mode: str, name: str, arguments: dict[str, Any], timeout: float = 30.0
) -> tuple[Transcript, str]:
    """One tool call through FastMCP's Client, which runs on asyncio only: in a fresh event
    loop (call it in a worker thread from trio), bounded by *timeout* seconds. *target* may be
    a function that makes it (a transport, made on the client's loop)."""
    from fastmcp import Client as FastMCPClient

    answers = Answers()

    async def run() -> tuple[Transcript, str]:
        where = target() if callable(target) else target
        async with FastMCPClient(where, mode=mode, **answers.fastmcp_handlers()) as client:
            try:
                raw = await client.call_tool_mcp(name, arguments)
                result: Any = _plain(raw)
            except Exception as error:
                result = f"{type(error).__name__}: {error}"
            version = client.protocol_version if hasattr(client, "protocol_version") else "?"
            return Transcript(tuple(answers.asked), result), str(version)

    async def bounded() -> tuple[Transcript, str]:
        return await asyncio.wait_for(run(), timeout)

    # In a context of its own: trio's worker threads run in a copy of the caller's, whose
    # sniffio marker says "trio".
    return contextvars.Context().run(asyncio.run, bounded())


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@contextlib.contextmanager
def served(transport: str, *, key: bytes | None = None, ready: float = 30.0) -> Iterator[str]:
    """`python -m tests.fastmcp_app TRANSPORT PORT` (FastMCP's or MCPServer's own HTTP
    transport, on asyncio) on a free loopback port; yields the endpoint URL, and kills the
    server on exit."""
    port = free_port()
    env = {**os.environ}
    if key is not None:
        env["MRTR_TEST_KEY"] = key.hex()
    process = subprocess.Popen(
        [sys.executable, "-m", "tests.fastmcp_app", transport, str(port)],
        cwd=ROOT,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + ready
        while True:
            with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), 0.2):
                break
            if process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"the {transport} server did not start (exit {process.poll()})")
            time.sleep(0.05)
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        process.kill()
        process.wait(10)
