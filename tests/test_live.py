"""The live driver: fan-out, failures, timeouts, cancellation and generator hygiene."""

from __future__ import annotations

import logging
import types
from collections.abc import Coroutine, Generator
from typing import Any

import anyio
import anyio.lowlevel
import pytest
import trio
import trio.lowlevel
import trio.testing

from mrtr_trio import (
    Context,
    InvalidInputResponse,
    MrtrError,
    RoundLimitExceeded,
    RoundTimeout,
    Runtime,
    done,
    elicit,
    pause,
    step,
)
from mrtr_trio._drive import _YieldFrom
from mrtr_trio.testing import run_live, run_modern

from .flows import CONFIRM, NAME, SIZE, happy_answer
from .loops import BOTH_LOOPS

KEY = b"l" * 32


def runtime(**kw: Any) -> Runtime:
    return Runtime([KEY], **kw)


async def ask_happy(key: str, request: Any) -> Any:
    return happy_answer(key, request)


@BOTH_LOOPS
async def test_a_batch_fans_out_concurrently() -> None:
    arrived = {"a": anyio.Event(), "b": anyio.Event()}

    async def ask(key: str, request: Any) -> Any:
        arrived[key].set()
        other = "b" if key == "a" else "a"
        await arrived[other].wait()  # deadlocks unless both are in flight at once
        return happy_answer(key, request)

    async def batch(ctx: Context):
        got = yield {"a": elicit("A?", NAME), "b": elicit("B?", CONFIRM)}
        yield done(sorted(got))

    with anyio.fail_after(5):
        assert await runtime().run_live(batch, {}, ask) == ["a", "b"]


@BOTH_LOOPS
async def test_first_failure_cancels_siblings_and_is_raised_alone() -> None:
    sibling_cancelled = anyio.Event()

    async def ask(key: str, request: Any) -> Any:
        if key == "fails":
            await anyio.lowlevel.checkpoint()
            raise ValueError("client said no")
        try:
            await anyio.sleep_forever()
        except anyio.get_cancelled_exc_class():
            sibling_cancelled.set()
            raise

    async def batch(ctx: Context):
        yield {"fails": elicit("A?", NAME), "waits": elicit("B?", CONFIRM)}
        yield done("never")

    with anyio.fail_after(5), pytest.raises(ValueError, match="client said no"):
        await runtime().run_live(batch, {}, ask)
    assert sibling_cancelled.is_set()


@BOTH_LOOPS
async def test_malformed_live_answer_fails_the_flow() -> None:
    async def ask(key: str, request: Any) -> Any:
        return {"action": "accept", "content": "not an object"}

    async def single(ctx: Context):
        yield elicit("A?", NAME)
        yield done("never")

    with pytest.raises(InvalidInputResponse, match="'input-0'"):
        await runtime().run_live(single, {}, ask)


@BOTH_LOOPS
async def test_schema_invalid_live_answers_are_asked_again_within_max_rounds() -> None:
    asked: list[str] = []

    async def ask(key: str, request: Any) -> Any:
        asked.append(key)
        size = 99 if len(asked) < 3 else 4
        return {"action": "accept", "content": {"size": size}}

    async def sized(ctx: Context):
        got = yield elicit("Size?", SIZE)
        yield done(got.content["size"])

    assert await runtime().run_live(sized, {}, ask) == 4
    assert asked == ["input-0"] * 3
    asked.clear()
    with pytest.raises(RoundLimitExceeded, match="after 2 rounds"):
        await runtime(max_rounds=2).run_live(sized, {}, ask)


@BOTH_LOOPS
async def test_live_pause_continues_at_once_and_costs_no_round() -> None:
    async def pauses(ctx: Context):
        for _ in range(20):
            yield pause()
        ok = yield elicit("ok?", CONFIRM)
        yield done(ok.action)

    assert await runtime(max_rounds=1).run_live(pauses, {}, ask_happy) == "accept"


