"""One handler, two eras, one behaviour: [assert_eras_agree][mrtr_trio.testing.assert_eras_agree].

The live driver is an optimisation of the replayed one (like Temporal's sticky cache or Durable
Functions' extended sessions): a handler must ask the same things, round by round, and return the
same value whether it is kept alive or replayed from its journal. This module runs both and
compares them, and says precisely where they part.
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, NoReturn

import anyio.lowlevel
import attrs

from .._errors import NondeterminismError
from .._flow import Step, is_generator_handler
from .._journal import qualified_name
from .._modern import InputRequired
from .._runtime import Runtime
from .._values import Request
from ._answers import restart_answer
from ._probe import map_yields, wire_of
from ._runners import (
    AnswerFunction,
    ReplayCheckError,
    answer_as_json,
    fresh_runtime,
    run_modern,
    wire_text,
)

__all__ = ["assert_eras_agree"]


@attrs.frozen
class _Outcome:
    value: Any = None
    error: Exception | None = None


async def _capture(run: Awaitable[Any]) -> _Outcome:
    try:
        return _Outcome(await run)
    except Exception as error:
        return _Outcome(error=error)


async def assert_eras_agree(
    handler: Callable[..., Any],
    arguments: Mapping[str, Any],
    answer: AnswerFunction,
    *,
    runtime: Runtime | None = None,
    client_capabilities: Mapping[str, Any] | None = None,
    replay_check: bool = True,
    same_steps: bool = True,
) -> Any:
    """Run the flow modern (strict replay, as [run_modern][mrtr_trio.testing.run_modern] does) and
    live (as [run_live][mrtr_trio.testing.run_live] does) with the same *answer*, compare them, and
    return the value.

    Compared, in this order: the requests asked, round by round (each round's
    `{key: request.to_wire()}`; a modern round that only paused has no live counterpart and is
    skipped), then whether either era raised, then the values. The first difference raises an
    `AssertionError` naming the round and the live and the modern request in wire form, or
    both values. When both eras raise the same type of exception, the live one is re-raised:
    the handler failed, but the eras agree.

    Step results are inputs from the outside world, like answers, so both eras get the same
    ones: the modern run calls each `step` function (once per flow, as always) and the live
    run is handed the value the modern run got for the same step, in order, instead of calling
    it again (pass `same_steps=False` to call it in both). A step that reads the clock or
    mints an id therefore does not make the eras differ, but a handler that reads the clock
    outside `step()` does.

    *runtime* is used as it is for the live run; the modern run uses the same keys and knobs with
    `replay="strict"`. `runtime=None` makes one with a random key. With `replay_check=True` (the
    default) every modern round's token is also replayed in a fresh runtime (see
    [run_modern][mrtr_trio.testing.run_modern]), which catches a handler that is not deterministic
    at the round where it first diverges. *answer* is called once per request in each era; an answer
    with a `restart()` method (an [AnswerScript][mrtr_trio.testing.AnswerScript]) is restarted
    before each run.
    """
    runtime = runtime or fresh_runtime()
    strict = runtime if runtime.replay == "strict" else attrs.evolve(runtime, replay="strict")
    name = qualified_name(handler)
    steps: list[Any] = []
    modern_handler, live_handler = handler, handler
    if same_steps and is_generator_handler(handler):
        modern_handler = _steps_through(handler, steps, record=True)
        live_handler = _steps_through(handler, steps, record=False)

    # Modern first: it asks in a fixed order, so answers drawn lazily (hypothesis) are drawn
    # in the same order on every run of an example; the live run then finds them decided.
    modern_rounds: list[dict[str, Any]] = []

    def on_round(_: int, outcome: Any) -> None:
        if isinstance(outcome, InputRequired):
            modern_rounds.append(wire_of(outcome.input_requests))

    modern = await _capture(
        run_modern(
            modern_handler,
            arguments,
            answer,
            runtime=strict,
            client_capabilities=client_capabilities,
            on_round=on_round,
            replay_check=replay_check,
        )
    )

    # Live: the driver asks a round's requests concurrently and the next round only after the
    # last answer. Every ask of a batch enters before any of them gets past its first
    # checkpoint, so an ask that enters while none is in flight starts a new round.
    live_rounds: list[dict[str, Any]] = []
    in_flight = 0

    async def ask(key: str, request: Request) -> Any:
        nonlocal in_flight
        if not in_flight:
            live_rounds.append({})
        live_rounds[-1][key] = request.to_wire()
        in_flight += 1
        try:
            await anyio.lowlevel.checkpoint()
            return await answer_as_json(answer, key, request)
        finally:
            in_flight -= 1

    restart_answer(answer)
    live = await _capture(
        runtime.run_live(live_handler, arguments, ask, client_capabilities=client_capabilities)
    )

    _compare_requests(name, live_rounds, modern_rounds, modern.error)
    _compare_ends(name, live, modern)
    return live.value


def _steps_through(
    handler: Callable[..., Any], values: list[Any], *, record: bool
) -> Callable[..., Any]:
    """*handler*, its steps' values recorded into *values* (`record=True`) or taken from
    them in order (`record=False`; a step beyond them runs for real). The step functions
    keep their names, so fingerprints and the handler's identity do not change."""
    taken = 0

    def through(fn: Callable[..., Any]) -> Callable[..., Any]:
        async def call(*args: Any) -> Any:
            nonlocal taken
            if not record and taken < len(values):
                taken += 1
                return values[taken - 1]
            value = fn(*args)
            if inspect.isawaitable(value):
                value = await value
            if record:
                values.append(value)
            return value

        call.__qualname__ = getattr(fn, "__qualname__", None) or type(fn).__qualname__
        return call

    def reroute(ctx: Any, yielded: Any) -> Any:
        return Step(through(yielded.fn), yielded.args) if isinstance(yielded, Step) else yielded

    return map_yields(handler, reroute)


