"""Log lines a client can cause, a few per interval per kind of event at most: a client that
repeats what it did cannot flood the log (issue 22)."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

import attrs

__all__ = ["RateLimitedLog"]


@attrs.define
class _Window:
    start: float
    logged: int = 0
    left_out: int = 0


class RateLimitedLog:
    """Logs through *logger* at *level*: for each kind of event, the first *burst* in every
    *interval* seconds, each as one line; the others at DEBUG only, and the first line of the
    next interval says how many were left out. Never a traceback: what a client causes is not
    the server's fault."""

    def __init__(
        self,
        logger: logging.Logger,
        level: int,
        interval: float,
        *,
        burst: int = 1,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._logger = logger
        self._level = level
        self._interval = interval
        self._burst = burst
        self._clock = clock
        self._windows: dict[str, _Window] = {}

    def __call__(self, kind: str, message: str, *args: object) -> None:
        """One event of *kind*, described by *message* % *args*."""
        now = self._clock()
        window = self._windows.get(kind)
        if window is None or now - window.start >= self._interval:
            left_out = 0 if window is None else window.left_out
            if left_out:
                message += " (%d more like it were logged at DEBUG in the previous %.0f s)"
                args = (*args, left_out, self._interval)
            if len(self._windows) > 1024:  # kinds come from names: keep the table bounded
                self._windows.clear()
            window = self._windows[kind] = _Window(now)
        if window.logged < self._burst:
            window.logged += 1
            self._logger.log(self._level, message, *args)
        else:
            window.left_out += 1
            self._logger.debug(message, *args)