async def test_round_timeout(autojump_clock: trio.testing.MockClock) -> None:
    closed: list[str] = []

    async def ask(key: str, request: Any) -> Any:
        await trio.sleep_forever()

    async def slow(ctx: Context):
        try:
            yield elicit("A?", NAME)
        finally:
            closed.append("finally")

    start = trio.current_time()
    with pytest.raises(RoundTimeout, match=r"within round_timeout=30\.0 s"):
        await runtime(round_timeout=30).run_live(slow, {}, ask)
    assert trio.current_time() - start == pytest.approx(30)
    assert closed == ["finally"]


async def test_round_timeout_of_a_later_round_and_of_a_push_and_of_a_batch(
    autojump_clock: trio.testing.MockClock,
) -> None:
    # Each round gets the whole round_timeout, counted from its own start; a push-style ask
    # times out where the handler awaits it; a batch's nursery times out as one round.
    async def answers_the_first_only(key: str, request: Any) -> Any:
        if request.message == "A?":
            await trio.sleep(20)
            return happy_answer(key, request)
        await trio.sleep_forever()

    async def two_rounds(ctx: Context):
        yield elicit("A?", CONFIRM)
        yield elicit("B?", CONFIRM)

    start = trio.current_time()
    with pytest.raises(RoundTimeout, match=r"round 2 \(input-1\) within round_timeout=30\.0 s"):
        await runtime(round_timeout=30).run_live(two_rounds, {}, answers_the_first_only)
    assert trio.current_time() - start == pytest.approx(20 + 30)

    async def pushes(ctx: Context):
        yield elicit("A?", CONFIRM)
        try:
            await ctx.elicit("B?", CONFIRM)
        except RoundTimeout as timeout:
            raise LookupError("the handler saw it") from timeout
        yield done("never")

    with pytest.raises(LookupError, match="the handler saw it"):
        await runtime(round_timeout=30).run_live(pushes, {}, answers_the_first_only)

    async def batch(ctx: Context):
        yield {"a": elicit("B?", CONFIRM), "b": elicit("C?", CONFIRM)}

    start = trio.current_time()
    with pytest.raises(RoundTimeout, match=r"round 1 \(a, b\) within"):
        await runtime(round_timeout=30).run_live(batch, {}, answers_the_first_only)
    assert trio.current_time() - start == pytest.approx(30)


async def test_round_timeout_bounds_only_the_rounds(autojump_clock: trio.testing.MockClock) -> None:
    # One scope times every round of a flow: its deadline must be gone while the handler,
    # its steps and its cleanup run, however long they take.
    closed: list[float] = []

    async def slow_step() -> str:
        await trio.sleep(50)
        return "stepped"

    async def slow_between_rounds(ctx: Context):
        try:
            first = yield elicit("A?", CONFIRM)
            await trio.sleep(50)  # the handler's own work between rounds
            stepped = yield step(slow_step)
            second = yield elicit("B?", CONFIRM)
            yield done((first.action, stepped, second.action))
        finally:
            await trio.sleep(50)
            closed.append(trio.current_time())

    async def ask(key: str, request: Any) -> Any:
        await trio.sleep(9)
        return happy_answer(key, request)

    start = trio.current_time()
    value = await runtime(round_timeout=10).run_live(slow_between_rounds, {}, ask)
    assert value == ("accept", "stepped", "accept")
    assert closed == [pytest.approx(start + 9 + 50 + 50 + 9 + 50)]


async def test_an_answer_that_comes_after_the_deadline_is_a_timeout(
    autojump_clock: trio.testing.MockClock,
) -> None:
    closed: list[str] = []

    async def late(key: str, request: Any) -> Any:
        with trio.CancelScope(shield=True):  # the deadline passes, but the ask still answers
            await trio.sleep(31)
        return happy_answer(key, request)

    async def flow(ctx: Context):
        try:
            yield elicit("A?", CONFIRM)
            yield done("answered in time?")
        finally:
            await trio.lowlevel.checkpoint()  # cleanup runs outside the expired round
            closed.append("finally")

    with pytest.raises(RoundTimeout, match=r"round 1 \(input-0\) within round_timeout=30\.0 s"):
        await runtime(round_timeout=30).run_live(flow, {}, late)
    assert closed == ["finally"]


