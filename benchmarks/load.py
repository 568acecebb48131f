"""``python -m benchmarks.load``: N simultaneous flows per era against one server over HTTP on
loopback, with the server's default settings (issue 9's load run; not part of the test suite).

The server is a real ``mrtr-trio serve --http`` process serving this file's ``app``. The flows
speak the wire by hand over one HTTP client without a pool limit (so every flow in flight has
its own connections), all started at once:

- **legacy** (2025-11-25): ``initialize``, ``notifications/initialized``, a ``tools/call`` whose
  SSE stream brings an ``elicitation/create``, the answer POSTed back, the result read, and the
  session DELETEd;
- **modern** (2026-07-28): a ``tools/call`` answered ``input_required``, then the retry with the
  answer and the echoed ``requestState``.

For each N and era it reports flows completed, errors (by kind), p50 and p99 latency of a whole
flow, and the server's RSS before, during (the peak) and after (once the flows are done and the
server is idle). "Before" is taken after a warm-up of a few flows, so imports and caches are in
it. ``--write`` puts the table into docs/reliability.md.

Two hooks for [benchmarks.steady][], read from the server's environment: `LEAK_VARIABLE` makes
each flow leak that many bytes on purpose (the load targets' self-test), and `PROBE_VARIABLE`
names a file the server writes its live Python allocations to when it gets ``SIGUSR1``.
"""

from __future__ import annotations

import argparse
import collections
import functools
import gc
import json
import os
import resource
import secrets
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import AsyncGenerator, Awaitable, Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import attrs
import httpx2
import trio

from mrtr_trio import Context, Runtime, done, elicit
from mrtr_trio.mcp import App
from mrtr_trio.mcp._transports import KEEP_ALIVE_TIMEOUT

__all__ = ["app", "main"]

ROOT = Path(__file__).resolve().parent.parent
CONFIRM = {"type": "object", "properties": {"ok": {"type": "boolean"}}, "required": ["ok"]}
KEY_VARIABLE = "MRTR_LOAD_KEY"
#: How ``mrtr-trio serve --http`` announces its URL on stderr, and within how many lines.
BANNER = "mrtr-trio: serving "
BANNER_WITHIN = 100
#: Bytes each flow leaks on purpose in a server started with it (`serve(leak=...)`).
LEAK_VARIABLE = "MRTR_LOAD_LEAK"
#: A file the server writes its live Python allocations to on ``SIGUSR1`` (`Server.allocations`).
PROBE_VARIABLE = "MRTR_LOAD_PROBE"

_LEAK = int(os.environ.get(LEAK_VARIABLE) or 0)
_LEAKED: list[bytes] = []

app = App(
    "load",
    runtime=Runtime([bytes.fromhex(os.environ.get(KEY_VARIABLE) or secrets.token_hex(32))]),
)


@app.tool()
async def confirm(ctx: Context, job: str) -> AsyncGenerator[Any, Any]:
    """One question, then the answer."""
    answer = yield elicit(f"Run {job}?", CONFIRM)
    if _LEAK:
        _LEAKED.append(b"\x01" * _LEAK)  # written, so resident (`bytes(n)` may not be)
    yield done(f"{job}: {answer.content['ok'] if answer.accepted else answer.action}")


# ------------------------------------------------------------------------------- server


def _write_allocations(path: str) -> None:
    """(In the server, on ``SIGUSR1``.) After a collection: the memory blocks Python has
    allocated and not freed (every object, whatever the allocator does with freed pages), and
    the objects the garbage collector tracks."""
    gc.collect()
    figures = {"blocks": sys.getallocatedblocks(), "objects": len(gc.get_objects())}
    Path(f"{path}.part").write_text(json.dumps(figures))
    os.replace(f"{path}.part", path)


if os.environ.get(PROBE_VARIABLE):
    signal.signal(
        signal.SIGUSR1, lambda signum, frame: _write_allocations(os.environ[PROBE_VARIABLE])
    )


@attrs.define
class Server:
    process: subprocess.Popen[str]
    url: str
    logged: list[str] = attrs.field(factory=list)  # what it wrote to stderr
    probe: Path | None = None  # where it writes its allocations (`serve(probe=True)`)

    def rss_mib(self) -> float:
        status = Path(f"/proc/{self.process.pid}/status").read_text()
        line = next(line for line in status.splitlines() if line.startswith("VmRSS:"))
        return int(line.split()[1]) / 1024

    async def allocations(self) -> dict[str, int]:
        """The server's live Python allocations now (``blocks``, ``objects``: see
        `_write_allocations`); only for a server started with ``probe=True``."""
        if self.probe is None:
            raise RuntimeError("the server was started without probe=True")
        self.probe.unlink(missing_ok=True)
        self.process.send_signal(signal.SIGUSR1)
        with trio.fail_after(60):
            # (another process writes it: there is no event to wait on)
            while not self.probe.exists():  # noqa: ASYNC110
                await trio.sleep(0.05)
        figures: dict[str, int] = json.loads(self.probe.read_text())
        return figures


