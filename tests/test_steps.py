"""Exactly-once steps in one process: the in-memory store."""

from __future__ import annotations

from mrtr_trio import Claim, MemoryStepStore


async def test_memory_store_release_leaves_a_recorded_result() -> None:
    # A presentation whose claim expired mid-step and whose step then failed releases the
    # key; by then another one may have recorded the result, which must stay.
    store = MemoryStepStore()
    await store.claim("k", 60)
    await store.record("k", b"\x01", 60)
    await store.release("k")
    assert await store.read("k") == Claim("done", b"\x01")
