"""A step store that several processes share: [RedisStepStore][mrtr_trio.redis.RedisStepStore],
on the official `redis` client (install `mrtr_trio[redis]`).

Behind a load balancer, two presentations of one `requestState` may reach two processes; only a
store they share lets one of them run a step and the other reuse its result. Each key holds a
claim marker while its step runs and the recorded result afterwards, under one Redis key with
a millisecond expiry:

- *claim*: one Lua script sets the marker with `SET NX PX` and, when the key was already there,
  returns what it holds, in a single atomic round trip;
- *record*: `SET PX` of the result;
- *read*: `GET`;
- *release*: a Lua script deletes the key only while it still holds the claim marker, so a
  recorded result is never dropped.

The client is synchronous and thread-safe; each call runs in a worker thread
(`trio.to_thread.run_sync`) on the client's connection pool, which is reused across calls.
Errors from Redis (connection refused, a timeout, a read-only replica) propagate: the runtime
then fails the step closed with [StepStoreUnavailable][mrtr_trio.StepStoreUnavailable].
"""

from __future__ import annotations

import math
from typing import Any

import trio

from ._steps import BUSY, WON, Claim

try:
    import redis
except ImportError as error:  # pragma: no cover - depends on the installed extras
    raise ImportError(
        "mrtr_trio.redis needs the redis package: pip install 'mrtr_trio[redis]'"
    ) from error

__all__ = ["RedisStepStore"]

# What a key holds: the claim marker while its step runs, or the result behind a prefix.
_CLAIMED = b"c"
_DONE = b"d"

# KEYS[1]: the key; ARGV: the claim marker, the expiry in ms. Returns nil when the claim was
# won, else what the key holds.
_CLAIM = """
if redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then
    return false
end
return redis.call('GET', KEYS[1])
"""

# KEYS[1]: the key; ARGV[1]: the claim marker. Deletes the key only while it holds the marker.
_RELEASE = """
if redis.call('GET', KEYS[1]) == ARGV[1] then
    return redis.call('DEL', KEYS[1])
end
return 0
"""


class RedisStepStore:
    """A [StepStore][mrtr_trio.StepStore] on Redis, shared by every process that serves a flow.

    - *url_or_client*: a URL (`redis://host:port/db`, `rediss://...` for TLS,
      `unix:///path/to/redis.sock?db=0`) or a `redis.Redis` client made without
      `decode_responses` (results are bytes). A client made from a URL has *timeout* as its
      connect and read timeout, so a Redis that hangs fails the step closed instead of holding
      it; pass a client to choose other settings.
    - *prefix*: put before every key, to share one database between applications.

    Expiries are in milliseconds, rounded up. [close][mrtr_trio.redis.RedisStepStore.close]
    disconnects a client the store made itself.

    ```python
    from mrtr_trio import Runtime
    from mrtr_trio.redis import RedisStepStore

    store = RedisStepStore("redis://127.0.0.1:6379/0", prefix="billing:")
    runtime = Runtime([b"k" * 32], step_store=store)
    ```
    """

    def __init__(
        self, url_or_client: str | redis.Redis, *, prefix: str = "", timeout: float = 5.0
    ) -> None:
        if not isinstance(prefix, str):
            raise TypeError(f"prefix must be a str, got {type(prefix).__name__}")
        if isinstance(url_or_client, str):
            client = redis.Redis.from_url(
                url_or_client, socket_timeout=timeout, socket_connect_timeout=timeout
            )
            self._owned = True
        elif isinstance(url_or_client, redis.Redis):
            client = url_or_client
            self._owned = False
        else:
            raise TypeError(
                "RedisStepStore needs a URL (redis://, rediss://, unix://) or a redis.Redis "
                f"client, got {type(url_or_client).__name__}"
            )
        if client.get_connection_kwargs().get("decode_responses"):
            raise ValueError(
                "RedisStepStore needs a client without decode_responses: results are bytes"
            )
        self.client = client
        self.prefix = prefix
        self._claim = client.register_script(_CLAIM)
        self._release = client.register_script(_RELEASE)

    def __repr__(self) -> str:
        return f"RedisStepStore({self.client!r}, prefix={self.prefix!r})"

    async def claim(self, key: str, ttl: float) -> Claim:
        """Claim *key* for *ttl* seconds if nobody holds it (atomically, in one round trip)."""
        held = await self._run(self._claim, [self.prefix + key], [_CLAIMED, _milliseconds(ttl)])
        return WON if held is None else _claim_of(held)

    async def record(self, key: str, value: bytes, ttl: float) -> None:
        """Record the result *value* under *key*, kept *ttl* seconds."""
        await self._run(self.client.set, self.prefix + key, _DONE + value, px=_milliseconds(ttl))

    async def read(self, key: str) -> Claim | None:
        """What is under *key*: `busy`, `done` with the value, or `None`."""
        held = await self._run(self.client.get, self.prefix + key)
        return None if held is None else _claim_of(held)

    async def release(self, key: str) -> None:
        """Drop the claim on *key*; a recorded result (or nothing) is left as it is."""
        await self._run(self._release, [self.prefix + key], [_CLAIMED])

    def close(self) -> None:
        """Disconnect the client if the store made it from a URL (a client passed in is the
        caller's to close)."""
        if self._owned:
            self.client.close()

    async def _run(self, fn: Any, *args: Any, **kwargs: Any) -> Any:
        return await trio.to_thread.run_sync(lambda: fn(*args, **kwargs))


def _milliseconds(ttl: float) -> int:
    return max(1, math.ceil(ttl * 1000))


def _claim_of(held: Any) -> Claim:
    if held == _CLAIMED:
        return BUSY
    if isinstance(held, bytes) and held.startswith(_DONE):
        return Claim("done", held[len(_DONE) :])
    raise ValueError(f"the step store key holds {held!r}, which RedisStepStore did not write")
