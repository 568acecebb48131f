"""Drive a handler the way real clients do, in either era, with a scripted ``answer``.

:func:`run_modern` behaves like a 2026-07-28 client (the official SDKs' input-required loop):
a new call per round, only this round's answers, the ``requestState`` echoed byte for byte,
at most 10 retries. :func:`run_live` runs the same flow live, as a legacy session would.
Both send answers as JSON, as a client on the wire does.
"""

from __future__ import annotations

import inspect
import secrets
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, TypeAlias

from .._errors import RoundLimitExceeded
from .._replay import Complete
from .._runtime import Runtime
from .._values import CreateMessageResult, ElicitResult, ListRootsResult, Request

__all__ = ["AnswerFunction", "CLIENT_MAX_ROUNDS", "run_live", "run_modern"]

#: ``answer(key, request)``: sync or async, returns the answer object (or its JSON).
AnswerFunction: TypeAlias = Callable[[str, Request], Any]

#: The official clients stop after this many retries (DEFAULT_INPUT_REQUIRED_MAX_ROUNDS).
CLIENT_MAX_ROUNDS = 10


def fresh_runtime() -> Runtime:
    """A runtime with a fresh random key and strict replay."""
    return Runtime([secrets.token_bytes(32)], replay="strict")


async def answer_json(answer: AnswerFunction, key: str, request: Request) -> Any:
    """Call *answer* (awaiting it if needed) and return the answer as client JSON."""
    value = answer(key, request)
    if inspect.isawaitable(value):
        value = await value
    if isinstance(value, ElicitResult | CreateMessageResult | ListRootsResult):
        return value.to_wire()
    return value


async def run_modern(
    handler: Callable[..., Any],
    arguments: Mapping[str, Any],
    answer: AnswerFunction,
    *,
    runtime: Runtime | None = None,
    client_capabilities: Mapping[str, Any] | None = None,
    on_round: Callable[[int, Any], Awaitable[None] | None] | None = None,
) -> Any:
    """Run *handler* to completion as a 2026-07-28 client would, and return its value.

    Each round is a new ``advance`` call carrying only the previous round's answers and the
    ``requestState`` exactly as received. Raises :class:`~mrtr_trio.RoundLimitExceeded` when
    the flow still needs input after the client's 10 retries. With ``runtime=None`` a runtime
    with a random key and ``replay="strict"`` is used. *on_round(n, outcome)* (optional) sees
    each round's outcome.
    """
    runtime = runtime or fresh_runtime()
    responses: dict[str, Any] | None = None
    state: str | None = None
    for retry in range(CLIENT_MAX_ROUNDS + 1):
        outcome = await runtime.advance(
            handler,
            arguments,
            input_responses=responses,
            request_state=state,
            client_capabilities=client_capabilities,
        )
        if on_round is not None:
            seen = on_round(retry, outcome)
            if inspect.isawaitable(seen):
                await seen
        if isinstance(outcome, Complete):
            return outcome.value
        if retry == CLIENT_MAX_ROUNDS:
            break
        responses = {
            key: await answer_json(answer, key, request)
            for key, request in outcome.input_requests.items()
        }
        state = outcome.request_state
    raise RoundLimitExceeded(
        f"the client gave up: the flow still required input after {CLIENT_MAX_ROUNDS} retries"
    )


async def run_live(
    handler: Callable[..., Any],
    arguments: Mapping[str, Any],
    answer: AnswerFunction,
    *,
    runtime: Runtime | None = None,
    client_capabilities: Mapping[str, Any] | None = None,
) -> Any:
    """Run *handler* live, as on a legacy session, answering with *answer*; return its value."""
    runtime = runtime or fresh_runtime()

    async def ask(key: str, request: Request) -> Any:
        return await answer_json(answer, key, request)

    return await runtime.run_live(handler, arguments, ask, client_capabilities=client_capabilities)
