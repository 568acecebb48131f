"""Serving a low-level MCP server under trio: stdio, and Streamable HTTP on hypercorn's trio
worker; running a server until Ctrl-C; and refusing to start one while `mrtr-trio serve` is
importing the file that defines the app.
"""

from __future__ import annotations

import contextlib
import functools
import os
from collections.abc import Awaitable, Callable, Iterator, Sequence
from typing import Any

import trio
from hypercorn.config import Config
from hypercorn.trio import serve
from mcp.server.lowlevel import Server
from mcp.server.stdio import stdio_server
from mcp.server.transport_security import TransportSecuritySettings
from starlette.applications import Starlette

__all__ = [
    "LOOPBACK_HOSTS",
    "ServingDuringImport",
    "asgi_app",
    "check_may_serve",
    "importing",
    "run_until_interrupted",
    "serve_http",
    "serve_stdio",
]

LOOPBACK_HOSTS = ("127.0.0.1", "localhost", "[::1]")

_importing: str | None = None


class ServingDuringImport(RuntimeError):
    """A server was started while `mrtr-trio serve` was importing the app's file."""


@contextlib.contextmanager
def importing(path: str) -> Iterator[None]:
    """While *path* is imported, starting a server raises
    `ServingDuringImport` instead of serving
    (and hanging the import, or serving somewhere the command line did not ask for)."""
    global _importing
    previous, _importing = _importing, path
    try:
        yield
    finally:
        _importing = previous


def check_may_serve(what: str) -> None:
    """Raise `ServingDuringImport` if a file is
    being imported by `mrtr-trio serve`; *what* names the call that tried to serve."""
    if _importing is not None:
        raise ServingDuringImport(f"{what} was called while importing {_importing}")


def run_until_interrupted(serve: Callable[[], Awaitable[None]]) -> None:
    """`trio.run(serve)` until it returns or Ctrl-C, which stops it quietly wherever in the
    task tree the interrupt arrives."""
    try:
        trio.run(serve)
    except* KeyboardInterrupt:
        pass


class _CancellableStdin:
    """Lines of fd 0, read in a thread trio may abandon on cancellation.

    The SDK's own stdin reader blocks cancellation until the next line arrives; this one lets
    `serve_stdio` stop promptly when its caller is cancelled.
    """

    def __init__(self) -> None:
        self._buffer = b""
        self._eof = False

    def __aiter__(self) -> _CancellableStdin:
        return self

    async def __anext__(self) -> str:
        while b"\n" not in self._buffer and not self._eof:
            chunk = await trio.to_thread.run_sync(os.read, 0, 65536, abandon_on_cancel=True)
            self._eof = not chunk
            self._buffer += chunk
        if not self._buffer:
            raise StopAsyncIteration
        line, newline, self._buffer = self._buffer.partition(b"\n")
        return (line + newline).decode("utf-8", "replace")


async def serve_stdio(server: Server[Any]) -> None:
    """Serve *server* on this process's stdin and stdout until EOF or cancellation."""
    async with stdio_server(stdin=_CancellableStdin()) as (read, write):  # type: ignore[arg-type]
        await server.run(read, write, server.create_initialization_options())


def asgi_app(
    server: Server[Any],
    *,
    path: str,
    stateless: bool,
    json_response: bool,
    allowed_hosts: Sequence[str] | None,
) -> Starlette:
    """A fresh Streamable HTTP ASGI app for *server*, accepting only loopback `Host` headers
    unless *allowed_hosts* (`"host"` or `"host:port"`, `*` as a port wildcard) is given."""
    hosts = list(allowed_hosts) if allowed_hosts is not None else list(LOOPBACK_HOSTS)
    patterns = [h if ":" in h.removeprefix("[").split("]")[-1] else f"{h}:*" for h in hosts]
    origins = [f"{scheme}://{p}" for p in patterns for scheme in ("http", "https")]
    security = TransportSecuritySettings(
        enable_dns_rebinding_protection=True,
        allowed_hosts=[*hosts, *patterns],
        allowed_origins=origins,
    )
    return server.streamable_http_app(
        streamable_http_path=path,
        stateless_http=stateless,
        json_response=json_response,
        transport_security=security,
    )


async def serve_http(
    app: Starlette,
    host: str,
    port: int,
    path: str,
    *,
    task_status: trio.TaskStatus[str] = trio.TASK_STATUS_IGNORED,
) -> None:
    """Serve *app* with hypercorn's trio worker until cancelled; report the endpoint URL (with
    the real port when *port* is 0) through *task_status*."""
    config = Config()
    config.bind = [f"[{host}]:{port}" if ":" in host else f"{host}:{port}"]
    config.accesslog = None
    config.loglevel = "WARNING"
    config.graceful_timeout = 1.0
    async with trio.open_nursery() as nursery:
        binds = await nursery.start(
            functools.partial(
                serve,
                app,  # type: ignore[arg-type]  # Starlette is an ASGI app; the stubs disagree
                config,
                shutdown_trigger=trio.sleep_forever,
            )
        )
        task_status.started(f"{binds[0]}{path}")