@pytest.mark.timeout(10)
async def test_rounds_answered_with_or_without_waiting_are_timed_alike(
    autojump_clock: trio.testing.MockClock,
) -> None:
    # The drive arms a round's deadline only when the client's turn waits (a turn that never
    # reaches a checkpoint cannot be cancelled): an in-memory answer, an answer after one
    # checkpoint, and a wait, each round counted from its own start.
    async def ask(key: str, request: Any) -> Any:
        if request.message == "Checkpoint?":
            await trio.lowlevel.checkpoint()
        elif request.message.startswith("Wait "):
            await trio.sleep(float(request.message.split()[1]))
        return happy_answer(key, request)

    async def flow(ctx: Context):
        answers = [(yield elicit("Now?", CONFIRM))]
        await trio.sleep(50)  # the handler's own time: no round's
        answers.append((yield elicit("Checkpoint?", CONFIRM)))
        answers.append((yield elicit("Wait 29", CONFIRM)))
        answers.append((yield elicit("Now?", CONFIRM)))
        answers.append((yield {"a": elicit("Wait 29", CONFIRM), "b": elicit("Now?", CONFIRM)}))
        answers.append((yield elicit("Wait 31", CONFIRM)))
        yield done(answers)

    start = trio.current_time()
    with pytest.raises(RoundTimeout, match=r"round 6 \(input-4\) within round_timeout=30\.0 s"):
        await runtime(round_timeout=30).run_live(flow, {}, ask)
    assert trio.current_time() - start == pytest.approx(50 + 29 + 29 + 30)


class _Awaitable:
    """An ask's result that is awaitable without being a coroutine."""

    def __init__(self, answer: Any, forever: bool) -> None:
        self.answer, self.forever = answer, forever

    def __await__(self) -> Generator[Any, Any, Any]:
        return self._answered().__await__()

    async def _answered(self) -> Any:
        if self.forever:
            await trio.sleep_forever()
        await trio.lowlevel.checkpoint()
        return self.answer


@pytest.mark.timeout(10)
async def test_an_ask_returning_another_awaitable_is_timed_from_its_start(
    autojump_clock: trio.testing.MockClock,
) -> None:
    def ask(key: str, request: Any) -> _Awaitable:
        return _Awaitable(happy_answer(key, request), forever=request.message == "B?")

    async def flow(ctx: Context):
        first = yield elicit("A?", CONFIRM)
        yield elicit("B?", CONFIRM)
        yield done(first.action)

    start = trio.current_time()
    with pytest.raises(RoundTimeout, match=r"round 2 \(input-1\) within round_timeout=30\.0 s"):
        await runtime(round_timeout=30).run_live(flow, {}, ask)
    assert trio.current_time() - start == pytest.approx(30)


@pytest.mark.timeout(10)
async def test_a_timed_ask_that_waits_is_awaited_as_a_plain_await_would(
    autojump_clock: trio.testing.MockClock,
) -> None:
    # What a waiting ask gets back from trio, raises, or is interrupted with goes through as
    # with a plain `await`: several checkpoints, its own error (alone), and a cancellation
    # from outside the flow, which its `finally` sees.
    seen: list[str] = []

    async def ask(key: str, request: Any) -> Any:
        try:
            for _ in range(3):
                await trio.sleep(1)
            if request.message == "Fail?":
                raise LookupError("the client went away")
            if request.message == "Forever?":
                await trio.sleep_forever()
            return happy_answer(key, request)
        finally:
            seen.append(f"{request.message} finally")

    async def flow(ctx: Context, last: str):
        try:
            first = yield elicit("A?", CONFIRM)
            yield elicit(last, CONFIRM)
            yield done(first.action)
        finally:
            seen.append("flow closed")

    with pytest.raises(LookupError, match="went away"):
        await runtime(round_timeout=30).run_live(flow, {"last": "Fail?"}, ask)
    assert seen == ["A? finally", "Fail? finally", "flow closed"]
    seen.clear()
    with trio.move_on_after(100) as outer:
        await runtime(round_timeout=300).run_live(flow, {"last": "Forever?"}, ask)
    assert outer.cancelled_caught
    assert seen == ["A? finally", "Forever? finally", "flow closed"]


@types.coroutine
def _trap(label: str) -> Generator[str, Any, Any]:
    return (yield label)


