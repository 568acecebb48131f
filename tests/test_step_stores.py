"""The StepStore contract, for MemoryStepStore (on a fake clock) and RedisStepStore (on a real
redis-server, whose clock runs the leases): claims are leases with owners; only the owner
records, renews or releases; a lapsed lease says the outcome is unknown, and is taken over only
when asked. Every test runs on trio and on asyncio."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterator

import anyio
import pytest

from mrtr_trio import Claim, MemoryStepStore, StepStore
from mrtr_trio.redis import RedisStepStore

from .loops import BOTH_LOOPS
from .services import RedisServer

LEASE = 0.3  # seconds: short, so that the Redis leases lapse within a test
LONG = 60.0

Pass = Callable[[float], Awaitable[None]]


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture(params=["memory", "redis"])
def store_and_time(request: pytest.FixtureRequest) -> Iterator[tuple[StepStore, Pass]]:
    """Each store, fresh, and how to let *seconds* pass for it: the memory store's fake clock
    moves; Redis's own clock runs, so the test sleeps."""
    if request.param == "memory":
        clock = FakeClock()

        async def move(seconds: float) -> None:
            clock.now += seconds

        yield MemoryStepStore(clock=clock), move
        return
    server: RedisServer = request.getfixturevalue("redis_db")
    store = RedisStepStore(server.unix_url)

    async def sleep(seconds: float) -> None:
        await anyio.sleep(seconds)

    yield store, sleep
    store.close()


@BOTH_LOOPS
async def test_a_claim_is_won_once_then_busy_then_done(
    store_and_time: tuple[StepStore, Pass],
) -> None:
    store, _ = store_and_time
    assert isinstance(store, StepStore)
    assert await store.read("k") is None
    assert await store.claim("k", "a", lease=LONG, ttl=LONG) == Claim("won")
    assert await store.claim("k", "b", lease=LONG, ttl=LONG) == Claim("busy")
    assert await store.read("k") == Claim("busy")
    assert await store.record("k", "a", b"\x00result\xff", LONG)
    assert await store.claim("k", "b", lease=LONG, ttl=LONG) == Claim("done", b"\x00result\xff")
    assert await store.read("k") == Claim("done", b"\x00result\xff")


@BOTH_LOOPS
async def test_only_the_owner_records_renews_or_releases(
    store_and_time: tuple[StepStore, Pass],
) -> None:
    store, _ = store_and_time
    await store.claim("k", "a", lease=LONG, ttl=LONG)
    assert not await store.record("k", "b", b"stolen", LONG)  # a late writer is told it lost
    assert not await store.renew("k", "b", LONG)
    assert not await store.release("k", "b")
    assert await store.read("k") == Claim("busy")  # a's claim stands, unchanged
    assert await store.record("k", "a", b"mine", LONG)
    assert not await store.release("k", "a")  # a result is never dropped
    assert not await store.record("k", "a", b"again", LONG)  # nor overwritten
    assert await store.read("k") == Claim("done", b"mine")


@BOTH_LOOPS
async def test_release_drops_the_owners_claim(store_and_time: tuple[StepStore, Pass]) -> None:
    store, _ = store_and_time
    await store.claim("k", "a", lease=LONG, ttl=LONG)
    assert await store.release("k", "a")
    assert await store.read("k") is None
    assert await store.claim("k", "b", lease=LONG, ttl=LONG) == Claim("won")
    assert not await store.release("nothing", "a")


@BOTH_LOOPS
async def test_a_lapsed_lease_is_unknown_after_the_lease_not_the_ttl(
    store_and_time: tuple[StepStore, Pass],
) -> None:
    store, let_pass = store_and_time
    await store.claim("k", "dead", lease=LEASE, ttl=LONG)  # its holder never renews
    assert await store.claim("k", "b", lease=LEASE, ttl=LONG) == Claim("busy")
    await let_pass(LEASE + 0.1)
    assert await store.read("k") == Claim("unknown")
    assert await store.claim("k", "b", lease=LEASE, ttl=LONG) == Claim("unknown")
    assert await store.read("k") == Claim("unknown")  # asking does not take it over


@BOTH_LOOPS
async def test_a_lapsed_claim_is_taken_over_only_when_asked(
    store_and_time: tuple[StepStore, Pass],
) -> None:
    store, let_pass = store_and_time
    await store.claim("k", "dead", lease=LEASE, ttl=LONG)
    assert await store.claim("k", "b", lease=LONG, ttl=LONG, take=True) == Claim("busy")
    await let_pass(LEASE + 0.1)
    assert await store.claim("k", "b", lease=LONG, ttl=LONG, take=True) == Claim("won")
    assert await store.read("k") == Claim("busy")  # b holds it now, with a live lease
    # The first holder comes back late: it lost, and cannot touch b's claim.
    assert not await store.record("k", "dead", b"late", LONG)
    assert not await store.renew("k", "dead", LONG)
    assert await store.record("k", "b", b"b's", LONG)
    assert await store.read("k") == Claim("done", b"b's")


