"""The `requestState` format: the byte layout of a token and its sizes.

The token is `base64url(header | body | tag)` without padding:

- header: format version (1 byte), key id (4 bytes), body check (2 bytes);
- body: the cursor as compact CBOR (`_cursorcbor`);
- tag: 16 bytes of BLAKE3 keyed with a `derive_key` subkey, over the binding digest, the
  header and the body.

The binding (handler identity, argument digest, host `bind` bytes) is fed into the tag rather
than carried, so the token stays small. The body check is a 2-byte digest of the header and body
*without* the binding, under its own subkey: when the tag fails but the check holds, the token
is authentic but was minted for another call, and the log can say so; a tampered token fails
both (but for a 1 in 65,536 chance).

Its items' CBOR is `_entrycbor`'s; the tag and the body check
are `_keyring`'s, the encrypted format's cipher `_aead`'s; sealing and opening, every check in
order, are `_token`'s.
"""

from __future__ import annotations

__all__ = [
    "CHECK_BYTES",
    "ENCRYPTED_VERSION",
    "FLOW_ID_BYTES",
    "FORMAT_VERSION",
    "FUTURE_SKEW_SECONDS",
    "KEY_ID_BYTES",
    "TAG_BYTES",
]

FORMAT_VERSION = 2
ENCRYPTED_VERSION = 3
FLOW_ID_BYTES = 8
KEY_ID_BYTES = 4
CHECK_BYTES = 2
TAG_BYTES = 16
FUTURE_SKEW_SECONDS = 60
_HEADER_BYTES = 1 + KEY_ID_BYTES + CHECK_BYTES
# Times in a token are whole seconds since the epoch; anything past this is not a time.
_MAX_TIME = 1 << 40
