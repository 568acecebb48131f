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
its key: the winner runs the function and records the result before it is journaled; a
presentation that finds the result recorded uses it without calling the function; one that
finds the key claimed waits (bounded) for the result, or fails with
[StepInProgress][mrtr_trio.StepInProgress], which says to retry. A store that cannot be reached
fails the step closed ([StepStoreUnavailable][mrtr_trio.StepStoreUnavailable]): it never runs
unrecorded. The same store makes tokens single-use when asked (`single_use=True`).

On a live session the generator stays alive, so a step runs once by construction; its key is
unique per flow and position, and the store is not consulted.
"""

from __future__ import annotations

import contextlib
import contextvars
import inspect
import time
from collections.abc import Awaitable, Callable
from typing import Any, Literal, Protocol, TypeVar, runtime_checkable

import attrs
import cbor2
import trio

from ._errors import MrtrError, StepInProgress, StepStoreUnavailable
from ._journal import qualified_name, recordable, strict_loads
from ._util import check_count

__all__ = [
    "Claim",
    "MemoryStepStore",
    "StepStore",
    "ask_store",
    "call",
    "call_step",
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
    """What a store says about a key when asked to claim it: `"won"` (the caller holds the
    claim and runs the step), `"busy"` (another holder is running it) or `"done"` (its
    result is recorded: `value`, as CBOR bytes)."""

    status: Literal["won", "busy", "done"]
    value: bytes | None = None


WON = Claim("won")
BUSY = Claim("busy")


@runtime_checkable
class StepStore(Protocol):
    """Where step results and token uses are remembered, shared by every process that serves a
    flow. Each method is atomic; *ttl* is in seconds. A store that cannot answer raises any
    exception: the runtime then fails the step closed.
    """

    async def claim(self, key: str, ttl: float) -> Claim:
        """Claim *key* for *ttl* seconds if nobody holds it: [Claim][mrtr_trio.Claim] `won`;
        otherwise `busy` while it is claimed, or `done` with the recorded value."""

    async def record(self, key: str, value: bytes, ttl: float) -> None:
        """Record the result *value* under a claimed *key*, kept *ttl* seconds."""

    async def read(self, key: str) -> Claim | None:
        """What is under *key*: `busy`, `done` with the value, or `None` (nothing)."""

    async def release(self, key: str) -> None:
        """Drop a claim whose step failed, so that a retry may run it; a recorded result
        under *key* stays."""


class MemoryStepStore:
    """A [StepStore][mrtr_trio.StepStore] in this process's memory: bounded and expiring.

    It serves one process; behind a load balancer use a shared store such as
    [RedisStepStore][mrtr_trio.redis.RedisStepStore]. When *max_entries* unexpired entries are
    held, a new claim fails closed ([StepStoreUnavailable][mrtr_trio.StepStoreUnavailable])
    rather than forgetting a result early, which would let a step run twice.
    """

    def __init__(
        self, max_entries: int = 100_000, *, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.max_entries = check_count("max_entries", max_entries)
        self._clock = clock
        # key -> (expires at, value): value None while claimed.
        self._entries: dict[str, tuple[float, bytes | None]] = {}

    def __repr__(self) -> str:
        return f"MemoryStepStore({len(self._entries)}/{self.max_entries} entries)"

    def __len__(self) -> int:
        return len(self._entries)

    async def claim(self, key: str, ttl: float) -> Claim:
        now = self._clock()
        held = self._live(key, now)
        if held is not None:
            return held
        if len(self._entries) >= self.max_entries:
            self._expire(now)
            if len(self._entries) >= self.max_entries:
                raise StepStoreUnavailable(
                    f"MemoryStepStore is full ({self.max_entries} unexpired entries); raise "
                    "max_entries or lower the runtime's ttl"
                )
        self._entries[key] = (now + ttl, None)
        return WON

    async def record(self, key: str, value: bytes, ttl: float) -> None:
        self._entries[key] = (self._clock() + ttl, value)

    async def read(self, key: str) -> Claim | None:
        return self._live(key, self._clock())

    async def release(self, key: str) -> None:
        # Only a claim: a result recorded meanwhile (by a presentation that claimed the key
        # after this one's claim expired) must stay, or the step would run again.
        if self._live(key, self._clock()) == BUSY:
            del self._entries[key]

    def _live(self, key: str, now: float) -> Claim | None:
        entry = self._entries.get(key)
        if entry is None:
            return None
        expires, value = entry
        if now >= expires:
            del self._entries[key]
            return None
        return BUSY if value is None else Claim("done", value)

    def _expire(self, now: float) -> None:
        for key in [k for k, (expires, _) in self._entries.items() if now >= expires]:
            del self._entries[key]


# ------------------------------------------------------------------------- running steps

#: How long a presentation waits for another one's step result before giving up.
STEP_WAIT = 10.0


async def call_step(
    fn: Callable[..., Any],
    args: tuple[Any, ...],
    key: Callable[[], str],
    store: StepStore | None = None,
    ttl: float = 0.0,
) -> Any:
    """Run the step `fn(*args)` once, with [step_key][mrtr_trio.step_key] giving *key()*.

    With a *store*: claim the key first; if its result is recorded, return it without calling
    *fn*; if another presentation holds it, wait for its result (at most `STEP_WAIT`
    seconds); if the store fails, fail closed. The result is recorded (for *ttl* seconds)
    before it is returned, and a failed step releases its claim.
    """
    if store is None:
        return await _call(fn, args, key)
    name = qualified_name(fn)
    store_key = f"mrtr_trio:step:{key()}"
    claim = await ask_store(store.claim(store_key, ttl), *_unrecorded(name))
    if claim.status == "busy":
        claim = await _wait_for(store, store_key, name, ttl)
    if claim.status == "done":
        return _decode(claim.value, name)
    try:
        value = await _call(fn, args, key)
    except BaseException:
        with trio.CancelScope(shield=True), contextlib.suppress(Exception):
            # The claim expires anyway; releasing it lets a retry run the step sooner.
            await store.release(store_key)
        raise
    # The step ran: a value that cannot be recorded fails the round as it would without a
    # store, and keeps the claim, so that a retry does not run the step again.
    value = recordable(value, f"step {name}")
    await ask_store(store.record(store_key, cbor2.dumps(value), ttl), *_unrecorded(name))
    return value


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


async def _wait_for(store: StepStore, key: str, name: str, ttl: float) -> Claim:
    deadline = trio.current_time() + STEP_WAIT
    delay = 0.01
    while trio.current_time() < deadline:
        await trio.sleep(delay)
        delay = min(delay * 2, 0.25)
        found = await ask_store(store.read(key), *_unrecorded(name))
        if found is None:  # the other presentation failed and released it: try to run it
            found = await ask_store(store.claim(key, ttl), *_unrecorded(name))
            if found.status == "won":
                return found
        elif found.status == "done":
            return found
    raise StepInProgress(
        f"step {name} of this flow is still running for another presentation of the same "
        f"requestState (waited {STEP_WAIT:g} s); retry the request to get its result"
    )


async def ask_store(call: Awaitable[_T], failed: str, why: str = "") -> _T:
    """Await *call*, an operation of a step store; any error it raises becomes
    [StepStoreUnavailable][mrtr_trio.StepStoreUnavailable] saying what *failed*, the error and
    *why* that matters."""
    try:
        return await call
    except StepStoreUnavailable:
        raise
    except Exception as error:
        raise StepStoreUnavailable(
            f"{failed}: the step store failed ({type(error).__name__}: {error}){why}"
        ) from error


def _unrecorded(name: str) -> tuple[str, str]:
    """What [ask_store][mrtr_trio._steps.ask_store] says when a step's store fails."""
    return f"step {name} did not run", "; a step never runs unrecorded"


def _decode(value: bytes | None, name: str) -> Any:
    try:
        return strict_loads(value or b"")
    except Exception as error:
        raise StepStoreUnavailable(
            f"step {name}: the step store returned a result that is not CBOR ({error})"
        ) from error
