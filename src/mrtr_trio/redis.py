"""Stores that several processes share, on the official `redis` client (install
`mrtr_trio[redis]`): [RedisStepStore][mrtr_trio.redis.RedisStepStore] for steps and
[RedisTaskStore][mrtr_trio.redis.RedisTaskStore] for the records of the tasks extension.

Behind a load balancer, two presentations of one `requestState` may reach two processes; only a
store they share lets one of them run a step and the other reuse its result. Each key holds a
claim (its owner and the end of its lease) while its step runs and the recorded result
afterwards, under one Redis key with a millisecond expiry. Every step operation is one Lua
script, atomic in Redis: *claim* (set the claim if the key is free, or take over a lapsed one
when asked; otherwise say what the key holds), *renew*, *record* and *release* (each only for
the claim's owner), and *read*.

A task's record is one key holding its JSON form
([TaskRecord.to_json][mrtr_trio.mcp.TaskRecord.to_json]), expiring with the record: any process
can then answer `tasks/get`, while the process that runs the task's handler writes it with a
compare-and-set on its `revision`.

The client is synchronous and thread-safe; each call runs in a worker thread
(`trio.to_thread.run_sync` on trio, `anyio.to_thread.run_sync` on asyncio, abandoned when the
runtime stops waiting for it) on the client's
connection pool, which is reused across calls, so the stores serve trio and asyncio alike and
a slow or stalled Redis never blocks the event loop.
Errors from Redis (connection refused, a timeout, a read-only replica) propagate: the runtime
then fails the step closed with [StepStoreUnavailable][mrtr_trio.StepStoreUnavailable].
"""

from __future__ import annotations

import functools
import json
import math
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import anyio
import anyio.to_thread
import trio

from ._steps import BUSY, STORE_TIMEOUT, UNKNOWN, WON, Claim
from ._util import check_count

if TYPE_CHECKING:  # mrtr_trio.mcp (the MCP SDK) is imported only when a task record is read
    from .mcp import TaskRecord

try:
    import redis
except ImportError as error:  # pragma: no cover - depends on the installed extras
    raise ImportError(
        "mrtr_trio.redis needs the redis package: pip install 'mrtr_trio[redis]'"
    ) from error

__all__ = ["RedisStepStore", "RedisTaskStore"]

# What a key holds: a claim (`c`, its lease's end in Redis milliseconds, `:`, its owner) while
# its step runs, or the result behind `d`. Lease times are Redis's own clock (TIME), so the
# processes' clocks need not agree.
_CLAIMED = b"c"
_DONE = b"d"

# The helpers every step script starts with: now in milliseconds, and a claim's parts.
_PARTS = """
local function now_ms()
    local t = redis.call('TIME')
    return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end
local function parts(held)
    local sep = string.find(held, ':', 2, true)
    return tonumber(string.sub(held, 2, sep - 1)), string.sub(held, sep + 1)
end
local function claimed_by(held, owner)
    if not held or string.sub(held, 1, 1) ~= 'c' then
        return false
    end
    local _, holder = parts(held)
    return holder == owner
end
"""

# KEYS[1]: the key; ARGV: owner, lease ms, ttl ms, take ("1"/"0"), not after (epoch ms, the
# caller's clock: a claim that reaches Redis after its caller gave up is not applied).
# Returns {status} or {"done", value}.
_CLAIM = (
    _PARTS
    + """
local now = now_ms()
local held = redis.call('GET', KEYS[1])
local ttl = tonumber(ARGV[3])
if held then
    if string.sub(held, 1, 1) == 'd' then
        return {'done', string.sub(held, 2)}
    end
    local lease_until = parts(held)
    if lease_until > now then
        return {'busy'}
    end
    if ARGV[4] ~= '1' then
        return {'unknown'}
    end
    ttl = math.max(ttl, redis.call('PTTL', KEYS[1]))
end
if now > tonumber(ARGV[5]) then
    return {'late'}
end
redis.call('SET', KEYS[1], 'c' .. (now + tonumber(ARGV[2])) .. ':' .. ARGV[1], 'PX', ttl)
return {'won'}
"""
)

