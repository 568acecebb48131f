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
from typing import Any, TypeVar

import trio

from mrtr_trio import Runtime

from . import flows

__all__ = ["KINDS", "allocation_sites", "measure", "per_flow"]

KINDS = ("mrtr_trio", "bare")
METHODS = ("tracemalloc", "rss")
ROOT = Path(__file__).resolve().parent.parent
M = TypeVar("M")
T = TypeVar("T")


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


async def _while_suspended(
    kind: str, count: int, before: Callable[[], M], after: Callable[[M], T]
) -> T:
    """``after(before())``, with *count* flows of *kind* suspended in between."""
    gate = _Gate(count)
    task, arguments = _flow_task(gate) if kind == "mrtr_trio" else _bare_task(gate)
    gc.collect()
    mark = before()
    async with trio.open_nursery() as nursery:
        for _ in range(count):
            nursery.start_soon(task, *arguments)
        await gate.all_in.wait()
        gc.collect()
        result = after(mark)
        gate.release.set()
    return result


def _traced() -> int:
    tracemalloc.start()
    return tracemalloc.get_traced_memory()[0]


def _traced_since(mark: int) -> int:
    used = tracemalloc.get_traced_memory()[0] - mark
    tracemalloc.stop()
    return used


def _resident_since(mark: int) -> int:
    return _resident_bytes() - mark


def _snapshot() -> tracemalloc.Snapshot:
    tracemalloc.start()
    return tracemalloc.take_snapshot()


def _growth_since(mark: tracemalloc.Snapshot) -> list[tracemalloc.StatisticDiff]:
    growth = tracemalloc.take_snapshot().compare_to(mark, "lineno")
    tracemalloc.stop()
    return growth


def measure(kind: str, count: int, method: str) -> float:
    """Bytes per suspended flow, measured in this process."""
    if method == "tracemalloc":
        used = trio.run(_while_suspended, kind, count, _traced, _traced_since)
    else:
        used = trio.run(_while_suspended, kind, count, _resident_bytes, _resident_since)
    return used / count


async def allocation_sites(count: int, top: int) -> list[tuple[str, float]]:
    """Where a suspended live flow's memory is allocated: the *top* source lines by bytes per
    flow (in this process, for `benchmarks.hotspots`)."""
    growth = await _while_suspended("mrtr_trio", count, _snapshot, _growth_since)
    return [(str(diff.traceback[0]), diff.size_diff / count) for diff in growth[:top]]


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
