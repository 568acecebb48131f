"""A per-test time limit that works under pytest-trio, so a regression that loops forever fails
its test instead of hanging the suite.

Two layers, both reading the ``timeout`` ini value or a ``@pytest.mark.timeout(seconds)`` mark:

- **the trio watchdog** (this module): every trio test runs beside a task that waits in a worker
  thread for the limit in *real* seconds (so ``autojump_clock`` cannot fire it early) and then
  cancels the test and fails it, after half the limit. The rest of the suite goes on.
- **pytest-timeout** (``timeout_method = "thread"``): at the full limit, for what trio cannot
  cancel (a synchronous busy loop, a blocking call in a sync test), it prints every thread's
  stack and ends the run with a failure. It is the backstop; the watchdog fires first.

pytest-trio runs autouse async fixtures only when a test names them, so the watchdog wraps the
test function itself, before pytest-trio turns it into a ``trio.run`` call.
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Awaitable, Callable
from typing import Any

import pytest
import trio

__all__ = ["guard_trio_tests"]

#: The watchdog fails a test after this share of its limit; pytest-timeout kills the run at 1.
WATCHDOG_SHARE = 0.5


def guard_trio_tests(items: list[pytest.Item]) -> None:
    """Wrap every trio test (not Hypothesis ones, which pytest-trio unwraps) in the watchdog."""
    for item in items:
        if not isinstance(item, pytest.Function) or item.get_closest_marker("trio") is None:
            continue
        if hasattr(item.obj, "hypothesis"):
            continue
        item.obj = _guarded(item.obj, _limit(item) * WATCHDOG_SHARE, item.nodeid)


def _limit(item: pytest.Function) -> float:
    mark = item.get_closest_marker("timeout")
    if mark is not None and mark.args:
        return float(mark.args[0])
    return float(item.config.getini("timeout") or 0) or 120.0


def _guarded(
    test: Callable[..., Awaitable[None]], limit: float, name: str
) -> Callable[..., Awaitable[None]]:
    @functools.wraps(test)
    async def guarded(**kwargs: Any) -> None:
        try:
            await _race(test, kwargs, limit, name)
        except BaseExceptionGroup as group:  # report the test's own failure, not a wrapper
            if len(group.exceptions) == 1:
                raise group.exceptions[0] from None
            raise

    return guarded


async def _race(
    test: Callable[..., Awaitable[None]], kwargs: dict[str, Any], limit: float, name: str
) -> None:
    expired = False
    async with trio.open_nursery() as nursery:

        async def watch() -> None:
            nonlocal expired
            finished = threading.Event()
            try:
                expired = not await trio.to_thread.run_sync(
                    finished.wait, limit, abandon_on_cancel=True
                )
            finally:
                finished.set()
            if expired:
                nursery.cancel_scope.cancel()

        nursery.start_soon(watch)
        try:
            await test(**kwargs)
        finally:
            nursery.cancel_scope.cancel()
    if expired:
        pytest.fail(f"{name} was still running after {limit:g} s (per-test timeout)")
