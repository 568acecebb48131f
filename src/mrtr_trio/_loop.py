"""The seam between the drivers and the event loop that runs them: trio, or asyncio (through
anyio).

The drivers (`_drive`, `_live`) need a handful of things from a loop, and get them through one
[Loop][mrtr_trio._loop.Loop], chosen by [current_loop][mrtr_trio._loop.current_loop] from
whichever loop calls them (once per drive):

- `current_task()`: the task running the drive, to read its
  [scope_marks][mrtr_trio._loop.scope_marks] (below);
- `now()`, the clock a round's deadline is set on, and `sleep(seconds)`;
- `cancel_scope()`: a cancel scope with a settable `deadline`, `cancel_called` and
  `cancelled_caught` (it times a live round);
- `open_task_group()`: an async context manager giving a group with `start_soon` and a
  `cancel_scope` (it fans a live batch out).

Trio is the reference: [TRIO][mrtr_trio._loop.TRIO] is trio's own functions, with nothing in
between. [ANYIO][mrtr_trio._loop.ANYIO] is anyio's, which a drive gets on asyncio (anyio runs
on trio too, but a drive under trio finds trio first). A drive that no loop runs (a coroutine
sent to by hand) gets [NO_LOOP][mrtr_trio._loop.NO_LOOP]: no scopes to guard, no rounds to time.
To add a loop, make a `Loop` of its functions and name it in `current_loop`.

A generator must not suspend at a `yield` inside a cancel scope or task group it opened: trio
forbids it, and anyio's cancel scopes on asyncio break the same way (the scope is left by
another frame, or the drive's own scope cannot close). Neither offers a public way to see that
a task entered or left a scope, so the drive compares `scope_marks(task)` around every resume,
to turn the mistake into a clear error at once. That reads private state, here and nowhere
else: trio's `Task._cancel_status`, and anyio's record of a task's innermost cancel scope on
asyncio. `tests/test_loop.py` fails loudly, naming this module, if a trio or anyio release
renames them or changes what they mean. (asyncio's own `asyncio.timeout()` and
`asyncio.TaskGroup` leave no such mark: a generator that yields inside one is not caught.)
"""

from __future__ import annotations

import asyncio
import operator
import types
from collections.abc import Awaitable, Callable
from contextlib import AbstractAsyncContextManager
from typing import Any, Protocol

import anyio
import attrs
import trio

__all__ = [
    "ANYIO",
    "NO_LOOP",
    "OFF_LOOP",
    "TRIO",
    "CancelScope",
    "Loop",
    "TaskGroup",
    "current_loop",
    "running",
    "scope_marks",
]


class CancelScope(Protocol):
    """What the drivers use of a loop's cancel scope (trio's and anyio's both have it)."""

    deadline: float

    @property
    def cancel_called(self) -> bool: ...

    @property
    def cancelled_caught(self) -> bool: ...

    def cancel(self) -> None: ...

    def __enter__(self) -> Any: ...

    def __exit__(self, *exc_info: Any) -> bool | None: ...


class TaskGroup(Protocol):
    """What the drivers use of a loop's task group (a trio nursery, an anyio task group)."""

    @property
    def cancel_scope(self) -> Any: ...

    def start_soon(self, fn: Callable[..., Awaitable[Any]], /, *args: Any) -> None: ...


@attrs.frozen
class Loop:
    """One event loop's functions, as the drivers need them (see the module docstring)."""

    name: str
    current_task: Callable[[], Any]
    now: Callable[[], float]
    sleep: Callable[[float], Awaitable[Any]]
    cancel_scope: Callable[[], CancelScope]
    open_task_group: Callable[[], AbstractAsyncContextManager[Any]]  # of a TaskGroup


#: `scope_marks(task)`, *task* being what `Loop.current_task()` returned: what changes exactly
#: when code running in *task* enters or leaves a cancel scope or a task group (which opens a
#: cancel scope of its own). On trio, the task's private cancel status; the other loops' tasks
#: are stand-ins with a `_cancel_status` of their own. (An attribute getter, not a function:
#: the drive reads it after every resume.)
scope_marks: Callable[[Any], object] = operator.attrgetter("_cancel_status")

#: The task of a drive that no loop runs: it has no scopes.
OFF_LOOP: Any = types.SimpleNamespace(_cancel_status=None)


class _AsyncioTask:
    """An asyncio task as the drive sees it: its scope marks are its innermost anyio cancel
    scope, from anyio's private record of them (`None` before it entered any)."""

    __slots__ = ("_states", "_task")

    def __init__(self) -> None:
        self._task = asyncio.current_task()
        self._states = _anyio_task_states()

    @property
    def _cancel_status(self) -> object:
        state = self._states.get(self._task)
        return None if state is None else state.cancel_scope


def _anyio_task_states() -> Any:
    """anyio's private map of each asyncio task to its state (whose `cancel_scope` is the
    task's innermost anyio cancel scope)."""
    from anyio._backends import _asyncio  # (loaded by anyio only once asyncio runs it)

    return _asyncio._task_states


def _no_loop(*args: object) -> Any:
    raise RuntimeError(
        "mrtr_trio: no event loop runs this drive (it needs trio, or asyncio through anyio)"
    )


#: trio, the reference: its own functions, nothing in between.
TRIO = Loop(
    "trio",
    trio.lowlevel.current_task,
    trio.current_time,
    trio.sleep,
    trio.CancelScope,
    trio.open_nursery,
)
#: asyncio, through anyio (whose cancel scopes and task groups mean what trio's do).
ANYIO = Loop(
    "asyncio",
    _AsyncioTask,
    anyio.current_time,
    anyio.sleep,
    anyio.CancelScope,
    anyio.create_task_group,
)
#: No loop: a drive sent to by hand (its task has no scopes; anything else raises).
NO_LOOP = Loop("none", lambda: OFF_LOOP, _no_loop, _no_loop, _no_loop, _no_loop)


def running() -> tuple[Loop, Any]:
    """The loop running the caller (as `current_loop` says) and its current task (the drive
    reads both at once: on trio, that asks trio once)."""
    try:
        return TRIO, trio.lowlevel.current_task()
    except RuntimeError:
        loop = current_loop()
        return loop, loop.current_task()


def current_loop() -> Loop:
    """The loop running the caller: [TRIO][mrtr_trio._loop.TRIO] under trio (anyio's trio
    backend included), [ANYIO][mrtr_trio._loop.ANYIO] under asyncio, else
    [NO_LOOP][mrtr_trio._loop.NO_LOOP]."""
    try:
        trio.lowlevel.current_task()
    except RuntimeError:
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            return NO_LOOP
        return ANYIO
    return TRIO
