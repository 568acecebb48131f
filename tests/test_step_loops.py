"""Running a step exactly once on either event loop: `call_step` against a MemoryStepStore and a
real RedisStepStore, on trio and on asyncio, in real time with short leases (asyncio has no
autojump clock). A step runs once and its result is reused; a step that outlasts its lease keeps
it while it runs (the renewer task of the loop); a step cancelled mid-step is reported unknown
at once (its give-up is shielded); a step that raises may run again; a stalled store fails the
step closed within the store timeout without blocking the loop; and the asyncio renewer is a task
of the running loop that ends with the claims it renews."""

from __future__ import annotations

import asyncio
import itertools
import time
from collections.abc import Iterator
from typing import Any

import anyio
import anyio.lowlevel
import pytest

from mrtr_trio import (
    Claim,
    Complete,
    Context,
    InputRequired,
    MemoryStepStore,
    Runtime,
    StepInProgress,
    StepOutcomeUnknown,
    StepStore,
    StepStoreUnavailable,
    _steps,
    done,
    elicit,
    step,
    step_key,
)
from mrtr_trio._steps import StepPolicy, call_step
from mrtr_trio.redis import RedisStepStore

from .loops import BOTH_LOOPS
from .services import RedisServer

KEY = b"s" * 32
LEASE = 0.3  # seconds: a step of a second outlasts three of them
LIMIT = 10.0  # the outer bound on a test a regression could hang
RENEWER = "mrtr_trio step leases"


def policy(store: StepStore) -> StepPolicy:
    return StepPolicy(store, time.time, None, 60.0)


def key(name: str = "k") -> Any:
    return lambda: name


@pytest.fixture(params=["memory", "redis"])
def store(request: pytest.FixtureRequest) -> Iterator[StepStore]:
    """Each store, fresh, with a short lease."""
    if request.param == "memory":
        yield MemoryStepStore(lease=LEASE)
        return
    server: RedisServer = request.getfixturevalue("redis_db")
    redis_store = RedisStepStore(server.unix_url, lease=LEASE)
    yield redis_store
    redis_store.close()


@pytest.fixture
def long_lease_store(request: pytest.FixtureRequest, store: StepStore) -> StepStore:
    """The same stores with a lease no test outlives: an unknown outcome must come from a
    give-up, not from a lapse."""
    store.lease = 60.0  # type: ignore[attr-defined]
    return store


class Effect:
    """A step function that counts its runs and returns which run it was."""

    def __init__(self, delay: float = 0.0) -> None:
        self.delay = delay
        self.keys: list[str] = []

    async def __call__(self, amount: int) -> str:
        self.keys.append(step_key())
        await anyio.sleep(self.delay)
        return f"run {len(self.keys)} for {amount}"


@BOTH_LOOPS
async def test_a_step_runs_once_and_its_result_is_reused(store: StepStore) -> None:
    effect = Effect()
    first = await call_step(effect, (5,), key("k1"), policy(store))
    again = await call_step(effect, (5,), key("k1"), policy(store))
    assert first == again == "run 1 for 5"
    assert effect.keys == ["k1"]
    assert await call_step(effect, (5,), key("k2"), policy(store)) == "run 2 for 5"


@BOTH_LOOPS
async def test_a_step_that_outlasts_its_lease_keeps_it_while_it_runs(store: StepStore) -> None:
    # The step takes a second, past three leases: the loop's renewer keeps its claim busy, so
    # a second presentation waits for its result instead of finding the outcome unknown.
    effect = Effect(delay=1.0)
    values: list[str] = []

    async def present() -> None:
        values.append(await call_step(effect, (5,), key(), policy(store)))

    async with anyio.create_task_group() as tasks:
        tasks.start_soon(present)
        await anyio.sleep(0.1)
        tasks.start_soon(present)
    assert values == ["run 1 for 5", "run 1 for 5"]
    assert len(effect.keys) == 1


@BOTH_LOOPS
async def test_a_step_cancelled_mid_step_is_unknown_at_once(long_lease_store: StepStore) -> None:
    store = long_lease_store
    effect = Effect(delay=60.0)
    with anyio.move_on_after(0.2):
        await call_step(effect, (5,), key(), policy(store))
    assert await store.read("mrtr_trio:step:k") == Claim("unknown")  # given up, not lapsed
    with anyio.fail_after(5), pytest.raises(StepOutcomeUnknown, match="may or may not"):
        await call_step(effect, (5,), key(), policy(store))
    effect.delay = 0.0
    retried = await call_step(effect, (5,), key(), policy(store), retry=True)
    assert retried == "run 2 for 5" and effect.keys == ["k", "k"]


