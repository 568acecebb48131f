"""A corpus of hostile ``requestState`` tokens, made from real ones (issue 9's fuzz suite).

Real tokens are minted by real flows through :meth:`Runtime.advance`; every mutation is then
presented through the same public API, where the only acceptable outcome is
:class:`~mrtr_trio.InvalidRequestState`. Families:

- ``bit-flip``: every bit of the decoded token flipped, one at a time;
- ``substitute``: every character replaced by every other base64url character;
- ``truncate``, ``extend``: every prefix; suffixes of every alphabet character and random runs;
- ``base64``: the same bytes in other encodings (padding, standard alphabet, whitespace, case,
  quotes, percent-encoding, look-alike Unicode);
- ``swap``: a real token presented to another handler, other arguments, another principal
  (bind bytes), a runtime with another key;
- ``expiry``: tokens past their lifetime and from the future, on a fake clock;
- ``garbage``: random strings from a few alphabets, up to 1 MiB;
- ``signed-body``: malformed cursor bodies signed with the right key (what a key holder, or a
  bug, could make): every field of a real body replaced by hostile values, nested entries
  replaced, raw CBOR corruption.

``corpus(scale)`` builds ``scale="short"`` (a deterministic sample, for the test suite) or
``"long"`` (everything, run by hand).
"""

from __future__ import annotations

import base64
import random
import secrets
import string
from collections.abc import Callable, Iterator
from typing import Any

import attrs
import cbor2

from mrtr_trio import (
    Context,
    InputRequired,
    Runtime,
    create_message,
    done,
    elicit,
    input_required,
    pause,
    step,
)
from mrtr_trio._binding import binding_digest
from mrtr_trio._journal import qualified_name
from mrtr_trio._tokenformat import _HEADER_BYTES, TAG_BYTES

from .flows import CONFIRM

B64URL = string.ascii_letters + string.digits + "-_"
KEY = secrets.token_bytes(32)
OTHER_KEY = secrets.token_bytes(32)
BIND = b"tools/call|alice"
T0 = 1_900_000_000.0


class FakeClock:
    """Seconds since the epoch, moved by hand."""

    def __init__(self) -> None:
        self.now = T0

    def __call__(self) -> float:
        return self.now


CLOCK = FakeClock()
RUNTIME = Runtime([KEY], clock=CLOCK)


async def ask_twice(ctx: Context, n: int):
    ok = yield elicit(f"Go {n}?", CONFIRM)
    notes = yield create_message(f"Notes for {n}", max_tokens=20)
    yield done((ok.action, notes.text))


async def with_step(ctx: Context, n: int):
    value = yield step(lambda: n * 7)
    yield elicit(f"Value {value}?", CONFIRM)
    yield pause()
    yield done(value)


async def return_style(ctx: Context, n: int) -> Any:
    if ctx.input_responses is None:
        state = await ctx.mint_request_state({"n": n, "pad": "p" * n})
        return input_required({"ok": elicit("Sure?", CONFIRM)}, state)
    return ctx.request_state()


HANDLERS: dict[str, Callable[..., Any]] = {
    "ask_twice": ask_twice,
    "with_step": with_step,
    "return_style": return_style,
}
YES = {"action": "accept", "content": {"confirm": True}}
SAMPLED = {"role": "assistant", "content": {"type": "text", "text": "ok"}, "model": "m"}


@attrs.frozen(eq=False)
class Target:
    """Where a token is presented: handler, arguments, bind bytes and runtime."""

    handler: str
    arguments: dict[str, Any]
    bind: bytes = BIND
    runtime: Runtime = RUNTIME
    responses: dict[str, Any] = attrs.field(factory=lambda: {"input-0": YES})

    @property
    def key(self) -> tuple[Any, ...]:
        """What tells two targets apart (runtimes by identity)."""
        return (self.handler, repr(sorted(self.arguments.items())), self.bind, id(self.runtime))

    async def present(self, token: str) -> Any:
        return await self.runtime.advance(
            HANDLERS[self.handler],
            self.arguments,
            input_responses=self.responses,
            request_state=token,
            bind=self.bind,
        )


