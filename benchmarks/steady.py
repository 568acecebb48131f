"""The load run's steady state: identical bursts of simultaneous flows against one server, per
era, and the server's resident set after each (for the targets: once the first burst has
warmed the server, a later burst must not grow it, and no flow may fail).

It reuses [benchmarks.load][]'s server (a real ``mrtr-trio serve --http`` process with default
settings) and its flows, which speak the wire by hand over HTTP on loopback. Each era gets a
fresh server, a warm-up of a few flows, then *count* bursts of *flows* flows started at once;
after each burst the server idles *settle* seconds before its RSS is read.

The flows of a burst are held together (``load.run(together=True)``): a legacy flow waits with
its elicitation unanswered, a modern one with its ``input_required`` unretried, until every
flow of the burst has got that far; then they finish at most ``load.WAVE`` at a time. So each
burst has all its flows open at once, and reaches the same peak, however fast the host runs
them. (The resident set after a burst is its peak: the allocator keeps the pages. Without the
hold, a slow first burst, say while other work competes for the cores, has fewer flows in
flight at a time than the next, and the next grows the resident set to its own higher peak;
with the hold but all released at once, how many finish at the same moment varies the same
way. Either reads as growth without any leak.)
"""

from __future__ import annotations

from typing import Any

from . import load

__all__ = ["ERAS", "bursts"]

ERAS = ("legacy", "modern")


async def bursts(flows: int, count: int, settle: float) -> dict[str, dict[str, Any]]:
    """Era -> the RSS before the first burst (after the warm-up) and each burst's figures."""
    results: dict[str, dict[str, Any]] = {}
    for era in ERAS:
        with load.serve() as server:
            await load.run(server, era, 10, settle)  # warm-up: imports and caches
            runs = [await load.run(server, era, flows, settle, together=True) for _ in range(count)]
        results[era] = {
            "flows": flows,
            "settle_s": settle,
            "rss_before_mib": runs[0].rss_before,
            "bursts": [
                {
                    "completed": run.completed,
                    "errors": sum(run.errors.values()),
                    "errors_by_kind": dict(run.errors),
                    "p50_ms": run.p50_ms,
                    "p99_ms": run.p99_ms,
                    "wall_s": run.wall_s,
                    "rss_peak_mib": run.rss_peak,
                    "rss_after_mib": run.rss_after,
                }
                for run in runs
            ],
        }
    return results
