"""requestState: signed, bound, expiring, rotated, and verified before anything else runs."""

from __future__ import annotations

import base64
import logging
from typing import Any

import blake3
import cbor2
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mrtr_trio import (
    Complete,
    Context,
    EphemeralKeyWarning,
    InputRequired,
    InvalidRequestState,
    MrtrError,
    Runtime,
    done,
    elicit,
    step,
)
from mrtr_trio._base64url import _strict_b64decode, b64url
from mrtr_trio._binding import binding_digest
from mrtr_trio._keyring import Keyring
from mrtr_trio._token import StateCodec

from .flows import CONFIRM, NAME
from .hostile import decode, encode

KEY = b"k" * 32
OTHER_KEY = b"o" * 32
ALPHABET = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"

entered: list[str] = []


async def two_asks(ctx: Context, user: str):
    entered.append(user)  # proves whether handler code ran
    name = yield elicit("Name?", NAME)
    ok = yield elicit(f"Confirm {name.content['name']}?", CONFIRM)
    yield done((name.content["name"], ok.action))


async def other_handler(ctx: Context, user: str):
    entered.append(user)
    name = yield elicit("Name?", NAME)
    ok = yield elicit(f"Confirm {name.content['name']}?", CONFIRM)
    yield done((name.content["name"], ok.action))


NAME_ANSWER = {"input-0": {"action": "accept", "content": {"name": "Ada"}}}
CONFIRM_ANSWER = {"input-1": {"action": "accept", "content": {"confirm": True}}}


@pytest.fixture(params=[False, True], ids=["signed", "encrypted"])
def encrypt(request: pytest.FixtureRequest) -> bool:
    """Token format: signed (the default) or encrypted (``Runtime(encrypt=True)``); the tests
    that take this fixture hold for both."""
    return bool(request.param)