@attrs.frozen
class Mutation:
    family: str
    token: str
    target: Target


@attrs.frozen
class Real:
    """A real token and where it is valid."""

    name: str
    token: str
    target: Target


async def real_tokens() -> list[Real]:
    """Real tokens of several shapes, each with the target that accepts it."""
    CLOCK.now = T0
    reals = []
    first = await _mint("ask_twice", {"n": 1})
    reals.append(Real("pending ask", first, Target("ask_twice", {"n": 1})))
    second = await RUNTIME.advance(
        ask_twice, {"n": 1}, input_responses={"input-0": YES}, request_state=first, bind=BIND
    )
    assert isinstance(second, InputRequired) and second.request_state is not None
    reals.append(
        Real(
            "journal + pending sampling",
            second.request_state,
            Target("ask_twice", {"n": 1}, responses={"input-1": SAMPLED}),
        )
    )
    stepped = await _mint("with_step", {"n": 3})
    reals.append(Real("step + pending ask", stepped, Target("with_step", {"n": 3})))
    paused = await RUNTIME.advance(
        with_step, {"n": 3}, input_responses={"input-0": YES}, request_state=stepped, bind=BIND
    )
    assert isinstance(paused, InputRequired) and paused.request_state is not None
    reals.append(Real("pending pause", paused.request_state, Target("with_step", {"n": 3})))
    minted = await _mint("return_style", {"n": 5})
    reals.append(
        Real(
            "return-style payload",
            minted,
            Target("return_style", {"n": 5}, responses={"ok": YES}),
        )
    )
    return reals


async def _mint(handler: str, arguments: dict[str, Any]) -> str:
    outcome = await RUNTIME.advance(HANDLERS[handler], arguments, bind=BIND)
    assert isinstance(outcome, InputRequired) and outcome.request_state is not None
    return outcome.request_state


# ------------------------------------------------------------------------------- families


def decode(token: str) -> bytes:
    """A token's bytes (its base64url decoded, padding optional)."""
    return base64.urlsafe_b64decode(token + "=" * (-len(token) % 4))


def encode(raw: bytes) -> str:
    """*raw* as a token: unpadded base64url."""
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode("ascii")


