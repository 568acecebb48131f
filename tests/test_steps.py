"""Exactly-once steps in one process: step_key(), the in-memory store, running a step against a
store (reuse, waiting, failing closed, releasing), single-use and encrypted tokens.

The same rules across processes, on a real Redis, are in tests/server/test_exactly_once.py.
"""

from __future__ import annotations

import re
import time
from typing import Any

import pytest
import trio

from mrtr_trio import (
    Claim,
    Complete,
    Context,
    InputRequired,
    InvalidInputResponse,
    InvalidRequestState,
    MemoryStepStore,
    MrtrError,
    Runtime,
    StepInProgress,
    StepOutcomeUnknown,
    StepStoreUnavailable,
    done,
    elicit,
    step,
    step_key,
)
from mrtr_trio._journal import Cursor, Journal, StepResult, step_fingerprint
from mrtr_trio._keyring import Keyring
from mrtr_trio._token import StateCodec

from .flows import CONFIRM, NAME, YES, Ledger, paying
from .hostile import decode

KEY = b"s" * 32
NO = {"input-0": {"action": "accept", "content": {"confirm": False}}}
STEP_KEY = re.compile(r"[A-Za-z0-9_-]{22}")


# ------------------------------------------------------------------------------- step_key()


async def test_step_key_is_the_same_on_every_replay_of_one_token() -> None:
    pay = await paying(Runtime([KEY]))
    await pay.present()
    await pay.present()
    keys = pay.ledger.keys
    assert len(keys) == 2  # no store: the step ran again, with the same key
    assert keys[0] == keys[1]
    assert STEP_KEY.fullmatch(keys[0])


async def test_step_key_differs_across_flows_with_the_same_arguments() -> None:
    pay = await paying(Runtime([KEY]))
    await pay.present()
    await (await pay.start()).present()  # another first call, the same arguments
    assert pay.ledger.keys[0] != pay.ledger.keys[1]


async def test_step_key_differs_across_answers() -> None:
    pay = await paying(Runtime([KEY]))
    await pay.present(YES)
    await pay.present(NO)
    assert pay.ledger.keys[0] != pay.ledger.keys[1]


async def test_step_key_differs_across_positions() -> None:
    keys: list[str] = []

    def note() -> None:
        keys.append(step_key())  # a sync step function gets its key too

    async def twice(ctx: Context):
        yield elicit("Go?", CONFIRM)
        yield step(note)
        yield step(note)  # same function, same arguments, next position
        yield done(None)

    runtime = Runtime([KEY])
    first = await runtime.advance(twice, {})
    assert isinstance(first, InputRequired)
    await runtime.advance(twice, {}, input_responses=YES, request_state=first.request_state)
    assert len(keys) == 2 and keys[0] != keys[1]


def test_step_key_material_binding_flow_journal_and_position() -> None:
    # The derivation itself, one input changed at a time (through the API, another binding
    # cannot reuse a token, so arguments are checked here too).
    codec = StateCodec(Keyring([KEY]), ttl=60, max_state_bytes=65536)
    flow = Cursor(flow_id=b"flow-one")
    binding = b"\1" * 32
    key = codec.step_key(flow, binding, 0)
    assert key == codec.step_key(Cursor(flow_id=b"flow-one"), binding, 0)
    assert key != codec.step_key(flow, b"\2" * 32, 0)  # other arguments, handler or bind
    assert key != codec.step_key(Cursor(flow_id=b"flow-two"), binding, 0)
    assert key != codec.step_key(flow, binding, 1)
    ran = Journal((StepResult(step_fingerprint(print), 1),))
    journaled = codec.step_key(Cursor(ran, flow_id=b"flow-one"), binding, 0)
    assert key != journaled  # another journal before the step
    other = Journal((StepResult(step_fingerprint(print), 2),))
    assert journaled != codec.step_key(Cursor(other, flow_id=b"flow-one"), binding, 0)
    other_key = StateCodec(Keyring([b"t" * 32]), ttl=60, max_state_bytes=65536)
    assert key != other_key.step_key(flow, binding, 0)


async def test_step_key_differs_across_arguments() -> None:
    ledger = Ledger()
    await (await paying(Runtime([KEY]), ledger, amount=5)).present()
    await (await paying(Runtime([KEY]), ledger, amount=6)).present()
    assert ledger.keys[0] != ledger.keys[1]


async def test_step_key_survives_key_rotation() -> None:
    old, new = b"O" * 32, b"N" * 32
    pay = await paying(Runtime([old]))
    await pay.present()
    pay.runtime = Runtime([new, old])  # the old key still verifies this flow
    await pay.present()
    assert pay.ledger.keys[0] == pay.ledger.keys[1]


