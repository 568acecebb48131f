"""The sans-IO core: what a handler may yield or return, and stepping a handler to its next need.

A handler is ``async def handler(ctx, **arguments)``, in one of two styles:

- **yield style** (an async generator): it yields a request, a ``{key: request}`` batch,
  ``step(fn, *args)``, ``pause()`` or ``done(value)``, and receives answers;
- **return style** (a coroutine function, the TypeScript FastMCP semantics): it returns a value,
  or ``input_required(...)`` to be called again with ``ctx.input_responses``.

A :class:`Flow` wraps one invocation of either style behind one interface: ``start()`` and
``resume(value)`` return the next *need* (:class:`Ask`, :class:`RunStep`, :class:`Wait` or
:class:`Finished`) and ``aclose()`` releases it. Nothing here knows about trio, MCP or tokens;
the drivers decide how each need is met. :func:`collect_answers` checks answers for an ask, the
same way in both eras.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Awaitable, Callable, Mapping
from typing import TYPE_CHECKING, Any, TypeAlias

import attrs

from ._errors import InvalidInputResponse, MrtrError
from ._state import (
    PendingAsk,
    PendingPause,
    fingerprint,
    record_problem,
    recordable,
    step_fingerprint,
)
from ._values import (
    Answer,
    CreateMessageRequest,
    ElicitRequest,
    ListRootsRequest,
    Request,
    content_problems_for,
    parse_answer,
)

if TYPE_CHECKING:
    from ._context import Context

__all__ = [
    "Ask",
    "Done",
    "Finished",
    "Flow",
    "MintedState",
    "NeedsInput",
    "Pause",
    "RunStep",
    "Step",
    "Wait",
    "collect_answers",
    "done",
    "handler_name",
    "input_required",
    "open_flow",
    "pause",
    "step",
]

_REQUEST_TYPES = (ElicitRequest, CreateMessageRequest, ListRootsRequest)

# ------------------------------------------------------------------- what handlers produce


@attrs.frozen
class Done:
    """Yielded to finish a yield-style flow with ``value``."""

    value: Any


def done(value: Any = None) -> Done:
    """Finish the flow with *value*; the runtime then closes the generator (``finally`` runs)."""
    return Done(value)


@attrs.frozen
class Step:
    """Yielded to run ``fn(*args)`` exactly once per flow and receive its value."""

    fn: Callable[..., Any]
    args: tuple[Any, ...]


def step(fn: Callable[..., Any], *args: Any) -> Step:
    """Run a side effect or non-deterministic call once: ``fn(*args)`` (sync or async) is called
    and its value sent back. On modern requests the value (CBOR-encodable) is recorded in the
    journal, and replays return it without calling *fn*."""
    if not callable(fn):
        raise TypeError(f"step() needs a callable, got {fn!r}")
    return Step(fn, args)


@attrs.frozen
class Pause:
    """Yielded to give the client a turn with nothing to ask."""


_PAUSE = Pause()


def pause() -> Pause:
    """Give the client a turn with nothing to ask: a ``requestState``-only result on modern
    requests; live, the flow continues at once."""
    return _PAUSE


@attrs.frozen
class MintedState:
    """An opaque handle on a return-style payload, from ``await ctx.mint_request_state(...)``.

    Pass it to :func:`input_required`; the runtime carries the payload inside its own signed
    envelope and hands it back as ``ctx.request_state()`` on the next round.
    """

    payload: Any = attrs.field(repr=False)


@attrs.frozen
class NeedsInput:
    """A return-style handler's "ask the client, then call me again" (see
    :func:`input_required`)."""

    input_requests: Mapping[str, Request]
    request_state: MintedState | None


def input_required(
    input_requests: Mapping[str, Request] | None = None,
    request_state: MintedState | None = None,
) -> NeedsInput:
    """Return-style: ask for *input_requests* (``{key: request}``) and/or carry
    *request_state* (from ``await ctx.mint_request_state(payload)``) to the next round.

    Raises ``TypeError`` when both are empty.
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
    return NeedsInput(requests, request_state)


# ----------------------------------------------------------------------- what flows need


