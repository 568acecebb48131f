"""The task stores: what MemoryTaskStore and RedisTaskStore (on a real redis-server, see
tests/services.py) share (expiring, newest revision wins, ids unique), the memory store's
bound, the Redis store's keys, expiries and sharing; and the record's wire and JSON forms. The
contract runs on trio and on asyncio."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator

import anyio
import attrs
import pytest
import trio

from mrtr_trio.mcp import MemoryTaskStore, TaskRecord, TaskStore, TaskStoreFull
from mrtr_trio.redis import RedisTaskStore

from ..loops import BOTH_LOOPS
from ..services import RedisServer


class Clock:
    def __init__(self) -> None:
        self.now = 1_000_000.0

    def __call__(self) -> float:
        return self.now


def record(
    task_id: str, status: str = "working", ttl: float | None = 60.0, at: float = 1e6
) -> TaskRecord:
    return TaskRecord(task_id, status, at, at, ttl)  # type: ignore[arg-type]


@pytest.fixture(params=["memory", "redis"])
def clock_and_store(request: pytest.FixtureRequest) -> Iterator[tuple[Clock, TaskStore]]:
    """Each task store the package ships, fresh, on a clock the test moves."""
    clock = Clock()
    if request.param == "memory":
        yield clock, MemoryTaskStore(clock=clock)
        return
    server: RedisServer = request.getfixturevalue("redis_db")
    made = RedisTaskStore(server.unix_url, clock=clock)
    yield clock, made
    made.close()


# ------------------------------------------------------------------------ the store contract


@BOTH_LOOPS
async def test_expiry_and_revisions(clock_and_store: tuple[Clock, TaskStore]) -> None:
    clock, store = clock_and_store
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
    assert await store.get("u") is None
    await store.delete("u")  # forgetting a forgotten task is fine


@BOTH_LOOPS
async def test_ids_are_unique_and_equal_revisions_do_not_replace(
    clock_and_store: tuple[Clock, TaskStore],
) -> None:
    clock, store = clock_and_store
    first = record("t", ttl=None)
    await store.create(first)
    with pytest.raises(ValueError, match="'t' exists already"):
        await store.create(record("t", "completed"))
    assert await store.get("t") == first
    await store.put(record("t", "failed"))  # revision 0 again: not newer
    assert await store.get("t") == first
    second = first.evolve(clock.now, status="completed", result={"content": []})
    await store.put(second)
    await store.put(second.evolve(clock.now + 1, status="failed").evolve(clock.now + 2))
    assert (await store.get("t")) == second.evolve(clock.now + 1, status="failed").evolve(
        clock.now + 2
    )
    await store.delete("t")
    await store.put(second.evolve(clock.now + 3))  # gone: not brought back by a write
    assert await store.get("t") is None


@BOTH_LOOPS
async def test_concurrent_writes_keep_the_highest_revision(
    clock_and_store: tuple[Clock, TaskStore],
) -> None:
    clock, store = clock_and_store
    base = record("t")
    await store.create(base)
    revisions = [base]
    for _ in range(12):
        revisions.append(revisions[-1].evolve(clock.now, status_message=f"{len(revisions)}"))

    async with anyio.create_task_group() as tasks:
        for revision in reversed(revisions):  # newest first: every later write is older
            tasks.start_soon(store.put, revision)
    assert await store.get("t") == revisions[-1]


# -------------------------------------------------------------------------- MemoryTaskStore


@pytest.fixture(params=["memory", "redis"])
def bounded(
    request: pytest.FixtureRequest,
) -> Iterator[Callable[..., tuple[Clock, TaskStore]]]:
    """A maker of each task store the package ships with the bounds given, on a clock the
    test moves."""
    made: list[RedisTaskStore] = []

    def make(max_tasks: int, max_tasks_per_owner: int | None = None) -> tuple[Clock, TaskStore]:
        clock = Clock()
        bounds = {"max_tasks": max_tasks, "max_tasks_per_owner": max_tasks_per_owner}
        if request.param == "memory":
            return clock, MemoryTaskStore(clock=clock, **bounds)  # type: ignore[arg-type]
        server: RedisServer = request.getfixturevalue("redis_db")
        made.append(RedisTaskStore(server.unix_url, clock=clock, **bounds))  # type: ignore[arg-type]
        return clock, made[-1]

    yield make
    for store in made:
        store.close()


async def test_a_full_store_never_drops_an_unexpired_record_and_refuses_instead(
    bounded: Callable[..., tuple[Clock, TaskStore]],
) -> None:
    clock, store = bounded(3)
    await store.create(record("a", "completed", at=clock.now))
    await store.create(record("b", "completed", at=clock.now + 1))
    await store.create(record("c", "working", ttl=10.0))
    clock.now += 11  # c expired
    await store.create(record("d"))
    assert await store.get("c") is None
    with pytest.raises(TaskStoreFull, match="max_tasks=3 tasks that have not expired"):
        await store.create(record("e"))  # full: the finished a and b stay readable
    assert await store.get("a") is not None and await store.get("b") is not None
    with pytest.raises(ValueError, match="exists"):
        await store.create(record("d"))


async def test_each_owner_holds_at_most_its_share_of_the_store(
    bounded: Callable[..., tuple[Clock, TaskStore]],
) -> None:
    clock, store = bounded(10, 2)
    alice, bob = ("client", "issuer", "alice"), ("client", "issuer", "bob")
    await store.create(attrs.evolve(record("a1", "completed", ttl=5.0), owner=alice))
    await store.create(attrs.evolve(record("a2"), owner=alice))
    with pytest.raises(TaskStoreFull, match="max_tasks_per_owner=2"):
        await store.create(attrs.evolve(record("a3"), owner=alice))
    await store.create(attrs.evolve(record("b1"), owner=bob))  # another owner is not held up
    for name in ("u1", "u2", "u3"):  # unauthenticated tasks share max_tasks only
        await store.create(record(name))
    clock.now += 6  # a1 expired: alice has room again
    await store.create(attrs.evolve(record("a3"), owner=alice))


def test_store_bound_must_be_positive() -> None:
    with pytest.raises(ValueError):
        MemoryTaskStore(0)


# --------------------------------------------------------------------------- the record's forms


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


@pytest.mark.parametrize(
    "task",
    [
        record("plain"),
        TaskRecord(
            "full",
            "input_required",
            1.25,
            2.5,
            None,
            owner=("client", "alice"),
            scopes=("mcp:admin", "mcp:read"),
            poll_interval=0.5,
            status_message="waiting",
            input_requests={"ask": {"method": "elicitation/create", "params": {"n": [1, None]}}},
            revision=7,
        ),
        TaskRecord("failed", "failed", 0, 0, 0.001, error={"code": -1, "message": "m"}),
        TaskRecord("done", "completed", 0, 0, 3, result={"content": [{"type": "text"}]}),
    ],
)
def test_the_json_form_round_trips(task: TaskRecord) -> None:
    through_json = json.loads(json.dumps(task.to_json()))
    assert TaskRecord.from_json(through_json) == task
    assert isinstance(TaskRecord.from_json(through_json).owner, tuple)
    assert isinstance(TaskRecord.from_json(through_json).scopes, tuple)


@pytest.mark.parametrize(
    ("change", "complaint"),
    [
        ({"status": "finished"}, "invalid status"),
        ({"owner": "alice"}, "invalid owner"),
        ({"scopes": "mcp:admin"}, "invalid scopes"),
        ({"scopes": [1]}, "invalid scopes"),
        ({"revision": 1.5, "ttl": "60"}, "invalid ttl, revision"),
        ({"revision": True}, "invalid revision"),
        ({"result": []}, "invalid result"),
        ({"extra": 1}, "has the fields"),
    ],
)
def test_a_bad_json_form_is_named(change: dict[str, object], complaint: str) -> None:
    with pytest.raises(ValueError, match=complaint):
        TaskRecord.from_json({**record("t").to_json(), **change})
    with pytest.raises(ValueError, match="got list"):
        TaskRecord.from_json([])


# --------------------------------------------------------------------------- RedisTaskStore


async def test_a_task_key_expires_with_its_record(redis_db: RedisServer) -> None:
    store = RedisTaskStore(redis_db.unix_url, prefix="jobs:")
    now = store.clock()
    with redis_db.client() as client:
        await store.create(record("short", ttl=0.3, at=now))
        await store.create(record("long", ttl=60, at=now - 30))  # half its life is gone
        await store.create(record("forever", ttl=None, at=now))
        assert 0 < client.pttl("jobs:mrtr_trio:task:short") <= 300
        assert 29_000 < client.pttl("jobs:mrtr_trio:task:long") <= 30_000
        assert client.pttl("jobs:mrtr_trio:task:forever") == -1  # no expiry
        newer = (await store.get("long")).evolve(now, status="completed")  # type: ignore[union-attr]
        await store.put(newer)
        assert 29_000 < client.pttl("jobs:mrtr_trio:task:long") <= 30_000  # kept
        await trio.sleep(0.35)
        assert client.exists("jobs:mrtr_trio:task:short") == 0  # Redis dropped it
    assert await store.get("short") is None
    assert await store.get("long") == newer
    store.close()


async def test_two_stores_on_one_redis_share_every_write(redis_db: RedisServer) -> None:
    here = RedisTaskStore(redis_db.unix_url)
    there = RedisTaskStore(redis_db.tcp_url)  # another client: another process, in effect
    first = record("t", at=here.clock())
    await here.create(first)
    assert await there.get("t") == first
    with pytest.raises(ValueError, match="exists already"):
        await there.create(first)
    newer = first.evolve(here.clock(), status="completed", result={"content": []})
    await here.put(newer)
    await there.put(first.evolve(here.clock(), status="failed"))  # same revision: too late
    assert await there.get("t") == newer
    await there.delete("t")
    assert await here.get("t") is None
    here.close()
    there.close()


@pytest.mark.parametrize(
    "garbage", [b"not json", b"\xff\xfe", b"[1, 2]", b'{"revision": 3}', b'{"task_id": "t"}']
)
async def test_a_value_the_store_did_not_write_is_a_named_error(
    redis_db: RedisServer, garbage: bytes
) -> None:
    store = RedisTaskStore(redis_db.unix_url)
    with redis_db.client() as client:
        client.set("mrtr_trio:task:t", garbage)
    named = r"the task store key 'mrtr_trio:task:t' holds .*which RedisTaskStore did not write"
    with pytest.raises(ValueError, match=named):
        await store.get("t")
    if b"revision" not in garbage:  # a value with a revision is compared, not parsed whole
        with pytest.raises(ValueError, match=named):
            await store.put(record("t").evolve(1.0))
    with redis_db.client() as client:
        assert client.get("mrtr_trio:task:t") == garbage  # nothing was overwritten
    store.close()


def test_bad_arguments_are_named() -> None:
    with pytest.raises(TypeError, match="RedisTaskStore needs a URL"):
        RedisTaskStore(6379)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="prefix must be a str"):
        RedisTaskStore("redis://127.0.0.1", prefix=b"x")  # type: ignore[arg-type]