async def test_live_step_keys_are_unique_per_flow_and_position() -> None:
    keys: list[str] = []

    async def note() -> None:
        keys.append(step_key())

    async def steps_only(ctx: Context):
        yield step(note)
        yield step(note)
        yield done(None)

    runtime = Runtime([KEY])
    await runtime.run_live(steps_only, {}, None)
    await runtime.run_live(steps_only, {}, None)
    assert len(keys) == 4 and len(set(keys)) == 4
    assert all(STEP_KEY.fullmatch(k) for k in keys)


async def test_step_key_outside_a_step_raises() -> None:
    with pytest.raises(MrtrError, match=r"only available inside a step function"):
        step_key()

    async def asks_in_the_handler(ctx: Context):
        step_key()  # the handler body is not a step
        yield done(None)

    with pytest.raises(MrtrError, match=r"only available inside a step function"):
        await Runtime([KEY]).advance(asks_in_the_handler, {})


# -------------------------------------------------------------------------- MemoryStepStore


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


async def test_a_full_memory_store_fails_closed_rather_than_forgetting() -> None:
    clock = FakeClock()
    store = MemoryStepStore(max_entries=2, clock=clock)
    await store.claim("a", "o", lease=10, ttl=10)
    await store.claim("b", "o", lease=10, ttl=20)
    await store.record("b", "o", b"kept", 20)
    with pytest.raises(StepStoreUnavailable, match=r"full \(2 unexpired entries\)"):
        await store.claim("c", "o", lease=10, ttl=10)
    # Nothing was forgotten to make room.
    assert await store.read("a") == Claim("busy")
    assert await store.read("b") == Claim("done", b"kept")
    clock.now += 10  # "a" expires: its room is reused
    assert await store.claim("c", "o", lease=10, ttl=10) == Claim("won")
    assert await store.read("b") == Claim("done", b"kept")
    assert len(store) == 2


def test_memory_store_bound_is_validated() -> None:
    for bad in (0, -1, 1.5, True, "10"):
        with pytest.raises(ValueError, match="max_entries"):
            MemoryStepStore(max_entries=bad)  # type: ignore[arg-type]


def test_runtime_takes_only_a_step_store() -> None:
    with pytest.raises(TypeError, match="step_store must be a StepStore"):
        Runtime([KEY], step_store=object())  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="single_use=True needs a step_store"):
        Runtime([KEY], single_use=True)


# ---------------------------------------------------------------- running steps with a store


async def test_without_a_store_each_presentation_runs_the_step() -> None:
    # Today's default, and the control for the tests below: they could fail.
    pay = await paying(Runtime([KEY]))
    values = [await pay.present() for _ in range(3)]
    assert len(pay.ledger.keys) == 3 and len(set(values)) == 3


async def test_with_a_store_a_token_presented_again_reuses_the_recorded_result() -> None:
    pay = await paying(Runtime([KEY], step_store=MemoryStepStore()))
    values = [await pay.present() for _ in range(5)]
    assert len(pay.ledger.keys) == 1
    assert values == ["receipt 1 for 5"] * 5


async def test_a_concurrent_presentation_waits_for_the_winners_result(
    autojump_clock: trio.testing.MockClock,
) -> None:
    ledger = Ledger(delay=3.0)  # well within the wait
    pay = await paying(Runtime([KEY], step_store=MemoryStepStore()), ledger)
    values: list[Any] = []

    async def one() -> None:
        values.append(await pay.present())

    async with trio.open_nursery() as nursery:
        for _ in range(5):
            nursery.start_soon(one)
    assert len(ledger.keys) == 1
    assert values == ["receipt 1 for 5"] * 5


async def test_a_presentation_that_waits_too_long_gets_step_in_progress(
    autojump_clock: trio.testing.MockClock,
) -> None:
    ledger = Ledger(delay=60.0)  # longer than a presentation waits for another's step
    pay = await paying(Runtime([KEY], step_store=MemoryStepStore()), ledger)
    values: list[Any] = []

    async def winner() -> None:
        values.append(await pay.present())

    async with trio.open_nursery() as nursery:
        nursery.start_soon(winner)
        await trio.sleep(1)
        started = trio.current_time()
        with pytest.raises(StepInProgress, match="retry the request"):
            await pay.present()
        assert 9.5 <= trio.current_time() - started <= 11
    assert values == ["receipt 1 for 5"]
    assert await pay.present() == "receipt 1 for 5"  # the retry gets it
    assert len(ledger.keys) == 1