@contextmanager
def serve(
    *options: str, open_files: int | None = None, leak: int = 0, probe: bool = False
) -> Iterator[Server]:
    """This file's app under ``mrtr-trio serve --http``, default settings unless *options*
    say otherwise; *open_files* lowers its limit of open files (``ulimit -n``); each flow
    leaks *leak* bytes; with *probe*, `Server.allocations` can ask it its allocations."""
    hooks = {LEAK_VARIABLE: str(leak)} if leak else {}
    probed: Path | None = None
    if probe:
        probed = Path(tempfile.mkdtemp(prefix="mrtr-load-")) / "allocations.json"
        hooks[PROBE_VARIABLE] = str(probed)
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "mrtr_trio._cli",
            "serve",
            f"{__file__}:app",
            "--http",
            "127.0.0.1:0",
            *options,
        ],
        env={**os.environ, KEY_VARIABLE: secrets.token_hex(32), **hooks, **_server_env()},
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=None if open_files is None else functools.partial(_limit_files, open_files),
    )
    assert process.stderr is not None
    drain: threading.Thread | None = None
    try:
        before: list[str] = []  # what the server logged before its banner
        for _ in range(BANNER_WITHIN):
            line = process.stderr.readline()
            if not line or line.startswith(BANNER):
                break
            before.append(line)
        if not line.startswith(BANNER):
            raise RuntimeError(f"no {BANNER!r} line from the server; it wrote: {''.join(before)}")
        served = Server(process, line.rsplit(" ", 1)[1].strip(), before, probed)
        # Keep reading what the server logs, or a full pipe would stall it mid-run.
        drain = threading.Thread(target=_drain, args=(process.stderr, served.logged), daemon=True)
        drain.start()
        yield served
    finally:
        process.terminate()
        process.wait(timeout=30)
        if drain is not None:
            drain.join(timeout=5)  # it ends at the pipe's end
        process.stderr.close()
        if probed is not None:
            shutil.rmtree(probed.parent, ignore_errors=True)


def _limit_files(limit: int) -> None:
    resource.setrlimit(resource.RLIMIT_NOFILE, (limit, limit))


def _drain(stream: Any, logged: list[str]) -> None:
    for line in stream:
        logged.append(line)
        if "Traceback" in line or "ERROR" in line:
            print(f"server: {line}", end="", file=sys.stderr)


def _server_env() -> dict[str, str]:
    """Extra environment for the server process, from MRTR_LOAD_SERVER_ENV (``A=1,B=2``)."""
    text = os.environ.get("MRTR_LOAD_SERVER_ENV", "")
    return dict(item.split("=", 1) for item in text.split(",") if item)


# ------------------------------------------------------------------------------- clients

ANSWER = {"action": "accept", "content": {"ok": True}}
ACCEPT = "application/json, text/event-stream"


async def _at_once() -> None:
    """A flow's default ``ready``: go on at once."""


async def legacy_flow(
    http: httpx2.AsyncClient, url: str, job: str, ready: Callable[[], Awaitable[None]] = _at_once
) -> str:
    headers = {"Content-Type": "application/json", "Accept": ACCEPT}
    init = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {
            "protocolVersion": "2025-11-25",
            "capabilities": {"elicitation": {}},
            "clientInfo": {"name": "load", "version": "0"},
        },
    }
    response = await http.post(url, json=init, headers=headers)
    response.raise_for_status()
    headers["Mcp-Session-Id"] = response.headers["mcp-session-id"]
    headers["MCP-Protocol-Version"] = "2025-11-25"
    notified = {"jsonrpc": "2.0", "method": "notifications/initialized"}
    (await http.post(url, json=notified, headers=headers)).raise_for_status()
    call = {
        "jsonrpc": "2.0",
        "id": 2,
        "method": "tools/call",
        "params": {"name": "confirm", "arguments": {"job": job}},
    }
    try:
        async with http.stream("POST", url, json=call, headers=headers) as stream:
            stream.raise_for_status()
            async for line in stream.aiter_lines():
                if not line.startswith("data:") or not line[5:].strip():
                    continue
                message = json.loads(line[5:])
                if message.get("method") == "elicitation/create":
                    await ready()  # (together: every flow suspended in the server's ask)
                    answer = {"jsonrpc": "2.0", "id": message["id"], "result": ANSWER}
                    (await http.post(url, json=answer, headers=headers)).raise_for_status()
                elif message.get("id") == 2:
                    return _text(message)
        raise RuntimeError("the stream ended without a result")
    finally:
        await http.delete(url, headers=headers)


