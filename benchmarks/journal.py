"""Round cost against journal length: the survey flow checkpointed after *n* answers, and the
next round (replay *n*, take one more, checkpoint *n* + 1), for

- ``mrtr_trio core``: `Runtime.advance` alone;
- ``mrtr_trio App``, ``sdk-resolve``, ``sdk-handbuilt``: one ``tools/call`` retry through the
  official ``mcp.Client`` connected in-process to each server (the SDK's direct dispatcher: no
  transport, no JSON framing), so the client's and the SDK's share is the same for all three.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import Any

import mcp_types as types
from mcp import Client

from mrtr_trio import InputRequired

from . import client, core, flows
from ._timing import Stats, cpu_us
from .servers import IMPLEMENTATIONS

__all__ = ["sweep"]

Round = Callable[[], Awaitable[Any]]


async def _core_rounds(lengths: Sequence[int]) -> dict[int, Round]:
    questions = max(lengths) + 2
    runtime = core.survey_runtime(questions)
    arguments = {"n": questions}
    states = await core.drive(runtime, flows.survey, arguments, keep=lengths)
    rounds: dict[int, Round] = {}
    for n, at in states.items():
        call = core.round_call(runtime, flows.survey, arguments, at)
        outcome = await call()
        assert isinstance(outcome, InputRequired), outcome  # checked once, outside the timing
        rounds[n] = call
    return rounds


async def _server_line(name: str, lengths: Sequence[int], budget: float) -> dict[int, Stats]:
    questions = max(lengths) + 2
    module = IMPLEMENTATIONS[name]
    arguments = {} if name == "sdk-resolve" else {"n": questions}
    target = module.target(questions)
    async with Client(target, mode="2026-07-28", elicitation_callback=client.answer) as session:
        states = await client.rounds(session, "survey", arguments, keep=lengths)
        line: dict[int, Stats] = {}
        for n in lengths:

            async def call(at: types.InputRequiredResult = states[n]) -> None:
                result = await client.retry(session, "survey", arguments, at)
                assert isinstance(result, types.InputRequiredResult)

            line[n] = await cpu_us(call, budget=budget)
        return line


async def sweep(
    lengths: Sequence[int], resolve_lengths: Sequence[int], budget: float
) -> dict[str, dict[int, Stats]]:
    """CPU per round (us) for each line at each journal length. The SDK's resolver chain
    re-runs every resolver each round (about 0.1 ms each), so it runs to *resolve_lengths*."""
    rounds = await _core_rounds(lengths)
    lines: dict[str, dict[int, Stats]] = {
        "mrtr_trio core": {n: await cpu_us(call, budget=budget) for n, call in rounds.items()}
    }
    lines["mrtr_trio App"] = await _server_line("mrtr_trio", lengths, budget)
    lines["sdk-resolve"] = await _server_line("sdk-resolve", resolve_lengths, budget)
    lines["sdk-handbuilt"] = await _server_line("sdk-handbuilt", lengths, budget)
    return lines


def slope(line: dict[int, Stats]) -> float:
    """Least-squares cost per journal entry (us) from a line's medians."""
    xs = list(line)
    ys = [line[n].median for n in xs]
    mean_x, mean_y = sum(xs) / len(xs), sum(ys) / len(ys)
    spread = sum((x - mean_x) ** 2 for x in xs)
    return sum((x - mean_x) * (y - mean_y) for x, y in zip(xs, ys, strict=True)) / spread
