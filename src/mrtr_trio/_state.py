"""The cursor of a modern flow and the signed ``requestState`` token that carries it.

The **cursor** is everything a retry needs to continue a flow in a fresh process: the journal
(one record per yield already answered: the answers or step result, each with a short
fingerprint of the request or step it answers), the pending yield (its keys and fingerprints,
plus answers kept from a partly valid batch), the number of rounds so far, the return-style
payload, and the issue time and lifetime.

The **token** is ``base64url(header | body | tag)`` without padding:

- header: format version (1 byte), key id (4 bytes), binding hint (2 bytes);
- body: the cursor as compact CBOR;
- tag: 16 bytes of BLAKE3 keyed with a ``derive_key`` subkey, over the binding digest, the
  header and the body.

The binding (handler identity, argument digest, host ``bind`` bytes) is fed into the tag rather
than carried, so the token stays small; the two-byte hint only lets the log tell "minted for
another call" from "tampered". :meth:`StateCodec.open` verifies before it parses: size cap,
strict base64url, version, authenticated key id, constant-time tag comparison, and only then a
CBOR decode with tight limits, then the expiry check. Every failure raises
:class:`InvalidRequestState`, whose wire message never varies; the reason goes to the log.
"""

from __future__ import annotations

import base64
import binascii
import hmac
import io
import json
import logging
import math
import re
import secrets
import time
import warnings
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Literal, TypeAlias

import attrs
import blake3
import cbor2

from ._errors import InvalidRequestState, MrtrError
from ._values import (
    ELICIT,
    ROOTS,
    SAMPLING,
    Answer,
    CreateMessageResult,
    ElicitResult,
    ListRootsResult,
    Request,
    Root,
    request_from_wire,
)

__all__ = [
    "AskRecord",
    "Cursor",
    "EphemeralKeyWarning",
    "Keyring",
    "PAUSE_RECORD",
    "PendingAsk",
    "PendingPause",
    "PauseRecord",
    "Record",
    "StateCodec",
    "StepRecord",
    "binding_digest",
    "canonical_wire",
    "describe_fingerprint",
    "fingerprint",
    "record_problem",
    "recordable",
    "step_fingerprint",
]

log = logging.getLogger("mrtr_trio")

FORMAT_VERSION = 1
FINGERPRINT_BYTES = 4
KEY_ID_BYTES = 4
HINT_BYTES = 2
TAG_BYTES = 16
MIN_KEY_BYTES = 32
FUTURE_SKEW_SECONDS = 60
_HEADER_BYTES = 1 + KEY_ID_BYTES + HINT_BYTES

# derive_key contexts: hard-coded, globally unique, one per purpose (BLAKE3 KDF rules).
_KDF_KEY_ID = "mrtr_trio 2026-11-30 requestState key id"
_KDF_TAG = "mrtr_trio 2026-11-30 requestState tag"
_KDF_HINT = "mrtr_trio 2026-11-30 requestState binding hint"
_KDF_FINGERPRINT = "mrtr_trio 2026-11-30 request fingerprint"

_B64URL = re.compile(r"[A-Za-z0-9_-]*")


class EphemeralKeyWarning(UserWarning):
    """``Runtime(keys=None)``: state will not survive a restart or reach another process."""


# ----------------------------------------------------------------------------- fingerprints


# A fingerprint is one byte naming the kind, then a short digest: enough to notice that a
# replayed handler asks something else, and to say what kind of thing was recorded.
_KIND_CODES = {ELICIT: 0, SAMPLING: 1, ROOTS: 2, "step": 3}
_KIND_NAMES = {code: kind for kind, code in _KIND_CODES.items()}


# Sorted keys: the same request fingerprints the same whatever order its dicts were built in.
_CANONICAL_JSON = json.JSONEncoder(
    sort_keys=True, separators=(",", ":"), ensure_ascii=False, check_circular=False
)


def canonical_wire(request: Request) -> str:
    """*request*'s wire form as canonical JSON (sorted keys): equal texts, equal requests."""
    return _CANONICAL_JSON.encode(request.to_wire())


def fingerprint(request: Request) -> bytes:
    """A short digest of *request*'s wire form: what a journal entry answers."""
    return _fingerprint_of(request.method, canonical_wire(request).encode())


def step_fingerprint(fn: Callable[..., Any]) -> bytes:
    """A short digest naming a ``step`` function (its qualified name, not its arguments, which
    may legitimately vary)."""
    name = getattr(fn, "__qualname__", None) or type(fn).__qualname__
    return _fingerprint_of("step", name.encode())


def describe_fingerprint(value: bytes) -> str:
    """``"elicitation/create 0a1b2c3d"``: the kind and the hex of a fingerprint."""
    return f"{_KIND_NAMES.get(value[0], '?')} {value.hex()}"


