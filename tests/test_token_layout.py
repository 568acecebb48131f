"""The signed token's bytes, computed here from the format's description alone: what the
codec's shortcuts (pre-keyed hashers, reused journal encodings) must keep exactly."""

from __future__ import annotations

import blake3
import cbor2

from mrtr_trio._encodedjournal import _encode_journal
from mrtr_trio._journal import EMPTY_JOURNAL, AnsweredOne, Journal, StepResult
from mrtr_trio._keyring import Keyring
from mrtr_trio._values import KIND_CODES, trusted_elicit_result

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
        assert keyring.verify(raw, BINDING) == body


def test_a_journal_in_memory_seals_to_the_cbor_array_of_its_entries() -> None:
    elicit, step = KIND_CODES["elicitation/create"], KIND_CODES["step"]
    first = bytes((elicit, 1, 2, 3))
    second = bytes((elicit, 4, 5, 6))
    stepped = bytes((step, 7, 8, 9))
    entries = (
        AnsweredOne("input-0", first, trusted_elicit_result("accept", {"a": 1})),
        StepResult(stepped, [5, "x"]),
        AnsweredOne("input-1", second, trusted_elicit_result("decline", None)),
    )
    journal = Journal(entries)
    assert journal.sealed() == (b"", 0, entries)
    assert _encode_journal(journal) == cbor2.dumps(
        [[first, 0, {"a": 1}], [stepped, [5, "x"]], [second, 1]]
    )
    assert _encode_journal(EMPTY_JOURNAL) == cbor2.dumps([])
