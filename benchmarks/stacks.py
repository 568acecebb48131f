"""What each HTTP stack costs on a legacy trip, apart from the server behind it.

    python -m benchmarks.stacks [--flows N] [--runs R]

The end-to-end benchmark ([benchmarks.e2e][]) serves each implementation behind the ASGI stack
its product ships (see [benchmarks.servers.__main__][]): mrtr_trio's `App.asgi()` puts
[SessionGuard][mrtr_trio.mcp._sessions.SessionGuard] (a dropped connection cancels its call,
an answer the SDK would drop fails its round at once) in front of the SDK's session manager on
a bare endpoint (no Starlette), while the SDK servers run the SDK's `streamable_http_app()`
(its session manager inside a Starlette app) as it comes. So a/c over
HTTP compares both the servers and their stacks. This benchmark separates the two: it serves
(a) mrtr_trio and (c) sdk-handbuilt each behind both stacks, four processes at once, runs the
3-question trip on a legacy (2025-11-25) session with the official ``mcp.Client`` over
loopback, interleaved (the order rotates each flow), and reads each server's CPU time per leg
from ``/proc`` as [benchmarks.e2e][] does. Each run starts fresh processes; the figures are
medians over the runs, with their spread.

- *stack* = the server's CPU per leg behind mrtr_trio's stack minus behind the SDK's (the
  guard and mrtr_trio's session knobs), measured for a and for c;
- *server* = a's CPU per leg minus c's, behind the same stack (the App, the runtime's live
  driver and its checks against the hand-written `elicit_form` calls).
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any

import trio
from mcp import Client

from . import client
from .e2e import LEGS, cpu_seconds, flow, served

__all__ = ["VARIANTS", "stacks"]

#: label -> (implementation, stack)
VARIANTS = {
    "a, mrtr_trio stack": ("mrtr_trio", "mrtr_trio"),
    "a, SDK stack": ("mrtr_trio", "sdk"),
    "c, mrtr_trio stack": ("sdk-handbuilt", "mrtr_trio"),
    "c, SDK stack": ("sdk-handbuilt", "sdk"),
}


async def _run(flows: int, warmup: int) -> dict[str, float]:
    """One run: fresh servers; label -> server CPU in ms per leg."""
    labels = list(VARIANTS)
    with tempfile.TemporaryDirectory() as scratch:
        async with AsyncExitStack() as stack:
            clients: dict[str, Client] = {}
            pids: dict[str, int] = {}
            for label, (name, asgi) in VARIANTS.items():
                target, pid = await stack.enter_async_context(
                    served(name, "http", Path(scratch), asgi)
                )
                clients[label] = await stack.enter_async_context(
                    Client(target, mode="legacy", elicitation_callback=client.answer)
                )
                pids[label] = pid()
            for _ in range(warmup):
                for label in labels:
                    await flow(clients[label])
            before = {label: cpu_seconds(pids[label]) for label in labels}
            for i in range(flows):
                for label in labels[i % len(labels) :] + labels[: i % len(labels)]:
                    await flow(clients[label])
            after = {label: cpu_seconds(pids[label]) for label in labels}
    return {label: (after[label] - before[label]) * 1e3 / flows / LEGS for label in labels}


async def stacks(flows: int, runs: int, warmup: int = 10) -> dict[str, Any]:
    """Per label, and for the differences, the median over *runs* of the CPU per leg (ms) and
    the runs' values."""
    samples = [await _run(flows, warmup) for _ in range(runs)]
    derived = {
        "stack, for a": ("a, mrtr_trio stack", "a, SDK stack"),
        "stack, for c": ("c, mrtr_trio stack", "c, SDK stack"),
        "server, SDK stack": ("a, SDK stack", "c, SDK stack"),
        "server, mrtr_trio stack": ("a, mrtr_trio stack", "c, mrtr_trio stack"),
        "a as shipped - c as shipped": ("a, mrtr_trio stack", "c, SDK stack"),
    }
    rows: dict[str, list[float]] = {label: [s[label] for s in samples] for label in VARIANTS}
    for name, (x, y) in derived.items():
        rows[name] = [s[x] - s[y] for s in samples]
    return {
        name: {"median_ms": statistics.median(values), "runs_ms": values}
        for name, values in rows.items()
    }


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.stacks")
    parser.add_argument("--flows", type=int, default=300, help="timed flows per run and server")
    parser.add_argument("--runs", type=int, default=5, help="runs, each with fresh servers")
    options = parser.parse_args()
    result = trio.run(stacks, options.flows, options.runs)
    print(f"server CPU per leg, legacy HTTP, {options.flows} trips x {options.runs} runs (ms)")
    for name, row in result.items():
        runs = " ".join(f"{v:6.3f}" for v in row["runs_ms"])
        print(f"{name:30s} {row['median_ms']:7.3f}   runs: {runs}")


if __name__ == "__main__":
    main()