# KEYS[1]: the key; ARGV: owner, lease ms. Extends the owner's lease (0: gives it up now) and
# keeps the key at least as long. Returns 1, or 0 when the owner holds no claim there.
_RENEW = (
    _PARTS
    + """
if not claimed_by(redis.call('GET', KEYS[1]), ARGV[1]) then
    return 0
end
local lease = tonumber(ARGV[2])
redis.call('SET', KEYS[1], 'c' .. (now_ms() + lease) .. ':' .. ARGV[1], 'KEEPTTL')
if lease > 0 and redis.call('PTTL', KEYS[1]) < lease then
    redis.call('PEXPIRE', KEYS[1], lease)
end
return 1
"""
)

# KEYS[1]: the key; ARGV: owner, value, ttl ms. Records the result for the claim's owner, or
# when the key has expired (nobody can claim it then); 0 when another holds it or it is
# recorded.
_RECORD = (
    _PARTS
    + """
local held = redis.call('GET', KEYS[1])
if held and not claimed_by(held, ARGV[1]) then
    return 0
end
redis.call('SET', KEYS[1], 'd' .. ARGV[2], 'PX', ARGV[3])
return 1
"""
)

# KEYS[1]: the key; ARGV: owner. Deletes the key only while it holds that owner's claim.
_RELEASE = (
    _PARTS
    + """
if not claimed_by(redis.call('GET', KEYS[1]), ARGV[1]) then
    return 0
end
return redis.call('DEL', KEYS[1])
"""
)

# KEYS[1]: the key. Returns nil, {"done", value}, or {"busy"} / {"unknown"} by the lease.
_READ = (
    _PARTS
    + """
local held = redis.call('GET', KEYS[1])
if not held then
    return false
end
if string.sub(held, 1, 1) == 'd' then
    return {'done', string.sub(held, 2)}
end
if string.sub(held, 1, 1) ~= 'c' or not string.find(held, ':', 2, true) then
    return {'foreign', held}
end
if parts(held) > now_ms() then
    return {'busy'}
end
return {'unknown'}
"""
)

# KEYS[1]: the task's key; ARGV: the record's JSON, its revision. Replaces the record (keeping
# the key's expiry) only when the stored revision is lower. Returns 1 when replaced, 0 when not
# (or the key is gone), -1 when the stored value is not a record with a revision.
_PUT_NEWER = """
local held = redis.call('GET', KEYS[1])
if not held then
    return 0
end
local ok, current = pcall(cjson.decode, held)
if not ok or type(current) ~= 'table' or type(current['revision']) ~= 'number' then
    return -1
end
if current['revision'] < tonumber(ARGV[2]) then
    redis.call('SET', KEYS[1], ARGV[1], 'KEEPTTL')
    return 1
end
return 0
"""

# KEYS: the task's key, the index of every task, the index of the owner's tasks ('' for none);
# ARGV: the record's JSON, its expiry in ms (0: none), now, its expires_at ('+inf': never),
# max_tasks, max_tasks_per_owner (0: none), the task id. Each index is a sorted set of task
# ids scored by expires_at; entries past now are dropped before counting. Returns 1 when
# created, 0 when the task exists, -1 when max_tasks are held, -2 when the owner holds its
# maximum.
_CREATE_BOUNDED = """
if redis.call('EXISTS', KEYS[1]) == 1 then
    return 0
end
redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', ARGV[3])
if redis.call('ZCARD', KEYS[2]) >= tonumber(ARGV[5]) then
    return -1
end
if KEYS[3] ~= '' then
    redis.call('ZREMRANGEBYSCORE', KEYS[3], '-inf', ARGV[3])
    if redis.call('ZCARD', KEYS[3]) >= tonumber(ARGV[6]) then
        return -2
    end
end
if tonumber(ARGV[2]) > 0 then
    redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
else
    redis.call('SET', KEYS[1], ARGV[1])
end
redis.call('ZADD', KEYS[2], ARGV[4], ARGV[7])
if KEYS[3] ~= '' then
    redis.call('ZADD', KEYS[3], ARGV[4], ARGV[7])
end
return 1
"""


