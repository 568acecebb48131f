"""Keys: checking them, deriving each key's id and subkeys (one `derive_key` context per
purpose), signing a body into a token and verifying a token into its body (the BLAKE3 tag
and the body check; the encrypted format through `_aead`), and the subkey a step key is
hashed under. A signed token's body can also be read by its body check alone, for a person
(`check_unbound`, `mrtr-trio inspect`), never to serve it."""

from __future__ import annotations

import functools
import hmac
from collections.abc import Sequence
from typing import Any

import attrs
import blake3

from ._aead import aead_decrypt, aead_encrypt, chacha
from ._errors import InvalidRequestState
from ._stepkey import derive_step_key
from ._tokenformat import (
    _HEADER_BYTES,
    CHECK_BYTES,
    ENCRYPTED_VERSION,
    FORMAT_VERSION,
    KEY_ID_BYTES,
    TAG_BYTES,
)

__all__ = ["MIN_KEY_BYTES", "Keyring", "check_keys"]

MIN_KEY_BYTES = 32

# derive_key contexts: hard-coded, globally unique, one per purpose (BLAKE3 KDF rules).
_KDF_KEY_ID = "mrtr_trio 2026-11-30 requestState key id"
_KDF_TAG = "mrtr_trio 2026-11-30 requestState tag"
_KDF_CHECK = "mrtr_trio 2026-12-01 requestState unbound body check"
_KDF_ENCRYPT = "mrtr_trio 2026-12-01 requestState ChaCha20-Poly1305 key"
_KDF_NONCE = "mrtr_trio 2026-12-01 requestState synthetic nonce"
_KDF_STEP = "mrtr_trio 2026-12-01 step idempotency key"


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
        return chacha(_subkey(self.secret, _KDF_ENCRYPT))

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
        sealed = aead_encrypt(key.cipher, key.nonce_key, body, binding + head)
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
            body = aead_decrypt(key.cipher, rest, binding + head)
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
        return derive_step_key(key.step_key, material)


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
