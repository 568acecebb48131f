"""The signed ``requestState`` token: a cursor's compact CBOR under a BLAKE3 tag.

The token is ``base64url(header | body | tag)`` without padding:

- header: format version (1 byte), key id (4 bytes), body check (2 bytes);
- body: the cursor as compact CBOR (layout below);
- tag: 16 bytes of BLAKE3 keyed with a ``derive_key`` subkey, over the binding digest, the
  header and the body.

The binding (handler identity, argument digest, host ``bind`` bytes) is fed into the tag rather
than carried, so the token stays small. The body check is a 2-byte digest of the header and body
*without* the binding, under its own subkey: when the tag fails but the check holds, the token
is authentic but was minted for another call, and the log can say so; a tampered token fails
both (but for a 1 in 65,536 chance).

[StateCodec.open][mrtr_trio._token.StateCodec.open] verifies before it parses: size cap,
strict base64url, version, authenticated key id, constant-time tag comparison, and only then a
CBOR decode with tight limits, then the expiry check. Every failure raises
[InvalidRequestState][mrtr_trio.InvalidRequestState], whose wire message never varies; the reason
goes to the log, at a bounded rate.
"""

from __future__ import annotations

import base64
import binascii
import hmac
import logging
import math
import re
import secrets
import time
import warnings
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import attrs
import blake3
import cbor2

from ._errors import InvalidRequestState, MrtrError
from ._journal import (
    PAUSED,
    Answered,
    Cursor,
    Entry,
    Pending,
    PendingPoll,
    StepResult,
    strict_loads,
)
from ._values import (
    ACTIONS,
    FINGERPRINT_BYTES,
    Answer,
    CreateMessageResult,
    ElicitResult,
    ListRootsResult,
    Root,
    request_from_wire,
)

__all__ = [
    "EphemeralKeyWarning",
    "Keyring",
    "MIN_KEY_BYTES",
    "StateCodec",
    "binding_digest",
    "decode_cursor",
    "encode_cursor",
]

log = logging.getLogger("mrtr_trio")

FORMAT_VERSION = 2
KEY_ID_BYTES = 4
CHECK_BYTES = 2
TAG_BYTES = 16
MIN_KEY_BYTES = 32
FUTURE_SKEW_SECONDS = 60
_HEADER_BYTES = 1 + KEY_ID_BYTES + CHECK_BYTES
# Times in a token are whole seconds since the epoch; anything past this is not a time.
_MAX_TIME = 1 << 40

# derive_key contexts: hard-coded, globally unique, one per purpose (BLAKE3 KDF rules).
_KDF_KEY_ID = "mrtr_trio 2026-11-30 requestState key id"
_KDF_TAG = "mrtr_trio 2026-11-30 requestState tag"
_KDF_CHECK = "mrtr_trio 2026-12-01 requestState unbound body check"

_B64URL = re.compile(r"[A-Za-z0-9_-]*")


class EphemeralKeyWarning(UserWarning):
    """``Runtime(keys=None)``: state will not survive a restart or reach another process."""


def binding_digest(identity: str, arguments: Mapping[str, Any], bind: bytes) -> bytes:
    """The 32-byte digest of what a token is bound to: the handler identity, a canonical
    encoding of the arguments, and the host's *bind* bytes.

    Values CBOR cannot encode bind by their JSON form when they have one (pydantic models), else
    by type name only; a host that validates arguments binds the raw ones through *bind*.
    """
    canonical = cbor2.dumps(
        [identity, dict(arguments), bytes(bind)], canonical=True, default=_bind_fallback
    )
    return blake3.blake3(canonical).digest()


def _bind_fallback(encoder: cbor2.CBOREncoder, value: Any) -> None:
    dump = getattr(value, "model_dump", None)
    if callable(dump):
        encoder.encode(dump(mode="json"))
    else:
        encoder.encode(f"<{type(value).__module__}.{type(value).__qualname__}>")


# ----------------------------------------------------------------------------- CBOR layout
#
# body    = [rounds, issued_at, lifetime, journal, pending, payload]
# journal = [entry...]; entry = {key: [fp, answer]} (answered; {} for a pause) | [fp, value] (step)
# pending = null | {key: [fp, answer|null]} | {key: [fp, answer|null, request]} (return style)
#         | [fp, deadline|null] (poll)
# answer  = [0, action] | [0, action, content]                       (elicitation)
#         | [1, role, content, model] | [1, role, content, model, stop_reason]   (sampling)
#         | [2, [[uri] | [uri, name], ...]]                          (roots)

_ACTION_CODES = {action: code for code, action in enumerate(ACTIONS)}