class Clock:
    def __init__(self, now: float = 1_800_000_000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


async def second_round_token(runtime: Runtime, **kw: Any) -> str:
    """The token a client holds after answering the first ask of ``two_asks``."""
    first = await runtime.advance(two_asks, {"user": "u"}, **kw)
    assert isinstance(first, InputRequired)
    second = await runtime.advance(
        two_asks,
        {"user": "u"},
        input_responses=NAME_ANSWER,
        request_state=first.request_state,
        **kw,
    )
    assert isinstance(second, InputRequired) and list(second.input_requests) == ["input-1"]
    assert second.request_state is not None
    return second.request_state


async def assert_rejected(
    runtime: Runtime, token: str, handler=two_asks, *, handler_ran: bool = False, **kw: Any
) -> str:
    """The reason *runtime* refuses *token*; no handler code runs unless *handler_ran*."""
    entered.clear()
    with pytest.raises(InvalidRequestState) as caught:
        await runtime.advance(
            handler,
            kw.pop("arguments", {"user": "u"}),
            input_responses=CONFIRM_ANSWER,
            request_state=token,
            **kw,
        )
    if not handler_ran:
        assert entered == [], "handler code ran before the state was verified"
    error = caught.value
    assert (error.code, error.message, error.data) == (
        -32602,
        "Invalid or expired requestState",
        {"reason": "invalid_request_state"},
    )
    return error.reason


async def test_valid_token_continues_the_flow(encrypt: bool) -> None:
    runtime = Runtime([KEY], encrypt=encrypt)
    token = await second_round_token(runtime)
    version = base64.urlsafe_b64decode(token[:4])[0]
    assert version == (3 if encrypt else 2)  # the format the other tests here tamper with
    out = await runtime.advance(
        two_asks, {"user": "u"}, input_responses=CONFIRM_ANSWER, request_state=token
    )
    assert out == Complete(("Ada", "accept"))


async def test_every_single_character_change_is_rejected(encrypt: bool) -> None:
    runtime = Runtime([KEY], encrypt=encrypt)
    token = await second_round_token(runtime)
    for index, original in enumerate(token):
        for replacement in ALPHABET + "=+/.~ ":
            if replacement != original:
                await assert_rejected(runtime, token[:index] + replacement + token[index + 1 :])


async def test_every_single_byte_change_is_rejected(encrypt: bool) -> None:
    runtime = Runtime([KEY], encrypt=encrypt)
    token = await second_round_token(runtime)
    raw = decode(token)
    for index in range(len(raw)):
        for flip in (0x01, 0x10, 0x80, 0xFF):
            changed = bytearray(raw)
            changed[index] ^= flip
            forged = encode(bytes(changed))
            await assert_rejected(runtime, forged)


async def test_every_truncation_and_extension_is_rejected(encrypt: bool) -> None:
    runtime = Runtime([KEY], encrypt=encrypt)
    token = await second_round_token(runtime)
    for length in range(len(token)):
        await assert_rejected(runtime, token[:length])
    for suffix in ["A", "AA", "AAAA", "-TAMPERED", "=", "==", token]:
        await assert_rejected(runtime, token + suffix)
    raw = decode(token)
    for extra in (b"\x00", b"\xff" * 3, raw[-16:]):
        forged = encode(raw + extra)
        await assert_rejected(runtime, forged)


async def test_re_encoded_tokens_are_rejected(encrypt: bool) -> None:
    runtime = Runtime([KEY], encrypt=encrypt)
    token = await second_round_token(runtime)
    raw = decode(token)
    padded = base64.urlsafe_b64encode(raw).decode()
    standard = base64.b64encode(raw).decode().rstrip("=")
    variants = {padded, standard, " " + token, token + "\n", token.replace("A", "a", 1)}
    variants.discard(token)
    # Same bytes, different text: a trailing character whose unused low bits are set.
    if len(token) % 4:
        last = ALPHABET.index(token[-1])
        variants.add(token[:-1] + ALPHABET[last | 1 if last % 2 == 0 else last & ~1])
    for variant in variants:
        assert variant != token
        await assert_rejected(runtime, variant)


@settings(max_examples=2000, deadline=None)
@given(st.text(alphabet=ALPHABET + "+/=!. \n\t\u00e9\u0430\uff21", max_size=14))
def test_strict_base64url_takes_exactly_the_canonical_unpadded_texts(text: str) -> None:
    """The decoder takes a text exactly when it is what b64url writes for some bytes: only the
    url-safe alphabet, no padding, a length that is not 1 mod 4, and zero unused bits."""
    expected = None
    if all(c in ALPHABET for c in text) and len(text) % 4 != 1:
        raw = base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
        if b64url(raw) == text:
            expected = raw
    try:
        got: bytes | None = _strict_b64decode(text)
    except InvalidRequestState:
        got = None
    assert got == expected


async def test_empty_and_non_string_states_are_invalid_not_absent() -> None:
    runtime = Runtime([KEY])
    assert "too short" in await assert_rejected(runtime, "")
    assert "not a string" in await assert_rejected(runtime, 12345)  # type: ignore[arg-type]


async def test_expiry_is_checked_with_the_clock(encrypt: bool) -> None:
    clock = Clock()
    runtime = Runtime([KEY], ttl=600, clock=clock, encrypt=encrypt)
    token = await second_round_token(runtime)
    minted = clock.now
    clock.now = minted + 599
    out = await runtime.advance(
        two_asks, {"user": "u"}, input_responses=CONFIRM_ANSWER, request_state=token
    )
    assert isinstance(out, Complete)
    clock.now = minted + 601
    assert "expired" in await assert_rejected(runtime, token)


async def test_expiry_is_exact_to_within_a_second() -> None:
    clock = Clock(1_800_000_000.75)
    runtime = Runtime([KEY], ttl=10, clock=clock)
    token = await second_round_token(runtime)
    clock.now += 9.0  # 9 s old: valid
    assert isinstance(
        await runtime.advance(
            two_asks, {"user": "u"}, input_responses=CONFIRM_ANSWER, request_state=token
        ),
        Complete,
    )
    clock.now += 1.0  # 10 s old: the ttl has passed (to within the 1 s stamp resolution)
    assert "expired" in await assert_rejected(runtime, token)


async def test_future_dated_tokens_are_rejected_beyond_the_skew() -> None:
    clock = Clock()
    runtime = Runtime([KEY], clock=clock)
    token = await second_round_token(runtime)
    clock.now -= 30  # a server whose clock is 30 s behind: allowed
    assert isinstance(
        await runtime.advance(
            two_asks, {"user": "u"}, input_responses=CONFIRM_ANSWER, request_state=token
        ),
        Complete,
    )
    clock.now -= 61  # now the token claims to be issued 91 s in the future
    assert "future" in await assert_rejected(runtime, token)


async def test_wrong_key_is_rejected(encrypt: bool) -> None:
    token = await second_round_token(Runtime([KEY], encrypt=encrypt))
    assert "not in the keyring" in await assert_rejected(
        Runtime([OTHER_KEY], encrypt=encrypt), token
    )


async def test_key_rotation(encrypt: bool) -> None:
    old, new = b"O" * 32, b"N" * 40
    old_token = await second_round_token(Runtime([old], encrypt=encrypt))
    rotated = Runtime([new, old], encrypt=encrypt)
    out = await rotated.advance(
        two_asks, {"user": "u"}, input_responses=CONFIRM_ANSWER, request_state=old_token
    )
    assert isinstance(out, Complete)  # old key still verifies while in the ring
    assert "not in the keyring" in await assert_rejected(Runtime([new], encrypt=encrypt), old_token)
    new_token = await second_round_token(rotated)  # signed by the first key
    assert "not in the keyring" in await assert_rejected(Runtime([old], encrypt=encrypt), new_token)
    assert isinstance(
        await Runtime([new], encrypt=encrypt).advance(
            two_asks, {"user": "u"}, input_responses=CONFIRM_ANSWER, request_state=new_token
        ),
        Complete,
    )


async def test_binding_to_arguments_handler_and_bind_bytes(encrypt: bool) -> None:
    runtime = Runtime([KEY], encrypt=encrypt)
    token = await second_round_token(runtime, bind=b"tools/call\x00deploy")
    reason = await assert_rejected(
        runtime, token, arguments={"user": "eve"}, bind=b"tools/call\x00deploy"
    )
    assert "another call" in reason
    assert "another call" in await assert_rejected(
        runtime, token, handler=other_handler, bind=b"tools/call\x00deploy"
    )
    assert "another call" in await assert_rejected(runtime, token, bind=b"tools/call\x00other")
    assert "another call" in await assert_rejected(runtime, token)  # bind omitted


async def test_reason_is_logged_but_never_sent(caplog: pytest.LogCaptureFixture) -> None:
    runtime = Runtime([KEY])
    token = await second_round_token(runtime)
    with caplog.at_level(logging.WARNING, logger="mrtr_trio"):
        await assert_rejected(runtime, token[:-2])
    assert any("rejected requestState" in r.getMessage() for r in caplog.records)


async def test_size_cap_on_incoming_and_minted_tokens() -> None:
    runtime = Runtime([KEY], max_state_bytes=64)
    with pytest.raises(MrtrError, match="max_state_bytes=64"):
        await second_round_token(runtime)
    token = await second_round_token(Runtime([KEY]))
    assert len(token) > 64
    assert "over max_state_bytes" in await assert_rejected(runtime, token)


async def test_token_for_a_one_answer_flow_is_about_a_hundred_characters() -> None:
    token = await second_round_token(Runtime([KEY]))
    assert 60 <= len(token) <= 110, token


def test_keys_are_validated() -> None:
    with pytest.raises(ValueError, match="at least 32 bytes"):
        Runtime([b"short"])
    with pytest.raises(TypeError, match="keys\\[0\\] must be bytes"):
        Runtime(["a" * 40])  # type: ignore[list-item]
    with pytest.raises(TypeError, match="list of byte strings"):
        Runtime(b"k" * 32)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="at least one key"):
        Runtime([])