async def modern_flow(
    http: httpx2.AsyncClient, url: str, job: str, ready: Callable[[], Awaitable[None]] = _at_once
) -> str:
    meta = {
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {"elicitation": {}},
    }
    headers = {
        "Content-Type": "application/json",
        "Accept": ACCEPT,
        "MCP-Protocol-Version": "2026-07-28",
        "Mcp-Method": "tools/call",
        "Mcp-Name": "confirm",
    }
    params: dict[str, Any] = {"name": "confirm", "arguments": {"job": job}, "_meta": meta}
    for round_ in range(3):
        body = {"jsonrpc": "2.0", "id": round_, "method": "tools/call", "params": params}
        response = await http.post(url, json=body, headers=headers)
        response.raise_for_status()
        message = response.json()
        result = message.get("result") or {}
        if result.get("resultType") != "input_required":
            return _text(message)
        await ready()  # (together: every flow's first round answered before any retry)
        params = {
            **params,
            "requestState": result["requestState"],
            "inputResponses": {key: ANSWER for key in result["inputRequests"]},
        }
    raise RuntimeError("still input_required after 3 rounds")


def _text(message: dict[str, Any]) -> str:
    if "error" in message:
        raise RuntimeError(f"JSON-RPC error {message['error']}")
    return str(message["result"]["content"][0]["text"])


FLOWS = {"legacy": legacy_flow, "modern": modern_flow}


# ----------------------------------------------------------------------------------- run


@attrs.frozen
class Result:
    era: str
    n: int
    completed: int
    errors: dict[str, int]
    p50_ms: float
    p99_ms: float
    wall_s: float
    rss_before: float
    rss_peak: float
    rss_after: float

    @property
    def rss_back(self) -> bool:
        return self.rss_after <= self.rss_before * 1.10

    def row(self) -> list[str]:
        errors = ", ".join(f"{k} x{v}" for k, v in sorted(self.errors.items())) or "0"
        return [
            self.era,
            str(self.n),
            str(self.completed),
            errors,
            f"{self.p50_ms:.0f}",
            f"{self.p99_ms:.0f}",
            f"{self.wall_s:.1f}",
            f"{self.rss_before:.0f}",
            f"{self.rss_peak:.0f}",
            f"{self.rss_after:.0f}",
            f"{(self.rss_after / self.rss_before - 1) * 100:+.0f}%",
        ]


HEADERS = [
    "era",
    "N",
    "completed",
    "errors",
    "p50 ms",
    "p99 ms",
    "wall s",
    "RSS before MiB",
    "RSS peak MiB",
    "RSS after MiB",
    "after vs before",
]


#: With ``run(together=True)``: how many flows may be on their way to, or from, the point where
#: all are held, at a time.
WAVE = 50


class _Together:
    """Lets flows start at most `WAVE` at a time, holds each at its ``ready`` point until all
    *n* have reached it (or failed before it), then lets them go on at most `WAVE` at a time:
    every burst has all its flows open at once, and no more than a wave starting or finishing
    at once, however fast the host runs them."""

    def __init__(self, n: int) -> None:
        self.missing = n
        self.everyone = trio.Event()
        self.wave = trio.CapacityLimiter(WAVE)

    def arrive(self) -> None:
        self.missing -= 1
        if self.missing == 0:
            self.everyone.set()