async def _asked(log: list[Any]) -> str:
    try:
        log.append(("sent", await _trap("first")))
        try:
            log.append(("sent", await _trap("second")))
        except ValueError as error:
            log.append(("caught", str(error)))
            log.append(("sent", await _trap("after the catch")))
        log.append(("sent", await _trap("last")))
        return "returned"
    finally:
        log.append("finally")


def _awaiting(log: list[Any], by_hand: bool, kept: list[Any]) -> Coroutine[Any, Any, str]:
    # `await _asked(log)`, plainly or as the drive does: started by hand, then `_YieldFrom`.
    # (The awaited coroutine is *kept* alive, so that only a forwarded close closes it.)
    async def plainly() -> str:
        kept.append(_asked(log))
        return await kept[0]

    async def started_by_hand() -> str:
        kept.append(_asked(log))
        return await _YieldFrom(kept[0], kept[0].send(None))

    return started_by_hand() if by_hand else plainly()


def _play(by_hand: bool, moves: list[tuple[str, Any]]) -> list[Any]:
    log: list[Any] = []
    kept: list[Any] = []
    coro = _awaiting(log, by_hand, kept)
    for move, value in moves:
        try:
            if move == "send":
                log.append(("yielded", coro.send(value)))
            elif move == "throw":
                log.append(("yielded", coro.throw(value)))
            else:
                coro.close()
                log.append("closed")
        except StopIteration as stop:
            log.append(("returned", stop.value))
        except Exception as error:
            log.append(("raised", type(error).__name__, str(error)))
    return log


@pytest.mark.parametrize(
    "moves",
    [
        [("send", None), ("send", 1), ("send", None), ("send", 3), ("send", 4)],
        [("send", None), ("send", 1), ("throw", ValueError("bad")), ("send", 2), ("send", 3)],
        [("send", None), ("throw", KeyError("out")), ("send", 1)],
        [("send", None), ("send", 1), ("close", None), ("send", 2)],
    ],
    ids=["sends", "caught-throw", "uncaught-throw", "close"],
)
def test_started_goes_on_exactly_as_a_plain_await(moves: list[tuple[str, Any]]) -> None:
    # What the drive awaits after starting a turn by hand to see whether it waits.
    assert _play(True, moves) == _play(False, moves)


@pytest.mark.timeout(10)
async def test_a_task_waiting_in_a_timed_ask_shows_the_asks_frame() -> None:
    # Stack dumps (trio's Task.iter_await_frames) walk through the drive into the ask.
    asking = trio.Event()

    async def ask(key: str, request: Any) -> Any:
        asking.set()
        await trio.sleep_forever()

    async def flow(ctx: Context):
        yield elicit("A?", CONFIRM)

    async with trio.open_nursery() as nursery:
        nursery.start_soon(runtime(round_timeout=30).run_live, flow, {}, ask)
        await asking.wait()
        (task,) = nursery.child_tasks
        names = [frame.f_code.co_name for frame, _ in task.iter_await_frames()]
        nursery.cancel_scope.cancel()
    assert names[:2] == ["drive", "ask"] and "sleep_forever" in names


@BOTH_LOOPS
async def test_run_live_raises_its_errors_when_awaited() -> None:
    # run_live returns the flow's drive rather than being a coroutine function of its own:
    # its errors must still come when it is awaited, as a coroutine function's would.
    async def single(ctx: Context, size: int):
        yield done(size)

    rt = runtime()
    for call, problem in (
        (rt.run_live(single, {"size": 1}, "not callable"), "ask must be an async callable"),
        (rt.run_live(lambda ctx: None, {}, ask_happy), "a handler must be an `async def`"),
        (rt.run_live(single, {"sizes": 1}, ask_happy), "unexpected keyword argument 'sizes'"),
    ):
        with pytest.raises(TypeError, match=problem):
            await call
    assert await rt.run_live(single, {"size": 1}, ask_happy) == 1


# ------------------------------------------------------------------- aclose accounting


