"""The core's costs, through `Runtime.advance` and `Runtime.run_live` under ``trio.run``, the
way a server calls them: a modern round with a 3-answer journal (the round that completes and
the round that checkpoints), a modern round with a long journal, a live round with an in-memory
``ask`` (and with one that waits once), and the size of the token."""

from __future__ import annotations

import secrets
from collections.abc import Awaitable, Callable, Collection, Mapping
from typing import Any

import attrs
import trio

from mrtr_trio import Complete, ElicitRequest, InputRequired, Runtime

from . import flows
from ._timing import Stats, cpu_us

__all__ = [
    "LiveCalls",
    "checked_live_calls",
    "drive",
    "live_calls",
    "live_round",
    "long_journal",
    "long_round",
    "modern_rounds",
    "round_call",
    "scaled",
    "survey_runtime",
    "token_sizes",
    "trip_rounds",
]

TRIP_ARGUMENTS = {"traveller": flows.TRAVELLER}


def responses_to(outcome: InputRequired) -> dict[str, Any]:
    """The client's answers to every request of *outcome*."""
    return {key: flows.answer_json(request) for key, request in outcome.input_requests.items()}


async def drive(
    runtime: Runtime,
    handler: Callable[..., Any],
    arguments: Mapping[str, Any],
    keep: Collection[int],
) -> dict[int, InputRequired]:
    """Run a flow round by round as a 2026-07-28 client does; return the outcome of the round
    whose token records *k* answers, for each *k* in *keep*."""
    kept: dict[int, InputRequired] = {}
    outcome = await runtime.advance(handler, arguments)
    answered = 0
    while isinstance(outcome, InputRequired) and answered <= max(keep):
        if answered in keep:
            kept[answered] = outcome
        outcome = await runtime.advance(
            handler,
            arguments,
            input_responses=responses_to(outcome),
            request_state=outcome.request_state,
        )
        answered += 1
    missing = set(keep) - set(kept)
    if missing:
        raise RuntimeError(f"{handler.__name__} finished before {sorted(missing)} answers")
    return kept


def round_call(
    runtime: Runtime, handler: Callable[..., Any], arguments: Mapping[str, Any], at: InputRequired
) -> Callable[[], Any]:
    """One retry of the round *at*: the client's answers and the echoed state."""
    responses = responses_to(at)

    async def call() -> Complete | InputRequired:
        return await runtime.advance(
            handler, arguments, input_responses=responses, request_state=at.request_state
        )

    return call


async def trip_rounds() -> dict[str, Callable[[], Any]]:
    """The 4-question trip's retries: the round that replays 3 answers and completes, and the
    round that replays 2, takes the 3rd and checkpoints (a token of 3 answers); each checked
    once."""
    runtime = Runtime([secrets.token_bytes(32)])
    states = await drive(runtime, flows.plan_trip, TRIP_ARGUMENTS, keep=(2, 3))
    complete = round_call(runtime, flows.plan_trip, TRIP_ARGUMENTS, states[3])
    checkpoint = round_call(runtime, flows.plan_trip, TRIP_ARGUMENTS, states[2])
    outcome = await complete()
    assert isinstance(outcome, Complete), outcome
    assert outcome.value.startswith("Booked Lisbon"), outcome
    assert isinstance(await checkpoint(), InputRequired)
    return {"complete": complete, "checkpoint": checkpoint}


async def modern_rounds(budget: float) -> dict[str, Stats]:
    """CPU per call of each of `trip_rounds`."""
    return {name: await cpu_us(call, budget=budget) for name, call in (await trip_rounds()).items()}


def survey_runtime(questions: int) -> Runtime:
    """A runtime whose knobs allow a survey of *questions* rounds."""
    return Runtime(
        [secrets.token_bytes(32)],
        max_rounds=questions + 1,
        max_state_bytes=64 * questions + 4096,
    )


