"""The one loop every driver runs: do what the replay machine says, need by need.

[drive][mrtr_trio._drive.drive] starts a flow, hands each need to the
[Replay][mrtr_trio._replay.Replay] machine and carries out its answer: feed a value, run a step
or a poll, let the client take a turn, or finish. Drivers differ only in what a client's turn
is, and say so through one [Driver][mrtr_trio._drive.Driver] object: the live and task drivers
wait for the answers (`turn`, or `ask` for a turn of one request); the modern driver has no one
to wait for, so the loop stops there and the round ends with a token. The flow is closed on
every exit path.

The loop is the same on every event loop. What it needs of one (the task's scope marks, the
clock, a cancel scope) comes from the [Loop][mrtr_trio._loop.Loop] running it, chosen once per
drive: trio's own functions under trio, anyio's under asyncio (see `_loop`, where a new loop
goes).

**Round timeouts.** A driver that waits may bound each round with a `round_timeout`. Its
timed turns share one cancel scope, a `with` block around the whole loop: a turn that asks the
client arms the round's deadline on it and clears it when the answers are in, so the handler's
own code between rounds never runs under it. A cancellation is delivered only where a task
waits, so a deadline matters only to a turn that waits: the loop starts each timed turn's
coroutine by hand ([_start_timed][mrtr_trio._drive._start_timed]), arms the deadline (counted
from the turn's start) only when it yields to the event loop, awaits the rest through a
[_YieldFrom][mrtr_trio._drive._YieldFrom] (PEP 380 by hand), and then clears it
([_end_round][mrtr_trio._drive._end_round]). A turn answered without waiting (an
in-memory answer) pays for no deadline. One difference can be seen: before its first
checkpoint, a started turn runs with the deadline not yet armed. When the flow ends the loop
leaves the scope before closing the flow (so a timed-out handler's cleanup does not run
cancelled), unless the handler still holds a scope of its own inside it, which closing the
flow closes first.

**Memory.** A round of one request is awaited by this loop itself (the driver's `ask`), so a
flow suspended in it keeps no frame but this one and the ask's. What a suspended live flow
costs is mostly this loop's frame (its task's coroutine) and the objects it holds while the
client answers; see docs/benchmarks.md.

**The scope guard.** A generator must not suspend at a `yield` inside a cancel scope or task
group it opened (trio forbids it; anyio's scopes on asyncio break): the loop compares the
task's [scope_marks][mrtr_trio._loop.scope_marks] around every resume, and turns the mistake
into a clear error at once.
"""

from __future__ import annotations

import math
from collections.abc import Awaitable, Callable, Mapping
from types import CoroutineType
from typing import Any, Protocol

from ._errors import MrtrError, RoundTimeout
from ._flow import Flow, Step
from ._loop import NO_LOOP, CancelScope, Loop, running, scope_marks
from ._replay import (
    UNMATCHED,
    Action,
    Complete,
    Feed,
    OneRequest,
    Replay,
    RunPoll,
    RunStep,
    Suspend,
)
from ._steps import call
from ._values import Request

__all__ = [
    "AskFunction",
    "Driver",
    "Turn",
    "drive",
    "timed_out",
]

#: `await turn(suspend)`: the client's turn, returning its responses (key → JSON or answer),
#: or `None` when this driver cannot wait for them (the round then ends with a checkpoint).
Turn = Callable[[Suspend], Awaitable[Mapping[str, Any] | None]]
#: `await ask(key, request)` performs one server-to-client request and returns the answer
#: (an answer object or the client's JSON).
AskFunction = Callable[[str, Request], Awaitable[Any]]


class Driver(Protocol):
    """What a driver lends the loop beside the flow and its machine: one object, so that a
    suspended flow's frame holds one reference to it (a live flow's is its turns, a round's
    is made per round)."""

    @property
    def waits(self) -> bool:
        """Whether `turn` waits for the client (else the client's turn ends the drive)."""

    @property
    def ask(self) -> AskFunction | None:
        """`await ask(key, request)`: a turn of one request is asked with it, awaited by the
        loop itself rather than through `turn` (`None`: every turn goes through `turn`)."""

    @property
    def round_timeout(self) -> float:
        """Seconds a turn that asks the client may take, else
        [RoundTimeout][mrtr_trio.RoundTimeout]."""

    @property
    def value_only(self) -> bool:
        """The drive returns the finished flow's value (for a driver whose turns always wait,
        so that the drive always finishes) rather than the action it stopped at."""

    def turn(self, suspend: Suspend, /) -> Awaitable[Mapping[str, Any] | None]:
        """The client's turn (see [Turn][mrtr_trio._drive.Turn])."""

    def run_step(self, step: Step, /) -> Awaitable[Any]:
        """Run a step's function once and return its value."""

    def now(self) -> float:
        """The clock poll deadlines are measured on."""