class Tracked:
    """A handler factory that counts how often its generator's finally block runs."""

    def __init__(self, *, fail: bool = False) -> None:
        self.started = 0
        self.finalised = 0
        self.fail = fail

    def handler(self):
        async def tracked(ctx: Context):
            self.started += 1
            try:
                first = yield elicit("A?", CONFIRM)
                if self.fail:
                    raise RuntimeError("handler failed")
                yield elicit("B?", CONFIRM)
                yield done(first.action)
                yield elicit("never reached", CONFIRM)
            finally:
                self.finalised += 1

        return tracked


@BOTH_LOOPS
async def test_generators_are_closed_on_completion_in_both_eras() -> None:
    tracked = Tracked()
    await run_live(tracked.handler(), {}, happy_answer)
    await run_modern(tracked.handler(), {}, happy_answer)
    assert tracked.started == 1 + 3  # modern replays the handler each round
    assert tracked.finalised == tracked.started


@BOTH_LOOPS
async def test_generators_are_closed_on_error_in_both_eras() -> None:
    tracked = Tracked(fail=True)
    with pytest.raises(RuntimeError, match="handler failed"):
        await run_live(tracked.handler(), {}, happy_answer)
    with pytest.raises(RuntimeError, match="handler failed"):
        await run_modern(tracked.handler(), {}, happy_answer)
    assert tracked.finalised == tracked.started == 3


@BOTH_LOOPS
async def test_generators_are_closed_when_the_client_errors() -> None:
    tracked = Tracked()

    async def ask(key: str, request: Any) -> Any:
        raise ConnectionError("client went away")

    with pytest.raises(ConnectionError):
        await runtime().run_live(tracked.handler(), {}, ask)
    assert tracked.finalised == tracked.started == 1


async def test_generators_are_closed_on_cancellation(autojump_clock: Any) -> None:
    tracked = Tracked()

    async def ask(key: str, request: Any) -> Any:
        await trio.sleep_forever()

    with trio.move_on_after(5) as scope:
        await runtime().run_live(tracked.handler(), {}, ask)
    assert scope.cancelled_caught
    assert tracked.finalised == tracked.started == 1


async def test_generators_are_closed_on_timeout(autojump_clock: Any) -> None:
    tracked = Tracked()

    async def ask(key: str, request: Any) -> Any:
        await trio.sleep_forever()

    with pytest.raises(RoundTimeout):
        await runtime(round_timeout=1).run_live(tracked.handler(), {}, ask)
    assert tracked.finalised == tracked.started == 1


@BOTH_LOOPS
async def test_modern_generators_are_closed_when_a_round_fails() -> None:
    tracked = Tracked()
    rt = runtime()
    first = await rt.advance(tracked.handler(), {})
    with pytest.raises(InvalidInputResponse):
        await rt.advance(
            tracked.handler(),
            {},
            input_responses={"input-0": "junk"},
            request_state=first.request_state,  # type: ignore[union-attr]
        )
    assert tracked.finalised == tracked.started == 2


# ----------------------------------------------- the yield rules (trio's, and anyio's on asyncio)


async def scope_across_yield(ctx: Context):
    with anyio.move_on_after(100):
        answer = yield elicit("inside a cancel scope?", CONFIRM)
    yield done(answer.action)


async def nursery_across_yield(ctx: Context):
    async with anyio.create_task_group() as nursery:
        nursery.start_soon(anyio.sleep_forever)
        answer = yield elicit("inside a nursery?", CONFIRM)
    yield done(answer.action)


async def scope_across_a_later_yield(ctx: Context):
    # Live, the round timeout's own scope is entered by then: the handler's is inside it.
    first = yield elicit("first?", CONFIRM)
    with anyio.move_on_after(100):
        answer = yield elicit("inside a cancel scope?", CONFIRM)
    yield done((first.action, answer.action))


async def nursery_across_a_later_yield(ctx: Context):
    first = yield elicit("first?", CONFIRM)
    async with anyio.create_task_group() as nursery:
        nursery.start_soon(anyio.sleep_forever)
        answer = yield elicit("inside a nursery?", CONFIRM)
    yield done((first.action, answer.action))


