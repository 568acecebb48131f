"""MemoryTaskStore: bounded, expiring, newest revision wins; and the record's two wire forms."""

from __future__ import annotations

import pytest

from mrtr_trio.mcp import MemoryTaskStore, TaskRecord, TaskStoreFull


class Clock:
    def __init__(self) -> None:
        self.now = 1_000_000.0

    def __call__(self) -> float:
        return self.now


def record(
    task_id: str, status: str = "working", ttl: float | None = 60.0, at: float = 1e6
) -> TaskRecord:
    return TaskRecord(task_id, status, at, at, ttl)  # type: ignore[arg-type]


async def test_full_store_drops_expired_then_oldest_finished_then_refuses() -> None:
    clock = Clock()
    store = MemoryTaskStore(3, clock=clock)
    await store.create(record("a", "completed", at=clock.now))
    await store.create(record("b", "completed", at=clock.now + 1))
    await store.create(record("c", "working", ttl=10.0))
    clock.now += 11  # c expired
    await store.create(record("d"))
    assert await store.get("c") is None and len(store) == 3
    await store.create(record("e"))  # full: the oldest finished one (a) goes
    assert await store.get("a") is None and await store.get("b") is not None
    await store.create(record("f"))  # then b
    with pytest.raises(TaskStoreFull, match="3 tasks are running"):
        await store.create(record("g"))
    with pytest.raises(ValueError, match="exists"):
        await store.create(record("d"))


async def test_expiry_and_revisions() -> None:
    clock = Clock()
    store = MemoryTaskStore(clock=clock)
    first = record("t", ttl=5.0)
    await store.create(first)
    newer = first.evolve(clock.now, status="input_required")
    await store.put(newer)
    await store.put(first)  # an older revision never overwrites a newer one
    assert (await store.get("t")) == newer
    await store.put(record("unknown"))  # writes to a forgotten task are dropped
    assert await store.get("unknown") is None
    clock.now += 5
    assert await store.get("t") is None
    unlimited = record("u", ttl=None)
    await store.create(unlimited)
    clock.now += 1e9
    assert await store.get("u") == unlimited
    await store.delete("u")
    assert len(store) == 0


def test_wire_forms() -> None:
    done = TaskRecord(
        "t",
        "completed",
        0.0,
        1.5,
        None,
        poll_interval=0.25,
        result={"content": []},
        input_requests={"k": {}},
    )
    created = done.to_wire(detailed=False)
    assert created == {
        "resultType": "task",
        "taskId": "t",
        "status": "completed",
        "createdAt": "1970-01-01T00:00:00.000Z",
        "lastUpdatedAt": "1970-01-01T00:00:01.500Z",
        "ttlMs": None,
        "pollIntervalMs": 250,
    }
    detailed = done.to_wire(detailed=True)
    assert detailed["resultType"] == "complete" and detailed["result"] == {"content": []}
    assert "inputRequests" not in detailed and "error" not in detailed
    failed = TaskRecord("t", "failed", 0.0, 0.0, 0.0001, error={"code": -1, "message": "m"})
    assert failed.to_wire(detailed=True)["error"] == {"code": -1, "message": "m"}
    assert failed.to_wire(detailed=True)["ttlMs"] == 1  # never 0: a positive integer


def test_store_bound_must_be_positive() -> None:
    with pytest.raises(ValueError):
        MemoryTaskStore(0)