def _fingerprint_of(kind: str, data: bytes) -> bytes:
    digest = blake3.blake3(data, derive_key_context=_KDF_FINGERPRINT).digest(FINGERPRINT_BYTES - 1)
    return bytes([_KIND_CODES[kind]]) + digest


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


# ---------------------------------------------------------------------------------- cursor


@attrs.frozen
class AskRecord:
    """A yielded ask, answered: key → (fingerprint of the request, answer)."""

    answers: Mapping[str, tuple[bytes, Answer]]


@attrs.frozen
class StepRecord:
    """A ``step`` that ran: its fingerprint and its (CBOR-normalised) value."""

    fingerprint: bytes
    value: Any


@attrs.frozen
class PauseRecord:
    """A ``pause()`` the client already gave its turn for."""


PAUSE_RECORD = PauseRecord()
Record: TypeAlias = AskRecord | StepRecord | PauseRecord


@attrs.frozen
class PendingAsk:
    """The ask the client is answering this round.

    ``fingerprints`` maps each key to the fingerprint of its request; ``answered`` holds the
    valid answers already received for some keys (a batch answered in part). ``requests`` is
    set for return-style handlers only: they are not replayed, so the requests travel along to
    check the answers against.
    """

    fingerprints: Mapping[str, bytes]
    answered: Mapping[str, Answer] = attrs.field(factory=dict)
    requests: Mapping[str, Request] | None = None


@attrs.frozen
class PendingPause:
    """A ``pause()`` (or a return-style state-only round) the client is to retry after."""


Pending: TypeAlias = PendingAsk | PendingPause


@attrs.frozen
class Cursor:
    """Where a modern flow stands (see the module docstring)."""

    journal: tuple[Record, ...] = ()
    pending: Pending | None = None
    rounds: int = 0
    payload: Any = None
    issued_at: int = 0
    lifetime: int = 0


# ------------------------------------------------------------------------------ recordable

# The tags cbor2 decodes itself (tag_hook never sees them); each is overridden to fail, but
# for bignums (2, 3): JSON integers have no size limit, and they decode to plain ints.
_BUILTIN_TAGS = (
    *(0, 1, 4, 5, 25, 28, 29, 30, 35, 36, 37, 52, 54),
    *(100, 256, 258, 260, 261, 1004, 43000, 55799),
)
#: Nesting the token decoder allows; recorded values get less, for the cursor around them.
MAX_DEPTH = 32
_VALUE_DEPTH = MAX_DEPTH - 8


def _reject_tag(*_: Any) -> Any:
    raise ValueError("CBOR tags are not allowed")


_NO_TAGS = dict.fromkeys(_BUILTIN_TAGS, _reject_tag)


def _strict_loads(data: bytes, max_depth: int = MAX_DEPTH) -> Any:
    """Decode CBOR with tight limits: no tags (so nothing but plain JSON-like values and bytes),
    no indefinite lengths, no duplicate keys, small depth, and no trailing bytes."""
    stream = io.BytesIO(data)
    decoder = cbor2.CBORDecoder(
        stream,
        tag_hook=_reject_tag,
        semantic_decoders=_NO_TAGS,
        max_depth=max_depth,
        allow_indefinite=False,
        allow_duplicate_keys=False,
        strict_hashable_types=True,
    )
    value = decoder.decode()
    if stream.tell() != len(data):
        raise ValueError(f"{len(data) - stream.tell()} trailing bytes")
    return value


def recordable(value: Any, what: str) -> Any:
    """*value* as it will read back from a token: encoded to CBOR and decoded again (tuples
    become lists). Both eras feed handlers this normalised value, so they see the same thing.

    Raises :class:`MrtrError` naming *what* when the value cannot be recorded.
    """
    try:
        return _read_back(value)
    except _UNRECORDABLE as problem:
        raise MrtrError(
            f"cannot record the {type(value).__name__} from {what} in requestState "
            f"({problem}); use None, bool, int, float, str, bytes, lists and dicts"
        ) from None


def record_problem(value: Any) -> str | None:
    """Why *value* could not be recorded in a token and read back (too deep, a type with no
    plain CBOR form, a string that is not valid Unicode), or ``None`` when it can."""
    try:
        _read_back(value)
    except _UNRECORDABLE as problem:
        return str(problem)
    return None


_UNRECORDABLE = (cbor2.CBORError, TypeError, ValueError)


def _read_back(value: Any) -> Any:
    return _strict_loads(cbor2.dumps(value), _VALUE_DEPTH)