def _answer_to_cbor(answer: Answer) -> list[Any]:
    if isinstance(answer, ElicitResult):
        head = [0, _ACTION_CODES[answer.action]]
        return head if answer.content is None else [*head, dict(answer.content)]
    if isinstance(answer, CreateMessageResult):
        content = answer.content
        blocks = [dict(b) for b in content] if isinstance(content, tuple) else dict(content)
        tail = [] if answer.stop_reason is None else [answer.stop_reason]
        return [1, answer.role, blocks, answer.model, *tail]
    return [2, [[r.uri] if r.name is None else [r.uri, r.name] for r in answer.roots]]


def _answer_from_cbor(data: Any) -> Answer:
    kind = data[0]
    if kind == 0:
        return ElicitResult(ACTIONS[data[1]], data[2] if len(data) == 3 else None)
    if kind == 1:
        content = data[2]
        blocks = tuple(content) if isinstance(content, list) else content
        return CreateMessageResult(data[1], blocks, data[3], data[4] if len(data) == 5 else None)
    if kind == 2:
        return ListRootsResult(Root(*root) for root in data[1])
    raise ValueError(f"unknown answer kind {kind!r}")


def _entry_to_cbor(entry: Entry) -> Any:
    if isinstance(entry, Answered):
        return {key: [fp, _answer_to_cbor(a)] for key, (fp, a) in entry.answers.items()}
    return [entry.fingerprint, entry.value]


def _entry_from_cbor(data: Any) -> Entry:
    if isinstance(data, dict):
        if not data:
            return PAUSED
        return Answered({key: (_fp(fp), _answer_from_cbor(a)) for key, (fp, a) in data.items()})
    fp, value = data
    return StepResult(_fp(fp), value)


def _pending_to_cbor(pending: Pending | PendingPoll | None) -> Any:
    if pending is None:
        return None
    if isinstance(pending, PendingPoll):
        return [pending.fingerprint, pending.deadline]
    entries: dict[str, list[Any]] = {}
    for key, fp in pending.fingerprints.items():
        answer = pending.answered.get(key)
        entry: list[Any] = [fp, None if answer is None else _answer_to_cbor(answer)]
        if pending.requests is not None:
            entry.append(pending.requests[key].to_wire())
        entries[key] = entry
    return entries


def _pending_from_cbor(data: Any) -> Pending | PendingPoll | None:
    if data is None:
        return None
    if isinstance(data, list):
        fp, deadline = data
        if deadline is not None and not _is_time(deadline):
            raise ValueError(f"bad poll deadline {deadline!r}")
        return PendingPoll(_fp(fp), deadline)
    if not isinstance(data, dict):
        raise ValueError(f"bad pending entry {data!r}")
    fingerprints = {key: _fp(entry[0]) for key, entry in data.items()}
    answered = {k: _answer_from_cbor(e[1]) for k, e in data.items() if e[1] is not None}
    with_requests = {len(entry) for entry in data.values()} == {3}
    requests = {k: request_from_wire(e[2]) for k, e in data.items()} if with_requests else None
    return Pending(fingerprints, answered, requests)


def _fp(value: Any) -> bytes:
    if type(value) is not bytes or len(value) != FINGERPRINT_BYTES:
        raise ValueError(f"bad fingerprint {value!r}")
    return value


def _is_time(value: Any) -> bool:
    return type(value) is int and 0 <= value < _MAX_TIME


def encode_cursor(cursor: Cursor) -> bytes:
    """The cursor as compact CBOR."""
    return cbor2.dumps(
        [
            cursor.rounds,
            cursor.issued_at,
            cursor.lifetime,
            [_entry_to_cbor(e) for e in cursor.journal],
            _pending_to_cbor(cursor.pending),
            cursor.payload,
        ]
    )


def decode_cursor(body: bytes) -> Cursor:
    """The cursor from its CBOR; ``ValueError`` when the body is not one."""
    try:
        rounds, issued_at, lifetime, journal, pending, payload = strict_loads(body)
        if not all(_is_time(n) for n in (rounds, issued_at, lifetime)):
            raise ValueError("bad counters")
        return Cursor(
            tuple(_entry_from_cbor(e) for e in journal),
            _pending_from_cbor(pending),
            rounds,
            payload,
            issued_at,
            lifetime,
        )
    except ValueError:
        raise
    except Exception as problem:  # whatever else a signed but absurd body trips over
        raise ValueError(f"{type(problem).__name__}: {problem}") from None


# --------------------------------------------------------------------------------- keyring


@attrs.frozen
class _Key:
    key_id: bytes
    tag_key: bytes
    check_key: bytes


