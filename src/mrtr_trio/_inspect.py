"""What a `requestState` holds, for a person debugging a stuck flow (`mrtr-trio inspect`).

[inspect_token][mrtr_trio._inspect.inspect_token] opens a token with the keys and reports, as
plain JSON values: how it was verified, the format and key id, the flow id, the issue and expiry
times, the rounds, every journal entry (its kind, key, fingerprint and recorded value: the
answer, or the step's result), the pending point, the return-style payload, and, when the call
it was minted for is known, the binding digest and the idempotency key of each recorded step.
It never shows a key.

A token's tag covers the call binding (handler, arguments, host bind bytes), which the token
does not carry. Without it a signed token is checked by its 2-byte body check only (authentic
to 1 in 65,536, enough to read it, never to serve it), and an encrypted token cannot be opened at
all (the binding is its associated data). With it (*binding*), the token is verified exactly as
a server verifies it, expiry aside: an expired token is reported as expired, not refused.
"""

from __future__ import annotations

import base64
import time
from collections.abc import Sequence
from typing import Any

import attrs

from ._base64url import _strict_b64decode
from ._cursorcbor import decode_cursor
from ._errors import InvalidRequestState
from ._journal import (
    Answered,
    AnsweredOne,
    Cursor,
    Pending,
    PendingOne,
    PendingPoll,
    StepResult,
    single_key,
)
from ._keyring import Keyring
from ._token import StateCodec
from ._tokenformat import ENCRYPTED_VERSION, KEY_ID_BYTES, TAG_BYTES
from ._values import KIND_NAMES

__all__ = ["inspect_token"]


def inspect_token(
    token: str,
    keys: Sequence[bytes],
    *,
    binding: bytes | None = None,
    now: float | None = None,
) -> dict[str, Any]:
    """The contents of *token* as JSON values (see the module docstring), opened with *keys*.

    [InvalidRequestState][mrtr_trio.InvalidRequestState] with the precise reason (its
    `.reason`) when it does not verify: not base64url, unknown format, a key id not among
    *keys*, a tag (or body check) that fails, or a malformed body.
    """
    keyring = Keyring(keys)
    raw = _strict_b64decode(token.strip())
    if len(raw) < 1 + KEY_ID_BYTES:
        raise InvalidRequestState(f"too short ({len(raw)} bytes)")
    codec = StateCodec(keyring, ttl=1.0, max_state_bytes=max(len(token), 1))
    if binding is None:
        body = keyring.check_unbound(raw)
        verified = "body check only (16 bits): the call binding was not checked"
    else:
        body = keyring.verify(raw, binding)
        verified = "tag checked against the call"
    try:
        cursor = decode_cursor(body, raw[1 : 1 + KEY_ID_BYTES], raw[-TAG_BYTES:])
        journal = list(cursor.journal)  # every entry read, so a malformed one is said here
    except ValueError as problem:
        raise InvalidRequestState(f"malformed body ({problem})") from None
    clock = time.time() if now is None else now
    expires_at = cursor.issued_at + cursor.lifetime
    report: dict[str, Any] = {
        "verified": verified,
        "format": "encrypted" if raw[0] == ENCRYPTED_VERSION else "signed",
        "format_version": raw[0],
        "key_id": raw[1 : 1 + KEY_ID_BYTES].hex(),
        "flow_id": cursor.flow_id.hex(),
        "issued_at": cursor.issued_at,
        "expires_at": expires_at,
        "expired": clock >= expires_at,
        "seconds_left": round(expires_at - clock),
        "rounds": cursor.rounds,
        "token_characters": len(token.strip()),
        "journal": [],
        "pending": _pending(
            cursor.pending, sum(isinstance(entry, AnsweredOne) for entry in journal)
        ),
    }
    if cursor.payload is not None:
        report["payload"] = _json(cursor.payload)
    if binding is not None:
        report["binding_digest"] = binding.hex()
    for position, entry in enumerate(journal):
        item: dict[str, Any] = {"index": position}
        if isinstance(entry, StepResult):
            item.update(kind="step", fingerprint=entry.fingerprint.hex())
            item["value"] = _json(entry.value)
            if binding is not None:
                item["step_key"] = _step_key(codec, cursor, binding, position)
        elif isinstance(entry, AnsweredOne):
            item.update(_answer(entry.key, entry.fingerprint, entry.answer))
        elif isinstance(entry, Answered) and not entry.fingerprints:
            item["kind"] = "pause"
        else:
            assert isinstance(entry, Answered)
            item["kind"] = "batch"
            item["answers"] = [
                _answer(key, entry.fingerprints[key], entry.answers[key])
                for key in entry.fingerprints
            ]
        report["journal"].append(item)
    return report


def _answer(key: str, fingerprint: bytes, answer: Any) -> dict[str, Any]:
    return {
        "kind": _kind(fingerprint),
        "key": key,
        "fingerprint": fingerprint.hex(),
        "answer": answer.to_wire(),
    }


def _pending(
    pending: Pending | PendingOne | PendingPoll | None, singles: int
) -> dict[str, Any] | None:
    """The pending point; *singles*: the asks of one request in the journal (a pending one's
    key, `input-N`, counts them)."""
    if pending is None:
        return None
    if isinstance(pending, PendingOne):
        fingerprint = pending.fingerprint
        one = {
            "key": single_key(singles),
            "kind": _kind(fingerprint),
            "fingerprint": fingerprint.hex(),
        }
        return {"kind": "ask", "asks": [one]}
    if isinstance(pending, PendingPoll):
        deadline = pending.deadline
        return {"kind": "poll", "fingerprint": pending.fingerprint.hex(), "deadline": deadline}
    if not pending.fingerprints:
        return {"kind": "pause"}
    asks = []
    for key, fingerprint in pending.fingerprints.items():
        ask: dict[str, Any] = {
            "key": key,
            "kind": _kind(fingerprint),
            "fingerprint": fingerprint.hex(),
        }
        if key in pending.answered:
            ask["answered"] = pending.answered[key].to_wire()
        if pending.requests is not None:
            ask["request"] = pending.requests[key].to_wire()
        asks.append(ask)
    return {"kind": "ask", "asks": asks}


def _step_key(codec: StateCodec, cursor: Cursor, binding: bytes, position: int) -> str:
    """The idempotency key the step at *position* ran with: derived, as the runtime derives
    it, from the journal before it."""
    before = attrs.evolve(cursor, journal=cursor.journal.head(position))
    return codec.step_key(before, binding, position)


def _json(value: Any) -> Any:
    """A recorded CBOR value as JSON: bytes as `{"base64": ...}`, maps with text keys."""
    if isinstance(value, bytes):
        return {"base64": base64.b64encode(value).decode("ascii")}
    if isinstance(value, list | tuple):
        return [_json(item) for item in value]
    if isinstance(value, dict):
        return {str(key): _json(item) for key, item in value.items()}
    return value


def _kind(fingerprint: bytes) -> str:
    """The kind a fingerprint names (its first byte)."""
    return KIND_NAMES.get(fingerprint[0], f"kind {fingerprint[0]}")
