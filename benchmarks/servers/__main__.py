"""``python -m benchmarks.servers IMPL stdio|http [--pidfile PATH]``: serve one implementation.

Over stdio the process speaks MCP on its stdin and stdout. Over HTTP it serves on a free
loopback port, prints the endpoint URL as its first line, and stops when its stdin closes.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

import trio

from . import IMPLEMENTATIONS


async def _serve_http(module: object) -> None:
    async with trio.open_nursery() as nursery:
        url = await nursery.start(module.serve_http)  # type: ignore[attr-defined]
        print(url, flush=True)
        await trio.to_thread.run_sync(sys.stdin.buffer.read, abandon_on_cancel=True)
        nursery.cancel_scope.cancel()


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.servers")
    parser.add_argument("implementation", choices=sorted(IMPLEMENTATIONS))
    parser.add_argument("transport", choices=["stdio", "http"])
    parser.add_argument("--pidfile", type=Path, help="write this process's id here first")
    options = parser.parse_args()
    if options.pidfile is not None:
        options.pidfile.write_text(str(os.getpid()))
    module = IMPLEMENTATIONS[options.implementation]
    if options.transport == "stdio":
        trio.run(module.serve_stdio)
    else:
        trio.run(_serve_http, module)


if __name__ == "__main__":
    main()