async def run(server: Server, era: str, n: int, settle: float, *, together: bool = False) -> Result:
    """*n* flows of *era* started at once; with *together*, each waits at its ``ready`` point
    (legacy: the elicitation received; modern: ``input_required`` received) until all have
    reached it; it starts, and goes on from there, in waves of `WAVE` flows (its latency
    includes the waits)."""
    flow = FLOWS[era]
    latencies: list[float] = []
    errors: collections.Counter[str] = collections.Counter()
    before = server.rss_mib()
    peak = before
    finished = trio.Event()

    gate = _Together(n)

    async def one(index: int) -> None:
        arrived = waved = False

        async def ready() -> None:
            nonlocal arrived, waved
            if together and not arrived:
                arrived = True
                gate.wave.release()
                waved = False
                gate.arrive()
                await gate.everyone.wait()
                await gate.wave.acquire()
                waved = True

        started = time.perf_counter()
        if together:
            await gate.wave.acquire()
            waved = True
        try:
            text = await flow(http, server.url, f"job{index}", ready)
            if text != f"job{index}: True":
                raise RuntimeError(f"wrong result {text!r}")
            latencies.append(time.perf_counter() - started)
        except Exception as error:
            errors[type(error).__name__] += 1
        finally:
            if not arrived:  # failed before its ready point: the others need not wait for it
                arrived = True
                gate.arrive()
            if waved:
                gate.wave.release()

    async def sample() -> None:
        nonlocal peak
        while not finished.is_set():
            peak = max(peak, server.rss_mib())
            await trio.sleep(0.05)

    started = time.perf_counter()
    # One client, no pool limit: every flow in flight has its own connections.
    limits = httpx2.Limits(max_connections=None, max_keepalive_connections=None)
    async with httpx2.AsyncClient(timeout=120, limits=limits) as http, trio.open_nursery() as outer:
        outer.start_soon(sample)
        async with trio.open_nursery() as flows:
            for index in range(n):
                flows.start_soon(one, index)
        wall = time.perf_counter() - started
        finished.set()
    await trio.sleep(settle)  # the server finishes its cleanup and goes idle
    after = server.rss_mib()
    ordered = sorted(latencies) or [float("nan")]
    return Result(
        era,
        n,
        len(latencies),
        dict(errors),
        statistics.median(ordered) * 1000,
        ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))] * 1000,
        wall,
        before,
        peak,
        after,
    )


async def measure(
    sizes: list[int], eras: list[str], settle: float, bursts: int = 1
) -> list[Result]:
    """Each size in turn on one server per era, the largest *bursts* times."""
    results = []
    for era in eras:
        with serve() as server:  # a fresh server per era, so each era's RSS stands alone
            await run(server, era, 10, settle)  # warm-up: imports and caches
            for n in [*sizes, *[max(sizes)] * (bursts - 1)]:
                result = await run(server, era, n, settle)
                print("  ".join(result.row()), flush=True)
                results.append(result)
    return results


def main(argv: list[str] | None = None) -> None:
    from . import hostile  # it uses this module's server and flows

    parser = argparse.ArgumentParser(prog="python -m benchmarks.load", description=__doc__)
    parser.add_argument(
        "--runs",
        nargs="+",
        choices=["flows", *hostile.RUNS],
        default=["flows", *hostile.RUNS],
        help="the flows per era, and the hostile-client runs (benchmarks/hostile.py)",
    )
    parser.add_argument("--n", type=int, nargs="+", default=[100, 300, 1000])
    parser.add_argument(
        "--bursts", type=int, default=3, help="bursts of the largest N, one after the other"
    )
    parser.add_argument("--eras", nargs="+", choices=sorted(FLOWS), default=["legacy", "modern"])
    parser.add_argument(
        "--settle",
        type=float,
        default=KEEP_ALIVE_TIMEOUT + 5,
        help="idle seconds before 'after' (default: past the keep-alive timeout, when "
        "connections the clients closed are gone too)",
    )
    parser.add_argument("--write", action="store_true", help="update docs/reliability.md")
    args = parser.parse_args(argv)
    from .report import Table, replace_block

    missed: list[str] = []
    if "flows" in args.runs:
        print("  ".join(HEADERS), flush=True)
        results = trio.run(measure, args.n, args.eras, args.settle, args.bursts)
        title = "Load: simultaneous flows per era, HTTP on loopback, default settings"
        table = Table(title, HEADERS, [r.row() for r in results])
        print()
        print(table.text())
        missed += [
            f"flows {r.era} {r.n}" for r in results if r.n >= 1000 and (r.errors or not r.rss_back)
        ]
        if args.write:
            replace_block(ROOT / "docs" / "reliability.md", "load", table.markdown())
    others = [name for name in args.runs if name != "flows"]
    if others:
        for result in trio.run(hostile.run_all, others):
            table = Table(f"Hostile clients: {result.run}", ["measured", "value"], result.figures)
            print()
            print(table.text())
            if not result.ok:
                missed.append(result.run)
            if args.write:
                block = f"load-{result.run}"
                replace_block(ROOT / "docs" / "reliability.md", block, table.markdown())
    if missed:
        print(f"\ntarget missed: {missed}")
        raise SystemExit(1)


if __name__ == "__main__":
    main()
