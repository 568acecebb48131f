"""The bytes of request bodies held at once, across all requests: an ASGI layer in front of
the Streamable HTTP app (issue 22). The SDK bounds each body (`max_body_size`, 413), but a
hundred clients each sending just under that bound, slowly, would still have the server hold
all of them; past `max_buffered_bytes` a request is refused with 503 and `Retry-After` as
soon as its body would go over, before more of it is read.

A request's bytes count from the first chunk read until its response starts (by then the SDK
has parsed the body and let it go) or it ends.

The `receive` and `send` this layer (and [read_body][mrtr_trio.mcp._budget.read_body]) hands on
are plain functions returning the wrapped callable's awaitable: no coroutine of theirs per
message, nor a frame of theirs in the await chain of a response's long wait for a disconnect.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable

from starlette.types import ASGIApp, Message, Receive, Scope, Send

__all__ = ["MAX_BUFFERED_BYTES", "BodyBudget", "error_response", "read_body"]

#: Bytes of request bodies held at once across all requests (eight bodies of the default 4 MiB).
MAX_BUFFERED_BYTES = 32 * 1024 * 1024
#: Seconds a client refused for lack of room is told to wait (`Retry-After`).
RETRY_AFTER = 1


async def error_response(
    send: Send, status: int, message: str, *, code: int = -32600, retry_after: int | None = None
) -> None:
    """Send a JSON-RPC error without a request id (the SDK's shape for HTTP-level refusals)
    with HTTP *status*, and `Retry-After` when given."""
    body = json.dumps(
        {"jsonrpc": "2.0", "id": None, "error": {"code": code, "message": message}}
    ).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", b"%d" % len(body))]
    if retry_after is not None:
        headers.append((b"retry-after", b"%d" % retry_after))
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


class BodyBudget:
    """The ASGI middleware described in the module docstring, around *app*: bodies over
    *max_body_size* get 413 (a declared `Content-Length` before any is read; a chunked body as
    soon as it goes over), and bodies that would take the total held over
    *max_buffered_bytes* get 503 with `Retry-After`."""

    def __init__(self, app: ASGIApp, *, max_body_size: int, max_buffered_bytes: int) -> None:
        self._app = app
        self._max_body_size = max_body_size
        self._budget = max_buffered_bytes
        self.held = 0  #: bytes held now, across all requests

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self._app(scope, receive, send)
            return
        declared = _content_length(scope)
        if declared is not None and declared > self._max_body_size:
            await self._too_large(send)
            return
        chunks: list[bytes] = []
        charged = 0
        try:
            while True:
                message = await receive()
                if message["type"] != "http.request":
                    break
                chunk = message.get("body", b"")
                size = len(chunk)
                if charged + size > self._max_body_size:
                    await self._too_large(send)
                    return
                if self.held + size > self._budget:
                    await error_response(
                        send,
                        503,
                        "The server is busy reading other requests' bodies; retry shortly",
                        retry_after=RETRY_AFTER,
                    )
                    return
                self.held += size
                charged += size
                chunks.append(chunk)
                if not message.get("more_body", False):
                    break
            pending: list[Message] = [
                {"type": "http.request", "body": b"".join(chunks), "more_body": False}
            ]
            del chunks[:]
            if message["type"] != "http.request":
                pending.append(message)  # a disconnect that came instead of the body's end

            def replay() -> Awaitable[Message]:
                return _ready(pending.pop(0)) if pending else receive()

            def released_send(message: Message) -> Awaitable[None]:
                nonlocal charged
                if charged and message["type"] == "http.response.start":
                    self.held -= charged
                    charged = 0
                return send(message)

            await self._app(scope, replay, released_send)
        finally:
            self.held -= charged

    async def _too_large(self, send: Send) -> None:
        await error_response(
            send, 413, f"Request body too large: the limit is {self._max_body_size} bytes"
        )


async def _ready(message: Message) -> Message:
    return message


def _content_length(scope: Scope) -> int | None:
    for name, value in scope["headers"]:
        if name == b"content-length":
            try:
                return int(value)
            except ValueError:
                return None
    return None


async def read_body(receive: Receive, limit: int) -> tuple[bytes | None, Receive]:
    """The whole request body (`None` past *limit*: the endpoint refuses it with 413), and a
    `receive` that replays what was read, for a layer that must see the body before the app does."""
    chunks: list[bytes] = []
    size = 0
    while True:
        message = await receive()
        if message["type"] != "http.request":
            more = False
            break
        chunks.append(message.get("body", b""))
        size += len(chunks[-1])
        more = message.get("more_body", False)
        if size > limit or not more:
            break
    body = b"".join(chunks)
    pending: list[Message] = [{"type": "http.request", "body": body, "more_body": more}]
    if message["type"] != "http.request":
        pending.append(message)  # a disconnect that came instead of the body's end

    def replay() -> Awaitable[Message]:
        return _ready(pending.pop(0)) if pending else receive()

    complete = message["type"] == "http.request" and size <= limit
    return (body if complete else None), replay
