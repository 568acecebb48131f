"""Where signing keys come from when the code passes none.

A deployment passes secrets through the environment: `MRTR_TRIO_KEYS` holds one or more keys
separated by commas, the first signing and all verifying (rotation), each written as hex or
base64url (padding optional) and at least 32 bytes long. A malformed entry is a `ValueError`
naming its position, never its text, so a log of the failure leaks no key.

When neither the code nor the environment gives keys, one random key per process signs, and
[EphemeralKeyWarning][mrtr_trio.EphemeralKeyWarning] says that state will not survive a
restart; the warning names the line of user code that made the runtime, however deep inside
mrtr_trio the runtime was made (`App()` makes one too).

`generate_key` is what `mrtr-trio keygen` prints.
"""

from __future__ import annotations

import base64
import binascii
import functools
import os
import re
import secrets
import sys
import warnings
from pathlib import Path

from ._keyring import MIN_KEY_BYTES

__all__ = [
    "ENVIRONMENT_VARIABLE",
    "EphemeralKeyWarning",
    "default_keys",
    "environment_keys",
    "generate_key",
    "parse_keys",
]

#: The environment variable `default_keys` reads.
ENVIRONMENT_VARIABLE = "MRTR_TRIO_KEYS"

_HEX = re.compile(r"(?:[0-9A-Fa-f]{2})+")
_BASE64URL = re.compile(r"[A-Za-z0-9_-]+={0,2}")
_PACKAGE = str(Path(__file__).resolve().parent) + os.sep


class EphemeralKeyWarning(UserWarning):
    """`Runtime(keys=None)`: state will not survive a restart or reach another process."""


def generate_key() -> str:
    """A fresh random 32-byte key, as unpadded base64url (43 characters)."""
    return secrets.token_urlsafe(MIN_KEY_BYTES)


def parse_keys(text: str, *, source: str = ENVIRONMENT_VARIABLE) -> list[bytes]:
    """The keys in *text*: comma-separated, each hex or base64url of at least 32 bytes.

    Text made only of hex digit pairs is read as hex (what `openssl rand -hex 32` prints);
    anything else must be base64url. Spaces around an entry are ignored. Raises `ValueError`
    naming *source* and the entry's position (from 1); the message never contains key text.
    """
    entries = [entry.strip() for entry in text.split(",")]
    if entries == [""]:
        raise ValueError(f"{source} is set but empty; unset it or give at least one key")
    where = f"{source}: key {{}} of {len(entries)}"
    return [_parse_entry(entry, where.format(n)) for n, entry in enumerate(entries, 1)]


def _parse_entry(entry: str, where: str) -> bytes:
    if not entry:
        raise ValueError(f"{where} is empty (two commas in a row, or a trailing comma?)")
    if _HEX.fullmatch(entry):
        key = bytes.fromhex(entry)
    elif _BASE64URL.fullmatch(entry):
        try:
            bare = entry.rstrip("=")
            key = base64.urlsafe_b64decode(bare + "=" * (-len(bare) % 4))
        except binascii.Error:
            raise ValueError(f"{where} is not valid base64url (its length is wrong)") from None
    else:
        raise ValueError(
            f"{where} is neither hex nor base64url (letters, digits, '-' and '_'); "
            "make one with `mrtr-trio keygen`"
        )
    if len(key) < MIN_KEY_BYTES:
        raise ValueError(
            f"{where} is {len(key)} bytes; keys must be at least {MIN_KEY_BYTES} bytes "
            "(make one with `mrtr-trio keygen`)"
        )
    return key


def environment_keys() -> list[bytes] | None:
    """The keys in `MRTR_TRIO_KEYS`, or `None` when it is not set (`ValueError` when it is
    malformed)."""
    text = os.environ.get(ENVIRONMENT_VARIABLE)
    return None if text is None else parse_keys(text)


def default_keys() -> tuple[bytes, ...]:
    """The keys of a runtime made without any: `MRTR_TRIO_KEYS` when set, else this process's
    random key, with an [EphemeralKeyWarning][mrtr_trio.EphemeralKeyWarning] that names the
    user's line."""
    keys = environment_keys()
    if keys is not None:
        return tuple(keys)
    warnings.warn(
        "Runtime(keys=None) signs requestState with a random per-process key: in-flight "
        "modern flows will not survive a restart or reach another process. Set MRTR_TRIO_KEYS "
        "(make a key with `mrtr-trio keygen`) or pass keys=[secret] (at least 32 bytes) to "
        "scale out.",
        EphemeralKeyWarning,
        stacklevel=_user_stacklevel(),
    )
    return (_process_key(),)


@functools.cache
def _process_key() -> bytes:
    """This process's random key, made on first use."""
    return secrets.token_bytes(MIN_KEY_BYTES)


def _user_stacklevel() -> int:
    """The `stacklevel` that makes a warning issued by our caller name the first frame outside
    mrtr_trio (attrs-generated methods of our classes count as inside)."""
    frame = sys._getframe(2)  # our caller's caller: level 2 for a warning our caller issues
    level = 2
    while frame.f_back is not None and _inside(frame.f_code.co_filename):
        frame = frame.f_back
        level += 1
    return level


def _inside(filename: str) -> bool:
    return filename.startswith(_PACKAGE) or filename.startswith("<attrs generated")