def bit_flips(real: Real) -> Iterator[str]:
    raw = decode(real.token)
    for bit in range(len(raw) * 8):
        flipped = bytearray(raw)
        flipped[bit // 8] ^= 1 << (bit % 8)
        yield encode(bytes(flipped))


def substitutions(real: Real) -> Iterator[str]:
    token = real.token
    for index, original in enumerate(token):
        for char in B64URL:
            if char != original:
                yield token[:index] + char + token[index + 1 :]


def truncations(real: Real) -> Iterator[str]:
    for length in range(len(real.token)):
        yield real.token[:length]


def extensions(real: Real, rng: random.Random) -> Iterator[str]:
    for char in B64URL + "=.~ \n\x00":
        yield real.token + char
        yield char + real.token
    for length in (2, 3, 4, 16, 100, 1000):
        yield real.token + "".join(rng.choice(B64URL) for _ in range(length))
    yield real.token + real.token


def base64_variants(real: Real) -> Iterator[str]:
    raw = decode(real.token)
    token = real.token
    yield base64.urlsafe_b64encode(raw).decode("ascii")  # padded
    yield base64.b64encode(raw).decode("ascii")  # standard alphabet
    yield base64.b64encode(raw).decode("ascii").rstrip("=")
    yield base64.b32encode(raw).decode("ascii")
    yield raw.hex()
    yield token.upper()
    yield token.lower()
    yield token.swapcase()
    yield f'"{token}"'
    yield f" {token}"
    yield f"{token} "
    yield "\n".join(token[i : i + 16] for i in range(0, len(token), 16))
    yield token.replace("-", "%2D").replace("_", "%5F")
    yield token.replace("-", "+").replace("_", "/")
    yield token.replace("a", "\u0430").replace("e", "\u0435")  # Cyrillic look-alikes
    yield token.replace("A", "\uff21")  # full-width
    yield "\ufeff" + token  # byte-order mark
    for cut in range(1, 4):  # re-encodings of a shifted byte stream
        yield encode(raw[cut:])
        yield encode(raw[:-cut])
        yield encode(b"\x00" * cut + raw)


def swaps(real: Real) -> Iterator[tuple[str, Target]]:
    target = real.target
    arguments = dict(target.arguments)
    for name in HANDLERS:
        if name != target.handler:
            yield real.token, attrs.evolve(target, handler=name)
    yield real.token, attrs.evolve(target, arguments={**arguments, "n": arguments["n"] + 1})
    yield real.token, attrs.evolve(target, arguments={**arguments, "extra": 1})
    yield real.token, attrs.evolve(target, arguments={})
    for bind in (b"", b"tools/call|bob", BIND + b"\x00", BIND[:-1], BIND.upper()):
        yield real.token, attrs.evolve(target, bind=bind)
    yield real.token, attrs.evolve(target, runtime=Runtime([OTHER_KEY], clock=CLOCK))


def garbage(rng: random.Random, lengths: tuple[int, ...]) -> Iterator[str]:
    alphabets = [B64URL, string.printable, "".join(map(chr, range(256))), "\x00", "A"]
    for length in lengths:
        for alphabet in alphabets:
            yield "".join(rng.choice(alphabet) for _ in range(length))
        yield encode(rng.randbytes(length))


# ------------------------------------------------------------------- signed malformed bodies


def sign(real: Real, body: bytes) -> str:
    """*body* signed with the right key for *real*'s target: a token that verifies and must
    then fail as a cursor. (The one place that knows the signer; DESIGN §3's token layout.)"""
    target = real.target
    handler = HANDLERS[target.handler]
    binding = binding_digest(qualified_name(handler), target.arguments, target.bind)
    return encode(target.runtime._codec.keyring.sign(body, binding))


def body_of(real: Real) -> bytes:
    return decode(real.token)[_HEADER_BYTES:-TAG_BYTES]  # see docs/state.md


HOSTILE_VALUES: list[Any] = [
    None,
    True,
    -1,
    0,
    2**31,
    2**63,
    2**64 - 1,
    -(2**64),
    1.5,
    float("nan"),
    float("inf"),
    "x",
    "",
    b"",
    b"\x00" * 4,
    [],
    [None],
    [[]],
    {},
    {"k": None},
    {"k": 1},
    {"k": []},
    {"k": [b"\x00\x00\x00\x00"]},
    {"k": [b"\x00\x00\x00\x00", None, None, None]},
    {1: 1},
]


def signed_bodies(real: Real) -> Iterator[tuple[str, str]]:
    """(what was done, token) for malformed bodies signed with the right key."""
    body = body_of(real)
    fields = cbor2.loads(body)
    for index in range(len(fields)):
        for value in HOSTILE_VALUES:
            mutated = list(fields)
            mutated[index] = value
            yield f"field {index} = {value!r:.30}", sign(real, cbor2.dumps(mutated))
    yield "one field short", sign(real, cbor2.dumps(fields[:-1]))
    yield "one field more", sign(real, cbor2.dumps([*fields, 0]))
    yield "a map, not a list", sign(real, cbor2.dumps(dict(enumerate(fields))))
    pending = fields[4]
    if isinstance(pending, dict):
        for key in pending:
            for value in HOSTILE_VALUES:
                mutated = list(fields)
                mutated[4] = {**pending, key: value}
                yield f"pending[{key}] = {value!r:.30}", sign(real, cbor2.dumps(mutated))
    journal = fields[3]
    if isinstance(journal, bytes):  # the journal travels as its own CBOR byte string
        for value in HOSTILE_VALUES:
            mutated = [*fields[:3], cbor2.dumps(value), *fields[4:]]
            yield f"journal = {value!r:.30}", sign(real, cbor2.dumps(mutated))
        for cut in range(1, len(journal)):
            mutated = [*fields[:3], journal[:cut], *fields[4:]]
            yield f"journal cut at {cut}", sign(real, cbor2.dumps(mutated))
    for cut in range(1, len(body)):
        yield f"body cut at {cut}", sign(real, body[:cut])
    yield "trailing byte", sign(real, body + b"\x00")
    yield "tagged", sign(real, cbor2.dumps(cbor2.CBORTag(55799, fields)))
    yield (
        "indefinite list",
        sign(real, b"\x9f" + b"".join(cbor2.dumps(f) for f in fields) + b"\xff"),
    )
    yield "duplicate map keys", sign(real, cbor2.dumps(fields)[:-1] + b"\xa2\x00\x00\x00\x00")
    yield "deep nesting", sign(real, b"\x81" * 100_000 + b"\x00")
    yield "huge issue time", sign(real, cbor2.dumps([fields[0], 2**70, *fields[2:]]))
    yield "huge lifetime", sign(real, cbor2.dumps([*fields[:2], 2**70, *fields[3:]]))
    yield "empty", sign(real, b"")
    yield "random bytes", sign(real, random.Random(len(body)).randbytes(len(body)))


# ------------------------------------------------------------------------------------- all


async def corpus(scale: str) -> tuple[list[Real], list[Mutation]]:
    """The real tokens and their distinct mutations at *scale* (``"short"`` or ``"long"``)."""
    rng = random.Random(20261201)
    reals = await real_tokens()
    mutations: list[Mutation] = []
    seen: set[tuple[str, tuple[Any, ...]]] = {(r.token, r.target.key) for r in reals}

    def add(family: str, token: str, target: Target) -> None:
        if (token, target.key) not in seen:
            seen.add((token, target.key))
            mutations.append(Mutation(family, token, target))

    long = scale == "long"
    for real in reals:
        for name, tokens in (
            ("bit-flip", bit_flips(real)),
            ("substitute", substitutions(real)),
            ("truncate", truncations(real)),
            ("extend", extensions(real, rng)),
            ("base64", base64_variants(real)),
        ):
            pool = list(tokens)
            if not long and name in ("bit-flip", "substitute"):
                pool = rng.sample(pool, min(len(pool), 300))
            for token in pool:
                add(name, token, real.target)
        for token, target in swaps(real):
            add("swap", token, target)
        for _, token in signed_bodies(real):
            add("signed-body", token, real.target)
    for token in await expired_tokens(long):
        add("expiry", token[0], token[1])
    lengths = (0, 1, 2, 3, 5, 64, 100, 1000, 65536, 65537, 1 << 20)
    for token in garbage(rng, lengths if long else lengths[:-2]):
        add("garbage", token, reals[0].target)
    return reals, mutations


async def expired_tokens(long: bool) -> list[tuple[str, Target]]:
    """Tokens presented past their lifetime, or minted more than 60 s in the future."""
    target = Target("ask_twice", {"n": 1})
    found = []
    ttl = RUNTIME.ttl
    for offset in range(0, 3600, 30 if long else 600):
        CLOCK.now = T0 + offset
        token = await _mint("ask_twice", {"n": 1})
        for late in (ttl, ttl + 1, ttl + 3600, 10**9):
            found.append((token, _at(target, T0 + offset + late)))
        for early in (61, 120, 10**6):  # presented long before it was minted
            found.append((token, _at(target, T0 + offset - early)))
    CLOCK.now = T0
    return found


def _at(target: Target, now: float) -> Target:
    return attrs.evolve(target, runtime=Runtime([KEY], clock=lambda: now))
