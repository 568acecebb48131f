"""What a handler may yield or return, and one interface over both handler styles.

A handler is `async def handler(ctx, **arguments)`, in one of two styles:

- **yield style** (an async generator): it yields a request, a `{key: request}` batch,
  `step(fn, *args)`, `poll(fn, *args)`, `pause()` or `done(value)`, and receives
  answers;
- **return style** (a coroutine function, the TypeScript FastMCP semantics): it returns a value,
  or `input_required(...)` to be called again with `ctx.input_responses`.

A [Flow][mrtr_trio._flow.Flow] wraps one invocation of either style and reports what it needs
next, in one vocabulary of three *needs*:

- [Ask][mrtr_trio._flow.Ask]: answers from the client (no requests: a pause, which gives the
  client a turn with nothing to ask), or a request yielded on its own;
- [Step][mrtr_trio.step] or [Poll][mrtr_trio.poll]: a function to run (as the handler
  yielded it);
- [Done][mrtr_trio.done]: the flow's value.

Nothing here knows about trio, MCP, tokens or replay; `_replay` decides how each need is met.
"""

from __future__ import annotations

import inspect
import logging
from collections.abc import Awaitable, Callable, Coroutine, Mapping
from typing import TYPE_CHECKING, Any, TypeAlias

import attrs

from ._errors import MrtrError
from ._journal import Pending, PendingOne, PendingPoll
from ._util import Memo, check_seconds
from ._values import REQUEST_TYPES, Answer, Request, misused_request

if TYPE_CHECKING:
    from ._context import Context

__all__ = [
    "Ask",
    "CallAgain",
    "Done",
    "Flow",
    "Handler",
    "MintedState",
    "Need",
    "PAUSE",
    "Pause",
    "Poll",
    "Step",
    "done",
    "input_required",
    "is_generator_handler",
    "open_flow",
    "pause",
    "poll",
    "step",
]

log = logging.getLogger("mrtr_trio")

#: A handler: `async def handler(ctx, **arguments)`, an async generator (yield style) or a
#: coroutine function (return style).
Handler: TypeAlias = Callable[..., Any]

# ------------------------------------------------------------------- what handlers produce


@attrs.frozen
class Done:
    """Yielded to finish a yield-style flow with `value` (see [done][mrtr_trio.done])."""

    value: Any


def done(value: Any = None) -> Done:
    """Finish the flow with *value*; the runtime then closes the generator (`finally` runs)."""
    return Done(value)


@attrs.frozen
class Step:
    """Yielded to run `fn(*args)` exactly once per flow and receive its value (see
    [step][mrtr_trio.step])."""

    fn: Callable[..., Any]
    args: tuple[Any, ...]
    name: str | None = None
    retry: bool = False


def step(fn: Callable[..., Any], *args: Any, name: str | None = None, retry: bool = False) -> Step:
    """Run a side effect or non-deterministic call once: `fn(*args)` (sync or async) is called
    and its value sent back. On modern requests the value (CBOR-encodable) is recorded in the
    journal, and replays return it without calling *fn*.

    - *name*: the step's identity in the journal (default: derived from *fn*: its qualified
      name, the wrapped function of a `functools.partial`, and the code location of a lambda
      or a function defined inside another). A replay that meets another identity at this
      point has diverged. Name lambdas and closures, so that editing the file around them
      does not change their identity.
    - *retry*: with a step store, an earlier attempt whose outcome is unknown (its process
      died or was cancelled mid-step) may run again, with the same
      [step_key][mrtr_trio.step_key] (pass it to the downstream service so it can deduplicate).
      Without it such a step fails with [StepOutcomeUnknown][mrtr_trio.StepOutcomeUnknown].
    """
    if not callable(fn):
        raise TypeError(f"step() needs a callable, got {fn!r}")
    _check_name(name, "step")
    return Step(fn, args, name, bool(retry))


def _check_name(name: object, what: str) -> None:
    if name is not None and (not isinstance(name, str) or not name):
        raise TypeError(f"{what}(name=...) must be a non-empty str, got {name!r}")


@attrs.frozen
class Poll:
    """Yielded to wait until `fn(*args)` returns something other than `None` (see
    [poll][mrtr_trio.poll])."""

    fn: Callable[..., Any]
    args: tuple[Any, ...]
    every: float
    timeout: float | None
    name: str | None = None


def poll(
    fn: Callable[..., Any],
    *args: Any,
    every: float = 1.0,
    timeout: float | None = None,
    name: str | None = None,
) -> Poll:
    """Wait for a condition outside the client: `fn(*args)` (sync or async) returns `None`
    while it is not met, and the value that ends the wait is sent back.

    Live, the driver calls *fn* every *every* seconds. On modern requests each round calls it
    once and, while it returns `None`, answers with a state-only round; those rounds are
    bounded by *timeout* (seconds, carried in the token), not by `max_rounds`. As a task, the
    task is `working` with `pollIntervalMs`. The ending value is journaled like a step's, so
    it is read once. Waiting past *timeout* raises [PollTimeout][mrtr_trio.PollTimeout].
    *name* is the poll's identity in the journal, as for [step][mrtr_trio.step].
    """
    if not callable(fn):
        raise TypeError(f"poll() needs a callable, got {fn!r}")
    _check_name(name, "poll")
    return Poll(
        fn,
        args,
        check_seconds("every", every),
        check_seconds("timeout", timeout, optional=True),
        name,
    )


