"""Measuring: process CPU time per call, in batches sized to a time budget; two calls measured
side by side, batch for batch, for their ratio; and the summary (median and 10th-90th
percentiles) of a set of samples."""

from __future__ import annotations

import gc
import math
import statistics
import time
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

import attrs

__all__ = ["Paired", "Stats", "cpu_us", "paired_cpu_us"]


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
    batch = await _batch_size(call)
    samples: list[float] = []
    spent = 0.0
    while spent < budget * 1e6 or len(samples) < min_batches:
        sample = await _batch(call, batch)
        spent += sample * batch
        samples.append(sample)
    return Stats.of(samples)


@attrs.frozen
class Paired:
    """Two calls timed side by side: each one's CPU per call, and their ratio (the median of
    the ratios of batches run back to back)."""

    numerator: Stats
    denominator: Stats
    ratio: Stats


async def _batch_size(call: Callable[[], Awaitable[Any]]) -> int:
    await call()  # warm caches and imports
    gc.collect()
    start = time.process_time_ns()
    await call()
    once = max(time.process_time_ns() - start, 1)
    return max(1, 2_000_000 // once)


async def _batch(call: Callable[[], Awaitable[Any]], size: int) -> float:
    start = time.process_time_ns()
    for _ in range(size):
        await call()
    return (time.process_time_ns() - start) / size / 1000


async def paired_cpu_us(
    numerator: Callable[[], Awaitable[Any]],
    denominator: Callable[[], Awaitable[Any]],
    *,
    budget: float,
    min_pairs: int = 9,
) -> Paired:
    """Process CPU time of ``await numerator()`` and ``await denominator()``, in microseconds,
    and the ratio of the first to the second, robust to a machine whose speed drifts.

    The two run in alternating batches (of at least 2 ms each, the order swapped each pair) until
    *budget* seconds of CPU are spent and at least *min_pairs* pairs are done. Each pair's two
    batches run back to back, so they meet the same machine (the same competing work, the same
    clock speed, the same caches); the ratio is the median of the pairs' ratios, so a pair that
    another process disturbed is outvoted, whichever side it hit.
    """
    sizes = (await _batch_size(numerator), await _batch_size(denominator))
    tops: list[float] = []
    bottoms: list[float] = []
    spent = time.process_time()
    while time.process_time() - spent < budget or len(tops) < min_pairs:
        if len(tops) % 2:
            bottom = await _batch(denominator, sizes[1])
            top = await _batch(numerator, sizes[0])
        else:
            top = await _batch(numerator, sizes[0])
            bottom = await _batch(denominator, sizes[1])
        tops.append(top)
        bottoms.append(bottom)
    return Paired(
        Stats.of(tops),
        Stats.of(bottoms),
        Stats.of([t / b for t, b in zip(tops, bottoms, strict=True)]),
    )
