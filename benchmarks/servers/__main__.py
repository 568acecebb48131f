"""``python -m benchmarks.servers IMPL stdio|http [--pidfile PATH] [--stack STACK]``: serve one
implementation.

Over stdio the process speaks MCP on its stdin and stdout. Over HTTP it serves on a free
loopback port, prints the endpoint URL as its first line, and stops when its stdin closes.

Over HTTP every implementation runs on hypercorn's trio worker with `mrtr_trio.mcp`'s settings
(`mrtr_trio.mcp._transports.serve_http`), and by default behind the ASGI stack its own product
ships: `App.asgi()` for mrtr_trio (the SDK's session manager with mrtr_trio's session knobs
on a bare endpoint, behind [SessionGuard][mrtr_trio.mcp._sessions.SessionGuard]), the SDK's
`streamable_http_app()` with its defaults for the SDK servers. ``--stack sdk`` or
``--stack mrtr_trio`` serves a low-level server behind the other stack instead, to measure
what each stack costs ([benchmarks.stacks][]).
"""

from __future__ import annotations

import argparse
import os
import sys
from functools import partial
from pathlib import Path
from typing import Any

import trio
from mcp.server.lowlevel import Server

from mrtr_trio.mcp import _transports as transports

from . import IMPLEMENTATIONS

#: The ASGI stacks ``--stack`` chooses from (see the module docstring).
STACKS = ("own", "sdk", "mrtr_trio")


async def _serve_stack(
    module: Any, stack: str, task_status: trio.TaskStatus[str] = trio.TASK_STATUS_IGNORED
) -> None:
    if stack == "own":
        await module.serve_http(task_status=task_status)
        return
    server = module.target()
    if stack == "sdk":
        app = server.streamable_http_app()
    elif isinstance(server, Server):  # what App.asgi() builds around App.server
        app = transports.asgi_app(
            server, path="/mcp", stateless=False, json_response=False, allowed_hosts=None
        )
    else:
        raise SystemExit(f"--stack mrtr_trio needs a low-level Server, not {type(server)}")
    await transports.serve_http(app, "127.0.0.1", 0, "/mcp", task_status=task_status)


async def _serve_http(module: object, stack: str = "own") -> None:
    async with trio.open_nursery() as nursery:
        url = await nursery.start(partial(_serve_stack, module, stack))
        print(url, flush=True)
        await trio.to_thread.run_sync(sys.stdin.buffer.read, abandon_on_cancel=True)
        nursery.cancel_scope.cancel()


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.servers")
    parser.add_argument("implementation", choices=sorted(IMPLEMENTATIONS))
    parser.add_argument("transport", choices=["stdio", "http"])
    parser.add_argument("--pidfile", type=Path, help="write this process's id here first")
    parser.add_argument(
        "--stack", choices=STACKS, default="own", help="the ASGI stack over HTTP (default: own)"
    )
    options = parser.parse_args()
    if options.pidfile is not None:
        options.pidfile.write_text(str(os.getpid()))
    module = IMPLEMENTATIONS[options.implementation]
    if options.transport == "stdio":
        trio.run(module.serve_stdio)
    else:
        trio.run(_serve_http, module, options.stack)


if __name__ == "__main__":
    main()