async def test_ephemeral_key_warns_and_is_shared_per_process() -> None:
    with pytest.warns(EphemeralKeyWarning, match="will not survive a restart"):
        first = Runtime()
    with pytest.warns(EphemeralKeyWarning):
        second = Runtime()
    token = await second_round_token(first)
    out = await second.advance(
        two_asks, {"user": "u"}, input_responses=CONFIRM_ANSWER, request_state=token
    )
    assert isinstance(out, Complete)


def test_remembered_bindings_tell_apart_values_python_calls_equal() -> None:
    """The binding memo keys by type too: 1, True and 1.0 (equal in Python) bind differently,
    as do 0.0 and -0.0, and a remembered digest is the one computed afresh."""
    values = [1, True, 1.0, 0, False, 0.0, -0.0, "1", None, 2**70, 2**63, "x" * 300, "x" * 100]
    for _ in range(2):  # the second time from the memo, where it keeps them
        digests = [binding_digest("h", {"a": v}, b"") for v in values]
        assert len(set(digests)) == len(values)
    fresh = [
        blake3.blake3(cbor2.dumps(["h", {"a": v}, b""], canonical=True)).digest() for v in values
    ]
    assert digests == fresh
    assert binding_digest("h", {"a": 1}, b"x") != binding_digest("h", {"a": 1}, b"")
    assert binding_digest("h", {"a": 1, "b": 2}, b"") == binding_digest("h", {"b": 2, "a": 1}, b"")
    # Names are keyed by type too (advance refuses names that are not str; others may not).
    assert binding_digest("h", {1: "x"}, b"") != binding_digest("h", {True: "x"}, b"")  # type: ignore[dict-item]
    assert binding_digest("h", {True: "x"}, b"") != binding_digest("h", {1: "x"}, b"")  # type: ignore[dict-item]