def _derive(key: bytes) -> _Key:
    def sub(context: str, size: int = 32) -> bytes:
        return blake3.blake3(key, derive_key_context=context).digest(size)

    return _Key(sub(_KDF_KEY_ID, KEY_ID_BYTES), sub(_KDF_TAG), sub(_KDF_CHECK))


_process_key: bytes | None = None


def ephemeral_key() -> bytes:
    """The random per-process key (made on first use)."""
    global _process_key
    if _process_key is None:
        _process_key = secrets.token_bytes(MIN_KEY_BYTES)
    return _process_key


def check_keys(keys: object) -> tuple[bytes, ...]:
    """*keys* as a tuple of byte strings, or ``TypeError``/``ValueError`` saying what is wrong."""
    if isinstance(keys, bytes | bytearray | str) or not isinstance(keys, Sequence):
        raise TypeError("keys must be a list of byte strings, e.g. keys=[secret]")
    if not keys:
        raise ValueError("keys must hold at least one key")
    checked = []
    for index, key in enumerate(keys):
        if not isinstance(key, bytes | bytearray):
            raise TypeError(f"keys[{index}] must be bytes, got {type(key).__name__}")
        if len(key) < MIN_KEY_BYTES:
            raise ValueError(
                f"keys[{index}] is {len(key)} bytes; keys must be at least {MIN_KEY_BYTES} "
                "bytes (e.g. secrets.token_bytes(32))"
            )
        checked.append(bytes(key))
    return tuple(checked)


def warn_ephemeral(stacklevel: int) -> tuple[bytes, ...]:
    """Warn that state is signed with the per-process key, and return that key."""
    warnings.warn(
        "Runtime(keys=None) signs requestState with a random per-process key: in-flight "
        "modern flows will not survive a restart or reach another process. Pass "
        "keys=[secret] (at least 32 bytes) to scale out.",
        EphemeralKeyWarning,
        stacklevel=stacklevel + 1,
    )
    return (ephemeral_key(),)


class Keyring:
    """Signing keys: the first signs, all verify (rotation).

    A key's id is derived from the key itself, so the order of the list does not matter to
    verification. Keys are checked with `check_keys`.
    """

    def __init__(self, keys: Sequence[bytes]) -> None:
        derived = [_derive(key) for key in check_keys(keys)]
        self._signing = derived[0]
        self._by_id = {k.key_id: k for k in reversed(derived)}

    @property
    def key_ids(self) -> tuple[bytes, ...]:
        """The ids of the keys that verify, the signing key first."""
        return (self._signing.key_id, *(i for i in self._by_id if i != self._signing.key_id))

    def sign(self, body: bytes, binding: bytes) -> bytes:
        """``header | body | tag`` under the signing key."""
        key = self._signing
        head = bytes((FORMAT_VERSION,)) + key.key_id
        header = head + _check(key, head, body)
        return header + body + _tag(key, binding, header, body)

    def verify(self, raw: bytes, binding: bytes) -> bytes:
        """The body of a signed token; [InvalidRequestState][mrtr_trio.InvalidRequestState]
        unless authentic."""
        if len(raw) < _HEADER_BYTES + TAG_BYTES + 1:
            raise InvalidRequestState(f"too short ({len(raw)} bytes)")
        if raw[0] != FORMAT_VERSION:
            raise InvalidRequestState(f"unknown format version {raw[0]}")
        header, body, tag = raw[:_HEADER_BYTES], raw[_HEADER_BYTES:-TAG_BYTES], raw[-TAG_BYTES:]
        key = self._by_id.get(header[1 : 1 + KEY_ID_BYTES])
        if key is None:
            raise InvalidRequestState(
                f"key id {header[1 : 1 + KEY_ID_BYTES].hex()} is not in the keyring"
            )
        if not hmac.compare_digest(tag, _tag(key, binding, header, body)):
            head = header[: 1 + KEY_ID_BYTES]
            if hmac.compare_digest(header[1 + KEY_ID_BYTES :], _check(key, head, body)):
                raise InvalidRequestState(
                    "bound to another call (handler, arguments or bind bytes differ)"
                )
            raise InvalidRequestState("tag mismatch (tampered, truncated or extended)")
        return body


def _tag(key: _Key, binding: bytes, header: bytes, body: bytes) -> bytes:
    hasher = blake3.blake3(binding, key=key.tag_key)
    hasher.update(header)
    hasher.update(body)
    return hasher.digest(TAG_BYTES)


