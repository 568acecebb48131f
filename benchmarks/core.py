"""The core's costs, through `Runtime.advance` and `Runtime.run_live` under ``trio.run``, the
way a server calls them: a modern round with a 3-answer journal (the round that completes and
the round that checkpoints), a modern round with a long journal, a live round with an in-memory
``ask`` (and with one that waits once), and the size of the token."""

from __future__ import annotations

import secrets
from collections.abc import Callable, Collection, Mapping
from typing import Any

import trio

from mrtr_trio import Complete, ElicitRequest, InputRequired, Runtime

from . import flows
from ._timing import Stats, cpu_us

__all__ = [
    "drive",
    "live_round",
    "long_journal",
    "modern_rounds",
    "round_call",
    "survey_runtime",
    "token_sizes",
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


async def modern_rounds(budget: float) -> dict[str, Stats]:
    """The 4-question trip: the round that replays 3 answers and completes, and the round that
    replays 2, takes the 3rd and checkpoints (a token of 3 answers)."""
    runtime = Runtime([secrets.token_bytes(32)])
    states = await drive(runtime, flows.plan_trip, TRIP_ARGUMENTS, keep=(2, 3))
    complete = round_call(runtime, flows.plan_trip, TRIP_ARGUMENTS, states[3])
    checkpoint = round_call(runtime, flows.plan_trip, TRIP_ARGUMENTS, states[2])
    outcome = await complete()
    assert isinstance(outcome, Complete), outcome
    assert outcome.value.startswith("Booked Lisbon"), outcome
    assert isinstance(await checkpoint(), InputRequired)
    return {
        "complete": await cpu_us(complete, budget=budget),
        "checkpoint": await cpu_us(checkpoint, budget=budget),
    }


def survey_runtime(questions: int) -> Runtime:
    """A runtime whose knobs allow a survey of *questions* rounds."""
    return Runtime(
        [secrets.token_bytes(32)],
        max_rounds=questions + 1,
        max_state_bytes=64 * questions + 4096,
    )


async def long_journal(answers: int, budget: float) -> Stats:
    """The round that replays *answers* recorded answers, takes one more and completes."""
    runtime = survey_runtime(answers + 1)
    arguments = {"n": answers + 1}
    at = (await drive(runtime, flows.survey, arguments, keep=(answers,)))[answers]
    call = round_call(runtime, flows.survey, arguments, at)
    outcome = await call()
    assert isinstance(outcome, Complete) and outcome.value == answers + 1, outcome
    return await cpu_us(call, budget=budget, min_batches=10)


async def live_round(budget: float) -> dict[str, Stats]:
    """`Runtime.run_live` with an ``ask`` that answers at once: the 4-question trip (its CPU
    divided by 4 rounds, setup included) and a 100-question survey (per round); and the trip
    with an ``ask`` that waits once (a trio checkpoint) before answering, which is what arms
    the round's deadline (an ask that never waits cannot be timed out, so it pays for none)."""
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

    assert (await trip()).startswith("Booked Lisbon")
    assert (await trip_waiting()).startswith("Booked Lisbon")
    assert await survey() == 100
    per_flow = await cpu_us(trip, budget=budget)
    per_waiting = await cpu_us(trip_waiting, budget=budget)
    per_survey = await cpu_us(survey, budget=budget)
    return {
        "trip": _scaled(per_flow, 1 / 4),
        "trip_waiting": _scaled(per_waiting, 1 / 4),
        "survey": _scaled(per_survey, 1 / 100),
    }


def _scaled(stats: Stats, factor: float) -> Stats:
    return Stats(stats.median * factor, stats.p10 * factor, stats.p90 * factor, stats.samples)


async def token_sizes() -> dict[str, int]:
    """Characters of the trip's ``requestState`` after 0, 1 and 2 answers."""
    runtime = Runtime([secrets.token_bytes(32)])
    states = await drive(runtime, flows.trip, TRIP_ARGUMENTS, keep=(0, 1, 2))
    return {f"answers_{k}": len(states[k].request_state or "") for k in (0, 1, 2)}