class _RedisStore:
    """The client, key prefix and worker-thread calls both stores share."""

    def __init__(self, url_or_client: str | redis.Redis, *, prefix: str, timeout: float) -> None:
        kind = type(self).__name__
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
                f"{kind} needs a URL (redis://, rediss://, unix://) or a redis.Redis "
                f"client, got {type(url_or_client).__name__}"
            )
        if client.get_connection_kwargs().get("decode_responses"):
            raise ValueError(f"{kind} needs a client without decode_responses: values are bytes")
        self.client = client
        self.prefix = prefix

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.client!r}, prefix={self.prefix!r})"

    def close(self) -> None:
        """Disconnect the client if the store made it from a URL (a client passed in is the
        caller's to close)."""
        if self._owned:
            self.client.close()

    async def _run(self, fn: Any, *args: Any, **kwargs: Any) -> Any:
        # Abandoned on cancellation: the runtime bounds every store call, and a stalled Redis
        # must not hold the round (a late step claim is refused by Redis itself).
        call = functools.partial(fn, *args, **kwargs)
        if trio.lowlevel.in_trio_task():  # (trio's own threads: anyio's around them cost more)
            return await trio.to_thread.run_sync(call, abandon_on_cancel=True)
        return await anyio.to_thread.run_sync(call, abandon_on_cancel=True)


class RedisStepStore(_RedisStore):
    """A [StepStore][mrtr_trio.StepStore] on Redis, shared by every process that serves a flow.

    - *url_or_client*: a URL (`redis://host:port/db`, `rediss://...` for TLS,
      `unix:///path/to/redis.sock?db=0`) or a `redis.Redis` client made without
      `decode_responses` (results are bytes). A client made from a URL has *timeout* as its
      connect and read timeout, so a Redis that hangs fails the step closed instead of holding
      it; pass a client to choose other settings (the runtime bounds every call anyway).
    - *prefix*: put before every key, to share one database between applications.
    - *lease*: seconds a step's claim stays `busy` without a renewal: after its holder dies,
      the next attempt learns the outcome is unknown (or, for `retry=True`, takes it over)
      this long after the last renewal.

    Each operation is one Lua script, atomic in Redis: a claim is set only if the key is free
    (or its lease lapsed and the caller takes it over), and only if it reaches Redis before the
    caller's *timeout* ran out (a claim queued behind a stall is not applied late); a record,
    renewal or release happens only for the claim's owner. Leases run on Redis's clock.
    Expiries are in milliseconds, rounded up. `close()`
    disconnects a client the store made itself. The guarantee needs a Redis that keeps what it
    acknowledged: see docs/exactly-once.md.

    ```python
    from mrtr_trio import Runtime
    from mrtr_trio.redis import RedisStepStore

    store = RedisStepStore("redis://127.0.0.1:6379/0", prefix="billing:")
    runtime = Runtime([b"k" * 32], step_store=store)
    ```
    """

    def __init__(
        self,
        url_or_client: str | redis.Redis,
        *,
        prefix: str = "",
        timeout: float = 5.0,
        lease: float = 10.0,
    ) -> None:
        super().__init__(url_or_client, prefix=prefix, timeout=timeout)
        if not (isinstance(lease, int | float) and not isinstance(lease, bool) and lease > 0):
            raise ValueError(f"lease must be a positive number of seconds, got {lease!r}")
        self.lease = float(lease)
        self.timeout = float(timeout)
        client = self.client
        self._claim = client.register_script(_CLAIM)
        self._renew = client.register_script(_RENEW)
        self._record = client.register_script(_RECORD)
        self._release = client.register_script(_RELEASE)
        self._read = client.register_script(_READ)

    async def claim(
        self, key: str, owner: str, *, lease: float, ttl: float, take: bool = False
    ) -> Claim:
        """Claim *key* for *owner* (atomically, in one round trip): see
        [StepStore.claim][mrtr_trio.StepStore.claim]."""
        # After this, the caller has stopped waiting (its socket timeout, or the runtime's
        # bound on every store call): a claim that reaches Redis later is not applied.
        not_after = int((time.time() + min(self.timeout, STORE_TIMEOUT)) * 1000)
        args = [owner, _milliseconds(lease), _milliseconds(ttl), int(take), not_after]
        held = await self._run(self._claim, [self.prefix + key], args)
        if held[0] == b"late":
            raise TimeoutError(
                "the claim reached Redis after this process stopped waiting for it (or "
                "Redis's clock is ahead of this host's); it was not applied"
            )
        return _claim_of(held)

    async def renew(self, key: str, owner: str, lease: float) -> bool:
        """Extend *owner*'s lease on *key* (0: give it up as unknown)."""
        ms = 0 if lease <= 0 else _milliseconds(lease)
        return bool(await self._run(self._renew, [self.prefix + key], [owner, ms]))

    async def record(self, key: str, owner: str, value: bytes, ttl: float) -> bool:
        """Record the result *value* under *key* if *owner* holds its claim (or it expired)."""
        args = [owner, value, _milliseconds(ttl)]
        return bool(await self._run(self._record, [self.prefix + key], args))

    async def read(self, key: str) -> Claim | None:
        """What is under *key*: `busy`, `unknown`, `done` with the value, or `None`."""
        held = await self._run(self._read, [self.prefix + key])
        return None if held is None else _claim_of(held)

    async def release(self, key: str, owner: str) -> bool:
        """Drop *owner*'s claim on *key*; a recorded result or another's claim stays."""
        return bool(await self._run(self._release, [self.prefix + key], [owner]))

    async def persistence_problem(self) -> str | None:
        """Why this Redis may forget what it acknowledged across a restart (neither an append
        only file nor snapshots), or `None` when it keeps it (or cannot say: `CONFIG` may be
        disabled on a managed Redis, whose provider says how it persists)."""
        info = await self._run(self.client.info, "persistence")
        if info.get("aof_enabled"):
            return None
        try:
            saves = await self._run(self.client.config_get, "save")
        except redis.ResponseError:
            return None
        if (saves.get("save") or "").strip():
            return (
                "Redis persists by snapshots only (no appendonly): a crash loses the step "
                "results and claims since the last snapshot, and those steps may run again"
            )
        return (
            "Redis has no persistence (appendonly no, no snapshots): a restart forgets every "
            "step result and claim, and those steps may run again; see docs/exactly-once.md"
        )