# ------------------------------------------------------- the decoder behind a valid tag


def sign(body: bytes, arguments: dict[str, Any], handler=two_asks) -> str:
    """A correctly signed token around an arbitrary body (what an attacker cannot make)."""
    binding = binding_digest(handler.__qualname__, arguments, b"")
    raw = Keyring([KEY]).sign(body, binding)
    return encode(raw)


NOW = 1_800_000_000
DEEP: Any = 1
for _ in range(40):
    DEEP = [DEEP]


def body(
    *,
    journal: Any = (),
    pending: Any = None,
    payload: Any = None,
    counters: Any = (0, NOW, 600),
    flow_id: Any = b"flow-id!",
) -> bytes:
    """A cursor body in token format 2: the journal is a byte string holding a CBOR array."""
    raw = journal if isinstance(journal, bytes) else cbor2.dumps(list(journal))
    return cbor2.dumps([*counters, raw, pending, payload, flow_id])


@pytest.mark.parametrize(
    ("body", "reason"),
    [
        (body() + b"\x00", "trailing"),
        (body(journal=cbor2.dumps([]) + b"\x00"), "trailing"),
        (
            b"\x9f\x00\x1a"
            + NOW.to_bytes(4, "big")
            + b"\x19\x02\x58\x41\x80\xf6\xf6\x48flow-id!\xff",
            "indefinite",
        ),
        (body(journal=b"\x9f\xff"), "indefinite"),
        (body(pending={"k": [b"\0" * 4, None], "k2": 1})[:-1], ""),
        (
            b"\x87\x00\x1a"
            + NOW.to_bytes(4, "big")
            + b"\x19\x02\x58\x41\x80\xa2\x61k\xf6\x61k\xf6\xf6\x48flow-id!",
            "duplicate",
        ),
        (body(payload=cbor2.CBORTag(1, 0)), "tag"),
        (body(payload=cbor2.CBORTag(35, "a+")), "tag"),
        (body(payload=cbor2.CBORTag(9999, 1)), "tag"),
        (body(journal=[cbor2.CBORTag(9999, 1)]), "tag"),
        (body(payload=DEEP), "depth"),
        (body(journal=[DEEP]), "depth"),
        (cbor2.dumps({"not": "a cursor"}), ""),
        (body(journal=b""), "journal"),
        (body(journal=cbor2.dumps({"a": 1})), "journal"),
        (body(counters=(-1, NOW, 600)), "counters"),
        (body(flow_id=b"short"), "flow id"),
        (body(flow_id="flow-id!"), "flow id"),
        (body(counters=(0, 2**70, 600)), "counters"),
        (body(pending=[b"\3" * 4, 2**70]), "deadline"),
        (body(pending=[b"\0" * 4, "later"]), "deadline"),
        (body(pending={"k": 5}), ""),
        (body(pending="pause"), "pending"),
    ],
)
async def test_signed_but_malformed_bodies_are_rejected(body: bytes, reason: str) -> None:
    clock = Clock(NOW)
    runtime = Runtime([KEY], clock=clock)
    got = await assert_rejected(runtime, sign(body, {"user": "u"}))
    assert got.startswith("malformed body")
    assert reason in got.lower()


