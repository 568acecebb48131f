"""A step's idempotency key: a hash of the flow id, the binding, the step's position and the
journal before it, keyed with a subkey of the key that verified the flow's token
(`Keyring.step_key` picks it), as unpadded base64url."""

from __future__ import annotations

import blake3

from ._base64url import b64url
from ._encodedjournal import _encode_journal
from ._journal import Cursor

__all__ = ["STEP_KEY_BYTES", "derive_step_key", "step_material"]

STEP_KEY_BYTES = 16


def step_material(cursor: Cursor, binding: bytes, position: int) -> bytes:
    """What the key of the step at *position* in *cursor*'s journal (the journal before the
    step) is a hash of, for the flow bound to *binding*."""
    return b"".join(
        (cursor.flow_id, binding, position.to_bytes(8, "big"), _encode_journal(cursor.journal))
    )


def derive_step_key(subkey: bytes, material: bytes) -> str:
    """A step's idempotency key: *material* hashed under *subkey* (a key's step subkey)."""
    digest = blake3.blake3(material, key=subkey).digest(STEP_KEY_BYTES)
    return b64url(digest)