async def long_round(answers: int) -> Callable[[], Any]:
    """The survey's round that replays *answers* recorded answers, takes one more and
    completes; checked once."""
    runtime = survey_runtime(answers + 1)
    arguments = {"n": answers + 1}
    at = (await drive(runtime, flows.survey, arguments, keep=(answers,)))[answers]
    call = round_call(runtime, flows.survey, arguments, at)
    outcome = await call()
    assert isinstance(outcome, Complete) and outcome.value == answers + 1, outcome
    return call


async def long_journal(answers: int, budget: float) -> Stats:
    """CPU per call of `long_round`."""
    return await cpu_us(await long_round(answers), budget=budget, min_batches=10)


@attrs.frozen
class LiveCalls:
    """Whole live flows through `Runtime.run_live`, and the ``ask`` they use."""

    ask: Callable[[str, Any], Awaitable[Any]]  # answers at once
    trip: Callable[[], Awaitable[Any]]  # the 4-question trip
    trip_waiting: Callable[[], Awaitable[Any]]  # the trip, with an ask that waits once
    survey: Callable[[], Awaitable[Any]]  # a 100-question survey


def live_calls() -> LiveCalls:
    """`Runtime.run_live` with an ``ask`` that answers at once: the 4-question trip and a
    100-question survey; and the trip with an ``ask`` that waits once (a trio checkpoint)
    before answering, which is what arms the round's deadline (an ask that never waits cannot
    be timed out, so it pays for none)."""
    runtime = survey_runtime(100)
    answers: dict[str, Any] = {}

    def answer(request: object) -> Any:
        # Answers are looked up by message, so the benchmark's own cost stays out of the round.
        assert isinstance(request, ElicitRequest)
        message = request.message
        if message not in answers:
            answers[message] = flows.answer_json(request)
        return answers[message]

    async def ask(key: str, request: object) -> Any:
        return answer(request)

    async def ask_waiting(key: str, request: object) -> Any:
        await trio.lowlevel.checkpoint()
        return answer(request)

    async def trip() -> Any:
        return await runtime.run_live(flows.plan_trip, TRIP_ARGUMENTS, ask)

    async def trip_waiting() -> Any:
        return await runtime.run_live(flows.plan_trip, TRIP_ARGUMENTS, ask_waiting)

    async def survey() -> Any:
        return await runtime.run_live(flows.survey, {"n": 100}, ask)

    return LiveCalls(ask, trip, trip_waiting, survey)


async def checked_live_calls() -> LiveCalls:
    """`live_calls`, each flow run once and its result checked."""
    calls = live_calls()
    assert (await calls.trip()).startswith("Booked Lisbon")
    assert (await calls.trip_waiting()).startswith("Booked Lisbon")
    assert await calls.survey() == 100
    return calls


async def live_round(budget: float) -> dict[str, Stats]:
    """CPU per round of `live_calls`: the trip's CPU divided by its 4 rounds (setup included),
    the survey's by its 100."""
    calls = await checked_live_calls()
    per_flow = await cpu_us(calls.trip, budget=budget)
    per_waiting = await cpu_us(calls.trip_waiting, budget=budget)
    per_survey = await cpu_us(calls.survey, budget=budget)
    return {
        "trip": scaled(per_flow, 1 / 4),
        "trip_waiting": scaled(per_waiting, 1 / 4),
        "survey": scaled(per_survey, 1 / 100),
    }


def scaled(stats: Stats, factor: float) -> Stats:
    """*stats* with every figure times *factor* (per flow to per round)."""
    return Stats(stats.median * factor, stats.p10 * factor, stats.p90 * factor, stats.samples)


async def token_sizes() -> dict[str, int]:
    """Characters of the trip's ``requestState`` after 0, 1 and 2 answers."""
    runtime = Runtime([secrets.token_bytes(32)])
    states = await drive(runtime, flows.trip, TRIP_ARGUMENTS, keep=(0, 1, 2))
    return {f"answers_{k}": len(states[k].request_state or "") for k in (0, 1, 2)}
