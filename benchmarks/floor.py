"""The floor under a modern round: what the work no runtime can skip costs in Python.

    python -m benchmarks.floor

Times, for the 4-question trip's completing round (3 answers replayed, the 4th taken), only
the irreducible steps written as bare calls, with none of the runtime's checks or bookkeeping:
hash the binding, decode and verify the token (base64url, BLAKE3 tag, two CBOR decodes), build
the three recorded answers, create the handler's generator and step it through its five
yields. No fingerprints are compared, no answer is validated, no state machine runs. What the
runtime costs on top of this is the price of those guarantees (see docs/benchmarks.md). (The
runtime remembers the binding digests of small plain arguments, so a real round that binds the
same arguments again skips the hash the floor pays.)

Prints the floor beside the real round (`Runtime.advance`, as in the core benchmark), both the
median of `cpu_us`'s batches, measured one after the other in the same process.
"""

from __future__ import annotations

import binascii
from typing import Any

import blake3
import cbor2
import trio

from mrtr_trio import Context
from mrtr_trio._values import ElicitResult, trusted_elicit_result

from . import core, flows
from ._timing import cpu_us

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
_TOKEN = (
    binascii.b2a_base64(b"\2abcdxy" + _BODY + b"t" * 16, newline=False)
    .translate(bytes.maketrans(b"+/", b"-_"), b"=")
    .decode()
)
_FROM_URLSAFE = bytes.maketrans(b"-_", b"+/")
_PADDING = (b"", b"", b"==", b"=")


async def _round() -> None:
    binding = blake3.blake3(
        cbor2.dumps(["plan_trip", {"traveller": "Ada"}, b""], canonical=True)
    ).digest()
    raw = binascii.a2b_base64(
        _TOKEN.encode().translate(_FROM_URLSAFE) + _PADDING[len(_TOKEN) % 4], strict_mode=True
    )
    blake3.blake3(binding + raw[:-16], key=_KEY).digest(16)
    body = cbor2.loads(raw[7:-16])
    answers = [trusted_elicit_result("accept", entry[2]) for entry in cbor2.loads(body[3])]
    handler: Any = flows.plan_trip(Context("modern", None), traveller="Ada")
    await handler.asend(None)
    for answer in answers:
        await handler.asend(answer)
    await handler.asend(ElicitResult("accept", {"confirm": True}))
    await handler.aclose()


async def floor_us(budget: float = 1.0) -> float:
    """CPU microseconds per bare round: the median of `cpu_us`'s batches over *budget* seconds,
    measured as the core's rounds are."""
    return (await cpu_us(_round, budget=budget)).median


async def _compared(budget: float) -> tuple[float, float]:
    """The floor and, measured alongside it the same way, the real round it is the floor of."""
    floor = await floor_us(budget)
    real = (await core.modern_rounds(budget))["complete"].median
    return floor, real


def main() -> None:
    floor, real = trio.run(_compared, 1.0)
    print(f"the floor under a 3-answer modern round: {floor:.1f} µs of CPU (median)")
    print(f"the real round (replay 3, answer, complete), measured alongside: {real:.1f} µs")
    print(f"the floor's share of the real round: {floor / real:.0%}")


if __name__ == "__main__":
    main()