@BOTH_LOOPS
async def test_renewing_keeps_a_claim_busy_past_its_first_lease(
    store_and_time: tuple[StepStore, Pass],
) -> None:
    store, let_pass = store_and_time
    await store.claim("k", "a", lease=LEASE, ttl=LONG)
    for _ in range(3):
        await let_pass(LEASE / 2)
        assert await store.renew("k", "a", LEASE)
    assert await store.read("k") == Claim("busy")
    assert await store.claim("k", "b", lease=LEASE, ttl=LONG, take=True) == Claim("busy")


@BOTH_LOOPS
async def test_giving_a_lease_up_makes_the_outcome_unknown_at_once(
    store_and_time: tuple[StepStore, Pass],
) -> None:
    store, _ = store_and_time
    await store.claim("k", "a", lease=LONG, ttl=LONG)
    assert await store.renew("k", "a", 0)
    assert await store.read("k") == Claim("unknown")
    # The owner may still record what it learned.
    assert await store.record("k", "a", b"v", LONG)
    assert await store.read("k") == Claim("done", b"v")


@BOTH_LOOPS
async def test_keys_expire_with_their_ttl(store_and_time: tuple[StepStore, Pass]) -> None:
    store, let_pass = store_and_time
    await store.claim("claimed", "a", lease=LEASE, ttl=LEASE)
    await store.claim("recorded", "a", lease=LEASE, ttl=LONG)
    await store.record("recorded", "a", b"v", LEASE * 2)
    await let_pass(LEASE + 0.1)
    assert await store.read("claimed") is None
    assert await store.read("recorded") == Claim("done", b"v")
    await let_pass(LEASE)
    assert await store.read("recorded") is None


@BOTH_LOOPS
async def test_a_renewal_keeps_the_key_alive_past_its_ttl(
    store_and_time: tuple[StepStore, Pass],
) -> None:
    # A step that outlasts the token it serves keeps its claim while it runs.
    store, let_pass = store_and_time
    await store.claim("k", "a", lease=LEASE, ttl=LEASE)
    await let_pass(LEASE / 2)
    assert await store.renew("k", "a", LEASE * 2)
    await let_pass(LEASE)
    assert await store.read("k") == Claim("busy")
    assert await store.record("k", "a", b"v", LONG)


@BOTH_LOOPS
async def test_a_step_that_outlasted_its_claim_still_records(
    store_and_time: tuple[StepStore, Pass],
) -> None:
    # The key expired (nobody can claim it again: the token it served is gone): the holder's
    # result is written all the same, for what it is worth.
    store, let_pass = store_and_time
    await store.claim("k", "a", lease=LEASE, ttl=LEASE)
    await let_pass(LEASE + 0.1)
    assert await store.read("k") is None
    assert await store.record("k", "a", b"v", LONG)
    assert await store.read("k") == Claim("done", b"v")


@BOTH_LOOPS
async def test_concurrent_claims_have_one_winner(store_and_time: tuple[StepStore, Pass]) -> None:
    store, _ = store_and_time
    claims: list[Claim] = []

    async def claim(owner: str) -> None:
        claims.append(await store.claim("contended", owner, lease=LONG, ttl=LONG))

    async with anyio.create_task_group() as tasks:
        for n in range(20):
            tasks.start_soon(claim, f"o{n}")
    assert sorted(c.status for c in claims) == ["busy"] * 19 + ["won"]


@BOTH_LOOPS
async def test_an_empty_result_is_a_result(store_and_time: tuple[StepStore, Pass]) -> None:
    store, _ = store_and_time
    await store.claim("k", "a", lease=LONG, ttl=LONG)
    assert await store.record("k", "a", b"", LONG)
    assert await store.read("k") == Claim("done", b"")


@BOTH_LOOPS
async def test_a_redis_claim_that_arrives_after_its_caller_gave_up_is_not_applied(
    redis_db: RedisServer,
) -> None:
    # A claim queued behind a stall reaches Redis after the caller's timeout: it must not
    # take the key (else every retry would see a claim nobody runs).
    store = RedisStepStore(redis_db.unix_url)
    store.timeout = -1.0  # the claim's deadline has passed when it reaches Redis
    with pytest.raises(TimeoutError, match="not applied"):
        await store.claim("k", "a", lease=LONG, ttl=LONG)
    assert await store.read("k") is None
