"""The hostile-client runs of ``python -m benchmarks.load`` (issue 22), each against its own
``mrtr-trio serve --http`` process serving ``benchmarks/load.py``'s app with default settings
unless said otherwise:

- **keepalive**: the server's open-files limit is 1,024; 1,100 connections each make one modern
  call and stay open and idle. Counts the connections served and refused, the server's log
  lines (one line per interval about running out of descriptors, no traceback), how long the
  idle ones stay open (the keep-alive timeout, 30 s), and whether 100 new clients are served
  once they are gone.
- **bodies**: 100 clients at once each send a 50 MB chunked body, 64 KiB at a time. Counts the
  413 and 503 answers, the bytes sent before the refusal, and the server's RSS before, at its
  peak and after.
- **sessions**: one client address sends 2,100 bare ``initialize`` requests at once; then
  another address opens a session and makes a call, and the first waits for the first-use
  deadline (30 s) to pass and opens one again. Counts the 200 and 503 answers, the
  ``Retry-After`` given, and how long each of the two waited.
"""

from __future__ import annotations

import collections
import json
import resource
import time
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager

import attrs
import httpx2
import trio

from mrtr_trio.mcp._slots import FIRST_USE_TIMEOUT
from mrtr_trio.mcp._transports import KEEP_ALIVE_TIMEOUT

from . import load

__all__ = ["HostileResult", "run_all"]

MODERN_CALL = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "tools/call",
    "params": {
        "name": "confirm",
        "arguments": {"job": "idle"},
        "_meta": {
            "io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientCapabilities": {"elicitation": {}},
        },
    },
}
MODERN_HEADERS = {
    "Content-Type": "application/json",
    "Accept": load.ACCEPT,
    "MCP-Protocol-Version": "2026-07-28",
    "Mcp-Method": "tools/call",
    "Mcp-Name": "confirm",
}
INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-11-25",
        "capabilities": {"elicitation": {}},
        "clientInfo": {"name": "flood", "version": "0"},
    },
}


@attrs.frozen
class HostileResult:
    """One run: its name and what was measured, as (label, value) pairs for the table."""

    run: str
    figures: tuple[tuple[str, str], ...]
    ok: bool


def _request(host: str, port: int) -> bytes:
    body = json.dumps(MODERN_CALL).encode()
    head = ["POST /mcp HTTP/1.1", f"Host: {host}:{port}", f"Content-Length: {len(body)}"]
    head += [f"{name}: {value}" for name, value in MODERN_HEADERS.items()]
    return ("\r\n".join(head) + "\r\n\r\n").encode() + body


async def _status_of(stream: trio.SocketStream, within: float) -> str:
    """The response's status code, ``"closed"`` if the server closed the connection without
    one, ``"none"`` if nothing came *within* seconds."""
    received = b""
    with trio.move_on_after(within):
        try:
            while b"\r\n" not in received:
                chunk = await stream.receive_some()
                if not chunk:
                    return "closed"
                received += chunk
        except trio.BrokenResourceError:
            return "closed"
        return received.split(b" ", 2)[1].decode()
    return "none"


@contextmanager
def _more_open_files(wanted: int) -> Iterator[None]:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (min(max(soft, wanted), hard), hard))
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


