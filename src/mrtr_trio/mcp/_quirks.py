"""The one place that knows an SDK internal: a log record of a known, harmless SDK race.

When a legacy session ends (the client's DELETE, an idle timeout) while one of the client's
notifications or answers is still being posted on it, the SDK's Streamable HTTP transport has
already answered that POST with 202 when it finds the session's stream closed. It then logs
``"Error handling POST request"`` with an ``anyio.ClosedResourceError`` traceback and tries to
send a 500 after the 202, which hypercorn reports as a second traceback ("http.response.start
given the state ASGIHTTPState.CLOSED"). Official clients trigger it on most cancellations: they
post ``notifications/cancelled`` and then DELETE the session. Nothing is lost (the session is
gone, so is the request the message was for), so neither traceback belongs on the user's stderr:

- the second one never happens: [SessionGuard][mrtr_trio.mcp._sessions.SessionGuard] drops
  whatever the SDK sends after its response ended, and the stream error it then raises;
- the first is filtered here, by its logger, message and exception type, and logged at DEBUG
  on ``mrtr_trio.mcp`` instead. tests/server/test_quirks.py reproduces the race, so a change in
  the SDK's wording shows up as a failing test, not a silent traceback.
"""

from __future__ import annotations

import logging

import anyio

__all__ = ["quiet_known_sdk_races"]

#: The SDK logger and message of the race (mcp 2.3, mcp/server/streamable_http.py).
SDK_LOGGER = "mcp.server.streamable_http"
SDK_MESSAGE = "Error handling POST request"

log = logging.getLogger("mrtr_trio.mcp")


class _SessionEndedRace(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        error = record.exc_info[1] if record.exc_info else None
        if record.getMessage() == SDK_MESSAGE and isinstance(
            error, anyio.ClosedResourceError | anyio.BrokenResourceError
        ):
            log.debug("a client message arrived as its legacy session ended; dropped")
            return False
        return True


_FILTER = _SessionEndedRace()


def quiet_known_sdk_races() -> None:
    """Install the filter (once, however often it is called)."""
    logger = logging.getLogger(SDK_LOGGER)
    if _FILTER not in logger.filters:
        logger.addFilter(_FILTER)
