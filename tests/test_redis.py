"""RedisStepStore on a real redis-server (started by the tests, see services.py): its URLs and
clients, key prefixes, expiry in milliseconds, and failing closed when Redis is down. (The
contract it shares with MemoryStepStore is in test_step_stores.py.)"""

from __future__ import annotations

from pathlib import Path

import pytest
import redis
import trio

from mrtr_trio import Claim, Runtime, StepStoreUnavailable
from mrtr_trio._steps import STEP_GRACE
from mrtr_trio.redis import RedisStepStore

from .flows import paying
from .services import RedisServer, free_port, need, redis_server

KEY = b"r" * 32


# --------------------------------------------------------------------------- Redis specifics


async def test_expiry_is_in_milliseconds(redis_db: RedisServer) -> None:
    store = RedisStepStore(redis_db.unix_url)
    with redis_db.client() as client:
        await store.claim("claimed", "a", lease=0.25, ttl=0.25)
        assert 0 < client.pttl("claimed") <= 250
        await store.claim("recorded", "a", lease=60, ttl=60)
        await store.record("recorded", "a", b"v", 1.5)
        assert 1000 < client.pttl("recorded") <= 1500
        await store.claim("tiny", "a", lease=1, ttl=0.0001)  # rounded up, never "no expiry"
        await trio.sleep(0.3)
    assert await store.read("claimed") is None
    assert await store.claim("claimed", "b", lease=60, ttl=60) == Claim("won")
    assert await store.read("tiny") is None
    assert await store.read("recorded") == Claim("done", b"v")
    store.close()


@pytest.mark.parametrize("how", ["unix", "tcp", "client"])
async def test_one_store_over_a_url_or_a_client(redis_db: RedisServer, how: str) -> None:
    target: str | redis.Redis = {
        "unix": redis_db.unix_url,
        "tcp": redis_db.tcp_url,
        "client": redis.Redis(host="127.0.0.1", port=redis_db.port),
    }[how]
    store = RedisStepStore(target)
    assert await store.claim("k", "a", lease=60, ttl=60) == Claim("won")
    assert await store.record("k", "a", b"v", 60)
    # Every process that connects to the same Redis sees the same store.
    assert await RedisStepStore(redis_db.unix_url).read("k") == Claim("done", b"v")
    store.close()
    if isinstance(target, redis.Redis):
        assert target.ping()  # the caller's client stays open
        target.close()


async def test_a_prefix_namespaces_every_key(redis_db: RedisServer) -> None:
    billing = RedisStepStore(redis_db.unix_url, prefix="billing:")
    shipping = RedisStepStore(redis_db.unix_url, prefix="shipping:")
    assert await billing.claim("mrtr_trio:step:abc", "a", lease=9, ttl=60) == Claim("won")
    assert await shipping.claim("mrtr_trio:step:abc", "a", lease=9, ttl=60) == Claim("won")
    with redis_db.client() as client:
        assert sorted(client.keys()) == [
            b"billing:mrtr_trio:step:abc",
            b"shipping:mrtr_trio:step:abc",
        ]


def test_bad_arguments_are_named() -> None:
    with pytest.raises(TypeError, match="needs a URL"):
        RedisStepStore(6379)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="prefix must be a str"):
        RedisStepStore("redis://127.0.0.1", prefix=b"x")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="decode_responses"):
        RedisStepStore(redis.Redis(decode_responses=True))
    with pytest.raises(ValueError):
        RedisStepStore("http://not-redis")


async def test_a_value_the_store_did_not_write_is_an_error(redis_db: RedisServer) -> None:
    store = RedisStepStore(redis_db.unix_url)
    with redis_db.client() as client:
        client.set("foreign", b"something else")
    with pytest.raises(ValueError, match="did not write"):
        await store.read("foreign")


# ------------------------------------------------------------- a runtime on RedisStepStore


