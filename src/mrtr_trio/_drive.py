"""The one loop every driver runs: do what the replay machine says, need by need.

[drive][mrtr_trio._drive.drive] starts a flow, hands each need to the
[Replay][mrtr_trio._replay.Replay] machine and carries out its answer: feed a value, run a step
or a poll, let the client take a turn, or finish. Drivers differ only in what a client's turn
is: the live and task drivers wait for the answers (`turn`); the modern driver has no one to
wait for, so the loop stops there and the round ends with a token. The flow is closed on every
exit path.

A driver that waits may bound each round with a `round_timeout`. The loop enters one cancel
scope, at the first round that asks the client, sets its deadline when each such round starts
and clears it when the round ends (the handler's own code between rounds never runs under
it), and leaves it when the flow ends: before closing the flow (so a timed-out handler's
cleanup does not run cancelled), unless the handler still holds a scope of its own inside it.
A round of one request is awaited by this loop itself, so a flow suspended in it keeps no
frame but this one and the ask's.

Trio forbids a generator to suspend at a `yield` inside a cancel scope or nursery it opened;
the loop checks that around every resume ([trio_scope_marks][mrtr_trio._drive.trio_scope_marks],
the one place that reads a private trio attribute).
"""

from __future__ import annotations

import math
import sys
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

import trio

from ._errors import MrtrError, RoundTimeout
from ._flow import Flow, Step
from ._replay import (
    UNMATCHED,
    Action,
    Feed,
    Finish,
    OneRequest,
    Replay,
    RunPoll,
    RunStep,
    Suspend,
)
from ._steps import call
from ._values import Request

__all__ = ["AskFunction", "StepRunner", "Turn", "drive", "timed_out", "trio_scope_marks"]

#: `await turn(suspend)`: the client's turn, returning its responses (key → JSON or answer),
#: or `None` when this driver cannot wait for them (the round then ends with a checkpoint).
Turn = Callable[[Suspend], Awaitable[Mapping[str, Any] | None]]
#: `await ask(key, request)` performs one server-to-client request and returns the answer
#: (an answer object or the client's JSON).
AskFunction = Callable[[str, Request], Awaitable[Any]]
#: `await run_step(step)`: run a step's function once and return its value (the drivers give
#: it an idempotency key, and the modern driver a store).
StepRunner = Callable[[Step], Awaitable[Any]]