class BrokenStore(MemoryStepStore):
    """A store whose server is down: every call raises, as a client library would."""

    def __init__(self, *broken: str, clock: Any = time.monotonic) -> None:
        super().__init__(clock=clock)
        self.broken = set(broken) or {"claim", "record", "read", "release", "renew"}

    def _fail(self, method: str) -> None:
        if method in self.broken:
            raise ConnectionError("Connection refused (store down)")

    async def claim(
        self, key: str, owner: str, *, lease: float, ttl: float, take: bool = False
    ) -> Claim:
        self._fail("claim")
        return await super().claim(key, owner, lease=lease, ttl=ttl, take=take)

    async def record(self, key: str, owner: str, value: bytes, ttl: float) -> bool:
        self._fail("record")
        return await super().record(key, owner, value, ttl)

    async def read(self, key: str) -> Claim | None:
        self._fail("read")
        return await super().read(key)

    async def renew(self, key: str, owner: str, lease: float) -> bool:
        self._fail("renew")
        return await super().renew(key, owner, lease)


async def test_a_store_that_cannot_be_reached_fails_the_step_closed() -> None:
    pay = await paying(Runtime([KEY], step_store=BrokenStore()))
    with pytest.raises(StepStoreUnavailable) as caught:
        await pay.present()
    assert pay.ledger.keys == []  # the step function was never called
    message = str(caught.value)
    assert "Ledger.charge did not run" in message and "Connection refused" in message
    assert "never runs unrecorded" in message


async def test_a_result_that_cannot_be_recorded_is_not_run_again() -> None:
    # The step ran but its result could not be recorded: the round fails saying so (not "did
    # not run"), and a retry does not run it again: its outcome is unknown to it.
    pay = await paying(Runtime([KEY], step_store=BrokenStore("record")))
    with pytest.raises(StepStoreUnavailable) as caught:
        await pay.present()
    assert "ran, but its result could not be recorded" in str(caught.value)
    assert "did not run" not in str(caught.value)
    with pytest.raises(StepOutcomeUnknown, match="not run again"):
        await pay.present()
    assert len(pay.ledger.keys) == 1


async def test_a_failing_step_releases_its_claim_so_a_retry_runs_it() -> None:
    ledger = Ledger(failures=1)
    pay = await paying(Runtime([KEY], step_store=MemoryStepStore()), ledger)
    with pytest.raises(RuntimeError, match="payment API failed"):
        await pay.present()
    assert await pay.present() == "receipt 2 for 5"
    assert await pay.present() == "receipt 2 for 5"
    assert len(ledger.keys) == 2 and ledger.keys[0] == ledger.keys[1]


async def test_a_step_cancelled_mid_step_is_never_silently_run_again(
    autojump_clock: trio.testing.MockClock,
) -> None:
    # Its effect may have happened: the claim is given up as unknown at once (no waiting for
    # the lease), and the next attempt is told so instead of running it again.
    store = MemoryStepStore()
    pay = await paying(Runtime([KEY], step_store=store), Ledger(delay=5.0))
    with trio.move_on_after(1):
        await pay.present()
    with pytest.raises(StepOutcomeUnknown, match="may or may not have happened"):
        await pay.present()
    assert len(pay.ledger.keys) == 1


async def test_a_cancelled_retry_step_runs_again_under_the_same_key(
    autojump_clock: trio.testing.MockClock,
) -> None:
    ledger = Ledger(delay=5.0)
    pay = await paying(Runtime([KEY], step_store=MemoryStepStore()), ledger, retry=True)
    with trio.move_on_after(1):
        await pay.present()
    assert await pay.present() == "receipt 2 for 5"
    assert await pay.present() == "receipt 2 for 5"  # recorded now: not a third run
    assert len(ledger.keys) == 2 and ledger.keys[0] == ledger.keys[1]


async def test_an_unrecordable_step_value_is_the_same_error_with_a_store(
    autojump_clock: trio.testing.MockClock,
) -> None:
    runs: list[str] = []

    def make_handle() -> object:
        runs.append(step_key())
        return object()  # no CBOR form

    async def bad_step(ctx: Context):
        yield elicit("Go?", CONFIRM)
        value = yield step(make_handle)
        yield done(value)

    for store in (None, MemoryStepStore()):
        runs.clear()
        runtime = Runtime([KEY], step_store=store)
        first = await runtime.advance(bad_step, {})
        assert isinstance(first, InputRequired)
        token = first.request_state
        with pytest.raises(MrtrError, match=r"cannot record the object from step .*make_handle"):
            await runtime.advance(bad_step, {}, input_responses=YES, request_state=token)
        if store is not None:
            # The step ran: a retry does not run it again (its outcome is unknown to it).
            with pytest.raises(StepOutcomeUnknown):
                await runtime.advance(bad_step, {}, input_responses=YES, request_state=token)
        assert len(runs) == 1


# ------------------------------------------------------------------------ single-use tokens


