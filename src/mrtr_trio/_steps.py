"""Steps that run exactly once: idempotency keys, the store that remembers results, and running
a step against it.

A modern flow can be presented again: a client retrying after a lost response, two clients
racing, or anyone who saw the traffic can send the same `requestState` twice, and each
presentation replays the handler up to the same step. Each step therefore has an **idempotency
key** ([step_key][mrtr_trio.step_key]): a keyed hash of the flow's identity (a random flow id
minted on its first call and carried in every token, and the call's binding), the journal
before the step, and the step's position. Every presentation of one token computes the same
key; any other flow, argument, answer or position gives another.

With a [StepStore][mrtr_trio.StepStore] (`Runtime(step_store=...)`), a step first *claims*
its key, as a lease with an owner that the runner renews while the step runs: the winner runs
the function and records the result before it is journaled; a presentation that finds the
result recorded uses it without calling the function; one that finds a live claim waits
(bounded) for the result, or fails with [StepInProgress][mrtr_trio.StepInProgress], which says
to retry; one that finds a claim whose lease lapsed (its holder died or was cancelled mid-step)
fails with [StepOutcomeUnknown][mrtr_trio.StepOutcomeUnknown], unless the step was declared
`retry=True`, in which case it takes the claim over and runs the step again under the same key.
Claims and results live as long as the token they serve (plus `STEP_GRACE`). A store that
cannot be reached, or does not answer within `STORE_TIMEOUT`, fails the step closed
([StepStoreUnavailable][mrtr_trio.StepStoreUnavailable]): it never runs unrecorded. The same
store makes tokens single-use when asked (`single_use=True`).

On a live session the generator stays alive, so a step runs once by construction; its key is
unique per flow and position, and the store is not consulted.

Steps run on whichever event loop calls them, trio or asyncio (through anyio's cancel scopes,
clock and sleeps). The one part that differs is the task that renews the leases (see
`_Renewals`): a trio system task per trio run, or an asyncio task of the running loop that
lives while this process holds claims.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import inspect
import logging
import secrets
import time
import weakref
from collections.abc import Awaitable, Callable
from types import CoroutineType
from typing import Any, Literal, Protocol, TypeVar, runtime_checkable

import anyio
import attrs
import cbor2
import trio

from ._errors import (
    InvalidRequestState,
    MrtrError,
    StepInProgress,
    StepOutcomeUnknown,
    StepStoreUnavailable,
)
from ._journal import qualified_name, recordable, strict_loads
from ._util import check_count, check_seconds

log = logging.getLogger("mrtr_trio")

__all__ = [
    "Claim",
    "MemoryStepStore",
    "StepPolicy",
    "StepStore",
    "ask_store",
    "call",
    "call_step",
    "probe_store",
    "step_key",
]

_T = TypeVar("_T")

# ------------------------------------------------------------------------------ the key

_CURRENT_KEY: contextvars.ContextVar[Callable[[], str] | None] = contextvars.ContextVar(
    "mrtr_trio_step_key", default=None
)


def step_key() -> str:
    """The idempotency key of the step running now: a short URL-safe string, the same on every
    replay of one `requestState`, different for any other flow, argument, answer or position
    (and unique per flow and position on a live session).

    Call it inside a step function (sync or async) and pass it to a payment API, a database or
    a queue as the idempotency key. Outside a step it raises
    [MrtrError][mrtr_trio.MrtrError].
    """
    make = _CURRENT_KEY.get()
    if make is None:
        raise MrtrError(
            "step_key() is only available inside a step function: call it from the fn of "
            "`yield step(fn, ...)`"
        )
    return make()


# ---------------------------------------------------------------------------- the store


@attrs.frozen
class Claim:
    """What a store says about a key when asked to claim or read it:

    - `"won"`: the caller now holds the claim (under its owner id) and runs the step;
    - `"busy"`: another holder runs it, and its lease is alive (it renews it while it runs);
    - `"done"`: its result is recorded: `value`, as CBOR bytes;
    - `"unknown"`: a holder claimed it and its lease lapsed (or it gave it up) without a
      result: its process died or it was cancelled mid-step, so the step's side effect may or
      may not have happened.
    """

    status: Literal["won", "busy", "done", "unknown"]
    value: bytes | None = None


WON = Claim("won")
BUSY = Claim("busy")
UNKNOWN = Claim("unknown")


@runtime_checkable
class StepStore(Protocol):
    """Where step results and token uses are remembered, shared by every process that serves a
    flow. Each method is atomic; times are in seconds. A store that cannot answer raises any
    exception: the runtime then fails the step closed.

    A claim is a **lease with an owner**: the holder's *owner* id (one per attempt) and a
    short *lease* it renews while the step runs, inside the key's own expiry (*ttl*, which
    the runtime sets from the token the step serves). Only the owner may record, renew or
    release it. A store may have a `lease` attribute (seconds): the lease the runtime asks for.
    """

    async def claim(
        self, key: str, owner: str, *, lease: float, ttl: float, take: bool = False
    ) -> Claim:
        """Claim *key* for *owner*: `won` when nobody holds it (it expires after *ttl*, its
        lease after *lease*); `busy` while another holder's lease runs; `done` with the
        recorded value; `unknown` when a holder's lease lapsed without a result, unless
        *take*, which takes such a claim over (`won`)."""

    async def renew(self, key: str, owner: str, lease: float) -> bool:
        """Extend *owner*'s lease on *key* to *lease* seconds from now (the key lives at least
        that long); `lease=0` gives it up at once, leaving the outcome `unknown`. False when
        *owner* no longer holds the claim."""

    async def record(self, key: str, owner: str, value: bytes, ttl: float) -> bool:
        """Record the result *value* under *key*, kept *ttl* seconds, if *owner* holds its
        claim, or the key has expired (a step that outlasted its claim: nobody else can claim
        it any more); False (nothing written) when another holds it or it is recorded: the
        late writer lost."""

    async def read(self, key: str) -> Claim | None:
        """What is under *key*: `busy`, `unknown`, `done` with the value, or `None`."""

    async def release(self, key: str, owner: str) -> bool:
        """Drop *owner*'s claim on *key* (its step failed and did not happen, so a retry may
        run it); a recorded result or another's claim stays. False when *owner* held none."""


