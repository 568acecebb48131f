"""The floors: what the work no runtime can skip costs in Python, for the rounds the targets
compare with them.

    python -m benchmarks.floor

- `modern_floor`: a modern round's irreducible steps written as bare calls, with none of the
  runtime's checks or bookkeeping: hash the binding, decode and verify the token (base64url,
  BLAKE3 tag, two CBOR decodes), build the recorded answers, create the handler's generator and
  step it through its yields. No fingerprints are compared, no answer is validated, no state
  machine runs. `trip_floor` is the 4-question trip's completing round (3 answers replayed, the
  4th taken); `survey_floor(n)` the survey's round that replays *n* answers and completes.
  (The runtime remembers the binding digests of small plain arguments, so a real round that
  binds the same arguments again skips the hash the floor pays.)
- `live_floor`: a live flow's bare trip through the same handler: create its generator, and for
  each request it yields await the same ``ask`` the live benchmark uses and ``asend`` the answer
  (built without a check), then close it. No answer is parsed or validated, no replay machine
  runs, no deadline is armed. `bare_trip` is the same trip through a generator that does
  nothing (a reference figure: the handler's own work left out too).

What the runtime costs on top of a floor is the price of its guarantees (see
docs/benchmarks.md). Prints each floor beside the real round, measured side by side
([benchmarks._timing.paired_cpu_us][]).
"""

from __future__ import annotations

import binascii
from collections.abc import AsyncGenerator, Awaitable, Callable, Mapping, Sequence
from typing import Any

import blake3
import cbor2
import trio

from mrtr_trio import Context
from mrtr_trio._values import ElicitResult, trusted_elicit_result

from . import core, flows
from ._timing import Paired, cpu_us, paired_cpu_us

__all__ = [
    "bare_trip",
    "floor_us",
    "live_floor",
    "modern_floor",
    "survey_floor",
    "trip_floor",
]

Call = Callable[[], Awaitable[Any]]

_KEY = b"k" * 32
_FINGERPRINT = b"\0\1\2\3"
_FROM_URLSAFE = bytes.maketrans(b"-_", b"+/")
_PADDING = (b"", b"", b"==", b"=")


def _token(recorded: Sequence[Mapping[str, Any]]) -> str:
    """A token shaped as the runtime's: header, a body whose journal is a nested CBOR item,
    a 16-byte tag (not a valid one: the floor computes the tag and does not compare it)."""
    body = cbor2.dumps(
        [
            len(recorded),
            1_800_000_000,
            600,
            cbor2.dumps([[_FINGERPRINT, 0, dict(content)] for content in recorded]),
            {f"input-{len(recorded)}": [_FINGERPRINT, None]},
            None,
            b"flow-id!",
        ]
    )
    return (
        binascii.b2a_base64(b"\2abcdxy" + body + b"t" * 16, newline=False)
        .translate(bytes.maketrans(b"+/", b"-_"), b"=")
        .decode()
    )


def modern_floor(
    handler: Callable[..., AsyncGenerator[Any, Any]],
    name: str,
    arguments: Mapping[str, Any],
    recorded: Sequence[Mapping[str, Any]],
    last: Mapping[str, Any],
) -> Call:
    """The bare round of *handler* that replays *recorded* answers (their content), takes
    *last* and completes; the round returns what the handler yielded last."""
    token = _token(recorded)
    encoded = token.encode().translate(_FROM_URLSAFE) + _PADDING[len(token) % 4]

    async def bare_round() -> Any:
        binding = blake3.blake3(cbor2.dumps([name, dict(arguments), b""], canonical=True)).digest()
        raw = binascii.a2b_base64(encoded, strict_mode=True)
        blake3.blake3(binding + raw[:-16], key=_KEY).digest(16)
        body = cbor2.loads(raw[7:-16])
        answers = [trusted_elicit_result("accept", entry[2]) for entry in cbor2.loads(body[3])]
        generator: Any = handler(Context("modern", None), **arguments)
        await generator.asend(None)
        for answer in answers:
            await generator.asend(answer)
        finished = await generator.asend(ElicitResult("accept", last))
        await generator.aclose()
        return finished

    return bare_round


def trip_floor() -> Call:
    """The floor under the 4-question trip's completing round (3 answers replayed)."""
    recorded: list[dict[str, Any]] = [
        {"city": "Lisbon"},
        {"start": "2026-09-01", "nights": 3},
        {"adults": 2},
    ]
    return modern_floor(
        flows.plan_trip, "plan_trip", core.TRIP_ARGUMENTS, recorded, {"confirm": True}
    )


def survey_floor(answers: int) -> Call:
    """The floor under the survey's round that replays *answers* answers and completes."""
    recorded = [{"v": 1}] * answers
    return modern_floor(flows.survey, "survey", {"n": answers + 1}, recorded, {"v": 1})


def live_floor(ask: Callable[[str, Any], Awaitable[Any]]) -> Call:
    """The bare live trip: the 4-question trip's generator, each request it yields answered by
    *ask* (the live benchmark's) and sent back as the answer the handler reads, unchecked; the
    trip returns what the handler yielded last."""

    async def bare_trip() -> Any:
        generator: Any = flows.plan_trip(Context("legacy", None), **core.TRIP_ARGUMENTS)
        request = await generator.asend(None)
        for _ in range(4):
            reply = await ask("input", request)
            request = await generator.asend(
                trusted_elicit_result(reply["action"], reply["content"])
            )
        await generator.aclose()
        return request

    return bare_trip


async def _idle_generator() -> AsyncGenerator[str, Any]:
    while True:
        yield "request"


async def _answer(key: str, request: Any) -> str:
    return "answer"


async def bare_trip() -> None:
    """Four rounds of a bare async generator trip: yield a request, await an answer function,
    ``asend`` it, with no checks and no work in the handler."""
    generator = _idle_generator()
    request = await generator.asend(None)
    for _ in range(4):
        request = await generator.asend(await _answer("input", request))
    await generator.aclose()


async def floor_us(budget: float = 1.0) -> float:
    """CPU microseconds per bare 3-answer round: the median of `cpu_us`'s batches over *budget*
    seconds, measured as the core's rounds are."""
    return (await cpu_us(trip_floor(), budget=budget)).median


async def _compared(budget: float) -> dict[str, Paired]:
    """Each real round and its floor, measured side by side."""
    rounds = await core.trip_rounds()
    long_round = await core.long_round(1000)
    live = await core.checked_live_calls()
    return {
        "3-answer modern round": await paired_cpu_us(
            rounds["complete"], trip_floor(), budget=budget
        ),
        "1000-answer modern round": await paired_cpu_us(
            long_round, survey_floor(1000), budget=budget
        ),
        "live trip (4 rounds)": await paired_cpu_us(live.trip, live_floor(live.ask), budget=budget),
    }


def main() -> None:
    for name, pair in trio.run(_compared, 1.0).items():
        print(
            f"{name}: {pair.numerator.median:.1f} µs of CPU (median), its floor "
            f"{pair.denominator.median:.1f} µs, ratio {pair.ratio.median:.2f} "
            f"({pair.ratio.p10:.2f}-{pair.ratio.p90:.2f})"
        )


if __name__ == "__main__":
    main()
