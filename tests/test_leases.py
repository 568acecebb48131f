"""Steps as leases with owners, at the runtime: a dead holder's claim is known after its lease
(not the token's lifetime), a step whose effect may have happened is never silently run again,
retry=True runs it again under the same key, late writers lose, a stalled store cannot hold a
round, and no presentation of a token, however timed, runs a step twice."""

from __future__ import annotations

from typing import Any

import pytest
import trio
import trio.testing

from mrtr_trio import (
    Claim,
    InvalidRequestState,
    MemoryStepStore,
    Runtime,
    StepInProgress,
    StepOutcomeUnknown,
    StepStoreUnavailable,
)
from mrtr_trio._steps import STORE_TIMEOUT

from .flows import Ledger, paying

KEY = b"l" * 32
LEASE = 3.0


class DeadHolderStore(MemoryStepStore):
    """A memory store on trio's clock in which the first claim's holder "dies": from then on,
    nothing that holder sends reaches the store (its renewals and its give-up are lost)."""

    def __init__(self, **kw: Any) -> None:
        super().__init__(lease=LEASE, clock=trio.current_time, **kw)
        self.dead: str | None = None

    async def claim(
        self, key: str, owner: str, *, lease: float, ttl: float, take: bool = False
    ) -> Claim:
        claim = await super().claim(key, owner, lease=lease, ttl=ttl, take=take)
        if self.dead is None and claim.status == "won":
            self.dead = owner
        return claim

    async def renew(self, key: str, owner: str, lease: float) -> bool:
        if owner == self.dead:
            return True  # (sent into the void)
        return await super().renew(key, owner, lease)

    async def release(self, key: str, owner: str) -> bool:
        if owner == self.dead:
            return True
        return await super().release(key, owner)


async def die_mid_step(pay: Any) -> None:
    """Present the token; the step starts, and its process dies (cancelled, nothing sent)."""
    with trio.move_on_after(1):
        await pay.present()
    assert len(pay.ledger.keys) == 1


async def test_a_dead_holders_step_is_reported_unknown_after_the_lease(
    autojump_clock: trio.testing.MockClock,
) -> None:
    store = DeadHolderStore()
    pay = await paying(Runtime([KEY], step_store=store), Ledger(delay=100.0))
    await die_mid_step(pay)
    started = trio.current_time()
    with pytest.raises(StepOutcomeUnknown, match="may or may not have happened"):
        await pay.present()
    # Known once the lease lapsed (the claim was taken at +0, the round began at +1), not
    # after the token's 600 s; and the step did not run again.
    assert trio.current_time() - started <= LEASE
    assert len(pay.ledger.keys) == 1
    with pytest.raises(StepOutcomeUnknown):  # and so on, for every later presentation
        await pay.present()


async def test_a_retry_step_of_a_dead_holder_runs_again_under_the_same_key(
    autojump_clock: trio.testing.MockClock,
) -> None:
    store = DeadHolderStore()
    ledger = Ledger(delay=100.0)
    pay = await paying(Runtime([KEY], step_store=store), ledger, retry=True)
    await die_mid_step(pay)
    ledger.delay = 0.0
    assert await pay.present() == "receipt 2 for 5"
    assert await pay.present() == "receipt 2 for 5"  # recorded: no third run
    assert len(ledger.keys) == 2 and ledger.keys[0] == ledger.keys[1]


async def test_still_running_only_while_a_live_holder_renews(
    autojump_clock: trio.testing.MockClock,
) -> None:
    # The step takes 60 s, far past its 3 s lease: its holder renews it, so a second
    # presentation waits and is told the step is still running, never that it is unknown.
    store = MemoryStepStore(lease=LEASE, clock=trio.current_time)
    ledger = Ledger(delay=60.0)
    pay = await paying(Runtime([KEY], step_store=store), ledger)
    values: list[Any] = []

    async def winner() -> None:
        values.append(await pay.present())

    async with trio.open_nursery() as nursery:
        nursery.start_soon(winner)
        await trio.sleep(1)
        with pytest.raises(StepInProgress, match="still running"):
            await pay.present()
    assert values == ["receipt 1 for 5"] and len(ledger.keys) == 1
    assert await pay.present() == "receipt 1 for 5"


async def test_a_late_writer_is_told_it_lost(autojump_clock: trio.testing.MockClock) -> None:
    # A's renewals stop reaching the store (it stalls); its lease lapses and B, a retry=True
    # step, takes over and records. A then finishes: its record is refused, and it says so.
    store = DeadHolderStore()
    ledger = Ledger(delay=20.0)
    pay = await paying(Runtime([KEY], step_store=store), ledger, retry=True)
    outcomes: list[Any] = []

    async def slow_a() -> None:
        try:
            outcomes.append(await pay.present())
        except StepOutcomeUnknown as error:
            outcomes.append(error)

    async with trio.open_nursery() as nursery:
        nursery.start_soon(slow_a)
        await trio.sleep(LEASE + 1)
        ledger.delay = 0.0
        assert await pay.present() == "receipt 2 for 5"  # B took over
    (lost,) = outcomes
    assert isinstance(lost, StepOutcomeUnknown) and "took its claim over" in str(lost)
    assert await pay.present() == "receipt 2 for 5"  # B's result is the recorded one


class StallingStore(MemoryStepStore):
    """A store whose claims never answer (a Redis stall)."""

    async def claim(
        self, key: str, owner: str, *, lease: float, ttl: float, take: bool = False
    ) -> Claim:
        await trio.sleep_forever()
        raise AssertionError  # pragma: no cover


