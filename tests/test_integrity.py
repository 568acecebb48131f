"""Promises of the token and the stores that nothing else checks, each pinned by a test that
fails when its check is taken out: the AEAD nonce's inputs, verify-before-decode, the method in
the host's bind bytes, and a single-use mark that lasts as long as its token."""

from __future__ import annotations

import base64
from typing import Any

import pytest

from mrtr_trio import (
    Context,
    InputRequired,
    InvalidRequestState,
    MemoryStepStore,
    Runtime,
    done,
    elicit,
)
from mrtr_trio._aead import NONCE_BYTES
from mrtr_trio._base64url import b64url
from mrtr_trio._binding import binding_digest
from mrtr_trio._journal import StrictDecoder
from mrtr_trio._keyring import Keyring
from mrtr_trio._tokenformat import _HEADER_BYTES, TAG_BYTES
from mrtr_trio.mcp._host import bind_bytes

KEY = b"t" * 32
NAME = {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}


async def three_asks(ctx: Context, user: str):
    a = yield elicit("First?", NAME)
    b = yield elicit("Second?", NAME)
    c = yield elicit("Third?", NAME)
    yield done([a.content["name"], b.content["name"], c.content["name"]])


def answer(n: int, name: str = "Ada") -> dict[str, Any]:
    return {f"input-{n}": {"action": "accept", "content": {"name": name}}}


def raw(token: str) -> bytes:
    return base64.urlsafe_b64decode(token + "=" * (-len(token) % 4))


async def tokens_of_one_flow(runtime: Runtime) -> list[str]:
    """The three tokens one flow of `three_asks` is given, answering the same name each time."""
    out = await runtime.advance(three_asks, {"user": "u"})
    tokens = []
    for n in range(3):
        assert isinstance(out, InputRequired) and out.request_state is not None
        tokens.append(out.request_state)
        if n == 2:
            break
        out = await runtime.advance(
            three_asks, {"user": "u"}, input_responses=answer(n), request_state=out.request_state
        )
    return tokens


# ---------------------------------------------------------------------- the AEAD nonce


async def test_two_tokens_of_one_flow_never_share_a_nonce() -> None:
    runtime = Runtime([KEY], encrypt=True)
    tokens = await tokens_of_one_flow(runtime)
    nonces = [raw(t)[_HEADER_BYTES : _HEADER_BYTES + NONCE_BYTES] for t in tokens]
    assert len(set(nonces)) == len(nonces)
    # Two flows with the same arguments and answers: other flow ids, other nonces.
    again = await tokens_of_one_flow(runtime)
    assert not set(nonces) & {raw(t)[_HEADER_BYTES : _HEADER_BYTES + NONCE_BYTES] for t in again}


def test_the_nonce_covers_the_binding_the_header_and_the_body() -> None:
    # The synthetic nonce is a keyed hash of everything sealed: change any input, and it
    # changes (so one keystream never encrypts two bodies).
    keyring = Keyring([KEY])
    binding = binding_digest("h", {}, b"")

    def nonce(body: bytes, bound: bytes = binding) -> bytes:
        return keyring.sign(body, bound, encrypt=True)[_HEADER_BYTES:][:NONCE_BYTES]

    base = nonce(b"\x80")
    assert nonce(b"\x81") != base  # another body
    assert nonce(b"\x80", binding_digest("other", {}, b"")) != base  # another call
    assert nonce(b"\x80") == base  # deterministic: no randomness needed


# ----------------------------------------------------------------- verify before decode


