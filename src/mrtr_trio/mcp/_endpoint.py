"""The Streamable HTTP endpoint as a bare ASGI app: one path served by the SDK's
`StreamableHTTPSessionManager`, the ASGI lifespan that runs the manager, 404 everywhere else.

This is what `Server.streamable_http_app()` builds with Starlette (a router, its error and
exception middleware, a `Route` and a lifespan), without the framework's layers around each
request: on a legacy trip they were about as many Python calls as
[SessionGuard][mrtr_trio.mcp._sessions.SessionGuard] itself (docs/benchmarks.md). The manager
is the SDK's documented way to mount the transport in an app of one's own; it keeps every
check (`Host` and `Origin`, the body limit, session idle timeout and cap). Like Starlette's
router, the path is matched after the scope's `root_path`, so the app can be mounted under a
prefix, and a trailing slash is allowed. An exception escaping the manager propagates to the
ASGI server, which answers 500 when no response has started (hypercorn does).
"""

from __future__ import annotations

import contextlib
from collections.abc import Awaitable

from starlette.types import Receive, Scope, Send

from ._sdk import StreamableHTTPSessionManager

__all__ = ["Endpoint"]

_NOT_FOUND = b"Not Found"


class Endpoint:
    """The ASGI app described in the module docstring: *manager* served at *path*."""

    def __init__(self, manager: StreamableHTTPSessionManager, path: str) -> None:
        self._manager = manager
        self._path = path.rstrip("/") or "/"

    def __call__(self, scope: Scope, receive: Receive, send: Send) -> Awaitable[None]:
        # A plain function: a request at the path is the manager's own awaitable, with no frame
        # of this app in its await chain.
        if scope["type"] == "http" and self._matches(scope):
            return self._manager.handle_request(scope, receive, send)
        return self._other(scope, receive, send)

    async def _other(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            await self._lifespan(receive, send)
        elif scope["type"] == "http":
            await send(
                {
                    "type": "http.response.start",
                    "status": 404,
                    "headers": [
                        (b"content-type", b"text/plain; charset=utf-8"),
                        (b"content-length", str(len(_NOT_FOUND)).encode()),
                    ],
                }
            )
            await send({"type": "http.response.body", "body": _NOT_FOUND})
        # other scopes (websocket) are not served: closing without accepting refuses them

    def _matches(self, scope: Scope) -> bool:
        path: str = scope["path"]
        root = scope.get("root_path", "")
        if root and path.startswith(root):
            path = path[len(root) :]
        return (path.rstrip("/") or "/") == self._path

    async def _lifespan(self, receive: Receive, send: Send) -> None:
        """Run the session manager from `lifespan.startup` to `lifespan.shutdown`."""
        message = await receive()
        assert message["type"] == "lifespan.startup"
        async with contextlib.AsyncExitStack() as stack:
            try:
                await stack.enter_async_context(self._manager.run())
            except BaseException as error:
                await send({"type": "lifespan.startup.failed", "message": repr(error)})
                raise
            await send({"type": "lifespan.startup.complete"})
            message = await receive()
            assert message["type"] == "lifespan.shutdown"
        await send({"type": "lifespan.shutdown.complete"})