async def drive(
    flow: Flow,
    machine: Replay,
    turn: Turn | None,
    run_step: StepRunner,
    now: Callable[[], float],
    *,
    round_timeout: float = math.inf,
    ask: AskFunction | None = None,
    value_only: bool = False,
) -> Any:
    """Run *flow* as *machine* directs until it finishes, or until the client must take a turn
    that *turn* (if any) does not wait for. *run_step* runs steps; *now* is the clock poll
    deadlines are measured on. A turn that asks the client something must end within
    *round_timeout* seconds, else [RoundTimeout][mrtr_trio.RoundTimeout]. With *ask*, a turn
    of one request is `await ask(key, request)`, awaited here rather than through *turn*.
    It returns the [Finish][mrtr_trio._replay.Finish] or the
    [Suspend][mrtr_trio._replay.Suspend] it stopped at; with *value_only*, for a *turn* that
    always waits (so the drive always finishes), the finished flow's value.

    The flow is closed on every exit path. An error raised while closing it is raised when the
    flow otherwise ended well, and logged (by the flow) when another error is on its way out.
    """
    # One frame for the whole loop: a suspended live flow keeps it (as its task's coroutine,
    # twice: trio makes a frame object of it), so every frame, and every local, costs memory
    # per flow.
    try:
        task: trio.lowlevel.Task | None = trio.lowlevel.current_task()
    except RuntimeError:  # not under trio: no scopes to guard, no rounds to time
        task = None
    timed = task is not None and turn is not None and round_timeout != math.inf
    # Timed turns share one cancel scope, entered at the first of them and left when the
    # drive ends; each turn sets its deadline and clears it after (cheaper than entering a
    # scope per round). A flow that never asks the client enters none.
    scope: trio.CancelScope | None = None
    closed = False
    marks = trio_scope_marks(task)
    try:
        try:
            need = await flow.start()
            while True:
                if trio_scope_marks(task) is not marks:
                    _scope_error(flow)
                # The commonest need, a replayed answer, with no action to build (and no local
                # of its own: `action` holds the answer).
                action: Action = machine.replayed(need)
                if action is not UNMATCHED:
                    need = await flow.resume(action)
                    continue
                action = machine.next(need)
                kind = type(action)
                while kind is not Feed:
                    if kind is RunStep:
                        action = machine.ran(await run_step(action.step))  # type: ignore[union-attr]
                    elif kind is RunPoll:
                        poll = action.poll  # type: ignore[union-attr]
                        action = machine.polled(await call(poll.fn, poll.args), now())
                    elif kind is Suspend and turn is not None:
                        requests = action.requests  # type: ignore[union-attr]
                        if timed and requests:
                            if scope is None:
                                scope = trio.CancelScope(
                                    deadline=trio.current_time() + round_timeout
                                ).__enter__()  # (returns the scope once it is entered)
                                marks = trio_scope_marks(task)
                            else:
                                scope.deadline = trio.current_time() + round_timeout
                        single = ask is not None and type(requests) is OneRequest
                        if single:
                            # While the client answers, a suspended flow keeps no frame but
                            # this one and the ask's.
                            responses: Any = await ask(requests.key, requests.request)  # type: ignore[misc,union-attr]
                        else:
                            responses = await turn(action)  # type: ignore[arg-type]
                        if timed and requests:
                            assert scope is not None
                            if scope.cancel_called:  # answered as the deadline passed
                                raise timed_out(machine, action, round_timeout)  # type: ignore[arg-type]
                            scope.deadline = math.inf
                        if single:
                            action = machine.answered_one(responses)
                        elif responses is None:  # no one to wait for the answers here
                            break
                        else:
                            action = machine.answered(responses)
                    else:  # a Finish, or a Suspend with no one to wait for it
                        break
                    kind = type(action)
                if kind is not Feed:
                    break
                need = await flow.resume(action.value)  # type: ignore[union-attr]
        except BaseException:
            if scope is None:
                raise
            if trio_scope_marks(task) is not marks:
                # The handler still holds a scope of its own, inside ours: close it first.
                closed = True
                try:
                    await flow.aclose()
                except BaseException:  # cancelled while closing: leave ours all the same
                    scope.__exit__(*sys.exc_info())
                    raise
            # Leave the scope as a `with` would: it swallows only its own deadline's Cancelled.
            if not scope.__exit__(*sys.exc_info()):
                raise
        else:
            if scope is not None:
                scope.__exit__(None, None, None)
    except BaseException:
        if not closed:
            await flow.aclose()
        raise
    error = await flow.aclose()
    if scope is not None and scope.cancelled_caught:  # the client's turn outlived its deadline
        raise timed_out(machine, action, round_timeout)  # type: ignore[arg-type]
    if error is not None:
        raise error
    if value_only:
        assert type(action) is Finish  # a turn that always waits: only a finish stops here
        return action.value
    return action


def timed_out(machine: Replay, suspend: Suspend, round_timeout: float) -> RoundTimeout:
    """The error for a client that did not answer *suspend* within *round_timeout*."""
    return RoundTimeout(
        f"{machine.name}: the client did not answer round {machine.rounds} "
        f"({', '.join(suspend.requests)}) within round_timeout={round_timeout} s"
    )


def trio_scope_marks(task: trio.lowlevel.Task | None) -> object:
    """What changes exactly when code running in *task* enters or leaves a cancel scope or a
    nursery (which opens a cancel scope of its own): the task's cancel status. It is private
    (`Task._cancel_status`); the test suite fails loudly if trio renames it."""
    return None if task is None else task._cancel_status


def _scope_error(flow: Flow) -> None:
    raise MrtrError(
        f"{flow.name} yielded inside a cancel scope or nursery it opened (such as `with "
        "trio.move_on_after(...)` or `async with trio.open_nursery()` around a yield). "
        "Trio forbids suspending a generator there: close the scope before yielding, or "
        "move the timed work into step(fn)."
    )
