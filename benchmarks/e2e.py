"""End to end, side by side: the 3-question trip served by each implementation of
[benchmarks.servers][] in its own server process, driven by the official ``mcp.Client`` under
trio, over stdio and Streamable HTTP (hypercorn's trio worker), on a legacy session
(2025-11-25) and on 2026-07-28.

Over HTTP each implementation runs behind the ASGI stack its product ships: mrtr_trio behind
`App.asgi()` (the SDK's session manager with mrtr_trio's session knobs, on a bare endpoint
with no web framework, behind [SessionGuard][mrtr_trio.mcp._sessions.SessionGuard]), the SDK
servers behind the SDK's `streamable_http_app()` as it comes; all on `mrtr_trio.mcp`'s
hypercorn settings.
[benchmarks.stacks][] measures what each stack costs apart from the server behind it.

Per transport and era, the three servers run at once and the iterations interleave them (the
order rotates each iteration), so machine noise hits all three alike. Each flow's wall-clock
latency is timed at the client; a run's a/c and a/b are medians of its per-iteration ratios.
Every transport and era is run three times (fresh processes each run, the runs of all legs
interleaved), and its a/c and a/b are the medians of its three runs'. Each
server's CPU time (utime + stime from ``/proc/PID/stat``, clock-tick resolution) is read before
and after the timed iterations. A flow is 4 legs in both
eras: on 2026-07-28 four ``tools/call`` requests, on legacy one call and three
``elicitation/create`` round trips inside it.
"""

from __future__ import annotations

import os
import statistics
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Callable
from contextlib import AsyncExitStack, asynccontextmanager
from pathlib import Path
from typing import Any

import attrs
import mcp_types as types
import trio
from mcp import Client, StdioServerParameters

from . import client, flows
from ._timing import Stats
from .servers import IMPLEMENTATIONS

__all__ = ["ERAS", "LEGS", "TRANSPORTS", "cpu_seconds", "flow", "served", "side_by_side"]

TRANSPORTS = ("stdio", "http")
#: era -> the client's mode
ERAS = {"2025-11-25": "legacy", "2026-07-28": "2026-07-28"}
LEGS = 4
ARGUMENTS = {"traveller": flows.TRAVELLER}
EXPECTED = flows.booking(flows.TRAVELLER, "Lisbon", "2026-09-01", 3)
ROOT = Path(__file__).resolve().parent.parent


def cpu_seconds(pid: int) -> float:
    """User plus system CPU time of process *pid*, all its threads, from ``/proc``."""
    with open(f"/proc/{pid}/stat") as stat:
        fields = stat.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _command(name: str, transport: str, *extra: str) -> list[str]:
    return [sys.executable, "-m", "benchmarks.servers", name, transport, *extra]


@asynccontextmanager
async def served(
    name: str, transport: str, scratch: Path, stack: str = "own"
) -> AsyncIterator[tuple[Any, Callable[[], int]]]:
    """Start *name*'s server (over HTTP behind *stack*, see [benchmarks.servers.__main__][]);
    yield what ``mcp.Client`` connects to and how to find its pid."""
    if transport == "stdio":  # the client spawns it; the server writes its pid first
        pidfile = scratch / f"{name}.pid"
        command = _command(name, "stdio", "--pidfile", str(pidfile))
        yield (
            StdioServerParameters(command=command[0], args=command[1:], cwd=ROOT),
            lambda: int(pidfile.read_text()),
        )
        return
    process = await trio.lowlevel.open_process(
        _command(name, "http", "--stack", stack), stdin=-1, stdout=-1, cwd=ROOT
    )
    try:
        assert process.stdout is not None and process.stdin is not None
        line = b""
        with trio.fail_after(30):
            while not line.endswith(b"\n"):
                chunk = await process.stdout.receive_some()
                if not chunk:
                    raise RuntimeError(f"{name} exited before serving HTTP")
                line += chunk
        yield line.decode().strip(), lambda: process.pid
    finally:
        with trio.move_on_after(10) as cleanup:
            cleanup.shield = True
            if process.stdin is not None:
                await process.stdin.aclose()  # the server stops when its stdin closes
            with trio.move_on_after(5):
                await process.wait()
            if process.returncode is None:
                process.kill()
                await process.wait()


def _text(result: types.CallToolResult) -> str:
    return "".join(b.text for b in result.content if isinstance(b, types.TextContent))


async def flow(client: Client) -> None:
    result = await client.call_tool("trip", ARGUMENTS)
    if result.is_error or _text(result) != EXPECTED:
        raise RuntimeError(f"the trip flow returned {result!r}")


