"""The signed `requestState` token: a cursor's compact CBOR under a BLAKE3 tag.

The token is `base64url(header | body | tag)` without padding:

- header: format version (1 byte), key id (4 bytes), body check (2 bytes);
- body: the cursor as compact CBOR (layout below);
- tag: 16 bytes of BLAKE3 keyed with a `derive_key` subkey, over the binding digest, the
  header and the body.

The binding (handler identity, argument digest, host `bind` bytes) is fed into the tag rather
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

import binascii
import functools
import hmac
import logging
import math
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any, NoReturn

import attrs
import blake3
import cbor2

from ._errors import InvalidRequestState, StateTooLarge
from ._journal import (
    PAUSED,
    Answered,
    AnsweredOne,
    Cursor,
    Entry,
    Journal,
    Pending,
    PendingOne,
    PendingPoll,
    StepResult,
    single_key,
    strict_decoder,
)
from ._util import Memo
from ._values import (
    ACTIONS,
    FINGERPRINT_BYTES,
    KIND_CODES,
    Answer,
    CreateMessageResult,
    ElicitResult,
    ListRootsResult,
    Request,
    Root,
    request_from_wire,
    trusted_answer,
    trusted_elicit_result,
)

__all__ = [
    "FLOW_ID_BYTES",
    "EncodedJournal",
    "Keyring",
    "MIN_KEY_BYTES",
    "StateCodec",
    "b64url",
    "binding_digest",
    "decode_cursor",
    "encode_cursor",
]

log = logging.getLogger("mrtr_trio")

FORMAT_VERSION = 2
ENCRYPTED_VERSION = 3
NONCE_BYTES = 12
STEP_KEY_BYTES = 16
FLOW_ID_BYTES = 8
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
_KDF_ENCRYPT = "mrtr_trio 2026-12-01 requestState ChaCha20-Poly1305 key"
_KDF_NONCE = "mrtr_trio 2026-12-01 requestState synthetic nonce"
_KDF_STEP = "mrtr_trio 2026-12-01 step idempotency key"


def b64url(raw: bytes) -> str:
    """*raw* as unpadded base64url, the alphabet of tokens and keys."""
    return binascii.b2a_base64(raw, newline=False).translate(_TO_URLSAFE, b"=").decode("ascii")


_TO_URLSAFE = bytes.maketrans(b"+/", b"-_")


def binding_digest(identity: str, arguments: Mapping[str, Any], bind: bytes) -> bytes:
    """The 32-byte digest of what a token is bound to: the handler identity, a canonical
    encoding of the arguments, and the host's *bind* bytes.

    Values CBOR cannot encode bind by their JSON form when they have one (pydantic models), else
    by type name only; a host that validates arguments binds the raw ones through *bind*.

    Every round of a flow binds the same arguments again: digests of small, plain ones are
    remembered (see `_binding_key`).
    """
    key = _binding_key(identity, arguments, bind)
    known = None if key is None else _BINDINGS.get(key)
    if known is not None:
        return known
    canonical = cbor2.dumps(
        [identity, dict(arguments), bytes(bind)], canonical=True, default=_bind_fallback
    )
    digest = blake3.blake3(canonical).digest()
    return digest if key is None else _BINDINGS.put(key, digest)


# At most 256 keys of at most 16 short values each: a bounded memory, whatever clients send.
_BINDINGS: Memo[tuple[Any, ...], bytes] = Memo(256)
_MAX_KEYED_ARGUMENTS = 16
_MAX_KEYED_TEXT = 128
_MAX_KEYED_INT = 1 << 64


def _binding_key(
    identity: str, arguments: Mapping[str, Any], bind: bytes
) -> tuple[Any, ...] | None:
    """A key under which the binding digest is remembered, or `None` (not remembered).

    Two keys are equal only when the canonical encodings are: each argument is keyed by its
    name (a str), its exact type and its value, and only str (short), int (within 64 bits),
    bool and None values are keyed (1, 1.0 and True are equal in Python but encode
    differently; so do 0.0 and -0.0, which is why floats are left out). Long texts, big
    numbers and many arguments are not keyed, so the memo stays small.
    """
    if (
        type(identity) is not str
        or type(bind) is not bytes
        or len(arguments) > _MAX_KEYED_ARGUMENTS
    ):
        return None
    parts: list[Any] = [identity, bind]
    for name, value in arguments.items():
        kind = type(value)
        if type(name) is not str:
            return None
        if kind is str:
            if len(value) > _MAX_KEYED_TEXT:
                return None
        elif kind is int:
            if not -_MAX_KEYED_INT < value < _MAX_KEYED_INT:
                return None
        elif kind is not bool and value is not None:
            return None
        parts += (name, kind, value)
    return tuple(parts)


def _bind_fallback(encoder: cbor2.CBOREncoder, value: Any) -> None:
    dump = getattr(value, "model_dump", None)
    if callable(dump):
        encoder.encode(dump(mode="json"))
    else:
        encoder.encode(f"<{type(value).__module__}.{type(value).__qualname__}>")


# ----------------------------------------------------------------------------- CBOR layout
#
# body    = [rounds, issued_at, lifetime, journal, pending, payload, flow_id]
# journal = bstr holding the CBOR array of the entries: kept as bytes, so that sealing the next
#           token appends the new entries to it instead of encoding the old ones again
# entry   = [fp, *answer]             an ask of one request (its key "input-N" implied: N counts
#                                     the entries of this form before it); fp[0] names the kind
#         | [fp, value]               a step or poll (fp[0] == 3)
#         | {key: [fp, *answer]}      a batch;  {} a pause
# pending = null | fp                  a request yielded on its own (its key "input-N" implied:
#                                     N counts the journal's asks of one request)
#         | {key: [fp, answer|null]} | {key: [fp, answer|null, request]} (return style)
#         | [fp, deadline|null] (poll)
# answer  = action | action, content                      (elicitation; action: 0 accept,
#                                                          1 decline, 2 cancel)
#         | role, content, model | role, content, model, stop_reason          (sampling)
#         | [[uri] | [uri, name], ...]                     (roots)
# (in a pending entry the answer fields are wrapped in one array)

_ACTION_CODES = {action: code for code, action in enumerate(ACTIONS)}
_ACTION_COUNT = len(ACTIONS)
_STEP_KIND = KIND_CODES["step"]


def _answer_fields(answer: Answer) -> list[Any]:
    if type(answer) is ElicitResult:
        code = _ACTION_CODES[answer.action]
        return [code] if answer.content is None else [code, dict(answer.content)]
    if type(answer) is CreateMessageResult:
        content = answer.content
        blocks = [dict(b) for b in content] if isinstance(content, tuple) else dict(content)
        tail = [] if answer.stop_reason is None else [answer.stop_reason]
        return [answer.role, blocks, answer.model, *tail]
    assert type(answer) is ListRootsResult
    return [[[r.uri] if r.name is None else [r.uri, r.name] for r in answer.roots]]


def _elicit_result(code: Any, content: Any) -> ElicitResult:
    if type(code) is not int or not 0 <= code < len(ACTIONS):
        raise ValueError(f"bad elicitation action {code!r}")
    if content is not None and type(content) is not dict:
        raise ValueError("bad elicitation content")
    return trusted_elicit_result(ACTIONS[code], content)


def _answer_from_fields(kind: int, fields: list[Any]) -> Answer:
    if kind == 0:
        if not 0 < len(fields) < 3:
            raise ValueError(f"bad elicitation answer {fields!r}")
        return _elicit_result(fields[0], fields[1] if len(fields) == 2 else None)
    if kind == 1:
        role, content = fields[0], fields[1]
        blocks = tuple(content) if isinstance(content, list) else content
        return trusted_answer(CreateMessageResult, role, blocks, *fields[2:4])
    if kind == 2:
        (roots,) = fields
        return trusted_answer(ListRootsResult, tuple(Root(*root) for root in roots))
    raise ValueError(f"unknown answer kind {kind!r}")


def _entry_to_cbor(entry: Entry, singles: int) -> tuple[Any, int]:
    """The entry's CBOR value, and the count of single-ask entries after it."""
    if isinstance(entry, StepResult):
        return [entry.fingerprint, entry.value], singles
    if isinstance(entry, AnsweredOne):
        if entry.key == single_key(singles):
            return [entry.fingerprint, *_answer_fields(entry.answer)], singles + 1
        entry = Answered({entry.key: entry.fingerprint}, {entry.key: entry.answer})
    return {
        key: [fp, *_answer_fields(entry.answers[key])] for key, fp in entry.fingerprints.items()
    }, singles


