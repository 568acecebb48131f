"""The encrypted format's cipher: ChaCha20-Poly1305 (from the optional `cryptography`
package, `mrtr_trio[encrypt]`) under a synthetic nonce, a keyed hash of the associated data
and the body, as in SIV. `_keyring` derives its keys and lays out the token around it.
"""

from __future__ import annotations

from typing import Any

import blake3

from ._tokenformat import TAG_BYTES

__all__ = ["NONCE_BYTES", "aead_decrypt", "aead_encrypt", "chacha"]

NONCE_BYTES = 12


def chacha(key: bytes) -> Any:
    """ChaCha20-Poly1305 under *key* (`ImportError` naming the extra without it)."""
    try:
        from cryptography.hazmat.primitives.ciphers.aead import ChaCha20Poly1305
    except ImportError:  # pragma: no cover - depends on the installed extras
        raise ImportError(
            "encrypted requestState needs the cryptography package: "
            "pip install 'mrtr_trio[encrypt]'"
        ) from None
    return ChaCha20Poly1305(key)


def aead_encrypt(cipher: Any, nonce_key: bytes, body: bytes, associated: bytes) -> bytes:
    """`nonce | ciphertext | tag` of *body* with *associated* data, under *cipher*."""
    # A synthetic nonce, as in SIV: a keyed hash of everything, so it never repeats for
    # different tokens and needs no randomness.
    nonce = blake3.blake3(associated + body, key=nonce_key).digest(NONCE_BYTES)
    sealed: bytes = nonce + cipher.encrypt(nonce, body, associated)
    return sealed


def aead_decrypt(cipher: Any, sealed: bytes, associated: bytes) -> bytes | None:
    """The body *sealed* (`nonce | ciphertext | tag`) holds, or `None` unless authentic."""
    if len(sealed) <= NONCE_BYTES + TAG_BYTES:
        return None
    from cryptography.exceptions import InvalidTag

    nonce, ciphertext = sealed[:NONCE_BYTES], sealed[NONCE_BYTES:]
    try:
        body: bytes = cipher.decrypt(nonce, ciphertext, associated)
    except InvalidTag:
        return None
    return body
