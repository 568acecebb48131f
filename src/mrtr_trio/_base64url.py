"""Unpadded base64url, the text of tokens and keys: `b64url` writes it, and
`_strict_b64decode` reads exactly one text per byte string (no padding, no other alphabet,
no stray low bits), refusing anything else with InvalidRequestState."""

from __future__ import annotations

import binascii

from ._errors import InvalidRequestState

__all__ = ["b64url"]


def b64url(raw: bytes) -> str:
    """*raw* as unpadded base64url, the alphabet of tokens and keys."""
    return binascii.b2a_base64(raw, newline=False).translate(_TO_URLSAFE, b"=").decode("ascii")


_TO_URLSAFE = bytes.maketrans(b"+/", b"-_")

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