def _entry_from_cbor(item: Any, singles: int) -> Entry:
    """The entry *item* encodes, its shape checked (its values were checked when they
    arrived, and the token is verified); *singles* asks of one request come before it."""
    if type(item) is list:
        fp = _fp(item[0])
        if fp[0] == _STEP_KIND:
            (value,) = item[1:]
            return StepResult(fp, value)
        return AnsweredOne(single_key(singles), fp, _answer_from_fields(fp[0], item[1:]))
    if type(item) is not dict:
        raise ValueError(f"bad journal entry {item!r}")
    if not item:
        return PAUSED
    prints, answers = {}, {}
    for key, (fp, *fields) in item.items():
        prints[key] = fp = _fp(fp)
        answers[key] = _answer_from_fields(fp[0], fields)
    return Answered(prints, answers)


def _is_single(item: Any) -> bool:
    """Whether a journal item is an ask of one request: an array that is not a step's (or a
    malformed one, which is refused when it is read)."""
    if type(item) is not list:
        return False
    fp = item[0] if item else None
    return not (type(fp) is bytes and fp[:1] == _STEP_PREFIX)


_STEP_PREFIX = bytes((_STEP_KIND,))
_ELICIT_KIND = KIND_CODES["elicitation/create"]
#: Raises [InvalidRequestState][mrtr_trio.InvalidRequestState] for a reason (logging it, or not).
Reject = Callable[[str], NoReturn]