async def keepalive(connections: int = 1100, open_files: int = 1024) -> HostileResult:
    with (
        _more_open_files(connections + 200),
        load.serve(open_files=open_files) as server,
    ):
        host, port = "127.0.0.1", int(server.url.split(":")[2].split("/")[0])
        request = _request(host, port)
        outcomes: collections.Counter[str] = collections.Counter()
        closed_after: list[float] = []
        served_at: dict[int, float] = {}
        streams: list[trio.SocketStream] = []

        async def one(index: int) -> None:
            try:
                stream = await trio.open_tcp_stream(host, port)
            except OSError:
                outcomes["connect failed"] += 1
                return
            streams.append(stream)
            try:
                await stream.send_all(request)
            except trio.BrokenResourceError:
                outcomes["closed"] += 1
                return
            status = await _status_of(stream, within=20)
            outcomes[status] += 1
            if status == "200":
                served_at[index] = time.monotonic()
                with trio.move_on_after(KEEP_ALIVE_TIMEOUT + 30):
                    try:
                        while await stream.receive_some():
                            pass
                    except trio.BrokenResourceError:
                        pass
                    closed_after.append(time.monotonic() - served_at[index])

        started = time.monotonic()
        async with trio.open_nursery() as nursery:
            for index in range(connections):
                nursery.start_soon(one, index)
                if index % 50 == 49:
                    await trio.sleep(0.05)  # a crowd, not one SYN flood
        wall = time.monotonic() - started
        for stream in streams:
            await stream.aclose()
        # New clients once the idle connections are gone.
        fresh: collections.Counter[str] = collections.Counter()

        async def new_client() -> None:
            try:
                async with await trio.open_tcp_stream(host, port) as stream:
                    await stream.send_all(request)
                    fresh[await _status_of(stream, within=20)] += 1
            except OSError:
                fresh["connect failed"] += 1

        async with trio.open_nursery() as nursery:
            for _ in range(100):
                nursery.start_soon(new_client)
        logged = "".join(server.logged)
    descriptor_lines = logged.count("out of file descriptors")
    tracebacks = logged.count("Traceback")
    ordered = sorted(closed_after) or [float("nan")]
    figures = (
        ("connections", str(connections)),
        ("server open-files limit", str(open_files)),
        ("served", str(outcomes["200"])),
        ("refused (closed at once)", str(outcomes["closed"] + outcomes["connect failed"])),
        ("left waiting", str(outcomes["none"])),
        ("idle connection closed after, s (min-max)", f"{ordered[0]:.1f}-{ordered[-1]:.1f}"),
        ("new clients served afterwards", f"{fresh['200']} of 100"),
        ("log lines about descriptors", str(descriptor_lines)),
        ("tracebacks logged", str(tracebacks)),
        ("wall s", f"{wall:.1f}"),
    )
    ok = fresh["200"] == 100 and tracebacks == 0 and outcomes["none"] == 0
    return HostileResult("keepalive", figures, ok)


async def bodies(
    clients: int = 100, size: int = 50 * 1024 * 1024, chunk: int = 64 * 1024
) -> HostileResult:
    with load.serve() as server:
        host, port = "127.0.0.1", int(server.url.split(":")[2].split("/")[0])
        await load.run(server, "modern", 10, 1.0)  # warm-up: imports and caches
        before = server.rss_mib()
        peak = before
        statuses: collections.Counter[str] = collections.Counter()
        sent_before_refusal: list[int] = []
        finished = trio.Event()
        head = ["POST /mcp HTTP/1.1", f"Host: {host}:{port}", "Transfer-Encoding: chunked"]
        head += [f"{name}: {value}" for name, value in MODERN_HEADERS.items()]
        head_bytes = ("\r\n".join(head) + "\r\n\r\n").encode()
        piece = b"%x\r\n%s\r\n" % (chunk, b" " * chunk)

        async def one() -> None:
            sent = 0
            stream = await trio.open_tcp_stream(host, port)

            async def push() -> None:
                nonlocal sent
                try:
                    await stream.send_all(head_bytes)
                    while sent < size:
                        await stream.send_all(piece)
                        sent += chunk
                    await stream.send_all(b"0\r\n\r\n")
                except (trio.BrokenResourceError, trio.ClosedResourceError):
                    pass

            async with stream, trio.open_nursery() as nursery:
                nursery.start_soon(push)
                status = await _status_of(stream, within=120)
                nursery.cancel_scope.cancel()
            statuses[status] += 1
            sent_before_refusal.append(sent)

        async def sample() -> None:
            nonlocal peak
            while not finished.is_set():
                peak = max(peak, server.rss_mib())
                await trio.sleep(0.05)

        started = time.monotonic()
        async with trio.open_nursery() as outer:
            outer.start_soon(sample)
            async with trio.open_nursery() as nursery:
                for _ in range(clients):
                    nursery.start_soon(one)
            finished.set()
        wall = time.monotonic() - started
        await trio.sleep(5)
        after = server.rss_mib()
        logged = "".join(server.logged)
    ordered = sorted(sent_before_refusal)
    figures = (
        ("clients", str(clients)),
        ("body each, MiB", f"{size / 2**20:.0f}"),
        ("answers", ", ".join(f"{k} x{v}" for k, v in sorted(statuses.items()))),
        (
            "sent before the answer, MiB (median, max)",
            f"{ordered[len(ordered) // 2] / 2**20:.1f}, {ordered[-1] / 2**20:.1f}",
        ),
        ("RSS before / peak / after, MiB", f"{before:.0f} / {peak:.0f} / {after:.0f}"),
        ("tracebacks logged", str(logged.count("Traceback"))),
        ("wall s", f"{wall:.1f}"),
    )
    ok = set(statuses) <= {"413", "503"} and peak - before < 200
    return HostileResult("bodies", figures, ok)


