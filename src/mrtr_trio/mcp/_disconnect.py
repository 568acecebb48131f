"""A dropped request is cancelled in JSON-response mode too: an ASGI layer in front of the
Streamable HTTP app when `json_response=True` (issue 22).

With SSE responses the SDK watches for the client's disconnect while it streams, and a call
whose client went away is cancelled. A JSON response is written only once the call is done,
and nothing listens in the meantime: a modern call dropped by its client kept running to the
end. This layer listens: once the request's body has been read, it waits for
`http.disconnect`, and if that comes before the response has been sent, it cancels the
request (the SDK then ends the call and closes its flow; on a legacy session
[SessionGuard][mrtr_trio.mcp._sessions.SessionGuard] tells the session the call is cancelled).
Written on anyio, like the SDK, so any ASGI server can run it.
"""

from __future__ import annotations

import anyio
from starlette.types import ASGIApp, Message, Receive, Scope, Send

__all__ = ["DisconnectWatch"]


class DisconnectWatch:
    """The ASGI middleware described in the module docstring, around *app*."""

    def __init__(self, app: ASGIApp) -> None:
        self._app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["method"] != "POST":
            await self._app(scope, receive, send)
            return
        body_read = anyio.Event()
        disconnected = anyio.Event()
        responded = False

        async def app_receive() -> Message:
            if body_read.is_set():  # the watch below reads from here on
                await disconnected.wait()
                return {"type": "http.disconnect"}
            message = await receive()
            if message["type"] != "http.request" or not message.get("more_body", False):
                body_read.set()
            if message["type"] == "http.disconnect":
                disconnected.set()
            return message

        async def app_send(message: Message) -> None:
            nonlocal responded
            if message["type"] == "http.response.body" and not message.get("more_body", False):
                responded = True  # a disconnect from here on is the response's own end
            await send(message)

        async with anyio.create_task_group() as group:

            async def watch() -> None:
                await body_read.wait()
                while not disconnected.is_set():
                    if (await receive())["type"] == "http.disconnect":
                        disconnected.set()
                if not responded:
                    group.cancel_scope.cancel()

            group.start_soon(watch)
            try:
                await self._app(scope, app_receive, app_send)
            finally:
                group.cancel_scope.cancel()