def _refuse(reason: str) -> NoReturn:
    raise InvalidRequestState(reason)


class EncodedJournal(Journal):
    """A journal read from a token: its entries as the token's CBOR items, each made into an
    [Entry][mrtr_trio._journal.Entry] only when it is read, so a retry builds only what its
    replay does not answer on the spot; and their encoding, which sealing the next token
    reuses. Entries added after them (`then`) are held in memory.

    An item's shape is checked when it is read: a malformed one, in a token that verified,
    is refused through *reject* (an [InvalidRequestState][mrtr_trio.InvalidRequestState],
    "malformed body"). Items never read (a flow that diverged before them) are not checked.
    """

    __slots__ = ("_counted", "_encoded", "_items", "_reject", "_singles")

    def __init__(
        self,
        items: list[Any],
        encoded: bytes,
        reject: Reject = _refuse,
        entries: Sequence[Entry] = (),
    ) -> None:
        super().__init__(entries)
        self._items = items
        self._encoded = encoded
        self._reject = reject
        # The asks of one request among the first `_counted` items (see `_singles_before`):
        # where the last read stopped, so that reading in order counts each item once.
        self._counted = 0
        self._singles = 0

    def __len__(self) -> int:
        return len(self._items) + len(self._entries)

    def _entry(self, index: int) -> Entry:
        size = len(self._items)
        if index < 0:
            index += len(self)
        if index >= size:
            return self._entries[index - size]
        if index < 0:
            raise IndexError("journal index out of range")
        try:
            return _entry_from_cbor(self._items[index], self._singles_before(index))
        except Exception as problem:  # whatever a signed but absurd item trips over
            self._reject(f"malformed body ({_problem(problem)})")

    def answer(self, position: int, singles: int, fingerprint: bytes) -> Answer | None:
        # The commonest entry, an elicitation's answer, is checked and built here, as
        # `_entry_from_cbor` would (without the entry around it); anything else is read as an
        # entry, and checked there.
        try:
            item = self._items[position]
        except IndexError:  # past the items: an entry held in memory
            return super().answer(position, singles, fingerprint)
        if position != self._counted:  # (reads in order find the count ready)
            self._singles_before(position)
        if singles == self._singles and fingerprint[0] == _ELICIT_KIND and type(item) is list:
            size = len(item)
            if size == 3:
                fp, code, content = item
                if type(content) is not dict:
                    fp = None
            elif size == 2:
                fp, code = item
                content = None
            else:
                fp = code = content = None
            if fp == fingerprint and type(code) is int and 0 <= code < _ACTION_COUNT:
                self._counted, self._singles = position + 1, singles + 1
                return trusted_elicit_result(ACTIONS[code], content)
        return super().answer(position, singles, fingerprint)

    def head(self, length: int) -> Journal:
        size = len(self._items)
        if length < size:
            return Journal(self[:length])
        return self._followed_by(self._entries[: length - size]) if length < len(self) else self

    def then(self, entries: Sequence[Entry]) -> Journal:
        return self._followed_by((*self._entries, *entries)) if entries else self

    def sealed(self) -> tuple[bytes, int, tuple[Entry, ...]]:
        """What sealing this journal reuses: the items' encoding and how many of them are asks
        of one request; and the entries held in memory after them, to encode."""
        return self._encoded, self._singles_before(len(self._items)), self._entries

    def _followed_by(self, entries: Sequence[Entry]) -> EncodedJournal:
        journal = EncodedJournal(self._items, self._encoded, self._reject, entries)
        journal._counted, journal._singles = self._counted, self._singles
        return journal

    def _singles_before(self, position: int) -> int:
        """How many of the items before *position* are asks of one request (the next one's key
        is `input-N`, N that count). Items read in order are counted once."""
        counted, singles = self._counted, self._singles
        if position < counted:
            counted = singles = 0
        items = self._items
        for index in range(counted, position):
            singles += _is_single(items[index])
        self._counted, self._singles = position, singles
        return singles


