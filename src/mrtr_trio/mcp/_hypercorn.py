"""Serving an ASGI app on hypercorn's trio worker so that clients cannot hold the server:

- **idle connections close at the keep-alive timeout whatever the app does.** hypercorn
  restarts a connection's idle timer from inside the app's last `send` of a response; an app
  that cancels its own task once the response is out (the SDK's disconnect watcher does, as
  Starlette responses do) cancelled that restart, and the connection then stayed open for good.
  [ShieldedResponseEnd][mrtr_trio.mcp._hypercorn.ShieldedResponseEnd] lets that `send` finish.
- **a connection the client closed is let go at once.** hypercorn's trio worker reads the
  client's end of an idle connection, but its idle timer goes on running, and the connection's
  task, buffers and socket (in CLOSE-WAIT) stay until the keep-alive timeout (30 s by default),
  so a thousand clients that came and went hold a thousand dead connections for that long.
  [_Connection][mrtr_trio.mcp._hypercorn._Connection] stops the timer once reading has ended.
- **running out of file descriptors degrades.** trio's own accept loop logs a traceback ten
  times a second while `accept` fails with `EMFILE`;
  [accept_loop][mrtr_trio.mcp._hypercorn.accept_loop] refuses the waiting connections instead
  (a spare descriptor is given up for as long as it takes to accept one and close it), and
  logs one WARNING line per interval.

Everything that reaches into hypercorn's modules beyond `hypercorn.trio.serve` lives here.
"""

from __future__ import annotations

import errno
import functools
import logging
import os
from collections.abc import Awaitable, Callable
from typing import Any

import trio
from hypercorn.config import Config
from hypercorn.trio.lifespan import Lifespan
from hypercorn.trio.tcp_server import TCPServer
from hypercorn.trio.worker_context import WorkerContext
from hypercorn.typing import ConnectionState
from hypercorn.utils import wrap_app
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from .._ratelimit import RateLimitedLog

__all__ = ["OUT_OF_DESCRIPTORS_LOG_INTERVAL", "ShieldedResponseEnd", "accept_loop", "serve"]

log = logging.getLogger("mrtr_trio.mcp")

#: Seconds between two log lines about running out of file descriptors.
OUT_OF_DESCRIPTORS_LOG_INTERVAL = 10.0
#: `accept` errors that mean "no resources for one more connection", not a broken listener.
_CAPACITY_ERRNOS = frozenset({errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM})
#: How long to wait before accepting again when not even the spare descriptor helps.
_BACKOFF = 0.1


class ShieldedResponseEnd:
    """ASGI middleware: the `send` that ends a response (its last body message) runs shielded
    from the app's cancellation, so the server's bookkeeping behind it (hypercorn restarts the
    connection's idle timer there) always completes. The write itself is the server's to
    bound; hypercorn already shields it."""

    def __init__(self, app: ASGIApp) -> None:
        self._app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self._app(scope, receive, send)
            return

        async def shielded_send(message: Message) -> None:
            if message["type"] == "http.response.body" and not message.get("more_body", False):
                with trio.CancelScope(shield=True):
                    await send(message)
            else:
                await send(message)

        await self._app(scope, receive, shielded_send)


class _Connection(TCPServer):
    """hypercorn's trio connection, whose idle timer stops once the client's end of the stream
    has been read (or the stream broke): nothing is left to wait for, and the connection closes
    as soon as a response still being sent on it is done."""

    async def _read_data(self) -> None:
        await super()._read_data()
        await self.idle_task.stop()


class _Spare:
    """One descriptor held in reserve, given up to make room for a single `accept`."""

    def __init__(self) -> None:
        self._fd: int | None = None
        self.take()

    def take(self) -> None:
        if self._fd is None:
            try:
                self._fd = os.open(os.devnull, os.O_RDONLY | os.O_CLOEXEC)
            except OSError:
                self._fd = None  # still out of descriptors: taken again next time

    def release(self) -> bool:
        if self._fd is None:
            return False
        os.close(self._fd)
        self._fd = None
        return True

    def close(self) -> None:
        self.release()


async def accept_loop(
    listener: trio.SocketListener,
    handler: Callable[[trio.SocketStream], Awaitable[Any]],
    nursery: trio.Nursery,
    *,
    log_interval: float = OUT_OF_DESCRIPTORS_LOG_INTERVAL,
) -> None:
    """Accept connections on *listener* and start *handler* on each in *nursery*, forever.

    When the process is out of file descriptors (or memory for sockets), each waiting
    connection is accepted with the spare descriptor and closed at once (the client sees the
    connection closed, not a hang), and one WARNING line per *log_interval* seconds says how
    many were refused.
    """
    spare = _Spare()
    warn = RateLimitedLog(log, logging.WARNING, log_interval)
    try:
        while True:
            try:
                stream = await listener.accept()
            except OSError as error:
                if error.errno not in _CAPACITY_ERRNOS:
                    raise
                refused = await _refuse_one(listener, spare)
                warn(
                    "out of file descriptors",
                    "out of file descriptors: accept failed with %s (%s), refusing new"
                    " connections until some close (raise the open-files limit, `ulimit -n`,"
                    " or lower keep_alive_timeout)",
                    errno.errorcode.get(error.errno or 0, "?"),
                    os.strerror(error.errno or 0),
                )
                if not refused:
                    await trio.sleep(_BACKOFF)
            else:
                nursery.start_soon(_handle, handler, stream)
    finally:
        spare.close()


async def _handle(
    handler: Callable[[trio.SocketStream], Awaitable[Any]], stream: trio.SocketStream
) -> None:
    try:
        await handler(stream)
    finally:
        await trio.aclose_forcefully(stream)


async def _refuse_one(listener: trio.SocketListener, spare: _Spare) -> bool:
    """Accept one waiting connection with the spare descriptor and close it at once."""
    if not spare.release():
        spare.take()
        return False
    try:
        with trio.move_on_after(_BACKOFF):
            sock, _ = await listener.socket.accept()
            sock.close()
            return True
        return False
    except OSError:
        return False
    finally:
        spare.take()


async def serve(
    app: ASGIApp,
    config: Config,
    sock: trio.socket.SocketType,
    *,
    log_interval: float = OUT_OF_DESCRIPTORS_LOG_INTERVAL,
    task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED,
) -> None:
    """Serve *app* (wrapped in `ShieldedResponseEnd`) on the listening socket *sock* with
    hypercorn's HTTP/1.1 and HTTP/2 connection handling and *config*, running its lifespan,
    until cancelled; report once accepting through *task_status*. Cancelling it closes every
    connection at once (as cancelling hypercorn's own `serve` does, which this follows with
    `accept_loop` in place of trio's accept loop).
    """
    wrapped = wrap_app(ShieldedResponseEnd(app), config.wsgi_max_body_size, "asgi")  # type: ignore[arg-type]
    lifespan_state: dict[str, Any] = {}
    lifespan = Lifespan(wrapped, config, lifespan_state)
    connection = functools.partial(
        _Connection,
        wrapped,
        config,
        WorkerContext(None),
        ConnectionState(lifespan_state.copy()),
    )
    async with trio.open_nursery() as nursery:
        await nursery.start(lifespan.handle_lifespan)
        await lifespan.wait_for_startup()
        task_status.started()
        await accept_loop(trio.SocketListener(sock), connection, nursery, log_interval=log_interval)
