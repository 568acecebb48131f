"""Log lines a client can cause, at most one per interval per kind: a client that repeats
what it did cannot flood the log (issue 22)."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

__all__ = ["RateLimitedLog"]


class RateLimitedLog:
    """Logs through *logger* at *level*, at most one line per *interval* seconds for each kind
    of event (the first at once; the next after the interval, saying how many were left out
    in between). Never a traceback: what a client causes is not the server's fault."""

    def __init__(
        self,
        logger: logging.Logger,
        level: int,
        interval: float,
        *,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._logger = logger
        self._level = level
        self._interval = interval
        self._clock = clock
        self._last: dict[str, float] = {}
        self._left_out: dict[str, int] = {}

    def __call__(self, kind: str, message: str, *args: object) -> None:
        """One event of *kind*, described by *message* % *args* if it is logged."""
        now = self._clock()
        last = self._last.get(kind)
        if last is not None and now - last < self._interval:
            self._left_out[kind] = self._left_out.get(kind, 0) + 1
            return
        self._last[kind] = now
        left_out = self._left_out.pop(kind, 0)
        if left_out:
            message += " (and %d more like it in the last %.0f s)"
            args = (*args, left_out, now - last if last is not None else 0.0)
        self._logger.log(self._level, message, *args)