class CountingDecoder:
    """Counts every CBOR decode of a token body or journal (`StrictDecoder.loads`)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.calls = 0
        original = StrictDecoder.loads

        def counted(decoder: StrictDecoder, data: bytes) -> Any:
            self.calls += 1
            return original(decoder, data)

        monkeypatch.setattr(StrictDecoder, "loads", counted)


@pytest.mark.parametrize("encrypt", [False, True], ids=["signed", "encrypted"])
async def test_a_tampered_well_formed_token_is_refused_before_any_decoding(
    monkeypatch: pytest.MonkeyPatch, encrypt: bool
) -> None:
    runtime = Runtime([KEY], encrypt=encrypt)
    token = (await tokens_of_one_flow(runtime))[1]
    body = bytearray(raw(token))
    body[-TAG_BYTES - 3] ^= 0x01  # one bit of the body (or ciphertext): still well formed
    counter = CountingDecoder(monkeypatch)
    with pytest.raises(InvalidRequestState) as caught:
        await runtime.advance(
            three_asks, {"user": "u"}, input_responses=answer(1), request_state=b64url(body)
        )
    assert "tag mismatch" in caught.value.reason
    assert counter.calls == 0


async def test_a_validly_tagged_garbage_body_is_decoded_only_after_its_tag_verified(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    binding = binding_digest(three_asks.__qualname__, {"user": "u"}, b"")
    garbage = b64url(Keyring([KEY]).sign(b"\xff\x00garbage", binding))
    counter = CountingDecoder(monkeypatch)
    with pytest.raises(InvalidRequestState) as caught:
        await Runtime([KEY]).advance(three_asks, {"user": "u"}, request_state=garbage)
    assert caught.value.reason.startswith("malformed body")
    assert counter.calls == 1  # the tag held, so the body was decoded, and refused there
    # The same garbage under a wrong tag never reaches the decoder.
    forged = bytearray(raw(garbage))
    forged[-1] ^= 0x01
    with pytest.raises(InvalidRequestState):
        await Runtime([KEY]).advance(three_asks, {"user": "u"}, request_state=b64url(forged))
    assert counter.calls == 1


# --------------------------------------------------------------------- method binding


async def test_a_token_minted_for_one_method_is_refused_for_another() -> None:
    # The host binds the method: a tools/call token is no prompts/get token for a prompt of
    # the same name, handler and arguments.
    runtime = Runtime([KEY])
    arguments = {"user": "u"}
    as_tool = bind_bytes("tools/call", "greet", arguments, "server", None)
    as_prompt = bind_bytes("prompts/get", "greet", arguments, "server", None)
    assert as_tool != as_prompt
    first = await runtime.advance(three_asks, arguments, bind=as_tool)
    assert isinstance(first, InputRequired)
    with pytest.raises(InvalidRequestState) as caught:
        await runtime.advance(
            three_asks,
            arguments,
            input_responses=answer(0),
            request_state=first.request_state,
            bind=as_prompt,
        )
    assert "another call" in caught.value.reason
    out = await runtime.advance(
        three_asks,
        arguments,
        input_responses=answer(0),
        request_state=first.request_state,
        bind=as_tool,
    )
    assert isinstance(out, InputRequired)


# ------------------------------------------------------ single use, on a moved clock


class Clock:
    def __init__(self) -> None:
        self.now = 1_800_000_000.0

    def __call__(self) -> float:
        return self.now


async def test_a_single_use_mark_lasts_as_long_as_its_token() -> None:
    # One clock for the tokens and the store: a second presentation just before the token
    # expires is still refused (the mark was not dropped early), and after expiry the token
    # is refused as expired.
    clock = Clock()
    runtime = Runtime(
        [KEY], ttl=600, step_store=MemoryStepStore(clock=clock), single_use=True, clock=clock
    )
    first = await runtime.advance(three_asks, {"user": "u"})
    assert isinstance(first, InputRequired)

    async def present() -> Any:
        return await runtime.advance(
            three_asks, {"user": "u"}, input_responses=answer(0), request_state=first.request_state
        )

    clock.now += 300
    assert isinstance(await present(), InputRequired)  # used once, half-way through its life
    for later in (200, 99):  # at +500 s and +599 s: the token is alive, the mark too
        clock.now += later
        with pytest.raises(InvalidRequestState) as caught:
            await present()
        assert "already used" in caught.value.reason
    clock.now += 2
    with pytest.raises(InvalidRequestState) as caught:
        await present()
    assert "expired" in caught.value.reason


# ------------------------------------------- a recorded answer and a changed schema


V1 = {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}
V2 = {
    "type": "object",
    "properties": {"name": {"type": "string"}, "age": {"type": "integer"}},
    "required": ["name", "age"],
}
schemas: list[dict[str, Any]] = [V1]


async def profile(ctx: Context, batch: bool = False):
    # The same message in both releases; only the requested schema changes.
    if batch:
        answers = yield {"who": elicit("About you?", schemas[0])}
        who = answers["who"]
    else:
        who = yield elicit("About you?", schemas[0])
    fields = [who.content[key] for key in schemas[0]["required"]]  # v2 needs "age"
    yield elicit("Sure?", NAME)
    yield done(fields)


ADA_V1 = {"action": "accept", "content": {"name": "Ada"}}
ADA_V2 = {"action": "accept", "content": {"name": "Ada", "age": 36}}


async def recorded_under_v1(runtime: Runtime, batch: bool) -> str:
    """A token whose journal holds an answer to the v1 form."""
    schemas[:] = [V1]
    key = "who" if batch else "input-0"
    out = await runtime.advance(profile, {"batch": batch})
    assert isinstance(out, InputRequired)
    out = await runtime.advance(
        profile, {"batch": batch}, input_responses={key: ADA_V1}, request_state=out.request_state
    )
    assert isinstance(out, InputRequired) and out.request_state is not None
    return out.request_state


@pytest.mark.parametrize("batch", [False, True], ids=["single", "batch"])
async def test_a_recorded_answer_that_no_longer_fits_the_schema_is_a_divergence(
    batch: bool,
) -> None:
    # The answer was valid for the form asked then; the new release asks for more. Replaying
    # it would crash the handler (KeyError: 'age'): it is a divergence instead, because the
    # fingerprint of the request covers its schema.
    from mrtr_trio import NondeterminismError

    token = await recorded_under_v1(Runtime([KEY], replay="strict"), batch)
    schemas[:] = [V2]
    sure = {"input-0" if batch else "input-1": {"action": "accept", "content": {"name": "x"}}}
    with pytest.raises(NondeterminismError):
        await Runtime([KEY], replay="strict").advance(
            profile, {"batch": batch}, input_responses=sure, request_state=token
        )
    # replay="reask": the form is asked again, under the new schema; nothing crashes.
    out = await Runtime([KEY]).advance(
        profile, {"batch": batch}, input_responses=sure, request_state=token
    )
    assert isinstance(out, InputRequired)
    ((key, request),) = out.input_requests.items()
    assert key == ("who" if batch else "input-0") and request.schema == V2
    out = await Runtime([KEY]).advance(
        profile, {"batch": batch}, input_responses={key: ADA_V2}, request_state=out.request_state
    )
    assert isinstance(out, InputRequired)  # on to "Sure?", with the new answer