def _problem(problem: Exception) -> str:
    return str(problem) if type(problem) is ValueError else f"{type(problem).__name__}: {problem}"


def _encode_journal(journal: Journal) -> bytes:
    """The journal's bstr content, reusing the encoding of the entries it was read with."""
    encoded, singles, new = journal.sealed()
    parts = [_array_header(len(journal)), encoded]
    for entry in new:
        value, singles = _entry_to_cbor(entry, singles)
        parts.append(cbor2.dumps(value))
    return b"".join(parts)


def _array_header(length: int) -> bytes:
    """The CBOR head of an array of *length* items (the shortest form, as cbor2 writes it)."""
    if length < 24:
        return bytes((0x80 | length,))
    for first, size in ((0x98, 1), (0x99, 2), (0x9A, 4), (0x9B, 8)):
        if length < 1 << (8 * size):
            return bytes((first,)) + length.to_bytes(size, "big")
    raise ValueError("journal too long")  # pragma: no cover


def _header_length(first: int) -> int:
    """How many bytes the CBOR head of an array takes, from its first byte."""
    return _HEADER_LENGTHS.get(first, 1)


_HEADER_LENGTHS = {0x98: 2, 0x99: 3, 0x9A: 5, 0x9B: 9}


def _pending_to_cbor(pending: Pending | PendingOne | PendingPoll | None) -> Any:
    if pending is None:
        return None
    if isinstance(pending, PendingOne):
        return pending.fingerprint
    if isinstance(pending, PendingPoll):
        return [pending.fingerprint, pending.deadline]
    entries: dict[str, list[Any]] = {}
    for key, fp in pending.fingerprints.items():
        answer = pending.answered.get(key)
        entry: list[Any] = [fp, None if answer is None else _answer_fields(answer)]
        if pending.requests is not None:
            entry.append(pending.requests[key].to_wire())
        entries[key] = entry
    return entries


def _pending_from_cbor(data: Any) -> Pending | PendingOne | PendingPoll | None:
    if data is None:
        return None
    if type(data) is bytes:
        return PendingOne(_fp(data))
    if type(data) is list:
        fp, deadline = data
        if deadline is not None and not _is_time(deadline):
            raise ValueError(f"bad poll deadline {deadline!r}")
        return PendingPoll(_fp(fp), deadline)
    if type(data) is not dict:
        raise ValueError(f"bad pending entry {data!r}")
    fingerprints: dict[str, bytes] = {}
    answered: dict[str, Answer] = {}
    requests: dict[str, Request] | None = {}
    for key, entry in data.items():
        fingerprints[key] = fp = _fp(entry[0])
        if entry[1] is not None:
            answered[key] = _answer_from_fields(fp[0], entry[1])
        if len(entry) == 3 and requests is not None:
            requests[key] = request_from_wire(entry[2])
        else:
            requests = None
    return Pending(fingerprints, answered, requests if data else None)


def _fp(value: Any) -> bytes:
    if type(value) is not bytes or len(value) != FINGERPRINT_BYTES:
        raise ValueError(f"bad fingerprint {value!r}")
    return value


def _is_time(value: Any) -> bool:
    return type(value) is int and 0 <= value < _MAX_TIME


def encode_cursor(cursor: Cursor, issued_at: int, lifetime: int) -> bytes:
    """The cursor as compact CBOR, stamped with *issued_at* and *lifetime*."""
    return cbor2.dumps(
        [
            cursor.rounds,
            issued_at,
            lifetime,
            _encode_journal(cursor.journal),
            _pending_to_cbor(cursor.pending),
            cursor.payload,
            cursor.flow_id,
        ]
    )


