"""Replay a `requestState` up to its pending point, and no further.

`probe` is what the "replay after every round" check of
[run_modern][mrtr_trio.testing.run_modern] and the recorded-state replayer share. It retries the
token with no answers, which replays the journal and re-derives the pending ask without running
any new handler code: a retry with no answers stops at the pending ask, and a handler yielding a
step before it diverges (strict replay) before the step runs. A token pending at a `pause()`
is different: the retry passes the pause and runs on, so the handler is wrapped in a guard that
stops it at its first yield past the pending point, before a step there could run.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, Callable, Mapping
from typing import Any

import attrs

from .._context import Context
from .._flow import Done, Pause, Poll, Step, is_generator_handler
from .._journal import qualified_name
from .._replay import Complete
from .._runtime import Runtime
from .._values import REQUEST_TYPES, Request

__all__ = ["Probe", "describe_yield", "map_yields", "probe", "wire_of"]


@attrs.frozen
class Probe:
    """What a token replays to.

    `requests` is the pending ask (the keys still to answer); it is empty when the token is
    pending at a pause, and then `then` says what the current code does once past it.
    """

    requests: Mapping[str, Request]
    at_pause: bool = False
    then: str | None = None


class _ReachedNewCode(Exception):
    def __init__(self, yielded: Any) -> None:
        super().__init__("the replay reached code past the pending point")
        self.yielded = yielded


def map_yields(
    handler: Callable[..., Any], transform: Callable[[Context, Any], Any]
) -> Callable[..., Any]:
    """*handler* with every value it yields passed through `transform(ctx, yielded)` (which
    may also raise). The wrapper keeps the handler's identity, so its tokens still verify."""

    async def mapped(ctx: Context, **arguments: Any) -> AsyncGenerator[Any, Any]:
        inner = handler(ctx, **arguments)
        sent: Any = None
        try:
            while True:
                try:
                    yielded = await inner.asend(sent)
                except StopAsyncIteration:
                    return
                sent = yield transform(ctx, yielded)
        finally:
            await inner.aclose()

    mapped.__qualname__ = qualified_name(handler)
    return mapped


def _stop_at_new_code(ctx: Context, yielded: Any) -> Any:
    """Raise `_ReachedNewCode` at the first yield made while not replaying."""
    if not ctx.is_replaying:
        raise _ReachedNewCode(yielded)
    return yielded


async def probe(
    runtime: Runtime,
    handler: Callable[..., Any],
    arguments: Mapping[str, Any],
    request_state: str,
    *,
    bind: bytes = b"",
    client_capabilities: Mapping[str, Any] | None = None,
) -> Probe:
    """Replay *request_state* with no answers and report where the flow stands.

    Raises what [Runtime.advance][mrtr_trio.Runtime.advance] raises:
    [InvalidRequestState][mrtr_trio.InvalidRequestState] when the token does not verify,
    [NondeterminismError][mrtr_trio.NondeterminismError] when the handler diverges from the journal
    (with a strict runtime), or the handler's own errors. Return-style handlers are not replayed:
    their token is verified and its stored requests read.
    """
    if not is_generator_handler(handler):
        info = runtime.inspect(handler, arguments, request_state, bind=bind)
        if info.pending_requests and info.pending_keys:
            return Probe({k: info.pending_requests[k] for k in info.pending_keys})
        return Probe({}, at_pause=True, then="calls the handler again")
    try:
        outcome = await runtime.advance(
            map_yields(handler, _stop_at_new_code),
            arguments,
            request_state=request_state,
            client_capabilities=client_capabilities,
            bind=bind,
        )
    except _ReachedNewCode as reached:
        return Probe({}, at_pause=True, then=describe_yield(reached.yielded))
    if isinstance(outcome, Complete):
        return Probe({}, at_pause=True, then=f"finishes with {outcome.value!r}")
    if not outcome.input_requests:  # pragma: no cover - the guard stops before a new pause
        return Probe({}, at_pause=True, then="pauses")
    return Probe(dict(outcome.input_requests))


def wire_of(requests: Mapping[str, Request]) -> dict[str, Any]:
    """`{key: request.to_wire()}`."""
    return {key: request.to_wire() for key, request in requests.items()}


def describe_yield(yielded: Any) -> str:
    """A short account of what a handler yielded."""
    if isinstance(yielded, REQUEST_TYPES):
        return f"asks {yielded.to_wire()}"
    if isinstance(yielded, Mapping):
        return f"asks {{{', '.join(f'{k!r}: {_wire(v)}' for k, v in yielded.items())}}}"
    if isinstance(yielded, Step):
        return f"runs step {qualified_name(yielded.fn)}"
    if isinstance(yielded, Poll):
        return f"polls {qualified_name(yielded.fn)}"
    if isinstance(yielded, Pause):
        return "pauses"
    if isinstance(yielded, Done):
        return f"finishes with {yielded.value!r}"
    return f"yields {yielded!r}"


def _wire(value: Any) -> Any:
    return value.to_wire() if isinstance(value, REQUEST_TYPES) else value