async def sessions(flood: int = 2100) -> HostileResult:
    with load.serve() as server:
        legacy = {"Content-Type": "application/json", "Accept": load.ACCEPT}
        statuses: collections.Counter[int] = collections.Counter()
        retry_after: set[str] = set()
        limits = httpx2.Limits(max_connections=200, max_keepalive_connections=200)
        started = time.monotonic()
        async with httpx2.AsyncClient(timeout=60, limits=limits) as http:

            async def initialize() -> None:
                response = await http.post(server.url, json=INITIALIZE, headers=legacy)
                statuses[response.status_code] += 1
                if "retry-after" in response.headers:
                    retry_after.add(response.headers["retry-after"])

            async with trio.open_nursery() as nursery:
                for _ in range(flood):
                    nursery.start_soon(initialize)
            wall = time.monotonic() - started
            # Another client address (127.0.0.2 is loopback too) is served at once.
            other_started = time.monotonic()
            transport = httpx2.AsyncHTTPTransport(local_address="127.0.0.2")
            async with httpx2.AsyncClient(timeout=60, transport=transport) as other:
                text = await load.legacy_flow(other, server.url, "other")
            other_waited = time.monotonic() - other_started
            # The flooding address gets a session again once the unused ones' deadline passed.
            again_started = time.monotonic()
            again = 0
            while time.monotonic() - again_started < FIRST_USE_TIMEOUT + 30:
                response = await http.post(server.url, json=INITIALIZE, headers=legacy)
                if response.status_code == 200:
                    again = response.status_code
                    break
                await trio.sleep(float(response.headers.get("retry-after", "1")))
            flooder_waited = time.monotonic() - again_started
        logged = "".join(server.logged)
    figures = (
        ("bare initialize requests", str(flood)),
        ("answers", ", ".join(f"{k} x{v}" for k, v in sorted(statuses.items()))),
        ("Retry-After given, s", ", ".join(sorted(retry_after, key=int)) or "-"),
        ("flood wall s", f"{wall:.1f}"),
        ("another address: a whole legacy flow", f"{text!r} in {other_waited:.2f} s"),
        ("the flooding address served again after, s", f"{flooder_waited:.1f}"),
        ("tracebacks logged", str(logged.count("Traceback"))),
    )
    ok = text == "other: True" and again == 200
    return HostileResult("sessions", figures, ok)


RUNS: dict[str, Callable[[], Awaitable[HostileResult]]] = {
    "keepalive": keepalive,
    "bodies": bodies,
    "sessions": sessions,
}


async def run_all(names: list[str]) -> list[HostileResult]:
    results = []
    for name in names:
        result = await RUNS[name]()
        for label, value in result.figures:
            print(f"  {name}: {label}: {value}", flush=True)
        results.append(result)
    return results