# ----------------------------------------------------------------------------- CBOR layout
#
# body    = [rounds, issued_at, lifetime, journal, pending, payload]
# journal = [record...]; record = {key: [fp, answer]} (ask) | [fp, value] (step) | null (pause)
# pending = null | true (pause) | {key: [fp, answer|null]} | {key: [fp, answer|null, request]}
# answer  = [0, action] | [0, action, content]                       (elicitation)
#         | [1, role, content, model] | [1, role, content, model, stop_reason]   (sampling)
#         | [2, [[uri] | [uri, name], ...]]                          (roots)

_ACTION_CODES = {"accept": 0, "decline": 1, "cancel": 2}
_ACTIONS: tuple[Literal["accept", "decline", "cancel"], ...] = ("accept", "decline", "cancel")


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
        return ElicitResult(_ACTIONS[data[1]], data[2] if len(data) == 3 else None)
    if kind == 1:
        content = data[2]
        blocks = tuple(content) if isinstance(content, list) else content
        return CreateMessageResult(data[1], blocks, data[3], data[4] if len(data) == 5 else None)
    if kind == 2:
        return ListRootsResult(Root(*root) for root in data[1])
    raise ValueError(f"unknown answer kind {kind!r}")


def _record_to_cbor(record: Record) -> Any:
    if isinstance(record, AskRecord):
        return {key: [fp, _answer_to_cbor(a)] for key, (fp, a) in record.answers.items()}
    if isinstance(record, StepRecord):
        return [record.fingerprint, record.value]
    return None


def _record_from_cbor(data: Any) -> Record:
    if data is None:
        return PAUSE_RECORD
    if isinstance(data, dict):
        return AskRecord({key: (_fp(fp), _answer_from_cbor(a)) for key, (fp, a) in data.items()})
    fp, value = data
    return StepRecord(_fp(fp), value)


def _pending_to_cbor(pending: Pending | None) -> Any:
    if pending is None:
        return None
    if isinstance(pending, PendingPause):
        return True
    entries: dict[str, list[Any]] = {}
    for key, fp in pending.fingerprints.items():
        answer = pending.answered.get(key)
        entry: list[Any] = [fp, None if answer is None else _answer_to_cbor(answer)]
        if pending.requests is not None:
            entry.append(pending.requests[key].to_wire())
        entries[key] = entry
    return entries


def _pending_from_cbor(data: Any) -> Pending | None:
    if data is None:
        return None
    if data is True:
        return PendingPause()
    fingerprints = {key: _fp(entry[0]) for key, entry in data.items()}
    answered = {k: _answer_from_cbor(e[1]) for k, e in data.items() if e[1] is not None}
    with_requests = {len(entry) for entry in data.values()} == {3}
    requests = {k: request_from_wire(e[2]) for k, e in data.items()} if with_requests else None
    return PendingAsk(fingerprints, answered, requests)


def _fp(value: Any) -> bytes:
    if not isinstance(value, bytes) or len(value) != FINGERPRINT_BYTES:
        raise ValueError(f"bad fingerprint {value!r}")
    return value


def encode_cursor(cursor: Cursor) -> bytes:
    """The cursor as compact CBOR."""
    return cbor2.dumps(
        [
            cursor.rounds,
            cursor.issued_at,
            cursor.lifetime,
            [_record_to_cbor(r) for r in cursor.journal],
            _pending_to_cbor(cursor.pending),
            cursor.payload,
        ]
    )


def decode_cursor(body: bytes) -> Cursor:
    """The cursor from its CBOR; ``ValueError`` (or ``TypeError``, ``KeyError``,
    ``IndexError``) when the body is not one."""
    rounds, issued_at, lifetime, journal, pending, payload = _strict_loads(body)
    if not all(isinstance(n, int) and n >= 0 for n in (rounds, issued_at, lifetime)):
        raise ValueError("bad counters")
    return Cursor(
        tuple(_record_from_cbor(r) for r in journal),
        _pending_from_cbor(pending),
        rounds,
        payload,
        issued_at,
        lifetime,
    )


# --------------------------------------------------------------------------------- keyring


@attrs.frozen
class _Key:
    key_id: bytes
    tag_key: bytes
    hint_key: bytes


def _derive(key: bytes) -> _Key:
    def sub(context: str, size: int = 32) -> bytes:
        return blake3.blake3(key, derive_key_context=context).digest(size)

    return _Key(sub(_KDF_KEY_ID, KEY_ID_BYTES), sub(_KDF_TAG), sub(_KDF_HINT))


_process_key: bytes | None = None


def _ephemeral_key() -> bytes:
    global _process_key
    if _process_key is None:
        _process_key = secrets.token_bytes(MIN_KEY_BYTES)
    return _process_key


