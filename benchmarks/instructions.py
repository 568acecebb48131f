"""``python -m benchmarks.instructions``: the core's rounds counted in machine instructions.

    python -m benchmarks.instructions [--against DIR] [--kinds complete checkpoint live]

Timings on a shared machine move by 10-30% from one minute to the next; a count of the
instructions a round executes does not. This runs each round under valgrind's callgrind twice
in fresh interpreters (*rounds* and then *rounds* + *extra* times, with ``PYTHONHASHSEED=0``)
and prints the difference divided by *extra*: the instructions of one round, setup excluded,
steady to a few hundred. It is for comparing two versions of the code side by side (``--against``
another checkout, such as a ``git worktree`` of an older commit), not for the targets, which
are stated in time: an instruction is not a fixed cost (an allocation, a cache miss and a
branch taken count alike), so a change should still be timed. It needs ``valgrind`` (Debian:
``apt-get install valgrind``) and takes about half a minute per round kind and checkout.

The kinds are the core benchmark's: ``complete`` (the 4-question trip's round that replays 3
answers, takes the 4th and completes), ``checkpoint`` (replays 2, takes the 3rd, seals a token)
and ``live`` (the whole trip on `Runtime.run_live` with an in-memory ``ask``: 4 rounds); and,
asked for by name, ``long`` (the survey's round that replays 1000 answers and completes: counted
over 1/100 of the rounds, being 300 times longer) and ``waiting`` (the live trip with an ``ask``
that waits once, at a trio checkpoint, before answering).
"""

from __future__ import annotations

import argparse
import os
import re
import secrets
import shutil
import subprocess
import sys
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import Any

import trio

from mrtr_trio import Runtime

from . import core, flows

__all__ = ["KINDS", "count", "round_call", "run_rounds"]

KINDS = ("complete", "checkpoint", "live")
#: The kinds counted only when named (``--kinds``), with the share of the rounds they count.
MORE_KINDS = {"long": 100, "waiting": 1}
ROOT = Path(__file__).resolve().parent.parent


async def round_call(kind: str) -> Callable[[], Awaitable[Any]]:
    """A call that runs one round of *kind* (set up, and run once, here)."""
    runtime = Runtime([secrets.token_bytes(32)])
    if kind == "long":
        return await core.long_round(1000)
    if kind == "waiting":
        return core.live_calls().trip_waiting
    if kind == "live":

        async def ask(key: str, request: Any) -> Any:
            return flows.answer_json(request)

        async def call() -> Any:
            return await runtime.run_live(flows.plan_trip, core.TRIP_ARGUMENTS, ask)

    else:
        if kind not in KINDS:
            raise ValueError(f"unknown round kind {kind!r}; one of {KINDS}")
        answered = 3 if kind == "complete" else 2
        states = await core.drive(runtime, flows.plan_trip, core.TRIP_ARGUMENTS, keep=(answered,))
        call = core.round_call(runtime, flows.plan_trip, core.TRIP_ARGUMENTS, states[answered])
    await call()
    return call


async def run_rounds(kind: str, rounds: int) -> None:
    """Set a round of *kind* up and run it *rounds* times (what valgrind counts)."""
    call = await round_call(kind)
    for _ in range(rounds):
        await call()


def _collected(kind: str, rounds: int, source: Path) -> int:
    """Instructions callgrind counts for a whole process running *rounds* rounds of *kind*
    with mrtr_trio from *source* (and this checkout's benchmark harness, so an older checkout
    needs no copy of this module)."""
    environment = dict(os.environ, PYTHONHASHSEED="0", PYTHONPATH=str(source / "src"))
    result = subprocess.run(
        [
            "valgrind",
            "--tool=callgrind",
            "--callgrind-out-file=/dev/null",
            sys.executable,
            "-m",
            "benchmarks.instructions",
            "--child",
            kind,
            str(rounds),
        ],
        cwd=ROOT,
        env=environment,
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
    )
    found = re.search(r"Collected : (\d+)", result.stderr)
    if result.returncode != 0 or found is None:
        raise RuntimeError(f"callgrind failed for {kind} in {source}:\n{result.stderr[-2000:]}")
    return int(found.group(1))


def count(kind: str, source: Path = ROOT, rounds: int = 100, extra: int = 2000) -> float:
    """Instructions per round of *kind* with the code in *source*."""
    return (_collected(kind, rounds + extra, source) - _collected(kind, rounds, source)) / extra


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.instructions", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("--kinds", nargs="+", choices=[*KINDS, *MORE_KINDS], default=list(KINDS))
    parser.add_argument("--against", type=Path, help="another checkout to count beside this one")
    parser.add_argument("--extra", type=int, default=2000, help="rounds counted (default 2000)")
    parser.add_argument("--child", nargs=2, metavar=("KIND", "ROUNDS"), help=argparse.SUPPRESS)
    options = parser.parse_args(argv)
    if options.child:
        kind, rounds = options.child
        trio.run(run_rounds, kind, int(rounds))
        return
    if shutil.which("valgrind") is None:
        raise SystemExit("valgrind is not installed (Debian: apt-get install valgrind)")
    sources = [("this checkout", ROOT)]
    if options.against is not None:
        sources.append((str(options.against), options.against.resolve()))
    header = ["round", *(name for name, _ in sources)]
    if len(sources) == 2:
        header.append("change here")
    print("| " + " | ".join(header) + " |")
    print("|---|" + "---:|" * (len(header) - 1))
    for kind in options.kinds:
        extra = max(1, options.extra // MORE_KINDS.get(kind, 1))
        counts = [
            count(kind, source, rounds=100 if kind in KINDS else 2, extra=extra)
            for _, source in sources
        ]
        cells = [kind, *(f"{n:,.0f}" for n in counts)]
        if len(counts) == 2:
            cells.append(f"{counts[0] / counts[1] - 1:+.1%}")
        print("| " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
