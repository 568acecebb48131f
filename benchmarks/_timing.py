"""Measuring: process CPU time per call, in batches sized to a time budget, and the summary
(median and 10th-90th percentiles) of a set of samples."""

from __future__ import annotations

import gc
import math
import statistics
import time
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

import attrs

__all__ = ["Stats", "cpu_us"]


@attrs.frozen
class Stats:
    """A summary of samples: the median, the 10th and 90th percentiles, and how many."""

    median: float
    p10: float
    p90: float
    samples: int

    @classmethod
    def of(cls, samples: Sequence[float]) -> Stats:
        if not samples:
            raise ValueError("no samples")
        ordered = sorted(samples)
        return cls(
            statistics.median(ordered),
            _percentile(ordered, 0.1),
            _percentile(ordered, 0.9),
            len(ordered),
        )

    def as_json(self) -> dict[str, float]:
        return {"median": self.median, "p10": self.p10, "p90": self.p90, "samples": self.samples}


def _percentile(ordered: Sequence[float], q: float) -> float:
    position = q * (len(ordered) - 1)
    low = math.floor(position)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


async def cpu_us(
    call: Callable[[], Awaitable[Any]], *, budget: float, min_batches: int = 5
) -> Stats:
    """Process CPU time of one ``await call()``, in microseconds.

    Calls run in batches of at least 2 ms each (so the clock's own cost is negligible) until
    *budget* seconds of CPU are spent and at least *min_batches* batches are done; each batch
    gives one sample (its time divided by its size).
    """
    await call()  # warm caches and imports
    gc.collect()
    start = time.process_time_ns()
    await call()
    once = max(time.process_time_ns() - start, 1)
    batch = max(1, 2_000_000 // once)
    samples: list[float] = []
    spent = 0
    while spent < budget * 1e9 or len(samples) < min_batches:
        start = time.process_time_ns()
        for _ in range(batch):
            await call()
        elapsed = time.process_time_ns() - start
        spent += elapsed
        samples.append(elapsed / batch / 1000)
    return Stats.of(samples)
