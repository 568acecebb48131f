"""Drive a handler the way real clients do, in either era, with a scripted `answer`.

[run_modern][mrtr_trio.testing.run_modern] behaves like a 2026-07-28 client (the official SDKs'
input-required loop): a new call per round, only this round's answers, the `requestState` echoed
byte for byte, at most 10 retries; with `replay_check=True` it also replays every token in a fresh
[Runtime][mrtr_trio.Runtime] and checks that the same requests come back.
[run_live][mrtr_trio.testing.run_live] runs the same flow live, as a legacy session would. Both send
answers as JSON, as a client on the wire does.
"""

from __future__ import annotations

import inspect
import json
import secrets
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, TypeAlias

import attrs

from .._errors import InvalidRequestState, NondeterminismError, RoundLimitExceeded
from .._modern import InputRequired
from .._replay import Complete
from .._runtime import Runtime
from .._values import CreateMessageResult, ElicitResult, ListRootsResult, Request
from ._answers import restart_answer
from ._probe import probe, wire_of

__all__ = [
    "CLIENT_MAX_ROUNDS",
    "AnswerFunction",
    "ReplayCheckError",
    "answer_as_json",
    "fresh_runtime",
    "run_live",
    "run_modern",
    "wire_text",
]

#: `answer(key, request)`: sync or async, returns the answer object (or its JSON).
AnswerFunction: TypeAlias = Callable[[str, Request], Any]

#: The official clients stop after this many retries (DEFAULT_INPUT_REQUIRED_MAX_ROUNDS).
CLIENT_MAX_ROUNDS = 10


class ReplayCheckError(AssertionError):
    """`run_modern(..., replay_check=True)` found a token that does not replay to the
    requests it was minted with.

    `round` is the 1-based round of the flow, `expected` the requests that round asked
    (`{key: wire form}`, empty for a pause), `current` what replaying its token in a fresh
    runtime gave instead (`{key: wire form}`, or what the handler did instead of asking, as
    [NondeterminismError.current][mrtr_trio.NondeterminismError] reports it, or
    `None` when the token did not verify).
    """

    def __init__(self, round: int, expected: Any, current: Any, detail: str) -> None:
        super().__init__(
            f"replay check failed at round {round}: the round asked {wire_text(expected)}, "
            f"but replaying its requestState in a fresh Runtime gave {wire_text(current)}. "
            f"{detail}"
        )
        self.round = round
        self.expected = expected
        self.current = current


def wire_text(value: Any) -> str:
    """*value* (JSON-like) as compact JSON with sorted keys, for messages; `{}` reads as
    "nothing (a pause)" and `None` as "nothing"."""
    if value is None:
        return "nothing"
    if value == {}:
        return "nothing (a pause)"
    return json.dumps(value, sort_keys=True, ensure_ascii=False, default=repr)


def fresh_runtime() -> Runtime:
    """A runtime with a fresh random key and strict replay."""
    return Runtime([secrets.token_bytes(32)], replay="strict")


async def answer_as_json(answer: AnswerFunction, key: str, request: Request) -> Any:
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
    replay_check: bool = False,
) -> Any:
    """Run *handler* to completion as a 2026-07-28 client would, and return its value.

    Each round is a new `advance` call carrying only the previous round's answers and the
    `requestState` exactly as received. Raises [RoundLimitExceeded][mrtr_trio.RoundLimitExceeded]
    when the flow still needs input after the client's 10 retries. With `runtime=None` a runtime
    with a random key and `replay="strict"` is used. *on_round(n, outcome)* (optional) sees each
    round's outcome (`n` counts from 0). An *answer* with a `restart()` method (an
    [AnswerScript][mrtr_trio.testing.AnswerScript]) is restarted first.

    With `replay_check=True`, after every round that needs input the token is replayed at once in a
    fresh runtime with the same keys (and strict replay), with no answers: it must verify and
    re-derive the same requests (same keys, same wire forms), or reach the same pause. Any
    difference raises [ReplayCheckError][mrtr_trio.testing.ReplayCheckError] (an `AssertionError`)
    naming the round and both requests: proof that nothing the next round needs lives in process
    memory, and an early catch for handlers that are not deterministic.
    """
    runtime = runtime or fresh_runtime()
    restart_answer(answer)
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
        if replay_check:
            await check_replay(runtime, handler, arguments, outcome, retry + 1, client_capabilities)
        if retry == CLIENT_MAX_ROUNDS:
            break
        responses = {
            key: await answer_as_json(answer, key, request)
            for key, request in outcome.input_requests.items()
        }
        state = outcome.request_state
    raise RoundLimitExceeded(
        f"the client gave up: the flow still required input after {CLIENT_MAX_ROUNDS} retries"
    )


async def check_replay(
    runtime: Runtime,
    handler: Callable[..., Any],
    arguments: Mapping[str, Any],
    outcome: InputRequired,
    round: int,
    client_capabilities: Mapping[str, Any] | None,
) -> None:
    """Replay *outcome*'s token in a fresh runtime and compare (see
    [run_modern][mrtr_trio.testing.run_modern])."""
    expected = wire_of(outcome.input_requests)
    if outcome.request_state is None:
        raise ReplayCheckError(round, expected, None, "The round carried no requestState.")
    # One more round than the original: the probe is a retry, which counts as one.
    fresh = attrs.evolve(runtime, max_rounds=runtime.max_rounds + 1, replay="strict")
    try:
        found = await probe(
            fresh,
            handler,
            arguments,
            outcome.request_state,
            client_capabilities=client_capabilities,
        )
    except NondeterminismError as error:
        raise ReplayCheckError(round, expected, error.current, str(error)) from error
    except InvalidRequestState as error:
        raise ReplayCheckError(
            round, expected, None, f"The token does not verify there: {error.reason}."
        ) from error
    current = wire_of(found.requests)
    if current != expected:
        raise ReplayCheckError(
            round,
            expected,
            current,
            "The handler is not deterministic: it asks something else when replayed (did it "
            "read the clock, randomness or I/O outside step()?).",
        )


async def run_live(
    handler: Callable[..., Any],
    arguments: Mapping[str, Any],
    answer: AnswerFunction,
    *,
    runtime: Runtime | None = None,
    client_capabilities: Mapping[str, Any] | None = None,
) -> Any:
    """Run *handler* live, as on a legacy session, answering with *answer*; return its value.

    An *answer* with a `restart()` method (an [AnswerScript][mrtr_trio.testing.AnswerScript]) is
    restarted first.
    """
    runtime = runtime or fresh_runtime()
    restart_answer(answer)

    async def ask(key: str, request: Request) -> Any:
        return await answer_as_json(answer, key, request)

    return await runtime.run_live(handler, arguments, ask, client_capabilities=client_capabilities)