@attrs.frozen
class Pause:
    """Yielded to give the client a turn with nothing to ask (see [pause][mrtr_trio.pause])."""


_PAUSE = Pause()


def pause() -> Pause:
    """Give the client a turn with nothing to ask: a `requestState`-only result on modern
    requests; live, the flow continues at once."""
    return _PAUSE


@attrs.frozen
class MintedState:
    """An opaque handle on a return-style payload, from `await ctx.mint_request_state(...)`.

    Pass it to [input_required][mrtr_trio.input_required]; the runtime carries the payload
    inside its own signed envelope and hands it back as `ctx.request_state()` on the next
    round.
    """

    payload: Any = attrs.field(repr=False)


@attrs.frozen
class CallAgain:
    """A return-style handler's "ask the client, then call me again", made by
    [input_required][mrtr_trio.input_required]. (Not to be confused with
    [InputRequired][mrtr_trio.InputRequired], the outcome of a modern round.)"""

    input_requests: Mapping[str, Request]
    request_state: MintedState | None


def input_required(
    input_requests: Mapping[str, Request] | None = None,
    request_state: MintedState | None = None,
) -> CallAgain:
    """Return-style: ask for *input_requests* (`{key: request}`) and/or carry
    *request_state* (from `await ctx.mint_request_state(payload)`) to the next round.

    Raises `TypeError` when both are empty.
    """
    requests = dict(input_requests or {})
    if not requests and request_state is None:
        raise TypeError("input_required() needs input_requests, request_state, or both")
    _check_batch(requests, "input_required()")
    if request_state is not None and not isinstance(request_state, MintedState):
        raise TypeError(
            "request_state must come from `await ctx.mint_request_state(payload)`, got "
            f"{type(request_state).__name__}; the runtime signs and carries it for you"
        )
    return CallAgain(requests, request_state)


# ----------------------------------------------------------------------------- the needs


@attrs.frozen
class Ask:
    """Answers from the client for `requests` (empty: a pause). `payload` is the
    return-style state to carry to the next round."""

    requests: Mapping[str, Request]
    payload: Any = None

    @property
    def fingerprints(self) -> dict[str, bytes]:
        """Each request's fingerprint, by key."""
        return {key: request.fingerprint for key, request in self.requests.items()}


#: The need of a pause.
PAUSE = Ask({})

#: A request yielded on its own is its own need: the replay machine names it (`input-N`,
#: see [single_key][mrtr_trio._journal.single_key]), and its answer (not a dict of answers)
#: goes back to the handler.
Need: TypeAlias = Ask | Request | Step | Poll | Done


_STYLES: Memo[Handler, bool] = Memo()


def is_generator_handler(handler: Handler) -> bool:
    """True for yield style, False for return style; `TypeError` for anything else."""
    style = _STYLES.get(handler)
    if style is not None:
        return style
    if inspect.isasyncgenfunction(handler):
        return _STYLES.put(handler, True)
    if inspect.iscoroutinefunction(handler):
        return _STYLES.put(handler, False)
    raise TypeError(
        f"a handler must be an `async def` function (yield style: an async generator; return "
        f"style: a coroutine function), got {handler!r}"
    )


class Flow:
    """One invocation of a handler, stepped need by need."""

    __slots__ = ("name",)

    name: str

    async def start(self) -> Need:
        """Run the handler to its first need."""
        raise NotImplementedError

    async def resume(self, value: Any) -> Need:
        """Send *value* (`{key: answer}` after an ask, the function's value after a step or
        poll) and return the next need."""
        raise NotImplementedError

    async def aclose(self) -> BaseException | None:
        """Release the handler (close the generator; `finally` blocks run). An error raised
        while closing is logged with its traceback and returned, never swallowed silently.
        Closing a closed flow does nothing."""
        return None


def open_flow(
    handler: Handler,
    ctx: Context,
    arguments: Mapping[str, Any],
    pending: Pending | PendingOne | PendingPoll | None = None,
    payload: Any = None,
    *,
    name: str,
    replayable: bool,
) -> Flow:
    """A flow for *handler*, which the driver has already named (`qualified_name`) and styled
    (*replayable*: [is_generator_handler][mrtr_trio._flow.is_generator_handler]).
    Return-style flows on a modern retry start at the *pending* ask with *payload*;
    yield-style flows always start from the top."""
    if replayable:
        return GeneratorFlow(handler, ctx, arguments, name)
    return ReturnFlow(handler, ctx, arguments, pending, payload, name)