async def drive(flow: Flow, machine: Replay, driver: Driver) -> Any:
    """Run *flow* as *machine* directs until it finishes, or until the client must take a turn
    that *driver* does not wait for; return the [Complete][mrtr_trio.Complete] or the
    [Suspend][mrtr_trio._replay.Suspend] it stopped at (for a `value_only` driver, the finished
    flow's value). A turn that asks the client something must end within the driver's
    `round_timeout`, else [RoundTimeout][mrtr_trio.RoundTimeout]. The flow is closed on every
    exit path: see [_ended][mrtr_trio._drive._ended] for an error raised while closing it."""
    # One frame for the whole loop: a suspended live flow keeps it (as its task's coroutine),
    # so every local costs 16 bytes per flow; the rarer moves are functions of their own.
    loop, task = running()  # trio, or asyncio through anyio: chosen once per drive
    scope = _round_scope(driver, loop)  # the timed turns' deadlines are armed on it
    try:
        with scope:
            marks = scope_marks(task)
            try:
                need = await flow.start()
                while True:
                    if scope_marks(task) is not marks:
                        _scope_error(flow)
                    replayed = machine.replayed(need)  # the commonest need: no action to build
                    if replayed is not UNMATCHED:
                        need = await flow.resume(replayed)
                        continue
                    action = machine.next(need)
                    while type(action) is not Feed:
                        if type(action) is RunStep or type(action) is RunPoll:
                            action = await _run(action, machine, driver)
                            continue
                        if type(action) is not Suspend or not driver.waits:
                            break  # finished, or a turn this driver does not wait for
                        asked = action.requests
                        if driver.ask is not None and type(asked) is OneRequest:
                            # Asked from here: the flow keeps no frame but this and the ask's.
                            turn = driver.ask(asked.key, asked.request)
                        else:
                            turn = driver.turn(action)
                        if not asked or scope is _UNTIMED:
                            answers = await turn  # (a turn that asks nothing is not timed)
                        else:  # started here, and timed only once it waits: see _start_timed
                            answers = _start_timed(turn, scope, loop, driver)
                            if type(answers) is _YieldFrom:
                                answers = await answers
                                _end_round(scope, machine, action, driver)
                        if driver.ask is not None and type(asked) is OneRequest:
                            action = machine.answered_one(answers)
                        elif answers is None:
                            break  # no one to wait for the answers here: the round ends
                        else:
                            action = machine.answered(answers)
                    if type(action) is not Feed:
                        break
                    need = await flow.resume(action.value)
            except BaseException:
                if scope_marks(task) is not marks:
                    await flow.aclose()  # a scope of the handler's is open inside ours: first
                raise
    except BaseException:
        await flow.aclose()
        raise
    return _ended(action, await flow.aclose(), scope, machine, driver)


def _ended(
    action: Action,
    close_error: BaseException | None,
    scope: CancelScope,
    machine: Replay,
    driver: Driver,
) -> Any:
    """What the drive returns once the flow is closed without an error on its way out:
    [RoundTimeout][mrtr_trio.RoundTimeout] when the client's turn outlived its deadline; else
    *close_error*, an error raised while closing the flow (when another error was on its way
    out, the flow logged it instead); else the *action* the drive stopped at, or for a
    `value_only` driver the finished flow's value."""
    if scope.cancelled_caught:
        raise timed_out(machine, action, driver.round_timeout)  # type: ignore[arg-type]
    if close_error is not None:
        raise close_error
    if driver.value_only:
        assert type(action) is Complete  # a turn that always waits: only a finish stops here
        return action.value
    return action


async def _run(action: RunStep | RunPoll, machine: Replay, driver: Driver) -> Action:
    """Run the step or poll *action* asks for, and report its value to *machine*."""
    if isinstance(action, RunStep):
        return machine.ran(await driver.run_step(action.step))
    value = await call(action.poll.fn, action.poll.args)
    return machine.polled(value, driver.now())


class _Untimed:
    """The scope of a drive whose turns are not timed (its driver does not wait, has no
    `round_timeout`, or no event loop runs it): it does nothing."""

    deadline = math.inf
    cancel_called = cancelled_caught = False

    def cancel(self) -> None:
        return None

    def __enter__(self) -> _Untimed:
        return self

    def __exit__(self, *exc_info: object) -> None:
        return None


_UNTIMED = _Untimed()


def _round_scope(driver: Driver, loop: Loop) -> CancelScope:
    """The cancel scope a drive's timed turns share (their deadlines are armed on it while
    the client answers, and cleared after), or the untimed stand-in."""
    if driver.waits and driver.round_timeout != math.inf and loop is not NO_LOOP:
        return loop.cancel_scope()
    return _UNTIMED


