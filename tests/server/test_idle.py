"""Memory given back after a burst (mrtr_trio.mcp._idle): a quiet server sweeps once, and a sweep
leaves nothing of the burst in the memos or in trio's deadline heap."""

from __future__ import annotations

import gc
import weakref
from typing import Any

import trio

from mrtr_trio import elicit
from mrtr_trio._util import Memo
from mrtr_trio.mcp._idle import QUIET, IdleSweep, prune_deadlines, sweep
from mrtr_trio.mcp._sessions import SessionGuard
from mrtr_trio.mcp._wire import sdk_request

from . import apps


async def _ok(scope: Any, receive: Any, send: Any) -> None:
    """A tiny ASGI app: a lifespan that starts and then waits to be told to stop, and 200s."""
    if scope["type"] == "lifespan":
        while (await receive())["type"] != "lifespan.shutdown":
            await send({"type": "lifespan.startup.complete"})
        await send({"type": "lifespan.shutdown.complete"})
        return
    await send({"type": "http.response.start", "status": 200, "headers": []})
    await send({"type": "http.response.body", "body": b""})


async def _request(app: Any) -> None:
    async def receive() -> Any:
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(message: Any) -> None:
        pass

    await app({"type": "http", "method": "GET", "headers": []}, receive, send)


async def test_a_quiet_server_sweeps_once_after_requests(autojump_clock: trio.abc.Clock) -> None:
    app = IdleSweep(_ok)
    shutdown = trio.Event()

    async def receive() -> Any:
        if not started:
            started.append(True)
            return {"type": "lifespan.startup"}
        await shutdown.wait()
        return {"type": "lifespan.shutdown"}

    async def send(message: Any) -> None:
        pass

    started: list[bool] = []
    memo: Memo[str, str] = Memo()
    async with trio.open_nursery() as nursery:
        nursery.start_soon(app, {"type": "lifespan"}, receive, send)
        await trio.sleep(QUIET * 5)
        assert app.sweeps == 0  # nothing served: nothing to give back
        for _ in range(3):  # a busy spell: a request in every interval
            memo.put("question", "answer")
            await _request(app)
            await trio.sleep(QUIET / 2)
        assert app.sweeps == 0 and len(memo) == 1
        await trio.sleep(QUIET * 2)
        assert app.sweeps == 1 and len(memo) == 0  # quiet for a whole interval: swept
        await trio.sleep(QUIET * 5)
        assert app.sweeps == 1  # once per quiet spell
        await _request(app)
        await trio.sleep(QUIET * 3)
        assert app.sweeps == 2
        shutdown.set()  # the lifespan ends: so does the watch, and the nursery closes


async def test_a_sweep_drops_what_a_flow_left_in_the_memos() -> None:
    request = elicit("Proceed with job 17?", {"type": "object", "properties": {}})
    model = weakref.ref(sdk_request(request, "2025-11-25"))
    asked = weakref.ref(request)
    del request
    gc.collect()
    assert asked() is not None and model() is not None  # remembered for the next round
    sweep()
    assert asked() is None and model() is None


async def test_a_sweep_prunes_exited_scopes_from_trios_deadline_heap() -> None:
    # A scope that exits long before its deadline (round_timeout, the session idle timeout)
    # stays in trio's heap, and alive, until that deadline passes: trio prunes lazily.
    with trio.CancelScope(deadline=trio.current_time() + 600) as scope:
        await trio.lowlevel.checkpoint()
    exited = weakref.ref(scope)
    del scope
    gc.collect()
    assert exited() is not None
    prune_deadlines()
    gc.collect()
    assert exited() is None


def test_pruning_outside_trio_does_nothing() -> None:
    prune_deadlines()  # no run, no heap: no error


def test_every_http_app_sweeps_when_idle() -> None:
    guard = apps.app.asgi()
    assert isinstance(guard, SessionGuard) and isinstance(guard._app, IdleSweep)
