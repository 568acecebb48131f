"""What the MCP server logs, under the logger `mrtr_trio.mcp`.

- One DEBUG line per `tools/call`, `prompts/get` and `resources/read` served: the method, the
  target, the protocol version, the outcome (`complete`, `input_required` with the keys asked,
  `isError`, or the JSON-RPC error) and the time it took.
- A flow that fails, whatever the client is told: ERROR with the traceback when the server's
  code is at fault (the handler raised, yielded something that is not a request, or built an
  invalid request), WARNING with the message when the flow ended on a limit or on the client
  (round limit, round timeout, no back channel, the client's error answer to a request).

The runtime logs under `mrtr_trio`: WARNING with the precise reason for each rejected
`requestState`, and for each replay that diverged under `replay="reask"`.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping
from typing import Any

from mcp.server.context import CallNext, ServerRequestContext
from mcp.shared.exceptions import MCPError

from .._errors import BackChannelUnavailable, RoundLimitExceeded, RoundTimeout
from ._host import MRTR_METHODS

__all__ = ["log", "log_calls", "log_failure"]

log = logging.getLogger("mrtr_trio.mcp")

#: Failures that end a flow without a fault in the server's code.
_ENDED_BY_CLIENT_OR_LIMIT = (RoundLimitExceeded, RoundTimeout, BackChannelUnavailable, MCPError)


def log_failure(kind: str, name: str, error: Exception) -> None:
    """Log a flow that failed: ERROR with the traceback for a fault in the server's code,
    WARNING for a flow that ended on a limit or on the client."""
    if isinstance(error, _ENDED_BY_CLIENT_OR_LIMIT):
        log.warning("%s %r ended: %s: %s", kind, name, type(error).__name__, error)
    else:
        log.error("%s %r failed", kind, name, exc_info=error)


async def log_calls(ctx: ServerRequestContext[Any], call_next: CallNext) -> Any:
    """Middleware: one DEBUG line per MRTR call served (when DEBUG is enabled)."""
    if ctx.method not in MRTR_METHODS or not log.isEnabledFor(logging.DEBUG):
        return await call_next(ctx)
    started = time.perf_counter()
    outcome = "cancelled"
    try:
        result = await call_next(ctx)
        outcome = _describe(result)
        return result
    except MCPError as error:
        outcome = f"error {error.code}: {error.message}"
        raise
    except Exception as error:
        outcome = f"error: {type(error).__name__}"
        raise
    finally:
        log.debug(
            "%s %s [%s]: %s (%.1f ms)",
            ctx.method,
            _target(ctx.params),
            ctx.protocol_version,
            outcome,
            (time.perf_counter() - started) * 1000,
        )


def _target(params: Mapping[str, Any] | None) -> str:
    params = params or {}
    target = params.get("name", params.get("uri"))
    retry = " (retry with requestState)" if params.get("requestState") is not None else ""
    return f"{target!r}{retry}"


def _describe(result: Any) -> str:
    """The outcome of a call from its wire result (the SDK shapes results for the wire inside
    the middleware chain)."""
    if not isinstance(result, Mapping):
        return "complete"
    if result.get("resultType") == "input_required":
        keys = sorted(result.get("inputRequests") or {})
        return f"input_required {keys}" if keys else "input_required (state only)"
    if result.get("isError"):
        blocks = result.get("content") or []
        text = "".join(b.get("text", "") for b in blocks if isinstance(b, Mapping))
        return f"isError: {text[:200]}"
    return "complete"
