"""The live driver: a whole flow on a legacy (2025-era) session, the handler kept alive.

[run_live][mrtr_trio._live.run_live] [drive][mrtr_trio._drive.drive]s the flow with a
[Replay][mrtr_trio._replay.Replay] machine that starts live, and meets each client turn
itself: a request becomes a real server-to-client request through the host's
`ask(key, request)` (one request is awaited by the drive loop itself); a batch fans out
concurrently in a task group of the loop running the flow (a trio nursery, or anyio's on
asyncio: see `_loop`), and the first failure cancels its siblings and is re-raised alone (never
as an `ExceptionGroup`). The client must answer each round within `round_timeout`, else
[RoundTimeout][mrtr_trio.RoundTimeout]: the drive times its rounds with one cancel scope per
flow. A poll's turn sleeps its interval; a return-style handler's state-only turn (the legacy
shim) sleeps `state_only_pacing`. Push-style `await ctx.elicit(...)` asks through the same
turns, each under a deadline of its own, since it runs inside the handler.
"""

from __future__ import annotations

import secrets
from collections.abc import Coroutine, Mapping
from typing import TYPE_CHECKING, Any, ClassVar, NoReturn

from ._context import Context, Host
from ._drive import AskFunction, drive, timed_out
from ._errors import BackChannelUnavailable, MrtrError
from ._flow import Handler, Step, is_generator_handler, open_flow
from ._journal import qualified_name
from ._loop import TaskGroup, current_loop
from ._replay import Feed, Replay, Suspend
from ._stepkey import STEP_KEY_BYTES
from ._steps import call_step
from ._values import Answer, Request

if TYPE_CHECKING:
    from ._runtime import Runtime

__all__ = ["AskFunction", "run_live"]


def run_live(
    runtime: Runtime,
    handler: Handler,
    arguments: Mapping[str, Any],
    ask: AskFunction | None,
    client_capabilities: Mapping[str, Any] | None,
    host: Host | None = None,
) -> Coroutine[Any, Any, Any]:
    """The drive of *handler* on a live session: await it for the value the flow ends with.

    (A plain function that sets the flow up and returns the drive itself, so that a suspended
    flow keeps no frame of its own here.)

    `ask=None` means the session has no back channel: asks fail with
    [BackChannelUnavailable][mrtr_trio.BackChannelUnavailable] (before any capability check),
    steps, polls and pauses work.
    """
    try:
        if ask is not None and not callable(ask):
            raise TypeError(f"ask must be an async callable ask(key, request), got {ask!r}")
        replayable = is_generator_handler(handler)
        name = qualified_name(handler)
        # Without a back channel nothing is asked, so the missing channel is the error to give.
        machine = Replay(
            name,
            runtime._live_rules,
            replayable=replayable,
            client_capabilities=client_capabilities if ask is not None else None,
        )
        # (Its turns are the drive's driver, and lend the context push-style asks.)
        kind = _Turns if replayable else _Shim if runtime.legacy_shim else _ShimRefused
        turns = kind(runtime, machine, ask)
        ctx = Context("legacy", client_capabilities, machine=machine, push=turns, host=host)
        flow = open_flow(handler, ctx, arguments, name=name, replayable=replayable)
    except Exception as error:  # raised when awaited, as from any coroutine function
        return _raise(error)
    return drive(flow, machine, turns)


async def _raise(error: Exception) -> NoReturn:
    raise error