class GeneratorFlow(Flow):
    """A yield-style handler: an async generator kept suspended between needs."""

    __slots__ = ("_agen", "_paused")

    def __init__(
        self, handler: Handler, ctx: Context, arguments: Mapping[str, Any], name: str
    ) -> None:
        self.name = name
        self._agen = handler(ctx, **arguments)
        self._paused = False  # a pause's turn gives the handler None

    def start(self) -> Coroutine[Any, Any, Need]:
        return self.resume(None)  # (not a coroutine of its own: one frame fewer to make)

    async def resume(self, value: Any) -> Need:
        if self._paused:
            self._paused, value = False, None
        try:
            yielded = await self._agen.asend(value)
        except StopAsyncIteration:
            _note_ended_without_done(self.name)
            return Done(None)
        kind = type(yielded)
        if kind in _YIELDED_AS_IS:  # a request (the machine gives it its key), a step, a poll, done
            return yielded  # type: ignore[no-any-return]
        if kind is Pause:
            self._paused = True
            return PAUSE
        if isinstance(yielded, Mapping):
            _check_batch(yielded, f"{self.name} yielded a dict that")
            if not yielded:
                raise TypeError(f"{self.name} yielded an empty dict; yield pause() to wait")
            return Ask(dict(yielded))
        raise TypeError(
            f"{self.name} yielded {yielded!r}; yield a request (elicit, elicit_url, "
            "create_message, list_roots), a dict of them, step(fn, ...), poll(fn, ...), "
            "pause() or done(value)"
        )

    async def aclose(self) -> BaseException | None:
        try:
            await self._agen.aclose()
        except BaseExceptionGroup as group:
            # A nursery held across a yield wraps the GeneratorExit it was closed with; what
            # else the group holds is a real error.
            _, real = group.split(GeneratorExit)
            if real is not None:
                return _log_close_error(self.name, real)
        except Exception as error:
            return _log_close_error(self.name, error)
        return None


_YIELDED_AS_IS = frozenset({*REQUEST_TYPES, Step, Poll, Done})

#: Handlers already logged as ending without `done(...)` (by name): said once, not per call.
_ENDED_WITHOUT_DONE: Memo[str, bool] = Memo()


def _note_ended_without_done(name: str) -> None:
    if _ENDED_WITHOUT_DONE.get(name) is None:
        _ENDED_WITHOUT_DONE.put(name, True)
        log.warning(
            "%s ended without `yield done(...)`, so its value is None (a tool's content is "
            "empty). Yield done(value) to return a value, or done(None) to say that none is "
            "meant (logged once per handler)",
            name,
        )


def _log_close_error(name: str, error: BaseException) -> BaseException:
    log.error("%s raised while being closed", name, exc_info=error)
    return error


class ReturnFlow(Flow):
    """A return-style handler: called again, from the top, each time it gets its answers."""

    __slots__ = ("_arguments", "_ctx", "_handler", "_payload", "_pending")

    def __init__(
        self,
        handler: Callable[..., Awaitable[Any]],
        ctx: Context,
        arguments: Mapping[str, Any],
        pending: Pending | PendingOne | PendingPoll | None,
        payload: Any,
        name: str,
    ) -> None:
        self.name = name
        self._handler = handler
        self._ctx = ctx
        self._arguments = arguments
        self._pending = pending
        self._payload = payload

    async def start(self) -> Need:
        pending = self._pending
        if pending is None:
            return await self._call(None)
        if isinstance(pending, Pending) and (
            pending.requests is not None or not pending.fingerprints
        ):
            return Ask(pending.requests or {}, self._payload)
        raise MrtrError(
            f"{self.name} is a return-style handler, but this requestState was minted by a "
            "yield-style handler of the same name; the flow must start again"
        )

    async def resume(self, value: Any) -> Need:
        return await self._call(dict(value))

    async def _call(self, responses: dict[str, Answer] | None) -> Need:
        self._ctx._enter_return_round(responses, self._payload)
        result = await self._handler(self._ctx, **self._arguments)
        if not isinstance(result, CallAgain):
            if isinstance(result, REQUEST_TYPES):
                raise misused_request(result, f"{self.name} returned {{call}}, which")
            return Done(result)
        minted = result.request_state
        self._payload = None if minted is None else minted.payload
        return Ask(result.input_requests, self._payload)


def _check_batch(requests: Mapping[Any, Any], what: str) -> None:
    for key, request in requests.items():
        if not isinstance(key, str) or not key:
            raise TypeError(f"{what} has key {key!r}; input request keys are non-empty strings")
        if not isinstance(request, REQUEST_TYPES):
            raise TypeError(
                f"{what} maps {key!r} to {request!r}; values must be requests (elicit, "
                "elicit_url, create_message, list_roots)"
            )