@BOTH_LOOPS
async def test_a_step_that_raises_releases_its_claim(store: StepStore) -> None:
    calls: list[int] = []

    async def flaky() -> str:
        calls.append(1)
        await anyio.lowlevel.checkpoint()
        if len(calls) == 1:
            raise ValueError("card declined")
        return "paid"

    with pytest.raises(ValueError, match="declined"):
        await call_step(flaky, (), key(), policy(store))
    assert await call_step(flaky, (), key(), policy(store)) == "paid"
    assert await call_step(flaky, (), key(), policy(store)) == "paid"
    assert len(calls) == 2


@BOTH_LOOPS
async def test_another_presentation_waits_then_says_still_running(
    store: StepStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(_steps, "STEP_WAIT", 0.5)
    effect = Effect(delay=1.5)
    async with anyio.create_task_group() as tasks:
        tasks.start_soon(call_step, effect, (5,), key(), policy(store))
        await anyio.sleep(0.1)
        started = anyio.current_time()
        with pytest.raises(StepInProgress, match="still running"):
            await call_step(effect, (5,), key(), policy(store))
        assert 0.5 <= anyio.current_time() - started < 1.2
    assert len(effect.keys) == 1


class StallingStore(MemoryStepStore):
    """A store whose claims never answer."""

    async def claim(
        self, key: str, owner: str, *, lease: float, ttl: float, take: bool = False
    ) -> Claim:
        await anyio.sleep_forever()
        raise AssertionError  # pragma: no cover


@BOTH_LOOPS
async def test_a_stalled_store_fails_the_step_closed_within_the_store_timeout(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(_steps, "STORE_TIMEOUT", 0.3)
    effect = Effect()
    started = anyio.current_time()
    with (
        anyio.fail_after(LIMIT),
        pytest.raises(StepStoreUnavailable, match="did not run: the step store did not answer"),
    ):
        await call_step(effect, (5,), key(), policy(StallingStore()))
    assert 0.3 <= anyio.current_time() - started < 1.0
    assert effect.keys == []


class Heartbeat:
    """A task that ticks every 20 ms: it stops ticking while anything blocks the loop."""

    def __init__(self) -> None:
        self.ticks: list[float] = []

    async def run(self) -> None:
        while True:
            self.ticks.append(time.monotonic())
            await anyio.sleep(0.02)

    def longest_gap(self, since: float) -> float:
        ticks = [since, *(t for t in self.ticks if t >= since), time.monotonic()]
        return max(b - a for a, b in itertools.pairwise(ticks))


@BOTH_LOOPS
async def test_a_paused_redis_never_blocks_the_loop(
    redis_db: RedisServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Redis stalls (CLIENT PAUSE) for 1.5 s: the store's calls wait in worker threads, so the
    # loop's other tasks go on (a heartbeat keeps ticking), and the step fails closed when the
    # runtime stops waiting, not when Redis comes back.
    from mrtr_trio import redis as redis_stores

    monkeypatch.setattr(_steps, "STORE_TIMEOUT", 0.5)
    monkeypatch.setattr(redis_stores, "STORE_TIMEOUT", 0.5)  # (its claims' own deadline)
    store = RedisStepStore(redis_db.unix_url, timeout=10, lease=LEASE)  # outlasts the stall
    effect = Effect()
    heartbeat = Heartbeat()
    with anyio.fail_after(LIMIT):
        async with anyio.create_task_group() as tasks:
            tasks.start_soon(heartbeat.run)
            with redis_db.client() as admin:
                admin.execute_command("CLIENT", "PAUSE", 1500, "ALL")
            started = time.monotonic()
            try:
                await call_step(effect, (5,), key(), policy(store))
            except StepStoreUnavailable as error:
                failed: Exception | None = error
            else:  # pragma: no cover - the failure below says so
                failed = None
            elapsed = time.monotonic() - started
            with anyio.move_on_after(0.3) as read:
                await store.read("mrtr_trio:step:k")
            gap = heartbeat.longest_gap(started)
            await anyio.sleep(1.5 - (time.monotonic() - started) + 0.3)  # the pause ends
            tasks.cancel_scope.cancel()
    assert gap < 0.25  # the loop never stopped
    assert elapsed < 1.2  # nor was the round held until the pause ended
    assert "did not answer within 0.5 s" in str(failed)
    assert read.cancelled_caught  # a plain store call is abandoned too
    assert len(heartbeat.ticks) >= 40
    assert await call_step(effect, (5,), key(), policy(store)) == "run 1 for 5"
    store.close()


async def _renewers() -> list[asyncio.Task[Any]]:
    return [t for t in asyncio.all_tasks() if t.get_name() == RENEWER]


def test_the_asyncio_renewer_lives_while_claims_are_held(store: StepStore) -> None:
    # One task of the running loop renews every claim held; it ends when the last is dropped,
    # so none is left pending when the loop closes.
    effect = Effect(delay=1.0)
    seen: list[int] = []

    async def main() -> None:
        assert await _renewers() == []
        async with anyio.create_task_group() as tasks:
            tasks.start_soon(call_step, effect, (1,), key("a"), policy(store))
            tasks.start_soon(call_step, effect, (2,), key("b"), policy(store))
            await anyio.sleep(0.5)
            seen.append(len(await _renewers()))
            assert await store.read("mrtr_trio:step:a") == Claim("busy")  # renewed
        await asyncio.sleep(0)  # (the cancelled renewer finishes)
        seen.append(len(await _renewers()))

    asyncio.run(main())
    assert seen == [1, 0]
    assert len(effect.keys) == 2


def test_a_new_loop_gets_a_renewer_of_its_own(store: StepStore) -> None:
    # Two asyncio loops of one thread take turns: the first is stopped with a step running
    # (its renewer a task of its own), the second runs steps that outlast their lease. They
    # get a renewer of the second loop, not the stopped loop's, which ends when it wakes.
    first = asyncio.new_event_loop()
    try:
        stopped = first.create_task(call_step(Effect(0.5), (1,), key("a"), policy(store)))
        first.run_until_complete(asyncio.sleep(0.05))
        effect = Effect(delay=1.0)

        async def main() -> list[str]:
            values: list[str] = []

            async def present() -> None:
                values.append(await call_step(effect, (5,), key("b"), policy(store)))

            async with anyio.create_task_group() as tasks:
                tasks.start_soon(present)
                await anyio.sleep(0.1)
                tasks.start_soon(present)
            return values

        assert asyncio.run(main()) == ["run 1 for 5", "run 1 for 5"]
        assert len(effect.keys) == 1
        assert first.run_until_complete(stopped) == "run 1 for 1"
        first.run_until_complete(asyncio.sleep(LEASE))
        assert first.run_until_complete(_renewers()) == []
    finally:
        first.close()


# ------------------------------------------------------------- through Runtime.advance

CONFIRM = {"type": "object", "properties": {"ok": {"type": "boolean"}}, "required": ["ok"]}
YES = {"input-0": {"action": "accept", "content": {"ok": True}}}


def paying(effect: Effect, retry: bool = False) -> Any:
    async def pay(ctx: Context, amount: int):  # type: ignore[no-untyped-def]
        yield elicit(f"Pay {amount}?", CONFIRM)
        receipt = yield step(effect, amount, name="charge", retry=retry)
        yield done(receipt)

    return pay


async def first_round(runtime: Runtime, handler: Any) -> Any:
    first = await runtime.advance(handler, {"amount": 5})
    assert isinstance(first, InputRequired)

    async def present() -> Any:
        out = await runtime.advance(
            handler, {"amount": 5}, input_responses=YES, request_state=first.request_state
        )
        assert isinstance(out, Complete)
        return out.value

    return present


@BOTH_LOOPS
async def test_a_runtime_runs_a_replayed_step_once(store: StepStore) -> None:
    effect = Effect()
    present = await first_round(Runtime([KEY], step_store=store), paying(effect))
    assert [await present() for _ in range(3)] == ["run 1 for 5"] * 3
    assert len(effect.keys) == 1


@BOTH_LOOPS
async def test_a_runtime_step_that_outlasts_its_lease_is_waited_for(store: StepStore) -> None:
    effect = Effect(delay=1.0)
    present = await first_round(Runtime([KEY], step_store=store), paying(effect))
    values: list[str] = []

    async def winner() -> None:
        values.append(await present())

    async with anyio.create_task_group() as tasks:
        tasks.start_soon(winner)
        await anyio.sleep(0.1)
        values.append(await present())
    assert values == ["run 1 for 5", "run 1 for 5"] and len(effect.keys) == 1


@BOTH_LOOPS
async def test_a_runtime_step_cancelled_mid_round_is_unknown_at_once(
    long_lease_store: StepStore,
) -> None:
    effect = Effect(delay=60.0)
    runtime = Runtime([KEY], step_store=long_lease_store)
    present = await first_round(runtime, paying(effect))
    with anyio.move_on_after(0.2):  # the client hangs up mid-step
        await present()
    with anyio.fail_after(5), pytest.raises(StepOutcomeUnknown):  # not after the lease
        await present()
    assert len(effect.keys) == 1