class Keyring:
    """Signing keys: the first signs, all verify (rotation).

    Each key must be at least 32 bytes. A key's id is derived from the key itself, so the order
    of the list does not matter to verification. ``keys=None`` uses one random key per process
    and warns (:class:`EphemeralKeyWarning`).
    """

    def __init__(self, keys: Sequence[bytes] | None) -> None:
        if keys is None:
            warnings.warn(
                "Runtime(keys=None) signs requestState with a random per-process key: in-flight "
                "modern flows will not survive a restart or reach another process. Pass "
                "keys=[secret] (at least 32 bytes) to scale out.",
                EphemeralKeyWarning,
                stacklevel=3,
            )
            keys = [_ephemeral_key()]
        if isinstance(keys, bytes | bytearray | str) or not isinstance(keys, Sequence):
            raise TypeError("keys must be a list of byte strings, e.g. keys=[secret]")
        if not keys:
            raise ValueError("keys must hold at least one key")
        derived = []
        for index, key in enumerate(keys):
            if not isinstance(key, bytes | bytearray):
                raise TypeError(f"keys[{index}] must be bytes, got {type(key).__name__}")
            if len(key) < MIN_KEY_BYTES:
                raise ValueError(
                    f"keys[{index}] is {len(key)} bytes; keys must be at least {MIN_KEY_BYTES} "
                    "bytes (e.g. secrets.token_bytes(32))"
                )
            derived.append(_derive(bytes(key)))
        self._signing = derived[0]
        self._by_id = {k.key_id: k for k in reversed(derived)}

    @property
    def key_ids(self) -> tuple[bytes, ...]:
        """The ids of the keys that verify, the signing key first."""
        return (self._signing.key_id, *(i for i in self._by_id if i != self._signing.key_id))

    def sign(self, body: bytes, binding: bytes) -> bytes:
        """``header | body | tag`` under the signing key."""
        key = self._signing
        header = bytes([FORMAT_VERSION]) + key.key_id + _hint(key, binding)
        return header + body + _tag(key, binding, header, body)

    def verify(self, raw: bytes, binding: bytes) -> bytes:
        """The body of a signed token; :class:`InvalidRequestState` unless authentic."""
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
            if not hmac.compare_digest(header[1 + KEY_ID_BYTES :], _hint(key, binding)):
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


def _hint(key: _Key, binding: bytes) -> bytes:
    return blake3.blake3(binding, key=key.hint_key).digest(HINT_BYTES)


# ------------------------------------------------------------------------------------ codec


class StateCodec:
    """Seals cursors into tokens and opens tokens into cursors, with every check in order."""

    def __init__(
        self,
        keyring: Keyring,
        *,
        ttl: float,
        max_state_bytes: int,
        clock: Callable[[], float] = time.time,
        check_expiry: bool = True,
    ) -> None:
        self.keyring = keyring
        self.ttl = ttl
        self.max_state_bytes = max_state_bytes
        self.clock = clock
        #: False only for offline tools that replay recorded tokens (mrtr_trio.testing).
        self.check_expiry = check_expiry

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

    def open(self, token: object, binding: bytes) -> Cursor:
        """The cursor in *token*; :class:`InvalidRequestState` (reason logged) unless it is
        authentic, bound to *binding*, well formed and unexpired."""
        try:
            return self._open(token, binding)
        except InvalidRequestState as error:
            log.warning("rejected requestState: %s", error.reason)
            raise

    def _open(self, token: object, binding: bytes) -> Cursor:
        if not isinstance(token, str):
            raise InvalidRequestState(f"not a string but {type(token).__name__}")
        if len(token) > self.max_state_bytes:
            raise InvalidRequestState(
                f"{len(token)} bytes, over max_state_bytes={self.max_state_bytes}"
            )
        raw = _strict_b64decode(token)
        body = self.keyring.verify(raw, binding)
        try:
            cursor = decode_cursor(body)
        except (ValueError, TypeError, KeyError, IndexError, cbor2.CBORError) as problem:
            raise InvalidRequestState(f"malformed body ({problem})") from None
        if not self.check_expiry:
            return cursor
        now = self.clock()
        if cursor.issued_at > now + FUTURE_SKEW_SECONDS:
            raise InvalidRequestState(f"issued {cursor.issued_at - now:.0f} s in the future")
        if now >= cursor.issued_at + cursor.lifetime:
            age = now - cursor.issued_at
            raise InvalidRequestState(f"expired ({age:.0f} s old, lifetime {cursor.lifetime} s)")
        return cursor


def _strict_b64decode(token: str) -> bytes:
    if not _B64URL.fullmatch(token) or len(token) % 4 == 1:
        raise InvalidRequestState("not unpadded base64url")
    try:
        raw = base64.urlsafe_b64decode(token + "=" * (-len(token) % 4))
    except (binascii.Error, ValueError):
        raise InvalidRequestState("not unpadded base64url") from None
    if base64.urlsafe_b64encode(raw).rstrip(b"=").decode("ascii") != token:
        raise InvalidRequestState("non-canonical base64url")
    return raw
