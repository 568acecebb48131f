"""Sealing a cursor into a `requestState` token and opening one into a cursor
([StateCodec][mrtr_trio._token.StateCodec]), and the bounded log of rejected tokens.

The token's layout is `_tokenformat`'s, its body's CBOR `_cursorcbor`'s, its keys, tag and
encryption `_keyring`'s (and `_aead`'s), its binding `_binding`'s, a step's key `_stepkey`'s.

[StateCodec.open][mrtr_trio._token.StateCodec.open] verifies before it parses: size cap,
strict base64url, version, authenticated key id, constant-time tag comparison, and only then a
CBOR decode with tight limits, then the expiry check. Every failure raises
[InvalidRequestState][mrtr_trio.InvalidRequestState], whose wire message never varies; the reason
goes to the log, at a bounded rate.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Callable
from typing import NoReturn

import attrs

from ._base64url import _strict_b64decode, b64url
from ._cursorcbor import decode_cursor, encode_cursor
from ._errors import InvalidRequestState, StateTooLarge
from ._journal import Cursor
from ._keyring import Keyring
from ._stepkey import step_material
from ._tokenformat import FUTURE_SKEW_SECONDS, KEY_ID_BYTES, TAG_BYTES

__all__ = ["StateCodec"]

log = logging.getLogger("mrtr_trio")

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
        return self.keyring.step_key(cursor.key_id, step_material(cursor, binding, position))

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