async def closing_asks(ctx: Context, user: str):
    """`two_asks`, saying when it runs and when it is closed."""
    entered.append(user)
    try:
        name = yield elicit("Name?", NAME)
        ok = yield elicit(f"Confirm {name.content['name']}?", CONFIRM)
        yield done((name.content["name"], ok.action))
    finally:
        entered.append("closed")


NAME_FP = elicit("Name?", NAME).fingerprint
ADA = [NAME_FP, 0, {"name": "Ada"}]


@pytest.mark.parametrize(
    ("journal", "reason"),
    [
        ([[b"\0", 1]], "fingerprint"),
        ([[b"\0\0\0\0\0\0\0\0\0", 7]], "action 7"),
        ([[NAME_FP, 7, {"name": "Ada"}]], "action 7"),
        ([[NAME_FP, 0, "Ada"]], "content"),
        ([[NAME_FP]], "elicitation answer"),
        ([[NAME_FP, 0, {}, 1]], "elicitation answer"),
        ([{"k": [b"\0\0\0\0\0\0\0\0\0"]}], "elicitation answer"),
        ([[b"\x03\0\0\0\0\0\0\0\0", 1, 2]], "unpack"),
        ([[b"\x07\0\0\0\0\0\0\0\0", 1]], "answer kind 7"),
        ([5], "entry 5"),
        ([[]], "IndexError"),
        ([ADA, [NAME_FP, 0, 5]], "content"),  # the second entry: read at the second ask
    ],
)
async def test_a_malformed_journal_entry_is_refused_when_the_replay_reads_it(
    journal: list[Any], reason: str
) -> None:
    # The token is verified before anything runs; each journal entry's shape is checked when
    # the replay reaches it, so the handler runs up to that yield, and is closed.
    clock = Clock(NOW)
    runtime = Runtime([KEY], clock=clock)
    token = sign(body(journal=journal), {"user": "u"}, closing_asks)
    got = await assert_rejected(runtime, token, closing_asks, handler_ran=True)
    assert got.startswith("malformed body") and reason in got
    assert entered == ["u", "closed"]


async def test_entries_a_diverged_replay_never_reads_are_not_checked() -> None:
    # replay="reask": the flow asks something else than the first entry records, so the
    # journal is dropped from there, unread (the malformed second entry with it), and the
    # client is asked again.
    token = sign(body(journal=[[b"\0\1\2\3\4\5\6\7\7", 0], 5]), {"user": "u"}, closing_asks)
    runtime = Runtime([KEY], clock=Clock(NOW))
    out = await runtime.advance(
        closing_asks, {"user": "u"}, input_responses=NAME_ANSWER, request_state=token
    )
    assert isinstance(out, InputRequired) and list(out.input_requests) == ["input-0"]
    info = runtime.inspect(closing_asks, {"user": "u"}, out.request_state or "")
    assert info.entries == 0