class MemoryStepStore:
    """A [StepStore][mrtr_trio.StepStore] in this process's memory: bounded and expiring.

    It serves one process; behind a load balancer use a shared store such as
    [RedisStepStore][mrtr_trio.redis.RedisStepStore]. When *max_entries* unexpired entries are
    held, a new claim fails closed ([StepStoreUnavailable][mrtr_trio.StepStoreUnavailable])
    rather than forgetting a result early, which would let a step run twice. *lease*: the
    seconds a step's claim stays `busy` without a renewal; *clock*: monotonic seconds.
    """

    def __init__(
        self,
        max_entries: int = 100_000,
        *,
        lease: float = 10.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.max_entries = check_count("max_entries", max_entries)
        self.lease = check_seconds("lease", lease)
        self._clock = clock
        self._entries: dict[str, _Entry] = {}

    def __repr__(self) -> str:
        return f"MemoryStepStore({len(self._entries)}/{self.max_entries} entries)"

    def __len__(self) -> int:
        return len(self._entries)

    async def claim(
        self, key: str, owner: str, *, lease: float, ttl: float, take: bool = False
    ) -> Claim:
        now = self._clock()
        entry = self._live(key, now)
        if entry is not None:
            held = entry.claim(now)
            if held is not UNKNOWN or not take:
                return held
            self._entries[key] = _Entry(max(entry.expires, now + ttl), None, owner, now + lease)
            return WON
        if len(self._entries) >= self.max_entries:
            self._expire(now)
            if len(self._entries) >= self.max_entries:
                raise StepStoreUnavailable(
                    f"MemoryStepStore is full ({self.max_entries} unexpired entries); raise "
                    "max_entries or lower the runtime's ttl"
                )
        self._entries[key] = _Entry(now + ttl, None, owner, now + lease)
        return WON

    async def renew(self, key: str, owner: str, lease: float) -> bool:
        now = self._clock()
        entry = self._live(key, now)
        if entry is None or entry.value is not None or entry.owner != owner:
            return False
        self._entries[key] = attrs.evolve(
            entry, expires=max(entry.expires, now + lease), lease_until=now + lease
        )
        return True

    async def record(self, key: str, owner: str, value: bytes, ttl: float) -> bool:
        now = self._clock()
        entry = self._live(key, now)
        if entry is not None and (entry.value is not None or entry.owner != owner):
            return False
        self._entries[key] = _Entry(now + ttl, value, owner, now)
        return True

    async def read(self, key: str) -> Claim | None:
        now = self._clock()
        entry = self._live(key, now)
        return None if entry is None else entry.claim(now)

    async def release(self, key: str, owner: str) -> bool:
        entry = self._live(key, self._clock())
        if entry is None or entry.value is not None or entry.owner != owner:
            return False
        del self._entries[key]
        return True

    def _live(self, key: str, now: float) -> _Entry | None:
        entry = self._entries.get(key)
        if entry is not None and now >= entry.expires:
            del self._entries[key]
            return None
        return entry

    def _expire(self, now: float) -> None:
        for key in [k for k, entry in self._entries.items() if now >= entry.expires]:
            del self._entries[key]


@attrs.frozen
class _Entry:
    """A key of a `MemoryStepStore`: when it expires, its result (`None` while claimed), its
    claim's owner and when that owner's lease lapses."""

    expires: float
    value: bytes | None
    owner: str
    lease_until: float

    def claim(self, now: float) -> Claim:
        if self.value is not None:
            return Claim("done", self.value)
        return BUSY if now < self.lease_until else UNKNOWN


# ------------------------------------------------------------------------- running steps

#: How long a presentation waits for another one's step result before giving up.
STEP_WAIT = 10.0
#: The lease a step's claim asks for when its store names none (seconds).
STEP_LEASE = 10.0
#: How long a claim or a result outlives the token it serves: a round that opened the token
#: just before it expired may still reach the step (a store call later).
STEP_GRACE = 30.0
#: The longest any one call to a step store may take (seconds) before the step fails closed.
STORE_TIMEOUT = 10.0


@attrs.frozen
class StepPolicy:
    """How a modern round runs its steps against a store: the *store*, the wall *clock* and
    when the token the round replays expires (*expires*, seconds since the epoch; `None` for a
    first call, whose steps serve the token minted at its end, good for *ttl*)."""

    store: StepStore
    clock: Callable[[], float]
    expires: float | None
    ttl: float

    def keep_for(self) -> float:
        """Seconds a claim or result must live: as long as the token may still be presented,
        plus `STEP_GRACE`."""
        now = self.clock()
        remaining = self.ttl if self.expires is None else self.expires - now
        return max(remaining, 0.0) + STEP_GRACE

    def check_unexpired(self, name: str) -> None:
        """Refuse to start a step for a token that expired during the round (before it)."""
        if self.expires is not None and self.clock() >= self.expires:
            raise InvalidRequestState(
                f"expired during the round, before step {name} ran (it did not run)"
            )


async def call_step(
    fn: Callable[..., Any],
    args: tuple[Any, ...],
    key: Callable[[], str],
    policy: StepPolicy | None = None,
    *,
    name: str | None = None,
    retry: bool = False,
) -> Any:
    """Run the step `fn(*args)` once, with [step_key][mrtr_trio.step_key] giving *key()*.

    With a *policy* (a store): claim the key first, as a lease with an owner renewed while
    *fn* runs; if its result is recorded, return it without calling *fn*; if another attempt
    holds a live lease, wait for its result (at most `STEP_WAIT` seconds); if an earlier
    attempt's outcome is unknown, raise [StepOutcomeUnknown][mrtr_trio.StepOutcomeUnknown]
    (*retry*: take its claim over and run *fn* again, under the same key); if the store
    fails, fail closed. The result is recorded before it is returned. A step that raises
    releases its claim; one cancelled mid-step gives it up as `unknown`.
    """
    if policy is None:
        return await _call(fn, args, key)
    store = policy.store
    name = name or qualified_name(fn)
    store_key = f"mrtr_trio:step:{key()}"
    owner = secrets.token_hex(8)
    lease = float(getattr(store, "lease", STEP_LEASE))
    policy.check_unexpired(name)
    claim = await ask_store(
        store.claim(store_key, owner, lease=lease, ttl=policy.keep_for(), take=retry),
        *_unrecorded(name),
    )
    if claim.status == "busy":
        claim = await _wait_for(store, store_key, owner, name, lease, policy, retry)
    if claim.status == "done":
        return _decode(claim.value, name)
    if claim.status == "unknown":
        raise _outcome_unknown(name)
    renewals = _renewals(store, lease)
    renewals.hold(store_key, owner)
    try:
        value = await _call(fn, args, key)
    except Exception:
        # The step raised: it says its effect did not happen, so a retry may run it.
        renewals.drop(store_key, owner)
        with anyio.CancelScope(shield=True):
            await _quietly(store.release(store_key, owner))
        raise
    except BaseException:
        # Cancelled mid-step: the effect may have happened. Give the claim up as unknown now,
        # rather than have retries wait for the lease to lapse.
        renewals.drop(store_key, owner)
        with anyio.CancelScope(shield=True):
            await _quietly(store.renew(store_key, owner, 0.0))
        raise
    renewals.drop(store_key, owner)
    try:
        # A value that cannot be recorded fails the round as it would without a store.
        value = recordable(value, f"step {name}")
    except MrtrError:
        await _quietly(store.renew(store_key, owner, 0.0))
        raise
    try:
        recorded = await ask_store(
            store.record(store_key, owner, cbor2.dumps(value), policy.keep_for()),
            f"step {name} ran, but its result could not be recorded",
            "; a retry of this request reports its outcome as unknown (StepOutcomeUnknown), "
            "or with step(..., retry=True) runs it again under the same step_key()",
        )
    except StepStoreUnavailable:
        # Give the claim up as unknown now if the store hears it (else the lease lapses).
        with anyio.CancelScope(shield=True):
            await _quietly(store.renew(store_key, owner, 0.0))
        raise
    if not recorded:
        raise StepOutcomeUnknown(
            f"step {name} ran, but another attempt took its claim over after its lease "
            f"lapsed (the store did not hear from this one for {lease:g} s), so this result "
            "was not recorded; retry the request to get the recorded outcome"
        )
    return value


class _Renewals:
    """Renews the leases of the steps this process runs against one store, every third of the
    lease, from a task of its own per event loop run, so that no step pays for a task and a
    step's exceptions reach the handler unwrapped by a task group:

    - on trio, a system task started with the run's first step, which lives as long as the run
      (trio cancels it when the run ends);
    - on asyncio, a task of the running loop started when the first claim is held and
      cancelled when the last is dropped, so that none is left behind when the loop closes
      (asyncio keeps only weak references to tasks: this holds it).

    A store error or a stall is retried at the next turn; a lease lapses if none gets through.
    A claim taken over by another attempt is dropped. It holds its store weakly, so that a
    store no one uses any more can go."""

    def __init__(self, store: StepStore, lease: float) -> None:
        try:
            self._store: Callable[[], StepStore | None] = weakref.ref(store)
        except TypeError:  # (a store without weak references is held for the run)
            self._store = lambda: store
        self.lease = lease
        self._held: dict[str, str] = {}  # store key -> owner
        self._run_token: object = None  # the trio run or asyncio loop whose task renews them
        self._task: asyncio.Task[None] | None = None  # that task, on asyncio, while it runs

    def hold(self, key: str, owner: str) -> None:
        """Renew *owner*'s claim on *key* until `drop`."""
        try:
            run: object = trio.lowlevel.current_root_task()
        except RuntimeError:
            self._hold_on_asyncio(key, owner)
            return
        if run is not self._run_token:
            self._run_token, self._held, self._task = run, {}, None
            trio.lowlevel.spawn_system_task(self._renew, run, name="mrtr_trio step leases")
        self._held[key] = owner

    def _hold_on_asyncio(self, key: str, owner: str) -> None:
        loop = asyncio.get_running_loop()
        if loop is not self._run_token:
            self._run_token, self._held, self._task = loop, {}, None
        self._held[key] = owner
        if self._task is None or self._task.done():
            self._task = loop.create_task(self._renew(loop), name="mrtr_trio step leases")

    def drop(self, key: str, owner: str) -> None:
        """Stop renewing *owner*'s claim on *key*."""
        if self._held.get(key) == owner:
            del self._held[key]
            if self._task is not None and not self._held:
                self._task.cancel()
                self._task = None

    async def _renew(self, run: object) -> None:
        turn = self.lease / 3
        while self._run_token is run:
            await anyio.sleep(turn)
            store = self._store()
            if store is None:
                return
            with anyio.move_on_after(turn):
                for key, owner in list(self._held.items()):
                    try:
                        renewed = await store.renew(key, owner, self.lease)
                    except Exception as error:
                        log.warning("could not renew step claim %s: %r", key, error)
                        continue
                    if not renewed and self._held.get(key) == owner:
                        log.warning("step claim %s was taken over mid-step", key)
                        self.drop(key, owner)
            del store


_RENEWALS: weakref.WeakKeyDictionary[Any, _Renewals] = weakref.WeakKeyDictionary()


def _renewals(store: StepStore, lease: float) -> _Renewals:
    """The renewals of *store*'s claims (made once per store and lease; for a store that
    cannot be weakly referenced or hashed, once per step)."""
    try:
        found = _RENEWALS.get(store)
        if found is None or found.lease != lease:
            found = _RENEWALS[store] = _Renewals(store, lease)
    except TypeError:
        return _Renewals(store, lease)
    return found


async def _quietly(call: Awaitable[Any]) -> None:
    """A store call whose failure changes nothing (a lease lapses by itself)."""
    with anyio.move_on_after(STORE_TIMEOUT), contextlib.suppress(Exception):
        await call


def _outcome_unknown(name: str) -> StepOutcomeUnknown:
    return StepOutcomeUnknown(
        f"step {name}: an earlier attempt started it and stopped without recording a result "
        "(its process died or was cancelled mid-step), so its effect may or may not have "
        "happened; it is not run again. Check the effect downstream (the step's "
        "step_key() is its idempotency key there) and start a new flow, or declare the step "
        "step(fn, ..., retry=True) if running it again under the same key is safe"
    )


async def call(fn: Callable[..., Any], args: tuple[Any, ...]) -> Any:
    """`fn(*args)`, awaiting the result when it is awaitable."""
    value = fn(*args)
    if inspect.isawaitable(value):
        value = await value
    return value


async def _call(fn: Callable[..., Any], args: tuple[Any, ...], key: Callable[[], str]) -> Any:
    token = _CURRENT_KEY.set(key)
    try:
        return await call(fn, args)
    finally:
        _CURRENT_KEY.reset(token)


async def _wait_for(
    store: StepStore,
    key: str,
    owner: str,
    name: str,
    lease: float,
    policy: StepPolicy,
    retry: bool,
) -> Claim:
    deadline = anyio.current_time() + STEP_WAIT
    delay = 0.01
    while anyio.current_time() < deadline:
        await anyio.sleep(delay)
        delay = min(delay * 2, 0.25)
        found = await ask_store(store.read(key), *_unrecorded(name))
        if found is None or (found.status == "unknown" and retry):
            # Released (the other attempt failed), or lapsed and safe to retry: run it here.
            policy.check_unexpired(name)
            found = await ask_store(
                store.claim(key, owner, lease=lease, ttl=policy.keep_for(), take=retry),
                *_unrecorded(name),
            )
        if found.status != "busy":
            return found
    raise StepInProgress(
        f"step {name} of this flow is still running for another presentation of the same "
        f"requestState, whose holder keeps renewing its lease (waited {STEP_WAIT:g} s); retry "
        "the request to get its result"
    )


async def ask_store(call: Awaitable[_T], failed: str, why: str = "") -> _T:
    """Await *call*, an operation of a step store, for at most `STORE_TIMEOUT` seconds; any
    error it raises (or a stall) becomes
    [StepStoreUnavailable][mrtr_trio.StepStoreUnavailable] saying what *failed*, the error and
    *why* that matters."""
    try:
        return await _bounded(call)
    except StepStoreUnavailable:
        raise
    except _TooSlow:
        raise StepStoreUnavailable(
            f"{failed}: the step store did not answer within {STORE_TIMEOUT:g} s{why}"
        ) from None
    except Exception as error:
        raise StepStoreUnavailable(
            f"{failed}: the step store failed ({type(error).__name__}: {error}){why}"
        ) from error


async def probe_store(store: StepStore) -> None:
    """Check that *store* answers: claim, record, read back and expire a probe key of its own
    (within `STORE_TIMEOUT` for each call), or raise
    [StepStoreUnavailable][mrtr_trio.StepStoreUnavailable] saying what failed."""
    key = f"mrtr_trio:probe:{secrets.token_hex(8)}"
    owner = "probe"
    what = f"the step store {store!r} cannot be reached"
    await ask_store(store.claim(key, owner, lease=1.0, ttl=5.0), what)
    await ask_store(store.record(key, owner, b"\xf6", 1.0), what)
    found = await ask_store(store.read(key), what)
    if found != Claim("done", b"\xf6"):
        raise StepStoreUnavailable(f"{what}: a probe key read back as {found!r}")


class _TooSlow(Exception):
    """A store call did not answer within `STORE_TIMEOUT` (raised by `_bounded`, whichever the
    event loop; a store's own `TimeoutError` stays an error of the store)."""


async def _bounded(call: Awaitable[_T]) -> _T:
    """*call* awaited for at most `STORE_TIMEOUT` seconds (else `_TooSlow`).

    A cancel scope costs more than an in-memory store's whole call, and a deadline only
    matters to a call that waits: so a call of [MemoryStepStore][mrtr_trio.MemoryStepStore]'s
    own methods, which never wait, runs to its end at once, and any other goes under a
    deadline from its start. (Starting a coroutine by hand and arming the deadline only when
    it yields would be cheaper, but wrong: a store that enters a cancel scope of its own
    before it first waits, as `trio.sleep` or anyio's worker threads do, would have it closed
    after the scope around it.)"""
    if type(call) is CoroutineType and id(call.cr_code) in _NEVER_WAITS:
        try:
            call.send(None)
        except StopIteration as finished:
            return finished.value  # type: ignore[no-any-return]
        call.close()  # pragma: no cover - the memory store's methods have no await
        raise AssertionError("a MemoryStepStore method waited")  # pragma: no cover
    if trio.lowlevel.in_trio_task():  # (trio's own scope: anyio's around it costs more)
        with trio.move_on_after(STORE_TIMEOUT):
            return await call
    else:
        with anyio.move_on_after(STORE_TIMEOUT):
            return await call
    raise _TooSlow


#: The store calls that never wait: the ids of the code of the memory store's own methods
#: (ids, because hashing a code object costs more than the call; the class holds them alive).
_NEVER_WAITS = frozenset(
    id(getattr(MemoryStepStore, name).__code__)
    for name in ("claim", "renew", "record", "read", "release")
)


def _unrecorded(name: str) -> tuple[str, str]:
    """What [ask_store][mrtr_trio._steps.ask_store] says when a step's store fails before the
    step ran."""
    return f"step {name} did not run", "; a step never runs unrecorded"


def _decode(value: bytes | None, name: str) -> Any:
    try:
        return strict_loads(value or b"")
    except Exception as error:
        raise StepStoreUnavailable(
            f"step {name}: the step store returned a result that is not CBOR ({error})"
        ) from error
