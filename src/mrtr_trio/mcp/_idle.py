"""Memory given back after a burst: an ASGI layer that tidies up once the server has been quiet.

A burst of flows leaves a few objects of each flow behind: in the package's memos (a request per
question asked, an SDK model per request, a compiled schema), bounded but useless once the flows
are done; in trio's deadline heap, which forgets the deadline of a cancel scope that exited
early only lazily (the scope stays referenced until its deadline passes, `round_timeout` or
the session idle timeout later, or until about a thousand such entries pile up); and as cyclic
garbage (cancelled tasks, exceptions and their tracebacks) that only the next full collection
frees, which an idle server may never run. Scattered through the memory the burst used, they
keep CPython's allocator from giving any of it back: an arena (1 MiB) is returned to the system
only when every block in it is free.

[IdleSweep][mrtr_trio.mcp._idle.IdleSweep] counts the requests that start; when a whole
`QUIET` interval passes with none started after some were served, it
[sweeps][mrtr_trio.mcp._idle.sweep] once: every memo is emptied, trio's deadline heap is
pruned of exited scopes, and a full garbage collection runs. The memos fill again on demand (a
schema is compiled again, a request model built again), which costs a fraction of a
millisecond once per question after a quiet spell. It runs beside the app's lifespan, so any
ASGI server that runs the lifespan (the SDK's session manager needs it anyway) gets it.
Written on anyio, like the SDK.
"""

from __future__ import annotations

import gc

import anyio
import trio
from starlette.types import ASGIApp, Receive, Scope, Send

from .._util import forget_memos

__all__ = ["QUIET", "IdleSweep", "sweep"]

#: Seconds with no request started, after some were served, before the server sweeps.
QUIET = 5.0


def sweep() -> None:
    """Forget every memo, prune trio's deadline heap and collect all garbage (what an idle
    server does after a burst)."""
    forget_memos()
    prune_deadlines()
    gc.collect()


def prune_deadlines() -> None:
    """Drop the entries of exited cancel scopes from the running trio loop's deadline heap
    (nothing outside a trio run).

    This is trio's own pruning, which it runs only once about a thousand stale entries have
    piled up; it is not public API, so it is looked up defensively, and a test fails if trio
    changes it."""
    runner = getattr(trio._core._run.GLOBAL_RUN_CONTEXT, "runner", None)
    prune = getattr(getattr(runner, "deadlines", None), "_prune", None)
    if prune is not None:
        prune()


class IdleSweep:
    """The ASGI middleware described in the module docstring, around *app*; *quiet* is the
    interval in seconds."""

    def __init__(self, app: ASGIApp, *, quiet: float = QUIET) -> None:
        self._app = app
        self._quiet = quiet
        self._started = 0  # requests (and websockets) started so far
        self.sweeps = 0  # how many times it swept

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "lifespan":
            self._started += 1
            await self._app(scope, receive, send)
            return
        async with anyio.create_task_group() as group:
            group.start_soon(self._watch)
            try:
                await self._app(scope, receive, send)
            finally:
                group.cancel_scope.cancel()

    async def _watch(self) -> None:
        seen = swept = self._started
        while True:
            await anyio.sleep(self._quiet)
            if self._started == seen != swept:  # quiet for a whole interval, after requests
                sweep()
                self.sweeps += 1
                swept = seen
            seen = self._started