async def test_a_stalled_store_fails_the_step_closed_within_the_store_timeout(
    autojump_clock: trio.testing.MockClock,
) -> None:
    pay = await paying(Runtime([KEY], step_store=StallingStore()))
    started = trio.current_time()
    with pytest.raises(StepStoreUnavailable, match="did not run: the step store did not answer"):
        await pay.present()
    assert trio.current_time() - started == pytest.approx(STORE_TIMEOUT)
    assert pay.ledger.keys == []


class WallClock:
    def __init__(self) -> None:
        self.now = 1_800_000_000.0

    def __call__(self) -> float:
        return self.now


class ProcessDied(BaseException):
    """Stands for the process dying mid-step (not an Exception: the step did not fail)."""


async def test_a_retry_just_before_the_token_expires_does_not_run_the_step_again() -> None:
    # The measured failure: a claim taken 5 s after its token was minted lapsed 5 s after the
    # token, so a retry just before expiry that waited saw it lapse and ran the step again.
    # Now the claim lives as long as the token (plus a grace), and a lapsed lease is an
    # unknown outcome, never a free key.
    clock = WallClock()
    store = DeadHolderStore()
    store._clock = clock  # the wall clock for the leases too: one fake time for all
    runtime = Runtime([KEY], ttl=30, step_store=store, clock=clock)
    ran: list[str] = []

    class Dying(Ledger):
        async def charge(self, amount: int) -> str:
            ran.append("charge")
            raise ProcessDied

    pay = await paying(runtime, Dying())
    clock.now += 5
    with pytest.raises(ProcessDied):  # claimed at +5, dead mid-step, its give-up lost
        await pay.present()
    for at in (10.0, 29.5):  # every retry until the token expires
        clock.now = 1_800_000_000.0 + at
        with pytest.raises(StepOutcomeUnknown):
            await pay.present()
    clock.now = 1_800_000_000.0 + 30.5
    with pytest.raises(InvalidRequestState):  # and then the token is gone
        await pay.present()
    assert ran == ["charge"]


async def test_a_round_whose_token_expired_before_a_step_does_not_start_it() -> None:
    from mrtr_trio import Context, InputRequired, done, elicit, step

    from .flows import CONFIRM, YES

    clock = WallClock()
    runtime = Runtime([KEY], ttl=30, step_store=MemoryStepStore(clock=clock), clock=clock)
    ran: list[str] = []

    def slow() -> str:
        ran.append("slow")
        clock.now += 60  # outlasts the token
        return "slow"

    def second() -> str:
        ran.append("second")
        return "second"

    async def two_steps(ctx: Context):
        yield elicit("Go?", CONFIRM)
        a = yield step(slow)
        b = yield step(second)
        yield done([a, b])

    first = await runtime.advance(two_steps, {})
    assert isinstance(first, InputRequired)
    with pytest.raises(InvalidRequestState) as caught:
        await runtime.advance(two_steps, {}, input_responses=YES, request_state=first.request_state)
    assert "before step" in caught.value.reason and ".second@" in caught.value.reason
    assert ran == ["slow"]


class SlottedStore:
    """A store of its own (no weak references, no hash): renewals work for it too."""

    __slots__ = ("inner", "lease")
    __hash__ = None  # type: ignore[assignment]

    def __init__(self) -> None:
        self.inner = MemoryStepStore(lease=LEASE, clock=trio.current_time)
        self.lease = LEASE

    async def claim(
        self, key: str, owner: str, *, lease: float, ttl: float, take: bool = False
    ) -> Claim:
        return await self.inner.claim(key, owner, lease=lease, ttl=ttl, take=take)

    async def renew(self, key: str, owner: str, lease: float) -> bool:
        return await self.inner.renew(key, owner, lease)

    async def record(self, key: str, owner: str, value: bytes, ttl: float) -> bool:
        return await self.inner.record(key, owner, value, ttl)

    async def read(self, key: str) -> Claim | None:
        return await self.inner.read(key)

    async def release(self, key: str, owner: str) -> bool:
        return await self.inner.release(key, owner)


async def test_a_store_of_its_own_without_weak_references_is_renewed(
    autojump_clock: trio.testing.MockClock,
) -> None:
    pay = await paying(Runtime([KEY], step_store=SlottedStore()), Ledger(delay=60.0))
    values: list[Any] = []

    async def winner() -> None:
        values.append(await pay.present())

    async with trio.open_nursery() as nursery:
        nursery.start_soon(winner)
        await trio.sleep(1)
        with pytest.raises(StepInProgress, match="still running"):
            await pay.present()
    assert values == ["receipt 1 for 5"]


def test_retries_of_an_unknown_outcome_are_a_rate_limited_warning(
    caplog: pytest.LogCaptureFixture,
) -> None:
    # A client retrying a step whose holder died gets StepOutcomeUnknown each time: one
    # WARNING line without a traceback, rate-limited, not an ERROR traceback per retry.
    import logging

    from mrtr_trio.mcp._log import CLIENT_LOG_BURST, log_failure

    caplog.set_level(logging.DEBUG, logger="mrtr_trio.mcp")
    error = StepOutcomeUnknown("step charge: ... may or may not have happened")
    for _ in range(CLIENT_LOG_BURST * 3):
        log_failure("tool", "unknown-outcome", error)
    records = [r for r in caplog.records if "unknown-outcome" in r.getMessage()]
    warnings = [r for r in records if r.levelno == logging.WARNING]
    assert len(warnings) == CLIENT_LOG_BURST and all(r.exc_info is None for r in warnings)
    assert all(r.levelno in (logging.WARNING, logging.DEBUG) for r in records)