def _check(key: _Key, head: bytes, body: bytes) -> bytes:
    hasher = blake3.blake3(head, key=key.check_key)
    hasher.update(body)
    return hasher.digest(CHECK_BYTES)


# ------------------------------------------------------------------------------ rejections


class _RejectionLog:
    """Logs rejected tokens at WARNING, at most ``burst`` lines per ``window`` seconds; the
    rest go to DEBUG, and the next WARNING says how many were held back."""

    def __init__(self, burst: int = 10, window: float = 60.0) -> None:
        self.burst = burst
        self.window = window
        self._window_start = -math.inf
        self._logged = 0
        self._held_back = 0

    def __call__(self, reason: str) -> None:
        now = time.monotonic()
        if now - self._window_start >= self.window:
            if self._held_back:
                log.warning(
                    "%d more requestState rejections in the last %.0f s were logged at DEBUG",
                    self._held_back,
                    self.window,
                )
            self._window_start, self._logged, self._held_back = now, 0, 0
        if self._logged < self.burst:
            self._logged += 1
            log.warning("rejected requestState: %s", reason)
        else:
            self._held_back += 1
            log.debug("rejected requestState: %s", reason)


# ------------------------------------------------------------------------------------ codec


@attrs.frozen
class StateCodec:
    """Seals cursors into tokens and opens tokens into cursors, with every check in order."""

    keyring: Keyring
    ttl: float
    max_state_bytes: int
    clock: Callable[[], float] = time.time
    _log_rejection: _RejectionLog = attrs.field(factory=_RejectionLog, init=False, repr=False)

    def seal(self, cursor: Cursor, binding: bytes) -> str:
        """A token for *cursor* (issue time now, lifetime ``ttl``), bound to *binding*."""
        stamped = attrs.evolve(cursor, issued_at=int(self.clock()), lifetime=math.ceil(self.ttl))
        raw = self.keyring.sign(encode_cursor(stamped), binding)
        token = base64.urlsafe_b64encode(raw).rstrip(b"=").decode("ascii")
        if len(token) > self.max_state_bytes:
            raise MrtrError(
                f"the requestState for this flow would be {len(token)} bytes, over "
                f"max_state_bytes={self.max_state_bytes}; record less (smaller step results or "
                "payloads, fewer rounds) or raise the cap"
            )
        return token

    def open(self, token: object, binding: bytes, *, check_expiry: bool = True) -> Cursor:
        """The cursor in *token*; [InvalidRequestState][mrtr_trio.InvalidRequestState] (reason
        logged) unless it is authentic, bound to *binding*, well formed and (with
        *check_expiry*) unexpired."""
        try:
            return self._open(token, binding, check_expiry)
        except InvalidRequestState as error:
            self._log_rejection(error.reason)
            raise

    def _open(self, token: object, binding: bytes, check_expiry: bool) -> Cursor:
        if not isinstance(token, str):
            raise InvalidRequestState(f"not a string but {type(token).__name__}")
        if len(token) > self.max_state_bytes:
            raise InvalidRequestState(
                f"{len(token)} bytes, over max_state_bytes={self.max_state_bytes}"
            )
        body = self.keyring.verify(_strict_b64decode(token), binding)
        try:
            cursor = decode_cursor(body)
        except ValueError as problem:
            raise InvalidRequestState(f"malformed body ({problem})") from None
        if not check_expiry:
            return cursor
        now = self.clock()
        if cursor.issued_at > now + FUTURE_SKEW_SECONDS:
            raise InvalidRequestState(f"issued {cursor.issued_at - now:.0f} s in the future")
        if now >= cursor.issued_at + cursor.lifetime:
            age = now - cursor.issued_at
            raise InvalidRequestState(f"expired ({age:.0f} s old, lifetime {cursor.lifetime} s)")
        return cursor


# The unused low bits of the last character of an unpadded base64url text must be zero, or the
# text is one of several that decode to the same bytes.
_LAST_CHAR_MASK = {2: 0b1111, 3: 0b11}
_B64_VALUE = {
    c: i for i, c in enumerate("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_")
}


def _strict_b64decode(token: str) -> bytes:
    if len(token) % 4 == 1 or not _B64URL.fullmatch(token):
        raise InvalidRequestState("not unpadded base64url")
    mask = _LAST_CHAR_MASK.get(len(token) % 4)
    if mask is not None and _B64_VALUE[token[-1]] & mask:
        raise InvalidRequestState("non-canonical base64url")
    try:
        return base64.urlsafe_b64decode(token + "=" * (-len(token) % 4))
    except (binascii.Error, ValueError):  # pragma: no cover - the checks above rule it out
        raise InvalidRequestState("not unpadded base64url") from None