def _start_timed(turn: Awaitable[Any], scope: CancelScope, loop: Loop, driver: Driver) -> Any:
    """Run the timed *turn* (a coroutine, or any awaitable) to its first yield: its value when
    it finishes without waiting (nothing could have cancelled it, so no deadline is armed);
    else arm the round's deadline on *scope*, the *driver*'s `round_timeout` from the turn's
    start, and return the [_YieldFrom][mrtr_trio._drive._YieldFrom] to await the rest with
    (then [_end_round][mrtr_trio._drive._end_round])."""
    deadline = loop.now() + driver.round_timeout
    started = turn if type(turn) is CoroutineType else _awaited(turn)
    assert type(started) is CoroutineType
    try:
        yielded = started.send(None)
    except StopIteration as finished:
        return finished.value
    scope.deadline = deadline
    return _YieldFrom(started, yielded)


def _end_round(scope: CancelScope, machine: Replay, asked: Suspend, driver: Driver) -> None:
    """A timed turn that waited is over: clear the round's deadline, or raise
    [RoundTimeout][mrtr_trio.RoundTimeout] when it passed as the answers came in."""
    if scope.cancel_called:
        raise timed_out(machine, asked, driver.round_timeout)
    scope.deadline = math.inf


class _YieldFrom:
    """`await _YieldFrom(coro, yielded)`: go on awaiting *coro*, a coroutine started by hand
    (`coro.send(None)`) that *yielded* instead of finishing, exactly as the plain `await coro`
    it stands for would have: PEP 380's `yield from`, by hand.

    It hands the event loop what *coro* yielded first, and forwards everything after to the
    coroutine as the awaiting frame would: each value sent (trio's outcomes, asyncio's wake-ups,
    which bring a cancellation or a `KeyboardInterrupt` as well as results), each exception
    thrown in, and `close` (`GeneratorExit`). The coroutine's `return` ends the `await` with
    its value, since `send` and `throw` raise its `StopIteration` on. `cr_frame` and `cr_await`
    are the coroutine's, so that `trio.lowlevel.Task.iter_await_frames` walks through this
    object to the frames below.

    Why by hand: a deadline only matters to an await that waits (a cancellation is delivered
    at a checkpoint), and arming one costs more than an in-memory answer's whole turn; started
    by hand, a coroutine shows whether it waits before any deadline is armed. The drive's timed
    turns ([_start_timed][mrtr_trio._drive._start_timed]) and the step stores' bounded calls
    (`_steps`) use it. It pays (issue 19's threshold is 10%): the live trip of the core
    benchmark, whose in-memory answers never wait, runs 357k instructions with it and 474k
    (+33%) with every timed turn armed from its start and awaited plainly, the two deadline
    updates of a round being most of the difference (`python -m benchmarks.instructions
    --kinds live`, measured again for issue 21).
    """

    __slots__ = ("_coro", "_yielded")

    def __init__(self, coro: CoroutineType[Any, Any, Any], yielded: Any) -> None:
        self._coro = coro
        self._yielded: Any = yielded

    def __await__(self) -> _YieldFrom:
        return self

    def __iter__(self) -> _YieldFrom:
        return self

    def __next__(self) -> Any:
        # `await` asks for the first thing to yield with next(); later, `send(None)` may come
        # this way too.
        yielded = self._yielded
        if yielded is _SENT:
            return self._coro.send(None)
        self._yielded = _SENT
        return yielded

    def send(self, value: Any) -> Any:
        return self._coro.send(value)

    def throw(self, *exception: Any) -> Any:
        return self._coro.throw(*exception)

    def close(self) -> None:
        self._coro.close()

    @property
    def cr_frame(self) -> Any:
        return self._coro.cr_frame

    @property
    def cr_await(self) -> Any:
        return self._coro.cr_await


_SENT: Any = object()


async def _awaited(awaitable: Awaitable[Any]) -> Any:
    # An awaitable that is not a coroutine, as one (to be started by hand).
    return await awaitable


def timed_out(machine: Replay, asked: Suspend | OneRequest, round_timeout: float) -> RoundTimeout:
    """The error for a client that did not answer *asked* (a request asked alone, or a
    [Suspend][mrtr_trio._replay.Suspend]) within *round_timeout*."""
    requests = asked if type(asked) is OneRequest else asked.requests  # type: ignore[union-attr]
    return RoundTimeout(
        f"{machine.name}: the client did not answer round {machine.rounds} "
        f"({', '.join(requests)}) within round_timeout={round_timeout} s"
    )


def _scope_error(flow: Flow) -> None:
    raise MrtrError(
        f"{flow.name} yielded inside a cancel scope or nursery it opened (such as `with "
        "trio.move_on_after(...)`, `with anyio.fail_after(...)` or `async with "
        "trio.open_nursery()` around a yield). A generator cannot suspend there (trio forbids "
        "it; anyio's scopes on asyncio break): close the scope before yielding, or move the "
        "timed work into step(fn)."
    )
