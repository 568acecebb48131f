"""Keys from the environment: MRTR_TRIO_KEYS, the per-process fallback and its warning, keygen."""

from __future__ import annotations

import base64
import subprocess
import sys
import warnings

import pytest

from mrtr_trio import Complete, EphemeralKeyWarning, InputRequired, Runtime
from mrtr_trio._keys import generate_key, parse_keys
from mrtr_trio.mcp import App

from .test_state import CONFIRM_ANSWER, second_round_token, two_asks

KEY = bytes(range(32))
OLD = bytes(range(100, 140))
KEY_HEX = KEY.hex()
KEY_B64 = base64.urlsafe_b64encode(KEY).decode()  # padded, 44 characters


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (KEY_HEX, [KEY]),
        (KEY_HEX.upper(), [KEY]),
        (KEY_B64, [KEY]),
        (KEY_B64.rstrip("="), [KEY]),
        (base64.urlsafe_b64encode(OLD).decode().rstrip("="), [OLD]),
        (f"{KEY_B64}, {OLD.hex()}", [KEY, OLD]),
        (f"  {KEY_HEX}  ", [KEY]),
    ],
)
def test_keys_parse_from_hex_and_base64url(text: str, expected: list[bytes]) -> None:
    assert parse_keys(text) == expected


SECRET_LOOKING = "Zm9vYmFyYmF6cXV4cXV1eGNvcmdlZ3JhdWx0Z2FycGx5d2FsZG8"


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", "MRTR_TRIO_KEYS is set but empty"),
        (f"{KEY_HEX},", "key 2 of 2 is empty"),
        (f"{KEY_HEX},,{KEY_HEX}", "key 2 of 3 is empty"),
        ("ab" * 16, "key 1 of 1 is 16 bytes; keys must be at least 32 bytes"),
        (f"{KEY_HEX},{SECRET_LOOKING[:20]}", "key 2 of 2 is 15 bytes"),
        (SECRET_LOOKING + "+/", "key 1 of 1 is neither hex nor base64url"),
        (SECRET_LOOKING + "AB", "key 1 of 1 is not valid base64url"),
        (f"{KEY_HEX},{SECRET_LOOKING}!", "key 2 of 2 is neither hex nor base64url"),
    ],
)
def test_a_malformed_key_names_its_position_never_its_text(text: str, message: str) -> None:
    with pytest.raises(ValueError, match=message) as raised:
        parse_keys(text)
    shown = str(raised.value)
    assert SECRET_LOOKING[:12] not in shown and KEY_HEX[:12] not in shown and "abab" not in shown
    error = raised.value  # no chained decoder error that could quote the text either
    assert error.__cause__ is None and (error.__context__ is None or error.__suppress_context__)


async def test_runtime_without_keys_signs_with_the_first_environment_key(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("MRTR_TRIO_KEYS", KEY_B64)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no EphemeralKeyWarning when the environment has keys
        minted = await second_round_token(Runtime())
    # Another process with the same key continues the flow ...
    out = await Runtime([KEY]).advance(
        two_asks, {"user": "u"}, input_responses=CONFIRM_ANSWER, request_state=minted
    )
    assert isinstance(out, Complete)
    # ... and after a rotation (new key first) the old token still verifies.
    monkeypatch.setenv("MRTR_TRIO_KEYS", f"{OLD.hex()},{KEY_B64}")
    rotated = Runtime()
    out = await rotated.advance(
        two_asks, {"user": "u"}, input_responses=CONFIRM_ANSWER, request_state=minted
    )
    assert isinstance(out, Complete)
    fresh = await rotated.advance(two_asks, {"user": "u"})
    assert isinstance(fresh, InputRequired)
    # The new token is signed with the first key: a runtime holding only the old key refuses it.
    monkeypatch.setenv("MRTR_TRIO_KEYS", KEY_HEX)
    assert not await _verifies(Runtime(), await second_round_token(rotated))
    assert await _verifies(Runtime([OLD]), await second_round_token(rotated))


async def _verifies(runtime: Runtime, token: str) -> bool:
    from mrtr_trio import InvalidRequestState

    try:
        await runtime.advance(
            two_asks, {"user": "u"}, input_responses=CONFIRM_ANSWER, request_state=token
        )
    except InvalidRequestState:
        return False
    return True


def test_a_malformed_environment_fails_at_startup(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MRTR_TRIO_KEYS", "not-a-key")
    with pytest.raises(ValueError, match="MRTR_TRIO_KEYS: key 1 of 1"):
        Runtime()
    with pytest.raises(ValueError, match="MRTR_TRIO_KEYS: key 1 of 1"):
        App("x")


def test_explicit_keys_win_over_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MRTR_TRIO_KEYS", "not-a-key")
    Runtime([KEY])  # the environment is not read at all


def test_the_ephemeral_key_warning_names_the_users_line(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("MRTR_TRIO_KEYS", raising=False)
    with pytest.warns(EphemeralKeyWarning, match="MRTR_TRIO_KEYS") as caught:
        Runtime()
        App("direct")
    assert [w.filename for w in caught] == [__file__, __file__]
    assert [w.lineno for w in caught] == [
        test_the_ephemeral_key_warning_names_the_users_line.__code__.co_firstlineno + 3,
        test_the_ephemeral_key_warning_names_the_users_line.__code__.co_firstlineno + 4,
    ]


def test_generated_keys_parse_and_differ() -> None:
    first, second = generate_key(), generate_key()
    assert first != second and len(first) == 43
    assert len(parse_keys(first)[0]) == 32


def test_keygen_prints_one_fresh_key() -> None:
    def keygen() -> str:
        return subprocess.run(
            [sys.executable, "-m", "mrtr_trio._cli", "keygen"],
            capture_output=True,
            text=True,
            timeout=30,
            check=True,
        ).stdout

    first, second = keygen(), keygen()
    assert first.endswith("\n") and first.count("\n") == 1
    assert first != second
    assert len(parse_keys(first.strip())[0]) == 32
