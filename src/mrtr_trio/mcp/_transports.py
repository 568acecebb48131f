"""Serving a low-level MCP server under trio: stdio, and Streamable HTTP on hypercorn's trio
worker, with the limits that keep a server up under real clients (see docs/reliability.md);
running a server until Ctrl-C; and refusing to start one while `mrtr-trio serve` is importing
the file that defines the app.
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
import stat
import sys
from collections.abc import AsyncIterator, Awaitable, Callable, Hashable, Iterator, Sequence
from typing import Any

import mcp_types as types
import trio
from hypercorn.config import Config
from hypercorn.utils import repr_socket_addr
from mcp import stdio_server
from starlette.types import ASGIApp, Scope

from . import _hypercorn
from ._budget import MAX_BUFFERED_BYTES, BodyBudget
from ._disconnect import DisconnectWatch
from ._endpoint import Endpoint
from ._sdk import (
    Server,
    SessionMessage,
    StreamableHTTPSessionManager,
    TransportSecuritySettings,
    close_session,
    quiet_known_sdk_races,
    session_is_open,
)
from ._sessions import SessionGuard
from ._slots import FIRST_USE_TIMEOUT, MAX_SESSIONS_PER_CLIENT, SessionSlots, client_key
from ._wirewatch import AnswerWatch

__all__ = [
    "BACKLOG",
    "FIRST_USE_TIMEOUT",
    "KEEP_ALIVE_TIMEOUT",
    "LOOPBACK_HOSTS",
    "MAX_BODY_SIZE",
    "MAX_BUFFERED_BYTES",
    "MAX_SESSIONS",
    "MAX_SESSIONS_PER_CLIENT",
    "SESSION_IDLE_TIMEOUT",
    "ServingDuringImport",
    "asgi_app",
    "client_key",
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


#: Pending connections the listening socket queues (the kernel caps it at `somaxconn`).
#: hypercorn's default of 100 reset 10-35% of 300 clients connecting at once.
BACKLOG = 4096
#: Largest request body, in bytes; bigger ones get 413 before any parsing.
MAX_BODY_SIZE = 4 * 1024 * 1024
#: Seconds an idle keep-alive connection stays open: longer than clients keep theirs in the
#: pool (httpx: 5 s), so a client never reuses a connection the server is closing.
KEEP_ALIVE_TIMEOUT = 30.0
#: Seconds a legacy session may go with no request in flight before it is closed.
SESSION_IDLE_TIMEOUT = 300.0
#: Legacy sessions open at once; past it, a new session gets 503.
MAX_SESSIONS = 2048


class _Stdin:
    """Lines of stdin, shown to *watch*, read by *read* (one chunk; `b""` at EOF).

    Either reader lets `serve_stdio` stop promptly when its caller is cancelled (the SDK's own
    stdin reader blocks cancellation until the next line arrives). After a line the SDK will
    drop, it yields the error responses the watch makes for the requests that line fails.
    """

    def __init__(self, read: Callable[[], Awaitable[bytes]], watch: AnswerWatch) -> None:
        self._read = read
        self._buffer = b""
        self._eof = False
        self._watch = watch
        self._fed: list[str] = []

    def __aiter__(self) -> _Stdin:
        return self

    async def __anext__(self) -> str:
        if self._fed:
            return self._fed.pop(0)
        while b"\n" not in self._buffer and not self._eof:
            chunk = await self._read()
            self._eof = not chunk
            self._buffer += chunk
        if not self._buffer:
            raise StopAsyncIteration
        line, newline, self._buffer = self._buffer.partition(b"\n")
        self._fed = [json.dumps(m) + "\n" for m in self._watch.received(line)] if line else []
        return (line + newline).decode("utf-8", "replace")


class _PipeStdout:
    """The SDK's stdout, written straight to a non-blocking pipe: no thread per write and
    per flush, which is most of a stdio leg's CPU on the SDK's own writer."""

    def __init__(self, stream: trio.lowlevel.FdStream) -> None:
        self._stream = stream

    async def write(self, text: str) -> None:
        await self._stream.send_all(text.encode("utf-8"))

    async def flush(self) -> None:
        pass  # nothing is buffered


def _is_pipe(fd: int) -> bool:
    """Whether *fd* is a pipe or a socket (which trio polls; a file or a terminal it cannot,
    or should not be made non-blocking)."""
    if sys.platform == "win32":  # pragma: no cover
        return False
    try:
        mode = os.fstat(fd).st_mode
    except OSError:
        return False
    return stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode)


@contextlib.asynccontextmanager
async def _stdio(watch: AnswerWatch) -> AsyncIterator[tuple[_Stdin, _PipeStdout | None]]:
    """What `serve_stdio` hands the SDK's `stdio_server`: the stdin lines, and (when stdout is
    a pipe) a stdout written without threads, else `None` (the SDK's writer).

    A pipe is read and written without a thread per line: trio polls a private duplicate of
    the descriptor, non-blocking until it is closed. While serving, fd 0 then reads the null
    device and fd 1 writes to stderr (as the SDK's writer does for fd 1), so handlers and
    their children neither steal the wire's bytes, nor corrupt it with stray prints, nor
    inherit a non-blocking pipe; both are restored on the way out. Stdin that is not a pipe
    (a file, a terminal) is read in a thread trio may abandon on cancellation.
    """
    async with contextlib.AsyncExitStack() as stack:
        if _is_pipe(0):
            stdin_pipe = _claim(0, os.open(os.devnull, os.O_RDONLY), stack)
            stdin = _Stdin(functools.partial(stdin_pipe.receive_some, 65536), watch)
        else:
            read = functools.partial(os.read, 0, 65536)
            stdin = _Stdin(
                functools.partial(trio.to_thread.run_sync, read, abandon_on_cancel=True), watch
            )
        stdout = None
        if _is_pipe(1):
            stdout = _PipeStdout(_claim(1, os.dup(2), stack))
        yield stdin, stdout


def _claim(
    fd: int, stand_in: int, stack: contextlib.AsyncExitStack[bool | None]
) -> trio.lowlevel.FdStream:
    """A stream on a private duplicate of *fd*, closed when *stack* unwinds, with *stand_in*
    (a descriptor, taken over) in *fd*'s place until then."""
    import fcntl  # POSIX only, like the pipes this is for

    wire = trio.lowlevel.FdStream(fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, 3))
    stack.push_async_callback(wire.aclose)  # also makes the pipe blocking again
    try:
        os.dup2(stand_in, fd)
    finally:
        os.close(stand_in)
    stack.callback(os.dup2, wire.fileno(), fd)  # unwinds first: fd is back on the wire
    return wire


class _WatchedWrite:
    """The server's write stream, showing the watch the requests the server sends."""

    def __init__(self, stream: Any, watch: AnswerWatch) -> None:  # the SDK's WriteStream
        self._stream = stream
        self._watch = watch

    async def send(self, item: SessionMessage, /) -> None:
        message = item.message
        if isinstance(message, types.JSONRPCRequest):  # all the watch reads of a request
            self._watch.sent({"method": message.method, "id": message.id})
        elif (
            isinstance(message, types.JSONRPCNotification)
            and message.method == "notifications/cancelled"
        ):  # not the progress and log notifications of every call
            self._watch.sent(message.model_dump(by_alias=True, mode="json", exclude_none=True))
        await self._stream.send(item)

    async def aclose(self) -> None:
        await self._stream.aclose()

    async def __aenter__(self) -> _WatchedWrite:
        await self._stream.__aenter__()
        return self

    async def __aexit__(self, *exc_info: Any) -> None:
        await self._stream.__aexit__(*exc_info)


async def serve_stdio(server: Server[Any]) -> None:
    """Serve *server* on this process's stdin and stdout until EOF or cancellation.

    A client that stops reading (a broken pipe on stdout) ends serving quietly; in-flight flows
    are cancelled and closed on the way out.
    """
    watch = AnswerWatch()
    try:
        async with (
            _stdio(watch) as (stdin, stdout),
            stdio_server(stdin=stdin, stdout=stdout) as (read, write),  # type: ignore[arg-type]
        ):
            await server.run(
                read, _WatchedWrite(write, watch), server.create_initialization_options()
            )
    except* (BrokenPipeError, trio.BrokenResourceError):
        pass  # the client went away: nothing is left to tell it


def asgi_app(
    server: Server[Any],
    *,
    path: str,
    stateless: bool,
    json_response: bool,
    allowed_hosts: Sequence[str] | None,
    max_body_size: int = MAX_BODY_SIZE,
    session_idle_timeout: float | None = SESSION_IDLE_TIMEOUT,
    max_sessions: int | None = MAX_SESSIONS,
    max_sessions_per_client: int | None = MAX_SESSIONS_PER_CLIENT,
    session_first_use_timeout: float = FIRST_USE_TIMEOUT,
    session_key: Callable[[Scope], Hashable] = client_key,
    max_buffered_bytes: int = MAX_BUFFERED_BYTES,
) -> ASGIApp:
    """A fresh Streamable HTTP ASGI app for *server* (the SDK's session manager at *path*,
    [Endpoint][mrtr_trio.mcp._endpoint.Endpoint]), accepting only loopback `Host` headers
    unless *allowed_hosts* (`"host"` or `"host:port"`, `*` as a port wildcard) is given.

    Legacy sessions close after *session_idle_timeout* seconds without a request in flight
    (`None`: never), or after *session_first_use_timeout* seconds when they made no request
    since `initialize` and a new session needs room; at most *max_sessions* are open at once,
    *max_sessions_per_client* for one *session_key* (`None`: no cap; a refused session gets
    503 with `Retry-After`: [SessionSlots][mrtr_trio.mcp._slots.SessionSlots]). A client
    that drops its connection mid-call has the call cancelled at once
    ([SessionGuard][mrtr_trio.mcp._sessions.SessionGuard]), in JSON-response mode too
    ([DisconnectWatch][mrtr_trio.mcp._disconnect.DisconnectWatch]). Request bodies held at once
    across all requests are bounded by *max_buffered_bytes*
    ([BodyBudget][mrtr_trio.mcp._budget.BodyBudget]).
    """
    quiet_known_sdk_races()
    hosts = list(allowed_hosts) if allowed_hosts is not None else list(LOOPBACK_HOSTS)
    patterns = [h if ":" in h.removeprefix("[").split("]")[-1] else f"{h}:*" for h in hosts]
    origins = [f"{scheme}://{p}" for p in patterns for scheme in ("http", "https")]
    security = TransportSecuritySettings(
        enable_dns_rebinding_protection=True,
        allowed_hosts=[*hosts, *patterns],
        allowed_origins=origins,
    )
    manager = StreamableHTTPSessionManager(
        app=server,
        json_response=json_response,
        stateless=stateless,
        security_settings=security,
        max_request_body_size=max_body_size,
        session_idle_timeout=session_idle_timeout,
        max_sessions=None,  # SessionSlots counts them, and says when to retry
    )
    app: ASGIApp = SessionGuard(Endpoint(manager, path), max_body_size=max_body_size)
    if not stateless:
        app = SessionSlots(
            app,
            max_sessions=max_sessions,
            max_per_client=max_sessions_per_client,
            first_use_timeout=session_first_use_timeout,
            key=session_key,
            is_open=functools.partial(session_is_open, manager),
            close=functools.partial(close_session, manager),
        )
    if json_response:
        app = DisconnectWatch(app)  # the SDK's SSE responses watch for it themselves
    return BodyBudget(app, max_body_size=max_body_size, max_buffered_bytes=max_buffered_bytes)


async def serve_http(
    app: ASGIApp,
    host: str,
    port: int,
    path: str,
    *,
    backlog: int = BACKLOG,
    keep_alive_timeout: float = KEEP_ALIVE_TIMEOUT,
    log_interval: float = _hypercorn.OUT_OF_DESCRIPTORS_LOG_INTERVAL,
    task_status: trio.TaskStatus[str] = trio.TASK_STATUS_IGNORED,
) -> None:
    """Serve *app* with hypercorn's trio worker until cancelled; report the endpoint URL (with
    the real port when *port* is 0) through *task_status*. *backlog* is the listen queue,
    *keep_alive_timeout* the seconds an idle connection stays open, whatever the app does.
    Out of file descriptors, new connections are refused (closed at once) and one WARNING
    line per *log_interval* seconds says so ([mrtr_trio.mcp._hypercorn][])."""
    config = Config()
    config.bind = [f"[{host}]:{port}" if ":" in host else f"{host}:{port}"]
    config.accesslog = None
    config.loglevel = "WARNING"
    config.graceful_timeout = 1.0
    config.backlog = backlog
    config.keep_alive_timeout = keep_alive_timeout
    sockets = config.create_sockets()
    (sock,) = sockets.insecure_sockets
    with sock:
        sock.listen(backlog)
        bound = repr_socket_addr(sock.family, sock.getsockname())
        async with trio.open_nursery() as nursery:
            await nursery.start(
                functools.partial(
                    _hypercorn.serve,
                    app,
                    config,
                    trio.socket.from_stdlib_socket(sock),
                    log_interval=log_interval,
                )
            )
            task_status.started(f"http://{bound}{path}")
