"""The signed token's bytes, computed here from the format's description alone: what the
codec's shortcuts (pre-keyed hashers, hand-built CBOR heads) must keep exactly."""

from __future__ import annotations

import blake3

from mrtr_trio._token import Keyring

KEY = bytes(range(32))
BINDING = blake3.blake3(b"a call").digest()


def _subkey(context: str, size: int = 32) -> bytes:
    return blake3.blake3(KEY, derive_key_context=context).digest(size)


def test_a_signed_token_is_header_body_and_tag_as_the_format_says() -> None:
    key_id = _subkey("mrtr_trio 2026-11-30 requestState key id", 4)
    tag_key = _subkey("mrtr_trio 2026-11-30 requestState tag")
    check_key = _subkey("mrtr_trio 2026-12-01 requestState unbound body check")
    keyring = Keyring([KEY])
    for body in (b"\x80", bytes(range(256)) * 5):
        head = bytes((2,)) + key_id
        check = blake3.blake3(head + body, key=check_key).digest(2)
        signed = head + check + body
        tag = blake3.blake3(BINDING + signed, key=tag_key).digest(16)
        raw = keyring.sign(body, BINDING)
        assert raw == signed + tag
        assert keyring.verify(raw, BINDING).body == body
