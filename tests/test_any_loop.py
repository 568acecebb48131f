"""The runtime's core on either event loop: `Runtime.advance` and `Runtime.run_live` (its round
timeout, the live fan-out of a batch, push-style asks, polls, pauses), steps, and the scope
guard, each test run under trio and under asyncio (``BOTH_LOOPS``, see ``loops.py``). The tests
use anyio's API, which is trio's under trio; the timeouts are real and short, each bounded by
an outer ``fail_after``."""

from __future__ import annotations

import asyncio
import secrets
from collections.abc import AsyncGenerator
from typing import Any

import anyio
import anyio.lowlevel
import pytest
import trio

from mrtr_trio import (
    Complete,
    Context,
    InputRequired,
    MrtrError,
    RoundTimeout,
    Runtime,
    done,
    elicit,
    pause,
    poll,
    step,
)
from mrtr_trio._loop import ANYIO, TRIO, current_loop

from .loops import BOTH_LOOPS

pytestmark = BOTH_LOOPS

CITY = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}
LIMIT = 5.0  # the outer bound on every test that waits


def runtime(**knobs: Any) -> Runtime:
    return Runtime([secrets.token_bytes(32)], **knobs)


def city(name: str) -> dict[str, Any]:
    return {"action": "accept", "content": {"city": name}}


async def trip(ctx: Context, who: str) -> AsyncGenerator[Any, Any]:
    where = yield elicit(f"Where to, {who}?", CITY)
    number = yield step(lambda: 41, name="number")
    yield pause()
    yield done(f"{who} to {where.content['city']} #{number + 1}")


async def two_at_once(ctx: Context, who: str = "") -> AsyncGenerator[Any, Any]:
    answers = yield {"a": elicit("A?", CITY), "b": elicit("B?", CITY)}
    yield done(sorted(answer.content["city"] for answer in answers.values()))


def test_the_drive_runs_on_the_loop_that_calls_it(anyio_backend: str) -> None:
    seen: list[object] = []

    async def handler(ctx: Context) -> AsyncGenerator[Any, Any]:
        seen.append(current_loop())
        yield done(None)

    async def main() -> None:
        await runtime().run_live(handler, {}, None)
        await runtime().advance(handler, {})

    anyio.run(main, backend=anyio_backend)
    assert seen == [TRIO if anyio_backend == "trio" else ANYIO] * 2


async def test_each_run_is_on_the_loop_it_names(anyio_backend: str) -> None:
    assert current_loop() is (TRIO if anyio_backend == "trio" else ANYIO)


async def test_advance_round_trips_to_completion(anyio_backend: str) -> None:
    rt = runtime()
    first = await rt.advance(trip, {"who": "Ann"})
    assert isinstance(first, InputRequired)
    ((key, request),) = first.input_requests.items()
    assert request.message == "Where to, Ann?"  # type: ignore[attr-defined]
    second = await rt.advance(
        trip, {"who": "Ann"}, input_responses={key: city("Oslo")}, request_state=first.request_state
    )
    assert isinstance(second, InputRequired) and second.input_requests == {}  # the pause
    third = await rt.advance(trip, {"who": "Ann"}, request_state=second.request_state)
    assert third == Complete("Ann to Oslo #42")


async def test_advance_with_a_turn_waits_in_process(anyio_backend: str) -> None:
    turns: list[list[str]] = []

    async def turn(suspend: Any) -> dict[str, Any]:
        turns.append(sorted(suspend.requests))
        await anyio.sleep(0.001)
        return {key: city("Rome") for key in suspend.requests}

    result = await runtime().advance(trip, {"who": "Bo"}, turn=turn)
    assert result == Complete("Bo to Rome #42")
    assert turns == [["input-0"], []]


async def test_run_live_asks_the_client(anyio_backend: str) -> None:
    asked: list[str] = []

    async def ask(key: str, request: Any) -> Any:
        asked.append(request.message)
        await anyio.sleep(0.001)  # an ask that waits, as a real one does
        return city("Lima")

    assert await runtime().run_live(trip, {"who": "Cy"}, ask) == "Cy to Lima #42"
    assert asked == ["Where to, Cy?"]


async def test_a_live_batch_fans_out_concurrently(anyio_backend: str) -> None:
    # Each ask waits for the other to start: asked one after the other, they would deadlock.
    started = {"a": anyio.Event(), "b": anyio.Event()}

    async def ask(key: str, request: Any) -> Any:
        started[key].set()
        await started["b" if key == "a" else "a"].wait()
        return city(key.upper())

    with anyio.fail_after(LIMIT):
        assert await runtime().run_live(two_at_once, {}, ask) == ["A", "B"]


async def test_a_live_batchs_first_failure_cancels_its_sibling_and_is_raised_alone(
    anyio_backend: str,
) -> None:
    cancelled: list[str] = []

    async def ask(key: str, request: Any) -> Any:
        if key == "a":
            await anyio.sleep(0.01)
            raise LookupError("the client went away")
        try:
            await anyio.sleep(LIMIT * 2)
        except anyio.get_cancelled_exc_class():
            cancelled.append(key)
            raise

    with anyio.fail_after(LIMIT), pytest.raises(LookupError, match="went away"):
        await runtime().run_live(two_at_once, {}, ask)
    assert cancelled == ["b"]


@pytest.mark.parametrize("handler", [trip, two_at_once], ids=["one request", "a batch"])
async def test_a_live_round_times_out(anyio_backend: str, handler: Any) -> None:
    async def ask(key: str, request: Any) -> Any:
        await anyio.sleep(LIMIT * 2)

    with anyio.fail_after(LIMIT), pytest.raises(RoundTimeout, match=r"round_timeout=0\.05 s"):
        await runtime(round_timeout=0.05).run_live(handler, {"who": "Di"}, ask)