def test_inspect_reads_every_journal_entry() -> None:
    # A replay reads an entry when it reaches it; inspecting a token reads them all.
    runtime = Runtime([KEY], clock=Clock(NOW))
    assert (
        runtime.inspect(
            closing_asks, {"user": "u"}, sign(body(journal=[ADA]), {"user": "u"}, closing_asks)
        ).entries
        == 1
    )
    with pytest.raises(InvalidRequestState) as caught:
        runtime.inspect(
            closing_asks, {"user": "u"}, sign(body(journal=[ADA, 5]), {"user": "u"}, closing_asks)
        )
    assert caught.value.reason == "malformed body (bad journal entry 5)"


async def test_a_signed_wellformed_body_is_accepted() -> None:
    # The control for the test above: the same signing path with a sane body works.
    clock = Clock(NOW)
    runtime = Runtime([KEY], clock=clock)
    out = await runtime.advance(
        two_asks,
        {"user": "u"},
        input_responses={"input-0": {"action": "accept", "content": {"name": "Bo"}}},
        request_state=sign(body(), {"user": "u"}),
    )
    assert isinstance(out, InputRequired)


async def test_step_values_must_be_recordable() -> None:
    async def bad_step(ctx: Context):
        value = yield step(object)
        yield done(value)

    runtime = Runtime([KEY])
    with pytest.raises(MrtrError, match="cannot record the object from step object"):
        await runtime.advance(bad_step, {})


def test_codec_rejects_before_decoding() -> None:
    codec = StateCodec(Keyring([KEY]), ttl=60, max_state_bytes=1000)
    with pytest.raises(InvalidRequestState) as caught:
        codec.open("A" * 40, b"\0" * 32)
    assert "format version" in caught.value.reason or "tag" in caught.value.reason


def test_every_tag_cbor2_decodes_itself_is_refused() -> None:
    # The decoder refuses tags through tag_hook (unknown tags) and semantic_decoders (the tags
    # cbor2 decodes itself), bignums (2, 3) aside. If a cbor2 upgrade adds a built-in tag,
    # this test names it.
    from mrtr_trio._journal import strict_loads as _strict_loads

    accepted = []
    for tag in range(70000):
        try:
            _strict_loads(cbor2.dumps(cbor2.CBORTag(tag, 0)))
        except (cbor2.CBORDecodeError, ValueError):
            continue
        accepted.append(tag)
    assert accepted == []


def test_bignums_read_back_as_plain_integers() -> None:
    from mrtr_trio._journal import strict_loads as _strict_loads

    assert _strict_loads(cbor2.dumps([2**70, -(2**70)])) == [2**70, -(2**70)]


# ------------------------------------------------------------------------ what the log says


async def test_the_log_tells_a_token_for_another_call_from_a_tampered_one(
    caplog: pytest.LogCaptureFixture, encrypt: bool
) -> None:
    runtime = Runtime([KEY], encrypt=encrypt)
    token = await second_round_token(runtime)
    raw = bytearray(decode(token))
    with caplog.at_level(logging.WARNING, logger="mrtr_trio"):
        assert "bound to another call" in await assert_rejected(
            runtime, token, arguments={"user": "someone else"}
        )
        assert any("bound to another call" in m for m in caplog.messages)
        for index in range(1, 7):  # the key id and the body check
            flipped = bytearray(raw)
            flipped[index] ^= 0x01
            forged = encode(bytes(flipped))
            caplog.clear()
            reason = await assert_rejected(runtime, forged)
            assert "bound to another call" not in reason, index
            assert caplog.messages and not any(
                "bound to another call" in m for m in caplog.messages
            )


async def test_a_token_flood_logs_a_bounded_number_of_warnings(
    caplog: pytest.LogCaptureFixture,
) -> None:
    runtime = Runtime([KEY])
    with caplog.at_level(logging.DEBUG, logger="mrtr_trio"):
        for n in range(200):
            with pytest.raises(InvalidRequestState):
                await runtime.advance(two_asks, {"user": "u"}, request_state=f"junk{n}")
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
    debug = [r for r in caplog.records if r.levelno == logging.DEBUG]
    assert len(warnings) == 10
    assert len(debug) == 190 and all("rejected requestState" in r.getMessage() for r in debug)
