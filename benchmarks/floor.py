"""The floor under a modern round: what the work no runtime can skip costs in Python.

    python -m benchmarks.floor

Times, for the 4-question trip's completing round (3 answers replayed, the 4th taken), only
the irreducible steps written as bare calls, with none of the runtime's checks or bookkeeping:
hash the binding, decode and verify the token (base64url, BLAKE3 tag, two CBOR decodes), build
the three recorded answers, create the handler's generator and step it through its five
yields. No fingerprints are compared, no answer is validated, no state machine runs. What the
runtime costs on top of this is the price of those guarantees (see docs/benchmarks.md).
"""

from __future__ import annotations

import binascii
import time
from typing import Any

import blake3
import cbor2
import trio

from mrtr_trio import Context
from mrtr_trio._values import ElicitResult, trusted_elicit_result

from . import flows

__all__ = ["floor_us"]

_KEY = b"k" * 32
_BODY = cbor2.dumps(
    [
        3,
        1_800_000_000,
        600,
        cbor2.dumps(
            [
                [b"\0\1\2\3", 0, {"city": "Lisbon"}],
                [b"\0\1\2\3", 0, {"start": "2026-09-01", "nights": 3}],
                [b"\0\1\2\3", 0, {"adults": 2}],
            ]
        ),
        {"input-3": [b"\0\1\2\3", None]},
        None,
        b"flow-id!",
    ]
)
_TOKEN = binascii.b2a_base64(b"\2abcdxy" + _BODY + b"t" * 16, newline=False).decode()
_URLSAFE = str.maketrans("+/", "-_")


async def _round() -> None:
    binding = blake3.blake3(
        cbor2.dumps(["plan_trip", {"traveller": "Ada"}, b""], canonical=True)
    ).digest()
    token = _TOKEN.translate(_URLSAFE).rstrip("=")
    raw = binascii.a2b_base64(token.translate(str.maketrans("-_", "+/")) + "=" * (-len(token) % 4))
    blake3.blake3(binding + raw[:-16], key=_KEY).digest(16)
    body = cbor2.loads(raw[7:-16])
    answers = [trusted_elicit_result("accept", entry[2]) for entry in cbor2.loads(body[3])]
    handler: Any = flows.plan_trip(Context("modern", None), traveller="Ada")
    await handler.asend(None)
    for answer in answers:
        await handler.asend(answer)
    await handler.asend(ElicitResult("accept", {"confirm": True}))
    await handler.aclose()


async def floor_us(rounds: int = 5000) -> float:
    """CPU microseconds per bare round, the best of five batches."""
    best = float("inf")
    for _ in range(5):
        started = time.process_time_ns()
        for _ in range(rounds):
            await _round()
        best = min(best, (time.process_time_ns() - started) / rounds / 1000)
    return best


def main() -> None:
    print(f"the floor under a 3-answer modern round: {trio.run(floor_us):.1f} µs of CPU")


if __name__ == "__main__":
    main()