def decode_cursor(
    body: bytes, key_id: bytes = b"", token_id: bytes = b"", reject: Reject = _refuse
) -> Cursor:
    """The cursor from its CBOR (read from the token *token_id*, verified by the key *key_id*);
    `ValueError` when the body is not one. Its journal's entries are checked when they are
    read, and *reject* refuses a malformed one (see
    [EncodedJournal][mrtr_trio._token.EncodedJournal])."""
    try:
        decoder = strict_decoder()
        rounds, issued_at, lifetime, journal, pending, payload, flow_id = decoder.loads(body)
        if not (_is_time(rounds) and _is_time(issued_at) and _is_time(lifetime)):
            raise ValueError("bad counters")
        if type(flow_id) is not bytes or len(flow_id) != FLOW_ID_BYTES:
            raise ValueError("bad flow id")
        if type(journal) is not bytes or not journal:
            raise ValueError("bad journal")
        items = decoder.loads(journal)
        if type(items) is not list:
            raise ValueError("the journal is not an array")
        return Cursor(
            EncodedJournal(items, journal[_header_length(journal[0]) :], reject),
            _pending_from_cbor(pending),
            rounds,
            payload,
            issued_at,
            lifetime,
            flow_id,
            key_id,
            token_id,
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
    secret: bytes = attrs.field(repr=False)
    # Hashers keyed once with `tag_key` and `check_key`, never updated: each tag or check
    # hashes into a copy of one (cheaper than keying a new hasher, and no concatenation).
    tagger: Any = attrs.field(init=False, repr=False, eq=False)
    checker: Any = attrs.field(init=False, repr=False, eq=False)
    #: The first bytes of a signed token under this key: format version and key id.
    signed_head: bytes = attrs.field(init=False, repr=False, eq=False)

    def __attrs_post_init__(self) -> None:
        object.__setattr__(self, "signed_head", bytes((FORMAT_VERSION,)) + self.key_id)
        object.__setattr__(self, "tagger", blake3.blake3(key=self.tag_key))
        object.__setattr__(self, "checker", blake3.blake3(key=self.check_key))

    @functools.cached_property
    def step_key(self) -> bytes:
        return _subkey(self.secret, _KDF_STEP)

    @functools.cached_property
    def cipher(self) -> Any:
        return _chacha(_subkey(self.secret, _KDF_ENCRYPT))

    @functools.cached_property
    def nonce_key(self) -> bytes:
        return _subkey(self.secret, _KDF_NONCE)


def _subkey(key: bytes, context: str, size: int = 32) -> bytes:
    return blake3.blake3(key, derive_key_context=context).digest(size)


def _derive(key: bytes) -> _Key:
    return _Key(
        _subkey(key, _KDF_KEY_ID, KEY_ID_BYTES),
        _subkey(key, _KDF_TAG),
        _subkey(key, _KDF_CHECK),
        key,
    )


def _chacha(key: bytes) -> Any:
    try:
        from cryptography.hazmat.primitives.ciphers.aead import ChaCha20Poly1305
    except ImportError:  # pragma: no cover - depends on the installed extras
        raise ImportError(
            "encrypted requestState needs the cryptography package: "
            "pip install 'mrtr_trio[encrypt]'"
        ) from None
    return ChaCha20Poly1305(key)


def check_keys(keys: object) -> tuple[bytes, ...]:
    """*keys* as a tuple of byte strings, or `TypeError`/`ValueError` saying what is wrong."""
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


class Keyring:
    """Keys: the first signs, all verify (rotation).

    A key's id is derived from the key itself, so the order of the list does not matter to
    verification. Keys are checked with `check_keys`. Tokens come in two formats: signed
    (version 2: the body in the clear under a BLAKE3 tag) and encrypted (version 3: the body
    under ChaCha20-Poly1305, the binding and header as associated data); either is opened
    whatever the runtime mints.
    """

    def __init__(self, keys: Sequence[bytes]) -> None:
        derived = [_derive(key) for key in check_keys(keys)]
        self._signing = derived[0]
        self._by_id = {k.key_id: k for k in reversed(derived)}

    def check_cipher(self) -> None:
        """Raise `ImportError` naming the extra when encryption is not available."""
        self._signing.cipher  # noqa: B018 - made on first use; this makes it now

    def sign(self, body: bytes, binding: bytes, *, encrypt: bool = False) -> bytes:
        """`header | body | tag` under the signing key (`encrypt`: `header | nonce |
        ciphertext | tag`)."""
        key = self._signing
        if not encrypt:
            head = key.signed_head
            signed = b"".join((head, _check(key, head, body), body))
            return signed + _tag(key, binding, signed)
        head = bytes((ENCRYPTED_VERSION,)) + key.key_id
        # A synthetic nonce, as in SIV: a keyed hash of everything, so it never repeats for
        # different tokens and needs no randomness.
        nonce = blake3.blake3(binding + head + body, key=key.nonce_key).digest(NONCE_BYTES)
        sealed: bytes = nonce + key.cipher.encrypt(nonce, body, binding + head)
        return head + _check(key, head, sealed) + sealed

    def verify(self, raw: bytes, binding: bytes) -> bytes:
        """The body of an authentic token (its key id is `raw[1:1 + KEY_ID_BYTES]`, and its
        last `TAG_BYTES`, unique per token, are its tag in both formats);
        [InvalidRequestState][mrtr_trio.InvalidRequestState] unless authentic."""
        if len(raw) < _HEADER_BYTES + TAG_BYTES + 1:
            raise InvalidRequestState(f"too short ({len(raw)} bytes)")
        version = raw[0]
        if version not in (FORMAT_VERSION, ENCRYPTED_VERSION):
            raise InvalidRequestState(f"unknown format version {version}")
        key = self._by_id.get(raw[1 : 1 + KEY_ID_BYTES])
        if key is None:
            raise InvalidRequestState(
                f"key id {raw[1 : 1 + KEY_ID_BYTES].hex()} is not in the keyring"
            )
        if version == FORMAT_VERSION:
            tag = raw[-TAG_BYTES:]
            signed = raw[:-TAG_BYTES]
            if hmac.compare_digest(tag, _tag(key, binding, signed)):
                return signed[_HEADER_BYTES:]
        head, check, rest = (
            raw[: 1 + KEY_ID_BYTES],
            raw[1 + KEY_ID_BYTES : _HEADER_BYTES],
            raw[_HEADER_BYTES:],
        )
        if version == FORMAT_VERSION:
            checked = rest[:-TAG_BYTES]  # the body, in the clear
        else:
            checked = rest  # nonce | ciphertext | tag
            body = _decrypt(key, rest, binding + head)
            # The AEAD does not cover the body check (it is computed over the ciphertext), so
            # it is verified here: no byte of an encrypted token may change either.
            if body is not None and hmac.compare_digest(check, _check(key, head, checked)):
                return body
        if hmac.compare_digest(check, _check(key, head, checked)):
            raise InvalidRequestState(
                "bound to another call (handler, arguments or bind bytes differ)"
            )
        raise InvalidRequestState("tag mismatch (tampered, truncated or extended)")

    def check_unbound(self, raw: bytes) -> bytes:
        """The body of a signed token whose body check holds under the key its key id names,
        without the call binding the tag covers: for a person reading a token
        (`mrtr-trio inspect`), authentic to 1 in 65,536 only, never for serving.
        [InvalidRequestState][mrtr_trio.InvalidRequestState] saying why otherwise; an
        encrypted token cannot be opened without its binding (it is associated data)."""
        if len(raw) < _HEADER_BYTES + TAG_BYTES + 1:
            raise InvalidRequestState(f"too short ({len(raw)} bytes)")
        if raw[0] == ENCRYPTED_VERSION:
            raise InvalidRequestState(
                "encrypted: its contents open only with the call it was minted for"
            )
        if raw[0] != FORMAT_VERSION:
            raise InvalidRequestState(f"unknown format version {raw[0]}")
        key = self._by_id.get(raw[1 : 1 + KEY_ID_BYTES])
        if key is None:
            raise InvalidRequestState(
                f"key id {raw[1 : 1 + KEY_ID_BYTES].hex()} is not in the keyring"
            )
        head, check = raw[: 1 + KEY_ID_BYTES], raw[1 + KEY_ID_BYTES : _HEADER_BYTES]
        body = raw[_HEADER_BYTES:-TAG_BYTES]
        if not hmac.compare_digest(check, _check(key, head, body)):
            raise InvalidRequestState("body check mismatch (tampered, or another key's token)")
        return body

    def step_key(self, key_id: bytes, material: bytes) -> str:
        """A step's idempotency key: *material* hashed under the step subkey of the key named
        *key_id* (the one that verified the flow's token, or the signing key)."""
        key = self._by_id.get(key_id, self._signing)
        digest = blake3.blake3(material, key=key.step_key).digest(STEP_KEY_BYTES)
        return b64url(digest)


def _decrypt(key: _Key, sealed: bytes, associated: bytes) -> bytes | None:
    if len(sealed) <= NONCE_BYTES + TAG_BYTES:
        return None
    from cryptography.exceptions import InvalidTag

    nonce, ciphertext = sealed[:NONCE_BYTES], sealed[NONCE_BYTES:]
    try:
        body: bytes = key.cipher.decrypt(nonce, ciphertext, associated)
    except InvalidTag:
        return None
    return body


def _tag(key: _Key, binding: bytes, signed: bytes) -> bytes:
    """The tag over *signed* (a token's header and body, side by side) bound to *binding*:
    BLAKE3 keyed with `tag_key` over `binding | signed`."""
    hasher = key.tagger.copy()
    hasher.update(binding)
    hasher.update(signed)
    digest: bytes = hasher.digest(TAG_BYTES)
    return digest


def _check(key: _Key, head: bytes, body: bytes) -> bytes:
    """The body check: BLAKE3 keyed with `check_key` over `head | body`."""
    hasher = key.checker.copy()
    hasher.update(head)
    hasher.update(body)
    digest: bytes = hasher.digest(CHECK_BYTES)
    return digest


# ------------------------------------------------------------------------------ rejections


class _RejectionLog:
    """Logs rejected tokens at WARNING, at most `burst` lines per `window` seconds; the
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
    encrypt: bool = False
    _log_rejection: _RejectionLog = attrs.field(factory=_RejectionLog, init=False, repr=False)

    def seal(self, cursor: Cursor, binding: bytes) -> str:
        """A token for *cursor* (issue time now, lifetime `ttl`), bound to *binding*."""
        body = encode_cursor(cursor, int(self.clock()), math.ceil(self.ttl))
        raw = self.keyring.sign(body, binding, encrypt=self.encrypt)
        token = b64url(raw)
        if len(token) > self.max_state_bytes:
            raise StateTooLarge(
                f"the requestState for this flow would be {len(token)} bytes, over "
                f"max_state_bytes={self.max_state_bytes}; record less (smaller step results or "
                "payloads, fewer rounds) or raise the cap"
            )
        return token

    def reject(self, reason: str) -> NoReturn:
        """Refuse a token that verified but may not be used (logged like any rejection)."""
        self._log_rejection(reason)
        raise InvalidRequestState(reason)

    def step_key(self, cursor: Cursor, binding: bytes, position: int) -> str:
        """The idempotency key of the step at *position* in *cursor*'s journal (the journal is
        the one before the step), for the flow bound to *binding*."""
        material = b"".join(
            (cursor.flow_id, binding, position.to_bytes(8, "big"), _encode_journal(cursor.journal))
        )
        return self.keyring.step_key(cursor.key_id, material)

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
        raw = _strict_b64decode(token)
        body = self.keyring.verify(raw, binding)
        try:
            cursor = decode_cursor(body, raw[1 : 1 + KEY_ID_BYTES], raw[-TAG_BYTES:], self.reject)
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
# base64url to base64, in one bytes.translate: "-" and "_" become "+" and "/", and "+", "/"
# and "=" (not in the url-safe alphabet, padding included) become "!", which strict mode refuses.
_FROM_URLSAFE = bytes.maketrans(b"-_+/=", b"+/!!!")
_PADDING = (b"", b"", b"==", b"=")


def _strict_b64decode(token: str) -> bytes:
    size = len(token)
    if size % 4 == 1:
        raise InvalidRequestState("not unpadded base64url")
    try:
        # strict_mode refuses every character outside the alphabet (and stray padding).
        raw = binascii.a2b_base64(
            token.encode("ascii").translate(_FROM_URLSAFE) + _PADDING[size % 4], strict_mode=True
        )
    except (binascii.Error, ValueError, UnicodeEncodeError):
        raise InvalidRequestState("not unpadded base64url") from None
    mask = _LAST_CHAR_MASK.get(size % 4)
    if mask is not None and _B64_VALUE[token[-1]] & mask:
        raise InvalidRequestState("non-canonical base64url")
    return raw