@attrs.frozen
class Ask:
    """Ask the client ``requests``. ``single`` is a bare yielded request (its answer is sent
    back alone); ``payload`` is the return-style state to carry."""

    requests: Mapping[str, Request]
    single: bool = False
    payload: Any = None

    @functools.cached_property
    def fingerprints(self) -> dict[str, bytes]:
        """Each request's fingerprint, by key (computed once, on first use)."""
        return {key: fingerprint(request) for key, request in self.requests.items()}


@attrs.frozen
class RunStep:
    """Run ``fn(*args)`` once; ``fingerprint`` identifies the step in the journal."""

    fn: Callable[..., Any]
    args: tuple[Any, ...]
    fingerprint: bytes

    @property
    def name(self) -> str:
        """The step function's qualified name."""
        return getattr(self.fn, "__qualname__", None) or type(self.fn).__qualname__


@attrs.frozen
class Wait:
    """Give the client a turn with nothing to ask (``pause()``, or a return-style state-only
    round carrying ``payload``)."""

    payload: Any = None


@attrs.frozen
class Finished:
    """The flow finished with ``value``."""

    value: Any


Need: TypeAlias = Ask | RunStep | Wait | Finished


def handler_name(handler: Callable[..., Any]) -> str:
    """The handler's identity: its ``__qualname__`` (not its module, so a file run as a script
    and the same file imported agree)."""
    target = getattr(handler, "func", handler)  # functools.partial
    return getattr(target, "__qualname__", None) or type(handler).__qualname__


def is_generator_handler(handler: Callable[..., Any]) -> bool:
    """True for yield style, False for return style; ``TypeError`` for anything else."""
    if inspect.isasyncgenfunction(handler):
        return True
    if inspect.iscoroutinefunction(handler):
        return False
    raise TypeError(
        f"a handler must be an `async def` function (yield style: an async generator; return "
        f"style: a coroutine function), got {handler!r}"
    )


class Flow:
    """One invocation of a handler, stepped need by need."""

    #: True for yield-style flows, which are replayed from a journal on modern requests.
    replayable: bool
    name: str

    async def start(self) -> Need:
        raise NotImplementedError

    async def resume(self, value: Any) -> Need:
        """Send *value* (``{key: answer}`` after an ask, the step value, ``None`` after a
        wait) and return the next need."""
        raise NotImplementedError

    async def aclose(self) -> None:
        """Release the handler (close the generator; ``finally`` blocks run)."""


def open_flow(
    handler: Callable[..., Any],
    ctx: Context,
    arguments: Mapping[str, Any],
    *,
    resume_at: PendingAsk | PendingPause | None = None,
    payload: Any = None,
) -> Flow:
    """A flow for *handler*. Return-style flows on a modern retry start at *resume_at* (the
    pending ask or wait) with *payload*; yield-style flows always start from the top."""
    if is_generator_handler(handler):
        return GeneratorFlow(handler, ctx, arguments)
    return ReturnFlow(handler, ctx, arguments, resume_at, payload)


class GeneratorFlow(Flow):
    """A yield-style handler: an async generator kept suspended between needs."""

    replayable = True

    def __init__(
        self, handler: Callable[..., Any], ctx: Context, arguments: Mapping[str, Any]
    ) -> None:
        self.name = handler_name(handler)
        self._agen = handler(ctx, **arguments)
        self._singles = 0
        self._single_key: str | None = None

    async def start(self) -> Need:
        return await self._send(None)

    async def resume(self, value: Any) -> Need:
        if self._single_key is not None:
            value = value[self._single_key]
        return await self._send(value)

    async def _send(self, value: Any) -> Need:
        try:
            yielded = await self._agen.asend(value)
        except StopAsyncIteration:
            return Finished(None)
        return self._interpret(yielded)

    def _interpret(self, yielded: Any) -> Need:
        self._single_key = None
        if isinstance(yielded, _REQUEST_TYPES):
            self._single_key = f"input-{self._singles}"
            self._singles += 1
            return Ask({self._single_key: yielded}, single=True)
        if isinstance(yielded, Mapping):
            _check_batch(yielded, f"{self.name} yielded a dict that")
            if not yielded:
                raise TypeError(f"{self.name} yielded an empty dict; yield pause() to wait")
            return Ask(dict(yielded))
        if isinstance(yielded, Step):
            return RunStep(yielded.fn, yielded.args, step_fingerprint(yielded.fn))
        if isinstance(yielded, Pause):
            return Wait()
        if isinstance(yielded, Done):
            return Finished(yielded.value)
        raise TypeError(
            f"{self.name} yielded {yielded!r}; yield a request (elicit, elicit_url, "
            "create_message, list_roots), a dict of them, step(fn, ...), pause() or done(value)"
        )

    async def aclose(self) -> None:
        try:
            await self._agen.aclose()
        except BaseExceptionGroup as group:
            # A nursery held across a yield wraps the GeneratorExit it closes with.
            leaks = group.subgroup(lambda e: not isinstance(e, GeneratorExit | BaseExceptionGroup))
            if leaks is not None:
                raise