class _Turns:
    """The client's turns on a live session: the [Driver][mrtr_trio._drive.Driver] of one
    flow's drive (one request is asked with `ask` by the drive itself), and what lends its
    context push-style asks."""

    __slots__ = ("_machine", "ask", "round_timeout")

    waits: ClassVar[bool] = True
    value_only: ClassVar[bool] = True

    def __init__(self, runtime: Runtime, machine: Replay, ask: AskFunction | None) -> None:
        self._machine = machine
        self.ask = ask
        self.round_timeout = runtime.round_timeout

    @staticmethod
    def now() -> float:
        return current_loop().now()

    @staticmethod
    async def run_step(step: Step) -> Any:
        # The generator stays alive, so the step runs once by construction; its key only needs
        # to be unique per flow and position.
        key = secrets.token_urlsafe(STEP_KEY_BYTES)
        return await call_step(step.fn, step.args, lambda: key)

    async def turn(self, suspend: Suspend) -> Mapping[str, Any]:
        # (A yield-style flow's turn asks something or waits for a poll: its pauses are free.
        # A return-style flow's state-only round is the shim's: see `_Shim`.)
        requests = suspend.requests
        if suspend.retry_after is not None:  # a poll waiting for the outside world
            await current_loop().sleep(suspend.retry_after)
            return {}
        ask = self.ask
        if ask is None:
            kinds = ", ".join(sorted({r.method for r in requests.values()}))
            raise BackChannelUnavailable(
                f"{self._machine.name} asked the client ({kinds}), but this legacy session has "
                "no back channel for server-to-client requests (stateless or JSON-response "
                "HTTP). Serve Streamable HTTP with stateless=False and json_response=False, or "
                "connect with MCP 2026-07-28, where the same handler asks through "
                "input_required results."
            )
        if len(requests) == 1:  # the common case needs no task group
            ((key, request),) = requests.items()
            return {key: await ask(key, request)}
        return await _ask_all(ask, requests)

    async def push(self, key: str, request: Request) -> Answer:
        """A push-style `ctx.elicit(...)` and friends: one request, asked like any other.
        It runs inside the handler, so it is timed by a scope of its own: a timeout is raised
        where the handler awaits."""
        machine = self._machine
        round_timeout = self.round_timeout
        action = machine.push({key: request})
        loop = current_loop()
        try:
            while True:
                with loop.cancel_scope() as scope:
                    scope.deadline = loop.now() + round_timeout
                    responses = await self.turn(action)
                if scope.cancelled_caught:
                    raise timed_out(machine, action, round_timeout)
                reply = machine.answered(responses)
                if type(reply) is Feed:
                    return reply.value[key]  # type: ignore[no-any-return]  # a batch of one
                assert type(reply) is Suspend
                action = reply
        except BaseException:
            machine.abandon()  # the handler may catch the error and carry on
            raise


class _Shim(_Turns):
    """The turns of a return-style handler on the legacy shim: a state-only round (no
    requests) is a round trip paced by `state_only_pacing`."""

    __slots__ = ("_pacing",)

    def __init__(self, runtime: Runtime, machine: Replay, ask: AskFunction | None) -> None:
        super().__init__(runtime, machine, ask)
        self._pacing = runtime.state_only_pacing

    async def turn(self, suspend: Suspend) -> Mapping[str, Any]:
        if not suspend.requests:
            await current_loop().sleep(self._pacing)
            return {}
        return await super().turn(suspend)


class _ShimRefused(_Turns):
    """The turns of a return-style handler when the runtime has `legacy_shim=False`: every
    one is refused (a return-style flow asks only through turns, never one request alone)."""

    __slots__ = ()

    async def turn(self, suspend: Suspend) -> Mapping[str, Any]:
        raise MrtrError(
            f"{self._machine.name} returned input_required() on a legacy session, but the "
            "runtime has legacy_shim=False: enable the shim, or write the handler in yield "
            "style"
        )


async def _ask_all(ask: AskFunction, requests: Mapping[str, Request]) -> dict[str, Any]:
    """Ask every request concurrently; the first failure cancels the others and is raised
    alone."""
    results: dict[str, Any] = {}
    failure: BaseException | None = None

    async def ask_one(key: str, request: Request, group: TaskGroup) -> None:
        nonlocal failure
        try:
            results[key] = await ask(key, request)
        except Exception as error:
            if failure is None:
                failure = error
            group.cancel_scope.cancel()

    async with current_loop().open_task_group() as group:
        for key, request in requests.items():
            group.start_soon(ask_one, key, request, group)
    if failure is not None:
        raise failure
    return results
