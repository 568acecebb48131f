"""Serving an ASGI app on hypercorn's trio worker, configured as `mrtr_trio.mcp.App` does, so
every implementation gets the same HTTP server."""

from __future__ import annotations

import functools
from typing import Any

import trio
from hypercorn.config import Config
from hypercorn.trio import serve

__all__ = ["serve_asgi"]


async def serve_asgi(
    app: Any, path: str = "/mcp", *, task_status: trio.TaskStatus[str] = trio.TASK_STATUS_IGNORED
) -> None:
    """Serve *app* on a free loopback port until cancelled; report its URL."""
    config = Config()
    config.bind = ["127.0.0.1:0"]
    config.accesslog = None
    config.loglevel = "WARNING"
    config.graceful_timeout = 1.0
    async with trio.open_nursery() as nursery:
        binds = await nursery.start(
            functools.partial(serve, app, config, shutdown_trigger=trio.sleep_forever)
        )
        task_status.started(f"{binds[0]}{path}")
