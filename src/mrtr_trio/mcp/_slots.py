"""Legacy session slots that one client cannot take from everyone else: an ASGI layer in front
of the Streamable HTTP app that admits each new legacy session (issue 22).

- **A cap, and a fair share per client.** At most `max_sessions` legacy sessions are open, and
  at most `max_sessions_per_client` for one client. A client is what *key* makes of the
  request's ASGI scope: by default [client_key][mrtr_trio.mcp._slots.client_key], the
  authenticated principal, else the peer's IP address (behind a proxy every unauthenticated
  client has the proxy's address: give a *key* that reads the forwarded one).
- **A first-use deadline.** A session that has made no request since its `initialize` (the
  `notifications/initialized` does not count) within `first_use_timeout` seconds loses its slot:
  the session is ended, as its idle timeout would end it, when a new session needs room.
- **`Retry-After` on the 503** that refuses a session: the seconds until the soonest unused
  session's deadline (or `first_use_timeout` when none is pending).

The open sessions themselves are the SDK's (`_sdk.session_is_open`); this layer only keeps, for
each session it admitted, whose it is and whether it has been used.
"""

from __future__ import annotations

import logging
import math
import time
from collections import Counter
from collections.abc import Awaitable, Callable, Hashable
from typing import Any

import attrs
import pydantic_core
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from .._ratelimit import RateLimitedLog
from ._budget import error_response
from ._sdk import AuthenticatedUser, principal_components

__all__ = [
    "FIRST_USE_TIMEOUT",
    "MAX_SESSIONS_PER_CLIENT",
    "SessionSlots",
    "client_key",
]

log = logging.getLogger("mrtr_trio.mcp")

#: Seconds a new legacy session may go without a request before it loses its slot.
FIRST_USE_TIMEOUT = 30.0
#: Legacy sessions one client may hold at once (half of the default `max_sessions`).
MAX_SESSIONS_PER_CLIENT = 1024
#: Seconds between two log lines about refused sessions.
_LOG_INTERVAL = 10.0


def client_key(scope: Scope) -> Hashable:
    """The default slot key: the authenticated principal (client, issuer, subject) when the
    request carries one (an App with `auth`), else the IP address the request came from
    (`None` when the ASGI server does not say)."""
    user = scope.get("user")
    if isinstance(user, AuthenticatedUser):
        return ("principal", principal_components(user.access_token))
    client = scope.get("client")
    return ("address", client[0] if client else None)


@attrs.define
class _Slot:
    key: Hashable
    deadline: float | None  # `None` once the session has been used


