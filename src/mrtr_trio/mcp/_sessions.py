"""Legacy HTTP sessions that end well: an ASGI layer in front of the SDK's Streamable HTTP app.

On a legacy (2025-era) session a flow lives inside one `tools/call` POST whose SSE response
carries the server-to-client requests. The SDK runs the call in the session's task group, apart
from the HTTP request, so two things would otherwise hang until `round_timeout`:

- **the client drops the connection** (no DELETE, no cancel): when a POST's response ends
  unfinished, before the request's JSON-RPC response went out, this layer tells the session
  `notifications/cancelled` for that request, so the SDK cancels it and the flow closes (its
  `finally` runs) at once;
- **the client answers with something the SDK drops** (not JSON, too deep, `"result": null`,
  an id it never sent): an [AnswerWatch][mrtr_trio.mcp._wirewatch.AnswerWatch] per session
  decides which waiting requests that fails, and this layer feeds the session an error response
  for each, which the host reports as `-32602` naming the request.

Both are said to the session the way a client would say them, as a POST on its session id: no
SDK module is imported here. What this layer relies on is the behaviour of the SDK's Streamable
HTTP transport (mcp 2.3), which the tests of `tests/server/` pin end to end:

- a legacy `tools/call` runs in the session's task group, not the POST's, and its SSE response
  carries the server-to-client requests as `data:` lines and ends with the call's JSON-RPC
  response (that is how `_saw` tells asked from answered);
- a POST of `notifications/cancelled` on the session id cancels that request, and a POST of an
  error response with a waiting request's id fails that request (the host turns it into
  `-32602`), both by the same path as a client's;
- answers the SDK cannot match or read are dropped without a word (hence the watch), and a
  session ended under a POST already answered raises `anyio.ClosedResourceError` or sends after
  the response ended (the race described in [mrtr_trio.mcp._sdk][], swallowed here).

Only legacy POSTs (and DELETEs) that carry `Mcp-Session-Id`
are watched, JSON-response sessions' included (they have no back channel, so nothing is asked on
them, but a dropped POST is still cancelled); modern and stateless requests, GETs and the
lifespan pass straight through. A session's watch lives from its first server-to-client request
until the last call that asked something ends with nothing outstanding, or the session's DELETE.
Written on anyio, like the SDK, so any ASGI server can run it.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Awaitable
from typing import Any

import anyio
import pydantic_core
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS
from pydantic_core import core_schema
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from ._budget import read_body
from ._wirewatch import AnswerWatch

__all__ = ["SessionGuard"]

log = logging.getLogger("mrtr_trio.mcp")

#: What `_saw` reads of a JSON object: its `id` and `method`, without building the rest in
#: Python (a request's params can be a whole form's schema). Not an object: a ValueError.
_HEAD = pydantic_core.SchemaValidator(
    core_schema.typed_dict_schema(
        {
            "id": core_schema.typed_dict_field(core_schema.any_schema(), required=False),
            "method": core_schema.typed_dict_field(core_schema.any_schema(), required=False),
        },
        extra_behavior="ignore",
    )
)

#: How long telling a session something may take before it is given up.
_TELL_TIMEOUT = 5.0


class SessionGuard:
    """The ASGI middleware described in the module docstring, around the SDK's *app*.

    *max_body_size* bounds what it reads ahead to inspect (bigger bodies pass uninspected; the
    SDK refuses them with 413 anyway).
    """

    def __init__(self, app: ASGIApp, *, max_body_size: int) -> None:
        self._app = app
        self._max_body_size = max_body_size
        self._watches: dict[str, AnswerWatch] = {}

    def __call__(self, scope: Scope, receive: Receive, send: Send) -> Awaitable[None]:
        # A plain function: a request passed straight through is the app's own awaitable.
        session = _legacy_session(scope)
        if session is not None and scope["method"] == "POST":
            return self._watched(session, scope, receive, send)
        if session is not None and scope["method"] == "DELETE":
            self._watches.pop(session, None)
        return self._app(scope, receive, send)

    async def _watched(self, session: str, scope: Scope, receive: Receive, send: Send) -> None:
        """A legacy POST on *session*: watched as the module docstring says."""
        body, replay = await read_body(receive, self._max_body_size)
        if body is None:
            await self._app(scope, replay, send)
            return
        parsed: Any = None
        unreadable: ValueError | None = None
        try:
            parsed = pydantic_core.from_json(body)  # once, for the watch and for _request_id
        except ValueError as error:
            unreadable = error
        watch = self._watches.get(session)
        feed: list[dict[str, Any]] = []
        if watch is not None and unreadable is not None:
            feed = watch.unreadable(unreadable)
        elif watch is not None:
            feed = watch.received_json(parsed)
        request_id = _request_id(parsed)
        stream = object()
        finished = asked = answered = False

        def watched_send(message: Message) -> Awaitable[None]:
            # A plain function: the send's own awaitable, no coroutine of ours per message.
            nonlocal finished, asked, answered
            if finished:
                return _nothing()  # e.g. the SDK's 500 after its 202 when the session ended
            if message["type"] == "http.response.body":
                if request_id is not None and not answered:
                    saw = self._saw(session, message.get("body", b""), stream, request_id)
                    asked, answered = asked or saw[0], saw[1]
                finished = finished or not message.get("more_body", False)
            return send(message)

        try:
            await self._app(scope, replay, watched_send)
        except (anyio.ClosedResourceError, anyio.BrokenResourceError):
            if not finished:
                raise
            # The session ended under a POST already answered: the SDK's known race (_sdk).
        finally:
            # Only a POST that asked has requests of its own outstanding to end.
            watch = self._watches.get(session) if asked else None
            if watch is not None:
                watch.stream_ended(stream)
                if watch.idle:
                    # The last call that asked has ended. Not sooner: between rounds, the
                    # watch remembers the answered ids, so a late answer is not "never sent".
                    del self._watches[session]
            if request_id is not None and not finished and not answered:
                # Not when the response went out and only the stream's end did not (the client
                # hung up after reading it): a finished request is not cancelled.
                feed.insert(0, _cancelled(request_id))
            if feed:  # scopes only when there is something to tell: most POSTs have nothing
                with anyio.CancelScope(shield=True), anyio.move_on_after(_TELL_TIMEOUT):
                    for message in feed:
                        await self._tell(scope, message)

    def _saw(
        self, session: str, chunk: bytes, stream: object, request_id: Any
    ) -> tuple[bool, bool]:
        """Note the server-to-client messages in an SSE chunk of the response to *request_id*:
        whether one was a request (the session's watch is made for the first), and whether one
        was the response itself."""
        asked = False
        for line in chunk.splitlines():
            if line.startswith(b"data:"):
                try:  # the SDK's own output: pydantic_core reads it without Python frames
                    message = _HEAD.validate_json(line[5:])
                except ValueError:
                    continue
                if message.get("method") == "notifications/cancelled":
                    message = pydantic_core.from_json(line[5:])  # the watch reads its params
                if "method" not in message:
                    identity = message.get("id")
                    if type(identity) is type(request_id) and identity == request_id:
                        return asked, True
                    continue
                request = "id" in message and isinstance(message["method"], str)
                watch = self._watches.get(session)
                if watch is None and request:
                    watch = self._watches[session] = AnswerWatch()
                if watch is not None:
                    watch.sent(message, stream)
                asked = asked or request
        return asked, False

    async def _tell(self, scope: Scope, message: dict[str, Any]) -> None:
        """POST *message* to the session as its client would, discarding the reply."""
        body = json.dumps(message).encode()
        headers = [(k, v) for k, v in scope["headers"] if k.lower() != b"content-length"]
        told = dict(scope, headers=[*headers, (b"content-length", str(len(body)).encode())])
        sent = False

        async def receive() -> Message:
            nonlocal sent
            if not sent:
                sent = True
                return {"type": "http.request", "body": body, "more_body": False}
            await anyio.sleep_forever()
            raise AssertionError("unreachable")

        async def discard(message: Message) -> None:
            pass

        try:
            await self._app(told, receive, discard)
        except Exception as error:  # the session ended meanwhile: there is no one to tell
            log.debug("could not tell an ended session %s: %r", message.get("method"), error)


async def _nothing() -> None:
    pass


def _legacy_session(scope: Scope) -> str | None:
    """The session id of a legacy HTTP request, else `None`."""
    if scope["type"] != "http":
        return None
    session: bytes | None = None
    version: bytes | None = None
    for name, value in scope["headers"]:  # the last repeated header wins
        if name == b"mcp-session-id":
            session = value
        elif name == b"mcp-protocol-version":
            version = value
    if session is None:
        return None
    if version is not None and version.decode("latin-1") not in HANDSHAKE_PROTOCOL_VERSIONS:
        return None
    return session.decode("latin-1")


def _request_id(message: Any) -> Any:
    """The id of *message* (a body parsed as JSON) if it is a JSON-RPC request, else `None` (a
    response, a notification, garbage)."""
    if isinstance(message, dict) and isinstance(message.get("method"), str):
        return message.get("id")
    return None


def _cancelled(request_id: Any) -> dict[str, Any]:
    return {
        "jsonrpc": "2.0",
        "method": "notifications/cancelled",
        "params": {"requestId": request_id, "reason": "the client disconnected"},
    }
