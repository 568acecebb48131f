"""Exactly-once steps in one process: the in-memory store."""

from __future__ import annotations

import pytest
import trio

from mrtr_trio import (
    Claim,
    Context,
    InputRequired,
    MemoryStepStore,
    MrtrError,
    Runtime,
    StepInProgress,
    done,
    elicit,
    step,
    step_key,
)

from .flows import CONFIRM

KEY = b"s" * 32
YES = {"input-0": {"action": "accept", "content": {"confirm": True}}}


async def test_memory_store_release_leaves_a_recorded_result() -> None:
    # A presentation whose claim expired mid-step and whose step then failed releases the
    # key; by then another one may have recorded the result, which must stay.
    store = MemoryStepStore()
    await store.claim("k", 60)
    await store.record("k", b"\x01", 60)
    await store.release("k")
    assert await store.read("k") == Claim("done", b"\x01")


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
            # The step ran: its claim stands, so a retry does not run it again.
            with pytest.raises(StepInProgress):
                await runtime.advance(bad_step, {}, input_responses=YES, request_state=token)
        assert len(runs) == 1
