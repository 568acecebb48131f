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

After each burst the server also reports its live Python allocations (``sys.getallocatedblocks``
after a collection, and the objects the collector tracks): a count of what is still allocated,
which the allocator's keeping or returning pages does not move, shown beside the RSS.

``python -m benchmarks.steady [--leak BYTES]`` runs the bursts alone and judges them as the full
run does (exit 1 naming each missed target); ``--leak`` makes every flow leak *BYTES* in the
server, the self-test that shows the targets fail on a leak.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

import trio

from . import load

__all__ = ["ERAS", "bursts", "main"]

ERAS = ("legacy", "modern")


async def bursts(
    flows: int, count: int, settle: float, *, leak: int = 0, eras: tuple[str, ...] = ERAS
) -> dict[str, dict[str, Any]]:
    """Era -> the RSS and live allocations before the first burst (after the warm-up), and each
    burst's figures; with *leak*, every flow leaks that many bytes in the server."""
    results: dict[str, dict[str, Any]] = {}
    for era in eras:
        with load.serve(leak=leak, probe=True) as server:
            await load.run(server, era, 10, settle)  # warm-up: imports and caches
            before = await server.allocations()
            runs, allocations = [], []
            for _ in range(count):
                runs.append(await load.run(server, era, flows, settle, together=True))
                allocations.append(await server.allocations())
        results[era] = {
            "flows": flows,
            "settle_s": settle,
            **({"leak_bytes_per_flow": leak} if leak else {}),
            "rss_before_mib": runs[0].rss_before,
            "blocks_before": before["blocks"],
            "objects_before": before["objects"],
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
                    "blocks_after": allocated["blocks"],
                    "objects_after": allocated["objects"],
                }
                for run, allocated in zip(runs, allocations, strict=True)
            ],
        }
    return results


def main(argv: list[str] | None = None) -> int:
    from .report import tables
    from .targets import verdicts

    parser = argparse.ArgumentParser(prog="python -m benchmarks.steady", description=__doc__)
    parser.add_argument("--flows", type=int, default=1000, help="flows per burst")
    parser.add_argument("--bursts", type=int, default=3)
    parser.add_argument("--settle", type=float, default=5.0, help="idle seconds before RSS")
    parser.add_argument("--eras", nargs="+", choices=ERAS, default=list(ERAS))
    parser.add_argument("--leak", type=int, default=0, help="bytes each flow leaks (self-test)")
    args = parser.parse_args(argv)
    found = {
        "load": trio.run(
            lambda: bursts(
                args.flows, args.bursts, args.settle, leak=args.leak, eras=tuple(args.eras)
            )
        )
    }
    judged = [v for v in verdicts(found) if v.met is not None]
    print("\n\n".join(t.text() for t in tables(found, judged, enforced=True)))
    missed = [v.name for v in judged if not v.met]
    if missed:
        print(f"\nMISSED: {missed}", file=sys.stderr)
    return 1 if missed else 0


if __name__ == "__main__":
    sys.exit(main())