class RedisTaskStore(_RedisStore):
    """A [TaskStore][mrtr_trio.mcp.TaskStore] on Redis, so that every process serving an
    [App][mrtr_trio.mcp.App] can answer `tasks/get` for any task.

    - *url_or_client*, *prefix*, *timeout*: as for
      [RedisStepStore][mrtr_trio.redis.RedisStepStore]; a task's key is *prefix* +
      `mrtr_trio:task:` + its id.
    - *clock*: seconds since the epoch; records are stamped and expired by it.

    Each record is one key holding its JSON form, created with `SET NX` (`ValueError` when
    the task exists) and expiring with the record (no expiry for an unlimited time to live).
    `put` is one Lua script: a compare-and-set that replaces the record only when the stored
    `revision` is lower, keeps the key's expiry, and does nothing when the key is gone. `get`
    treats a record past its `expires_at` by *clock* as gone, and raises `ValueError` naming
    the key when it holds something that is not a record.

    Like [MemoryTaskStore][mrtr_trio.mcp.MemoryTaskStore], it holds at most *max_tasks*
    unexpired records, and at most *max_tasks_per_owner* of one authenticated owner (`None`:
    no per-owner bound); past either, `create` raises
    [TaskStoreFull][mrtr_trio.mcp.TaskStoreFull] naming the bound, and no record is ever
    dropped before it expires. The counts are two sorted sets of task ids scored by expiry
    (`mrtr_trio:tasks` and `mrtr_trio:tasks:owner:` + the owner's JSON, after the prefix),
    checked and written with the record by one Lua script. A Redis with a `volatile-*` or
    `allkeys-*` eviction policy may still drop records before they expire when it reaches its
    `maxmemory`; keep `noeviction` (the default) for tasks. It needs Redis 6.0 or later
    (`SET ... KEEPTTL`).
    """

    #: What every task key starts with, after the store's prefix.
    KEY_PREFIX = "mrtr_trio:task:"
    #: The sorted set that counts the unexpired tasks, after the store's prefix.
    INDEX = "mrtr_trio:tasks"

    def __init__(
        self,
        url_or_client: str | redis.Redis,
        *,
        prefix: str = "",
        timeout: float = 5.0,
        clock: Callable[[], float] = time.time,
        max_tasks: int = 10_000,
        max_tasks_per_owner: int | None = 1_000,
    ) -> None:
        super().__init__(url_or_client, prefix=prefix, timeout=timeout)
        self.clock = clock
        self.max_tasks = check_count("max_tasks", max_tasks)
        self.max_tasks_per_owner = (
            None
            if max_tasks_per_owner is None
            else check_count("max_tasks_per_owner", max_tasks_per_owner)
        )
        self._put_newer = self.client.register_script(_PUT_NEWER)
        self._create_bounded = self.client.register_script(_CREATE_BOUNDED)

    def key(self, task_id: str) -> str:
        """The Redis key of the task *task_id*."""
        return self.prefix + self.KEY_PREFIX + task_id

    async def create(self, record: TaskRecord) -> None:
        """Add a new task, atomically (`ValueError` when a task with its id exists,
        [TaskStoreFull][mrtr_trio.mcp.TaskStoreFull] past a bound)."""
        from .mcp import TaskStoreFull

        by_owner = bool(record.owner) and self.max_tasks_per_owner is not None
        keys = [
            self.key(record.task_id),
            self.prefix + self.INDEX,
            self.prefix + self.INDEX + ":owner:" + json.dumps(list(record.owner))
            if by_owner
            else "",
        ]
        expires = "+inf" if record.ttl is None else repr(record.expires_at)
        arguments = [
            _json_of(record),
            self._expiry(record) or 0,
            repr(self.clock()),
            expires,
            self.max_tasks,
            self.max_tasks_per_owner or 0,
            record.task_id,
        ]
        created = await self._run(self._create_bounded, keys, arguments)
        if created == 0:
            raise ValueError(f"task {record.task_id!r} exists already")
        if created == -1:
            raise TaskStoreFull(
                f"the task store holds max_tasks={self.max_tasks} tasks that have not "
                "expired; retry once some have (or lower the tasks' ttl)"
            )
        if created == -2:
            raise TaskStoreFull(
                f"this client holds max_tasks_per_owner={self.max_tasks_per_owner} tasks "
                "that have not expired; retry once some have (or lower the tasks' ttl)"
            )

    async def get(self, task_id: str) -> TaskRecord | None:
        """The task's current record, or `None` when unknown or expired."""
        key = self.key(task_id)
        held = await self._run(self.client.get, key)
        if held is None:
            return None
        from .mcp import TaskRecord

        try:
            record = TaskRecord.from_json(json.loads(held))
        except ValueError as error:  # json.JSONDecodeError and UnicodeDecodeError too
            raise _foreign(key, held, error) from error
        return None if self.clock() >= record.expires_at else record

    async def put(self, record: TaskRecord) -> None:
        """Replace the task's record with this newer revision (ignored if it is gone or the
        stored revision is not lower)."""
        key = self.key(record.task_id)
        outcome = await self._run(self._put_newer, [key], [_json_of(record), record.revision])
        if outcome == -1:
            held = await self._run(self.client.get, key)
            raise _foreign(key, held, ValueError("it has no revision"))

    async def delete(self, task_id: str) -> None:
        """Forget the task (its owner's count drops when it would have expired)."""
        await self._run(self.client.delete, self.key(task_id))
        await self._run(self.client.zrem, self.prefix + self.INDEX, task_id)

    def _expiry(self, record: TaskRecord) -> int | None:
        if record.ttl is None:
            return None
        return _milliseconds(record.expires_at - self.clock())


def _json_of(record: TaskRecord) -> bytes:
    return json.dumps(record.to_json(), separators=(",", ":")).encode()


def _foreign(key: str, held: Any, error: Exception) -> ValueError:
    shown = held if not isinstance(held, bytes) or len(held) <= 80 else held[:80] + b"..."
    return ValueError(
        f"the task store key {key!r} holds {shown!r}, which RedisTaskStore did not write ({error})"
    )


def _milliseconds(ttl: float) -> int:
    return max(1, math.ceil(ttl * 1000))


def _claim_of(held: Any) -> Claim:
    status = held[0]
    if status == b"done":
        return Claim("done", held[1])
    if status == b"busy":
        return BUSY
    if status == b"unknown":
        return UNKNOWN
    if status == b"won":
        return WON
    raise ValueError(f"the step store key holds {held[-1]!r}, which RedisStepStore did not write")