@pytest.mark.parametrize(
    "handler",
    [
        scope_across_yield,
        nursery_across_yield,
        scope_across_a_later_yield,
        nursery_across_a_later_yield,
    ],
)
@BOTH_LOOPS
async def test_holding_a_scope_across_a_yield_is_a_clear_error(handler) -> None:
    for run in (run_live, run_modern):
        with anyio.fail_after(5), pytest.raises(MrtrError, match="cancel scope or nursery"):
            await run(handler, {}, happy_answer)
    await anyio.lowlevel.checkpoint()  # the loop's own state is intact: checkpoints still work


async def test_a_scope_holder_cancelled_while_closing_leaves_trio_intact(
    autojump_clock: trio.testing.MockClock,
) -> None:
    # The round timeout's scope is left even when closing the handler (which still holds a
    # scope of its own inside it) is cancelled: trio's scope stack stays whole.
    async def holder(ctx: Context):
        yield elicit("first?", CONFIRM)
        try:
            with trio.move_on_after(100):
                yield elicit("inside a cancel scope?", CONFIRM)
        finally:
            outer.cancel()  # the caller gives up while the flow is being closed
            await trio.sleep(1)

    with trio.CancelScope() as outer:
        await runtime().run_live(holder, {}, ask_happy)
    assert outer.cancelled_caught
    await trio.lowlevel.checkpoint()


# ----------------------------------------------------------------------- push style


async def push_style(ctx: Context):
    answer = await ctx.elicit("Push?", CONFIRM)
    roots = await ctx.list_roots()
    text = await ctx.create_message("Hi", max_tokens=5)
    yield done((answer.action, len(roots.roots), text.text))


@BOTH_LOOPS
async def test_push_style_works_live() -> None:
    assert await run_live(push_style, {}, happy_answer) == ("accept", 2, "Paris")


async def test_a_handler_may_catch_a_failed_push_style_ask_and_carry_on(
    autojump_clock: trio.testing.MockClock,
) -> None:
    async def recovers(ctx: Context):
        outcomes = []
        for _ in range(3):
            try:
                answer = await ctx.elicit("Push?", CONFIRM)
                outcomes.append(answer.action)
            except (RoundTimeout, InvalidInputResponse, RuntimeError) as error:
                outcomes.append(type(error).__name__)
        confirmed = yield elicit("Yield?", CONFIRM)  # the flow is still live and asks on
        yield done((*outcomes, confirmed.action))

    replies = iter(["slow", "junk", "fails"])

    async def ask(key: str, request: Any) -> Any:
        if key.startswith("input-"):
            return happy_answer(key, request)
        reply = next(replies)
        if reply == "slow":
            await trio.sleep(60)
        if reply == "fails":
            raise RuntimeError("the client said no")
        return {"action": "maybe"}

    value = await runtime(round_timeout=30).run_live(recovers, {}, ask)
    assert value == ("RoundTimeout", "InvalidInputResponse", "RuntimeError", "accept")


@BOTH_LOOPS
async def test_push_style_elsewhere_names_the_replacement() -> None:
    with pytest.raises(MrtrError, match=r"modern .*Yield elicit\(\.\.\.\).*input_required"):
        await run_modern(push_style, {}, happy_answer)


@BOTH_LOOPS
async def test_errors_raised_while_closing_a_handler_are_logged_and_raised(
    caplog: pytest.LogCaptureFixture,
) -> None:
    async def faulty_cleanup(ctx: Context):
        try:
            yield elicit("A?", NAME)
        finally:
            raise ValueError("cleanup failed")

    with caplog.at_level(logging.ERROR, logger="mrtr_trio"), pytest.raises(ValueError):
        await runtime().advance(faulty_cleanup, {})
    assert "faulty_cleanup raised while being closed" in caplog.text
    assert "ValueError: cleanup failed" in caplog.text  # with its traceback

    async def fails_then_cleanup_fails(ctx: Context):
        try:
            yield step(lambda: 1 / 0)
        finally:
            raise ValueError("cleanup failed too")

    caplog.clear()
    with caplog.at_level(logging.ERROR, logger="mrtr_trio"), pytest.raises(ZeroDivisionError):
        await runtime().run_live(fails_then_cleanup_fails, {}, None)
    assert "cleanup failed too" in caplog.text  # logged, while the first error goes on