def _compare_requests(
    name: str,
    live_rounds: list[dict[str, Any]],
    modern_rounds: list[dict[str, Any]],
    modern_error: Exception | None,
) -> None:
    modern_asks = [asked for asked in modern_rounds if asked]
    for index, (live, modern) in enumerate(zip(live_rounds, modern_asks, strict=False)):
        if live != modern:
            _fail(
                f"{name}: the eras asked different requests in round {index + 1}: live asked "
                f"{wire_text(live)}; modern asked {wire_text(modern)}",
                modern_error,
            )

    if isinstance(modern_error, ReplayCheckError | NondeterminismError):
        # A replay diverged although the rounds so far agree: name the round the replay
        # stumbled on, what each era asked there, and what the replay asked instead.
        round = modern_error.round
        asked = modern_rounds[round - 1] if 0 < round <= len(modern_rounds) else None
        live_index = sum(1 for r in modern_rounds[:round] if r) - 1
        in_live = live_rounds[live_index] if asked and 0 <= live_index < len(live_rounds) else None
        _fail(
            f"{name} is not deterministic: replaying modern round {round} asked "
            f"{wire_text(modern_error.current)} instead; that round, live asked "
            f"{wire_text(in_live)} and modern asked {wire_text(asked)}",
            modern_error,
        )

    if len(live_rounds) != len(modern_asks):
        index = min(len(live_rounds), len(modern_asks))
        live_extra = live_rounds[index] if index < len(live_rounds) else None
        modern_extra = modern_asks[index] if index < len(modern_asks) else None
        _fail(
            f"{name}: the eras asked different requests in round {index + 1}: live asked "
            f"{wire_text(live_extra)}; modern asked {wire_text(modern_extra)}",
            modern_error,
        )


def _compare_ends(name: str, live: _Outcome, modern: _Outcome) -> None:
    if live.error is not None and modern.error is not None:
        if type(live.error) is type(modern.error):
            live.error.add_note(f"(both eras raised {type(live.error).__name__})")
            raise live.error
        _fail(
            f"{name}: the eras failed differently: live raised {_describe(live.error)}; "
            f"modern raised {_describe(modern.error)}",
            live.error,
        )
    if live.error is not None:
        _fail(
            f"{name}: live raised {_describe(live.error)}, but modern returned {modern.value!r}",
            live.error,
        )
    if modern.error is not None:
        _fail(
            f"{name}: modern raised {_describe(modern.error)}, but live returned {live.value!r}",
            modern.error,
        )
    if live.value != modern.value:
        _fail(
            f"{name}: the eras returned different values: live {live.value!r}; "
            f"modern {modern.value!r}",
            None,
        )


def _describe(error: BaseException) -> str:
    return f"{type(error).__name__}: {error}"


def _fail(message: str, cause: Exception | None) -> NoReturn:
    raise AssertionError(message) from cause
