"""Memory per suspended live flow: *count* trio tasks, each in `Runtime.run_live` on the trip
flow, all suspended in ``ask`` on one shared `trio.Event`; and the floor to compare with, a bare
trio task holding a suspended async generator and waiting on the same kind of event.

Each measurement runs in a fresh interpreter (``python -m benchmarks.memory KIND COUNT METHOD``
prints JSON), so one does not inherit another's freed memory: ``tracemalloc`` counts the Python
allocations made while the flows are suspended, ``rss`` the growth of the resident set.
"""

from __future__ import annotations

import gc
import json
import os
import secrets
import subprocess
import sys
import tracemalloc
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import trio

from mrtr_trio import Runtime

from . import flows

__all__ = ["KINDS", "measure", "per_flow"]

KINDS = ("mrtr_trio", "bare")
METHODS = ("tracemalloc", "rss")
ROOT = Path(__file__).resolve().parent.parent


def _resident_bytes() -> int:
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


class _Gate:
    """Counts arrivals; holds everyone on one event until released."""

    def __init__(self, expected: int) -> None:
        self.expected = expected
        self.arrived = 0
        self.all_in = trio.Event()
        self.release = trio.Event()

    async def arrive(self) -> None:
        self.arrived += 1
        if self.arrived == self.expected:
            self.all_in.set()
        await self.release.wait()


def _flow_task(gate: _Gate) -> tuple[Callable[..., Awaitable[Any]], tuple[Any, ...]]:
    """The task is `Runtime.run_live` itself, with no wrapper coroutine."""
    runtime = Runtime([secrets.token_bytes(32)])
    arguments = {"traveller": flows.TRAVELLER}

    async def ask(key: str, request: Any) -> Any:
        if not gate.release.is_set():
            await gate.arrive()
        return flows.answer_json(request)

    return runtime.run_live, (flows.trip, arguments, ask)


async def _bare_generator() -> Any:
    received = yield "ask"
    yield received


def _bare_task(gate: _Gate) -> tuple[Callable[..., Awaitable[Any]], tuple[Any, ...]]:
    async def task() -> None:
        generator = _bare_generator()
        try:
            await generator.asend(None)
            await gate.arrive()
        finally:
            await generator.aclose()

    return task, ()


async def _suspended(kind: str, count: int, method: str) -> float:
    gate = _Gate(count)
    task, arguments = _flow_task(gate) if kind == "mrtr_trio" else _bare_task(gate)
    gc.collect()
    if method == "tracemalloc":
        tracemalloc.start()
        before = tracemalloc.get_traced_memory()[0]
    else:
        before = _resident_bytes()
    async with trio.open_nursery() as nursery:
        for _ in range(count):
            nursery.start_soon(task, *arguments)
        await gate.all_in.wait()
        gc.collect()
        if method == "tracemalloc":
            used = tracemalloc.get_traced_memory()[0] - before
            tracemalloc.stop()
        else:
            used = _resident_bytes() - before
        gate.release.set()
    return used / count


def measure(kind: str, count: int, method: str) -> float:
    """Bytes per suspended flow, measured in this process."""
    return trio.run(_suspended, kind, count, method)


def per_flow(count: int) -> dict[str, dict[str, float]]:
    """Bytes per suspended flow for each kind and method, each in a fresh interpreter."""
    results: dict[str, dict[str, float]] = {kind: {} for kind in KINDS}
    for kind in KINDS:
        for method in METHODS:
            output = subprocess.run(
                [sys.executable, "-m", "benchmarks.memory", kind, str(count), method],
                cwd=ROOT,
                check=True,
                capture_output=True,
                text=True,
                timeout=600,
            ).stdout
            results[kind][method] = float(json.loads(output)["bytes_per_flow"])
    return results


if __name__ == "__main__":
    kind, count, method = sys.argv[1], int(sys.argv[2]), sys.argv[3]
    if kind not in KINDS or method not in METHODS:
        raise SystemExit(
            f"usage: python -m benchmarks.memory {'|'.join(KINDS)} COUNT {'|'.join(METHODS)}"
        )
    print(json.dumps({"bytes_per_flow": measure(kind, count, method)}))