class SessionSlots:
    """The ASGI middleware described in the module docstring, around *app*. *is_open* and
    *close* ask and end a session in the SDK's session manager."""

    def __init__(
        self,
        app: ASGIApp,
        *,
        max_sessions: int | None,
        max_per_client: int | None,
        first_use_timeout: float,
        key: Callable[[Scope], Hashable] = client_key,
        is_open: Callable[[str], bool],
        close: Callable[[str], Awaitable[None]],
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._app = app
        self._max = max_sessions
        self._max_per_client = max_per_client
        self._first_use_timeout = first_use_timeout
        self._key = key
        self._is_open = is_open
        self._close = close
        self._clock = clock
        self._slots: dict[str, _Slot] = {}  # in the order admitted
        self._unused: dict[str, float] = {}  # session -> deadline, soonest first
        self._per_client: Counter[Hashable] = Counter()
        self._pending = 0  # admitted sessions whose opening response has not come yet
        self._warn = RateLimitedLog(log, logging.WARNING, _LOG_INTERVAL)

    def __call__(self, scope: Scope, receive: Receive, send: Send) -> Awaitable[None]:
        # A plain function: on a request it has nothing to do for (most of them), the app's own
        # awaitable, and no frame of this layer in the request's await chain.
        if scope["type"] != "http":
            return self._app(scope, receive, send)
        session, legacy = _session_headers(scope)
        if legacy and session is None and scope["method"] == "POST":
            return self._open(scope, receive, send)
        if legacy and session in self._unused:
            if scope["method"] == "POST":
                return self._note_use(session, scope, receive, send)
            if scope["method"] == "DELETE":
                self._forget(session)
        return self._app(scope, receive, send)

    @property
    def held(self) -> int:
        """Slots taken, counting sessions being opened."""
        return len(self._slots) + self._pending

    async def _open(self, scope: Scope, receive: Receive, send: Send) -> None:
        key = self._key(scope)
        await self._expire_unused()
        if self._full(key):
            self._forget_closed()
            if self._full(key):
                await self._refuse(key, send)
                return
        self._pending += 1
        self._per_client[key] += 1
        opened: str | None = None

        async def watched_send(message: Message) -> None:
            nonlocal opened
            if message["type"] == "http.response.start" and message["status"] < 400:
                for name, value in message.get("headers", ()):
                    if name.lower() == b"mcp-session-id":
                        opened = value.decode("latin-1")
            await send(message)

        try:
            await self._app(scope, receive, watched_send)
        finally:
            self._pending -= 1
            if opened is not None and self._is_open(opened):
                self._slots[opened] = _Slot(key, self._clock() + self._first_use_timeout)
                self._unused[opened] = self._slots[opened].deadline  # type: ignore[assignment]
            else:
                self._per_client[key] -= 1

    def _full(self, key: Hashable) -> bool:
        return (self._max is not None and self.held >= self._max) or (
            self._max_per_client is not None and self._per_client[key] >= self._max_per_client
        )

    async def _refuse(self, key: Hashable, send: Send) -> None:
        per_client = self._max is None or self.held < self._max
        self._warn(
            "sessions full",
            "refused a new legacy session from %r: %s",
            key,
            f"it holds {self._max_per_client} (max_sessions_per_client)"
            if per_client
            else f"{self._max} are open (max_sessions)",
        )
        soonest = next(iter(self._unused.values()), None)
        wait = self._first_use_timeout if soonest is None else soonest - self._clock()
        await error_response(
            send,
            503,
            "Too many open sessions"
            + (" for this client" if per_client else "")
            + "; retry after the time in Retry-After",
            code=-32603,
            retry_after=max(1, math.ceil(wait)),
        )

    async def _expire_unused(self) -> None:
        """End every session whose first-use deadline has passed."""
        now = self._clock()
        while self._unused:
            session, deadline = next(iter(self._unused.items()))
            if deadline > now:
                break
            self._forget(session)
            log.debug("legacy session %s unused since initialize: closed", session[:16])
            await self._close(session)

    def _forget_closed(self) -> None:
        """Drop the sessions the SDK has ended (DELETE, idle timeout) from the count."""
        for session in [s for s in self._slots if not self._is_open(s)]:
            self._forget(session)

    def _forget(self, session: str) -> None:
        slot = self._slots.pop(session, None)
        self._unused.pop(session, None)
        if slot is not None:
            self._per_client[slot.key] -= 1
            if not self._per_client[slot.key]:
                del self._per_client[slot.key]

    async def _note_use(self, session: str, scope: Scope, receive: Receive, send: Send) -> None:
        """Mark *session* used unless this POST is only its `notifications/initialized`, and
        pass the request on with a `receive` that replays what was read."""
        message = await receive()
        body = message.get("body", b"") if message["type"] == "http.request" else b""
        if not _only_initialized(body):
            self._unused.pop(session, None)
            slot = self._slots.get(session)
            if slot is not None:
                slot.deadline = None
        pending: list[Message] = [message]

        async def replay() -> Message:
            return pending.pop() if pending else await receive()

        await self._app(scope, replay, send)


def _only_initialized(body: bytes) -> bool:
    if b"notifications/initialized" not in body:
        return False
    try:
        message: Any = pydantic_core.from_json(body)
    except ValueError:
        return False
    return isinstance(message, dict) and message.get("method") == "notifications/initialized"


def _session_headers(scope: Scope) -> tuple[str | None, bool]:
    """The request's `Mcp-Session-Id` (or `None`), and whether it is a legacy request (no
    `MCP-Protocol-Version`, or a handshake-era one)."""
    session: bytes | None = None
    version: bytes | None = None
    for name, value in scope["headers"]:
        if name == b"mcp-session-id":
            session = value
        elif name == b"mcp-protocol-version":
            version = value
    legacy = version is None or version.decode("latin-1") in HANDSHAKE_PROTOCOL_VERSIONS
    return (None if session is None else session.decode("latin-1")), legacy