async def _state_sizes(session: Client) -> list[int]:
    """Characters of ``requestState`` after 0, 1 and 2 answers (a manual 2026-07-28 drive)."""
    states = await client.rounds(session, "trip", ARGUMENTS, keep=(0, 1, 2))
    return [len(states[k].request_state or "") for k in (0, 1, 2)]


@attrs.frozen
class _Run:
    """One interleaved run of a transport and era: each server's latencies (ms, in iteration
    order), its CPU seconds over them, and its token sizes."""

    latencies: dict[str, list[float]]
    cpu_seconds: dict[str, float]
    sizes: dict[str, list[int]]


async def _combo(transport: str, era: str, iterations: int, warmup: int) -> _Run:
    names = list(IMPLEMENTATIONS)
    with tempfile.TemporaryDirectory() as scratch:
        async with AsyncExitStack() as stack:
            clients: dict[str, Client] = {}
            pids: dict[str, Callable[[], int]] = {}
            for name in names:
                target, pid = await stack.enter_async_context(
                    served(name, transport, Path(scratch))
                )
                clients[name] = await stack.enter_async_context(
                    Client(target, mode=ERAS[era], elicitation_callback=client.answer)
                )
                if clients[name].protocol_version != era:
                    raise RuntimeError(f"{name} negotiated {clients[name].protocol_version}")
                pids[name] = pid
            for _ in range(warmup):
                for name in names:
                    await flow(clients[name])
            latencies: dict[str, list[float]] = {name: [] for name in names}
            cpu_before = {name: cpu_seconds(pids[name]()) for name in names}
            for i in range(iterations):
                for name in names[i % len(names) :] + names[: i % len(names)]:
                    start = time.perf_counter_ns()
                    await flow(clients[name])
                    latencies[name].append((time.perf_counter_ns() - start) / 1e6)
            cpu = {name: cpu_seconds(pids[name]()) - cpu_before[name] for name in names}
            sizes = {}
            if ERAS[era] != "legacy":
                sizes = {name: await _state_sizes(clients[name]) for name in names}
    return _Run(latencies, cpu, sizes)


def _paired(run: _Run, x: str, y: str) -> float:
    """The median of the per-iteration ratios of *x*'s latency to *y*'s: flows of one
    iteration run back to back, so they share the machine's state."""
    pairs = zip(run.latencies[x], run.latencies[y], strict=True)
    return statistics.median(p / q for p, q in pairs)


def _summary(names: list[str], runs: list[_Run]) -> dict[str, Any]:
    """The runs of one transport and era: a/c and a/b are the medians of the runs' own paired
    ratios (a run's ratio is already a median); latency and CPU pool every run."""
    a, b, c = names
    iterations = sum(len(run.latencies[a]) for run in runs)
    latencies = {n: [ms for run in runs for ms in run.latencies[n]] for n in names}
    per_flow_cpu = {n: sum(run.cpu_seconds[n] for run in runs) * 1e3 / iterations for n in names}
    median = {n: statistics.median(latencies[n]) for n in names}
    per_run = [{"a/c": _paired(run, a, c), "a/b": _paired(run, a, b)} for run in runs]
    return {
        "latency_ms": {n: Stats.of(latencies[n]).as_json() for n in names},
        "server_cpu_ms_per_flow": per_flow_cpu,
        "server_cpu_ms_per_leg": {n: per_flow_cpu[n] / LEGS for n in names},
        # Judged on the median over runs of each run's paired ratio; the ratio of the pooled
        # medians is kept for reference.
        "a/c": statistics.median(r["a/c"] for r in per_run),
        "a/b": statistics.median(r["a/b"] for r in per_run),
        "runs": per_run,
        "a/c of medians": median[a] / median[c],
        "a/b of medians": median[a] / median[b],
        "state_chars": dict(runs[-1].sizes),
        "iterations": iterations,
    }


async def side_by_side(iterations: int, warmup: int, runs: int = 3) -> dict[str, dict[str, Any]]:
    """Every transport x era: ``"stdio 2026-07-28"`` -> its summary over *runs* runs of
    *iterations* interleaved flows each. The runs interleave too: every transport and era has
    its first run before any has its second, so a noisy minute of the host touches one run of
    several legs rather than every run of one."""
    combos = [(transport, era) for transport in TRANSPORTS for era in ERAS]
    done: dict[tuple[str, str], list[_Run]] = {combo: [] for combo in combos}
    for _ in range(runs):
        for transport, era in combos:
            done[transport, era].append(await _combo(transport, era, iterations, warmup))
    names = list(IMPLEMENTATIONS)
    return {f"{t} {e}": _summary(names, done[t, e]) for t, e in combos}