async def test_a_runtime_on_redis_runs_a_replayed_step_once(redis_db: RedisServer) -> None:
    runtime = Runtime([KEY], step_store=RedisStepStore(redis_db.unix_url))
    pay = await paying(runtime, amount=3)
    # A second runtime (another process, in effect) with the same key and the same Redis.
    other = Runtime([KEY], step_store=RedisStepStore(redis_db.tcp_url))
    values = []
    for serving in (runtime, other, runtime, other):
        pay.runtime = serving
        values.append(await pay.present())
    assert values == ["receipt 1 for 3"] * 4
    assert len(pay.ledger.keys) == 1
    with redis_db.client() as client:
        (step_key,) = client.keys("mrtr_trio:step:*")
        # Kept while the token it serves may be presented (its lifetime left, and a grace).
        assert 0 < client.pttl(step_key) <= (600 + STEP_GRACE) * 1000


async def test_redis_down_fails_the_step_closed() -> None:
    # Nothing listens on this port: the client's connection is refused.
    store = RedisStepStore(f"redis://127.0.0.1:{free_port()}/0", timeout=2)
    pay = await paying(Runtime([KEY], step_store=store))  # no step yet: no store needed
    with pytest.raises(StepStoreUnavailable, match=r"did not run: the step store failed \("):
        await pay.present()
    assert pay.ledger.keys == []
    with pytest.raises(redis.ConnectionError):  # the store itself lets Redis's error through
        await store.claim("k", "a", lease=1, ttl=1)


@pytest.fixture
def redis_installed() -> None:
    """Skip (or fail) at setup when redis-server is missing, for a test that starts its own."""
    need("redis-server", "redis-server")


async def test_redis_stopping_mid_flow_fails_the_step_closed(
    redis_installed: None, tmp_path: Path
) -> None:
    # Our own server for this test, since it is stopped half-way.
    with redis_server(tmp_path) as server:
        store = RedisStepStore(server.tcp_url, timeout=2)
        pay = await paying(Runtime([KEY], step_store=store))
        assert await store.claim("k", "a", lease=9, ttl=60) == Claim("won")  # connected
    # The server is stopped now (SIGTERM), with the store's connection open.
    with pytest.raises(StepStoreUnavailable):
        await pay.present()
    assert pay.ledger.keys == []
    store.close()


def test_the_services_rule_names_the_package(monkeypatch: pytest.MonkeyPatch) -> None:
    from . import services

    monkeypatch.setenv("PATH", "")
    monkeypatch.setattr(services, "REQUIRED", False)
    with pytest.raises(pytest.skip.Exception, match="apt-get install redis-server"):
        services.need("redis-server", "redis-server")
    monkeypatch.setattr(services, "REQUIRED", True)
    with pytest.raises(pytest.fail.Exception, match="MRTR_TRIO_REQUIRE_SERVICES=1"):
        services.need("redis-server", "redis-server")


async def test_a_redis_stall_does_not_wedge_the_flow(
    redis_db: RedisServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Redis stalls (CLIENT PAUSE) longer than the runtime waits for a store call: the client is
    # told the step did not run, which is true. When Redis resumes it runs the queued claim,
    # after its caller gave up: the claim carries its own deadline and is not applied, so the
    # retry runs the step at once instead of finding a claim nobody holds.
    from mrtr_trio import _steps
    from mrtr_trio import redis as redis_store

    monkeypatch.setattr(_steps, "STORE_TIMEOUT", 1.0)
    monkeypatch.setattr(redis_store, "STORE_TIMEOUT", 1.0)
    store = RedisStepStore(redis_db.unix_url, timeout=10)  # the socket outlasts the stall
    pay = await paying(Runtime([KEY], step_store=store))
    with redis_db.client() as admin:
        admin.execute_command("CLIENT", "PAUSE", 3000, "ALL")
    with pytest.raises(StepStoreUnavailable, match="did not run: the step store did not answer"):
        await pay.present()
    await trio.sleep(3.5)  # the stall ends, and Redis runs the claim that was waiting
    assert await pay.present() == "receipt 1 for 5"
    assert len(pay.ledger.keys) == 1
    store.close()
