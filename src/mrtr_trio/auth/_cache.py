"""Verified tokens remembered by their exact string, so that a token presented on every request
is checked once (an RS256 check costs about as much as 5% of a request's server CPU).

An entry lives until the earliest of the token's expiry and the verifier's bound on how long a
verification may be reused (a withdrawn key, a revoked token); the cache holds at most
*max_entries* and drops the oldest past that. Only positive answers are kept.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from mcp.server.auth.provider import AccessToken

__all__ = ["TokenCache"]


class TokenCache:
    """Verified `AccessToken`s by token string, each until its own deadline (epoch seconds)."""

    def __init__(self, max_entries: int = 10_000, clock: Callable[[], float] = time.time) -> None:
        self._max_entries = max_entries
        self._clock = clock
        self._entries: dict[str, tuple[AccessToken, float]] = {}

    def __len__(self) -> int:
        return len(self._entries)

    def get(self, token: str) -> AccessToken | None:
        """The verification of *token*, if it is remembered and still good."""
        entry = self._entries.get(token)
        if entry is None:
            return None
        if entry[1] <= self._clock():
            del self._entries[token]
            return None
        return entry[0]

    def put(self, token: str, verified: AccessToken, until: float) -> None:
        """Remember *verified* for *token* until *until* (epoch seconds)."""
        if until <= self._clock():
            return
        if len(self._entries) >= self._max_entries:
            self._purge()
        self._entries[token] = (verified, until)

    def clear(self) -> None:
        """Forget every verification (after a key is known to be compromised)."""
        self._entries.clear()

    def _purge(self) -> None:
        now = self._clock()
        for token in [t for t, (_, until) in self._entries.items() if until <= now]:
            del self._entries[token]
        while len(self._entries) >= self._max_entries:
            del self._entries[next(iter(self._entries))]  # the oldest