class ReturnFlow(Flow):
    """A return-style handler: called again, from the top, each time it gets its answers."""

    replayable = False

    def __init__(
        self,
        handler: Callable[..., Awaitable[Any]],
        ctx: Context,
        arguments: Mapping[str, Any],
        resume_at: PendingAsk | PendingPause | None,
        payload: Any,
    ) -> None:
        self.name = handler_name(handler)
        self._handler = handler
        self._ctx = ctx
        self._arguments = arguments
        self._resume_at = resume_at
        self._payload = payload

    async def start(self) -> Need:
        if isinstance(self._resume_at, PendingAsk):
            if self._resume_at.requests is None:
                raise MrtrError(
                    f"{self.name} is a return-style handler, but this requestState was minted "
                    "by a yield-style handler of the same name; the flow must start again"
                )
            return Ask(self._resume_at.requests, payload=self._payload)
        if isinstance(self._resume_at, PendingPause):
            return Wait(self._payload)
        return await self._call(None)

    async def resume(self, value: Any) -> Need:
        return await self._call({} if value is None else dict(value))

    async def _call(self, responses: dict[str, Answer] | None) -> Need:
        self._ctx._enter_return_round(responses, self._payload)
        result = await self._handler(self._ctx, **self._arguments)
        if not isinstance(result, NeedsInput):
            return Finished(result)
        minted = result.request_state
        self._payload = None if minted is None else minted.payload
        if result.input_requests:
            return Ask(result.input_requests, payload=self._payload)
        return Wait(self._payload)


def _check_batch(requests: Mapping[Any, Any], what: str) -> None:
    for key, request in requests.items():
        if not isinstance(key, str) or not key:
            raise TypeError(f"{what} has key {key!r}; input request keys are non-empty strings")
        if not isinstance(request, _REQUEST_TYPES):
            raise TypeError(
                f"{what} maps {key!r} to {request!r}; values must be requests (elicit, "
                "elicit_url, create_message, list_roots)"
            )


# ------------------------------------------------------------------------ checking answers


def collect_answers(
    requests: Mapping[str, Request],
    kept: Mapping[str, Answer],
    responses: Mapping[str, Any],
) -> tuple[dict[str, Answer], dict[str, Request]]:
    """Check *responses* (key → client JSON or answer) against *requests*, on top of the
    answers already *kept*.

    Returns ``(answers, again)``: the valid answers (kept plus new), and the requests still
    unanswered or answered with content that fails the requested schema, to ask again. Keys
    nobody asked for are ignored. A response not shaped like an answer to its request raises
    :class:`InvalidInputResponse` naming the key.
    """
    answers = dict(kept)
    again: dict[str, Request] = {}
    for key, request in requests.items():
        if key in answers:
            continue
        if key not in responses:
            again[key] = request
            continue
        try:
            answer = parse_answer(request, responses[key])
        except InvalidInputResponse as error:
            raise InvalidInputResponse(f"the answer to {key!r} is malformed: {error}") from None
        problem = record_problem(answer.to_wire())  # both eras: what a token could not hold
        if problem is not None:
            raise InvalidInputResponse(f"the answer to {key!r} cannot be used: {problem}")
        if content_problems_for(request, answer):
            again[key] = request
        else:
            answers[key] = answer
    return answers, again


def normalise_step_value(need: RunStep, value: Any) -> Any:
    """The step's value as a replay will return it (see :func:`recordable`)."""
    return recordable(value, f"step {need.name}")