async def test_a_single_use_token_continues_once() -> None:
    entered: list[str] = []

    async def two_asks(ctx: Context):
        entered.append("in")
        yield elicit("Name?", NAME)
        yield elicit("Sure?", CONFIRM)
        yield done("ok")

    runtime = Runtime([KEY], step_store=MemoryStepStore(), single_use=True)
    first = await runtime.advance(two_asks, {})
    assert isinstance(first, InputRequired)
    name = {"input-0": {"action": "accept", "content": {"name": "Ada"}}}
    second = await runtime.advance(
        two_asks, {}, input_responses=name, request_state=first.request_state
    )
    assert isinstance(second, InputRequired)
    entered.clear()
    with pytest.raises(InvalidRequestState) as caught:
        await runtime.advance(two_asks, {}, input_responses=name, request_state=first.request_state)
    assert entered == []  # refused before the handler ran
    assert (caught.value.code, caught.value.message) == (-32602, "Invalid or expired requestState")
    assert "already used" in caught.value.reason
    sure = {"input-1": {"action": "accept", "content": {"confirm": True}}}
    out = await runtime.advance(
        two_asks, {}, input_responses=sure, request_state=second.request_state
    )
    assert out == Complete("ok")  # each new token is good once


async def test_a_single_use_token_is_spent_even_when_its_round_then_fails() -> None:
    # Documented: the token is claimed when it is accepted, before the answers are read.
    pay = await paying(Runtime([KEY], step_store=MemoryStepStore(), single_use=True))
    with pytest.raises(InvalidInputResponse):
        await pay.present({"input-0": {"action": "maybe"}})
    with pytest.raises(InvalidRequestState):
        await pay.present()
    assert pay.ledger.keys == []


async def test_a_token_that_expires_mid_step_still_completes_its_round() -> None:
    clock = FakeClock()
    clock.now = 1_800_000_000.0
    runtime = Runtime([KEY], ttl=60, step_store=MemoryStepStore(), clock=clock)

    def slow_charge() -> str:
        clock.now += 120  # the step outlasts its token
        return "charged"

    async def pay_then_ask(ctx: Context):
        yield elicit("Pay?", CONFIRM)
        receipt = yield step(slow_charge)
        yield elicit(f"{receipt}: send a receipt?", CONFIRM)
        yield done(receipt)

    first = await runtime.advance(pay_then_ask, {})
    assert isinstance(first, InputRequired)
    second = await runtime.advance(
        pay_then_ask, {}, input_responses=YES, request_state=first.request_state
    )
    assert isinstance(second, InputRequired)  # the round completed, with a fresh token
    with pytest.raises(InvalidRequestState):  # the old token has expired meanwhile
        await runtime.advance(
            pay_then_ask, {}, input_responses=YES, request_state=first.request_state
        )
    again = {"input-1": {"action": "accept", "content": {"confirm": True}}}
    out = await runtime.advance(
        pay_then_ask, {}, input_responses=again, request_state=second.request_state
    )
    assert out == Complete("charged")


async def test_without_single_use_a_token_can_be_presented_again() -> None:
    pay = await paying(Runtime([KEY], step_store=MemoryStepStore()))
    assert await pay.present() == await pay.present()


# ------------------------------------------------------------------------ encrypted tokens


async def test_an_encrypted_token_does_not_carry_the_answers_in_the_clear() -> None:
    async def ask_twice(ctx: Context):
        name = yield elicit("Name?", NAME)
        yield elicit(f"Sure, {name.content['name']}?", CONFIRM)
        yield done(name.content["name"])

    secret = "Ada Lovelace-7f3a"
    answer = {"input-0": {"action": "accept", "content": {"name": secret}}}
    tokens = {}
    for encrypt in (False, True):
        runtime = Runtime([KEY], encrypt=encrypt)
        first = await runtime.advance(ask_twice, {})
        assert isinstance(first, InputRequired)
        second = await runtime.advance(
            ask_twice, {}, input_responses=answer, request_state=first.request_state
        )
        assert isinstance(second, InputRequired) and second.request_state is not None
        tokens[encrypt] = second.request_state
    assert secret.encode() in decode(tokens[False])  # the control: signed tokens are readable
    assert secret.encode() not in decode(tokens[True])
    assert b"Ada" not in decode(tokens[True])
    # Either runtime opens either kind of token (turning encryption on or off keeps flows).
    sure = {"input-1": {"action": "accept", "content": {"confirm": True}}}
    for token in tokens.values():
        for encrypt in (False, True):
            out = await Runtime([KEY], encrypt=encrypt).advance(
                ask_twice, {}, input_responses=sure, request_state=token
            )
            assert out == Complete(secret)