async def test_a_later_round_times_out_and_earlier_waits_did_not_count(
    anyio_backend: str,
) -> None:
    # Three rounds answered after 0.25 s each fit a 0.6 s round timeout (together they would
    # not); the fourth does not.
    answered: list[int] = []

    async def survey(ctx: Context) -> AsyncGenerator[Any, Any]:
        for i in range(4):
            yield elicit(f"Q{i}?", CITY)
        yield done(None)

    async def ask(key: str, request: Any) -> Any:
        await anyio.sleep(0.25 if len(answered) < 3 else LIMIT * 2)
        answered.append(1)
        return city("X")

    with anyio.fail_after(LIMIT), pytest.raises(RoundTimeout, match="round 4"):
        await runtime(round_timeout=0.6).run_live(survey, {}, ask)
    assert len(answered) == 3


async def test_the_round_timeout_bounds_only_the_rounds(anyio_backend: str) -> None:
    # The handler's own waits, between rounds, may take longer than a round may.
    async def slow(ctx: Context) -> AsyncGenerator[Any, Any]:
        await anyio.sleep(0.1)
        where = yield elicit("Where?", CITY)
        await anyio.sleep(0.1)
        yield done(where.content["city"])

    async def ask(key: str, request: Any) -> Any:
        await anyio.lowlevel.checkpoint()
        return city("Quito")

    with anyio.fail_after(LIMIT):
        assert await runtime(round_timeout=0.05).run_live(slow, {}, ask) == "Quito"


async def test_a_push_style_ask_works_and_times_out(anyio_backend: str) -> None:
    async def pushy(ctx: Context) -> AsyncGenerator[Any, Any]:
        first = await ctx.elicit("Where?", CITY)
        try:
            await ctx.elicit("And then?", CITY)
        except RoundTimeout as error:
            yield done((first.content["city"], str(error)))

    async def ask(key: str, request: Any) -> Any:
        if request.message == "And then?":
            await anyio.sleep(LIMIT * 2)
        return city("Bern")

    with anyio.fail_after(LIMIT):
        where, error = await runtime(round_timeout=0.05).run_live(pushy, {}, ask)
    assert where == "Bern" and "round_timeout=0.05 s" in error


async def test_a_live_poll_sleeps_between_calls(anyio_backend: str) -> None:
    calls: list[float] = []

    def ready() -> str | None:
        calls.append(current_loop().now())
        return "ready" if len(calls) == 3 else None

    async def waits(ctx: Context) -> AsyncGenerator[Any, Any]:
        value = yield poll(ready, every=0.02, timeout=LIMIT)
        yield done(value)

    with anyio.fail_after(LIMIT):
        assert await runtime().run_live(waits, {}, None) == "ready"
    assert len(calls) == 3 and calls[2] - calls[0] >= 0.04 - 0.005


async def test_an_async_step_runs_on_the_loop(anyio_backend: str) -> None:
    async def fetch() -> str:
        await anyio.sleep(0.001)
        return anyio_backend

    async def stepping(ctx: Context) -> AsyncGenerator[Any, Any]:
        value = yield step(fetch)
        yield done(value)

    assert await runtime().advance(stepping, {}) == Complete(anyio_backend)
    assert await runtime().run_live(stepping, {}, None) == anyio_backend


async def test_cancelling_a_live_flow_closes_the_handler(anyio_backend: str) -> None:
    closed: list[bool] = []

    async def held(ctx: Context) -> AsyncGenerator[Any, Any]:
        try:
            yield elicit("Where?", CITY)
        finally:
            closed.append(True)

    async def ask(key: str, request: Any) -> Any:
        await anyio.sleep(LIMIT * 2)

    with anyio.move_on_after(0.05) as scope:
        await runtime().run_live(held, {}, ask)
    assert scope.cancelled_caught and closed == [True]


async def test_yielding_inside_a_cancel_scope_the_handler_opened_is_a_clear_error(
    anyio_backend: str,
) -> None:
    async def holds_a_scope(ctx: Context) -> AsyncGenerator[Any, Any]:
        with anyio.move_on_after(LIMIT):
            yield elicit("Where?", CITY)
        yield done(None)

    async def ask(key: str, request: Any) -> Any:
        return city("Oslo")

    with pytest.raises(MrtrError, match="yielded inside a cancel scope"):
        await runtime().run_live(holds_a_scope, {}, ask)
    with pytest.raises(MrtrError, match="yielded inside a cancel scope"):
        await runtime().advance(holds_a_scope, {})
    # The loop is intact: its own scopes still work.
    with anyio.move_on_after(0.01) as scope:
        await anyio.sleep(LIMIT)
    assert scope.cancelled_caught


def test_under_the_loops_own_runner_too(anyio_backend: str) -> None:
    # asyncio.run or trio.run, with no anyio runner around it: the runtime needs nothing of
    # the caller.
    async def ask(key: str, request: Any) -> Any:
        await anyio.sleep(0.001)
        return city("Kyiv")

    async def main() -> tuple[Any, Any]:
        rt = runtime(round_timeout=0.05)
        live = await rt.run_live(trip, {"who": "Ed"}, ask)
        first = await rt.advance(trip, {"who": "Ed"})
        return live, first

    runner = asyncio.run if anyio_backend == "asyncio" else lambda coro: trio.run(lambda: coro)
    live, first = runner(main())
    assert live == "Ed to Kyiv #42"
    assert isinstance(first, InputRequired)
