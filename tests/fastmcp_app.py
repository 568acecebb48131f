"""The same mrtr_trio handlers served three ways: by a FastMCP server (`fastmcp_server`), by the
SDK's MCPServer (`mcpserver`) and by an App (`app`), for the cross-host tests.

The handlers are the example flows (`tests.flows`), one tool that reports progress and logs, and
the conformance suite's input-required fixtures, imported from examples/conformance_server.py
(the functions its App registers, registered again here on FastMCP).

Run as a server on asyncio, FastMCP's own transports:

    python -m tests.fastmcp_app http PORT     # Streamable HTTP at http://127.0.0.1:PORT/mcp
    python -m tests.fastmcp_app stdio
    python -m tests.fastmcp_app mcpserver-http PORT   # the MCPServer twin, on its own transport

Keys: `MRTR_TEST_KEY` (hex), else a fixed test key, so that every host signs alike.
"""

from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path
from typing import Any

from fastmcp import FastMCP
from mcp.server.mcpserver import MCPServer

import mrtr_trio.fastmcp
import mrtr_trio.mcpserver
from mrtr_trio import Context, Runtime, create_message, done, elicit, list_roots
from mrtr_trio.mcp import App

from . import flows

ROOT = Path(__file__).resolve().parents[1]
KEY = bytes.fromhex(os.environ.get("MRTR_TEST_KEY", "11" * 32))
runtime = Runtime([KEY])


def _conformance_fixtures() -> Any:
    spec = importlib.util.spec_from_file_location(
        "conformance_fixtures", ROOT / "examples" / "conformance_server.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


conformance = _conformance_fixtures()
CONFORMANCE_TOOLS = [
    "test_input_required_result_elicitation",
    "test_input_required_result_sampling",
    "test_input_required_result_list_roots",
    "test_input_required_result_request_state",
    "test_input_required_result_multiple_inputs",
    "test_input_required_result_multi_round",
    "test_input_required_result_tampered_state",
    "test_input_required_result_capabilities",
]
CONFORMANCE_PROMPT = "test_input_required_result_prompt"


async def asks_everything(ctx: Context, topic: str = "tea"):
    """Elicitation, sampling and roots in turn, with progress and a log line between."""
    await ctx.report_progress(1, 3, "asking for a name")
    name = yield elicit(f"Your name, for {topic}?", flows.NAME)
    await ctx.log("info", f"got a name for {topic}")
    reply = yield create_message(f"Say something about {topic}", max_tokens=20)
    await ctx.report_progress(2, 3, "listing roots")
    roots = yield list_roots()
    uris = ",".join(r.uri for r in roots.roots)
    yield done(f"{name.content['name']}|{reply.text}|{uris}")


async def ask_for_a_resource(ctx: Context):
    """A resource that asks before it reads."""
    answer = yield elicit("Which shelf?", flows.NAME)
    yield done(f"shelf {answer.content['name']}")


#: (tool name, handler) served by every host.
FLOWS: list[tuple[str, Any]] = [
    ("single_ask", flows.single_ask),
    ("batch_of_three", flows.batch_of_three),
    ("wizard", flows.wizard),
    ("decline_or_cancel", flows.decline_or_cancel),
    ("with_pause", flows.with_pause),
    ("return_confirm", flows.return_confirm),
    ("return_chunked_sum", flows.return_chunked_sum),
    ("asks_everything", asks_everything),
]


def _build_fastmcp() -> FastMCP[Any]:
    server: FastMCP[Any] = FastMCP("mrtr-trio-hosts")
    for name, handler in FLOWS:
        mrtr_trio.fastmcp.tool(server, name, runtime=runtime)(handler)
    for name in CONFORMANCE_TOOLS:
        mrtr_trio.fastmcp.tool(server, name, runtime=runtime)(getattr(conformance, name))
    mrtr_trio.fastmcp.prompt(server, CONFORMANCE_PROMPT, runtime=runtime)(
        getattr(conformance, CONFORMANCE_PROMPT)
    )
    mrtr_trio.fastmcp.resource(server, "test://shelf", runtime=runtime)(ask_for_a_resource)

    @server.tool
    def plain_add(a: int, b: int) -> int:
        """An ordinary FastMCP tool beside the mrtr_trio ones."""
        return a + b

    return server


def _build_mcpserver() -> MCPServer:
    server = MCPServer("mrtr-trio-hosts")
    for name, handler in FLOWS:
        mrtr_trio.mcpserver.tool(server, name, runtime=runtime)(handler)
    mrtr_trio.mcpserver.prompt(server, CONFORMANCE_PROMPT, runtime=runtime)(
        getattr(conformance, CONFORMANCE_PROMPT)
    )
    return server


def _build_app() -> App:
    app = App("mrtr-trio-hosts", runtime=runtime)
    for name, handler in FLOWS:
        app.tool(name)(handler)
    app.prompt(CONFORMANCE_PROMPT)(getattr(conformance, CONFORMANCE_PROMPT))
    app.resource("test://shelf")(ask_for_a_resource)
    return app


fastmcp_server = _build_fastmcp()
mcpserver = _build_mcpserver()
app = _build_app()


def main(argv: list[str]) -> None:
    transport = argv[0]
    if transport == "stdio":
        fastmcp_server.run(transport="stdio", show_banner=False)
    elif transport == "http":
        fastmcp_server.run(
            transport="http", host="127.0.0.1", port=int(argv[1]), show_banner=False,
            log_level="warning",
        )  # fmt: skip
    elif transport == "mcpserver-http":
        mcpserver.run(transport="streamable-http", host="127.0.0.1", port=int(argv[1]))
    else:
        raise SystemExit(f"unknown transport {transport!r}")


if __name__ == "__main__":
    main(sys.argv[1:])
