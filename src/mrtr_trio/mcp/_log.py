"""What the MCP server logs, under the logger `mrtr_trio.mcp`.

- One DEBUG line per `tools/call`, `prompts/get`, `resources/read`, `tasks/get`,
  `tasks/update` and `tasks/cancel` served: the method, the target (a task's id, and the keys a
  `tasks/update` answers), the protocol version, the outcome (`complete`, `input_required` with
  the keys asked, `task` with its id and status for a call that became a task, the task's
  status for `tasks/get`, `isError`, or the JSON-RPC error) and the time it took.
- A flow that fails, whatever the client is told ([flow_failure][mrtr_trio.mcp._log.flow_failure]
  says what it is told, in every driver): ERROR with the traceback when the server's
  code is at fault (the handler raised, yielded something that is not a request, or built an
  invalid request), one WARNING line with the message when the flow ended on a limit or on the
  client (round limit, round timeout, poll timeout, no back channel, the client's error answer
  to a request, a requestState that would be over `max_state_bytes`, a retry while the step
  is still running), at most 5 a minute for each handler and kind of ending (the others at
  DEBUG).
  Under `App(mask_errors=True)` a fault in the server's code is logged with an error id, and
  the client is told only that id (`MASKED`), never the exception's text.

The runtime logs under `mrtr_trio`: WARNING with the precise reason for each rejected
`requestState`, and for each replay that diverged under `replay="reask"`.
"""

from __future__ import annotations

import logging
import secrets
import time
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, NoReturn, TypeVar

from mcp import MCPError

from .._errors import (
    INTERNAL_ERROR,
    BackChannelUnavailable,
    MrtrError,
    PollTimeout,
    RoundLimitExceeded,
    RoundTimeout,
    StateTooLarge,
    StepInProgress,
    StepOutcomeUnknown,
)
from .._ratelimit import RateLimitedLog
from ._host import MRTR_METHODS
from ._registry import Entry
from ._sdk import CallNext, ServerRequestContext
from ._wire import PROTOCOL_ERRORS, error_message, mcp_error

__all__ = ["MASKED", "flow_failure", "log", "log_calls", "log_failure", "raise_flow_failure"]

log = logging.getLogger("mrtr_trio.mcp")

R = TypeVar("R")

#: Failures that end a flow without a fault in the server's code: what a client can cause.
_ENDED_BY_CLIENT_OR_LIMIT = (
    RoundLimitExceeded,
    RoundTimeout,
    PollTimeout,
    BackChannelUnavailable,
    MCPError,
    StateTooLarge,  # e.g. an answer too big to carry in the next requestState
    StepInProgress,  # a retry while another presentation of the token runs the step
    StepOutcomeUnknown,  # retries of a step whose holder died: reported, not a fault here
)
#: At most `CLIENT_LOG_BURST` WARNING lines per `CLIENT_LOG_INTERVAL` seconds about flows of
#: one handler ending alike on a limit or on the client; the others at DEBUG.
CLIENT_LOG_INTERVAL = 60.0
CLIENT_LOG_BURST = 5
_client_caused = RateLimitedLog(log, logging.WARNING, CLIENT_LOG_INTERVAL, burst=CLIENT_LOG_BURST)


def log_failure(kind: str, name: str, error: Exception) -> None:
    """Log a flow that failed: ERROR with the traceback for a fault in the server's code;
    one WARNING line without a traceback for a flow that ended on a limit or on the client,
    at most `CLIENT_LOG_BURST` per `CLIENT_LOG_INTERVAL` seconds for each handler and kind of
    ending, the others at DEBUG (a client repeating itself cannot flood the log)."""
    if isinstance(error, _ENDED_BY_CLIENT_OR_LIMIT):
        reason = type(error).__name__
        _client_caused(f"{kind} {name} {reason}", "%s %r ended: %s: %s", kind, name, reason, error)
    else:
        log.error("%s %r failed", kind, name, exc_info=error)


#: What a client is told of a masked failure (`App(mask_errors=True)`).
MASKED = "{kind} {name!r} failed with an internal error (error id {error_id})"


def flow_failure(
    entry: Entry, error: Exception, failure_result: Callable[[str], R] | None = None
) -> R | MCPError:
    """What a flow that raised *error* answers, whichever driver ran it: a protocol error is
    its JSON-RPC error; any other failure is logged (`log_failure`: ERROR with the traceback
    for a fault in the server's code) and becomes *failure_result* (tools: an `isError`
    result) or, without one, a JSON-RPC error with the error's code (prompts, resources;
    DESIGN §3), an `MCPError` as it is. With the entry's `mask_errors`, a fault in the
    server's code is told as `MASKED` with a fresh error id, which the log line carries too
    (`data.errorId` on a JSON-RPC error)."""
    if isinstance(error, PROTOCOL_ERRORS):
        return mcp_error(error)
    if entry.mask_errors and not isinstance(error, _ENDED_BY_CLIENT_OR_LIMIT):
        error_id = secrets.token_hex(8)
        log.error("%s %r failed (error id %s)", entry.kind, entry.name, error_id, exc_info=error)
        masked = MASKED.format(kind=entry.kind, name=entry.name, error_id=error_id)
        if failure_result is not None:
            return failure_result(masked)
        return MCPError(INTERNAL_ERROR, masked, {"errorId": error_id})
    log_failure(entry.kind, entry.name, error)
    if failure_result is not None:
        return failure_result(error_message(error))
    if isinstance(error, MCPError):
        return error  # e.g. the client's error answer to a legacy request, with its code
    code = error.code if isinstance(error, MrtrError) else INTERNAL_ERROR
    return MCPError(code, error_message(error))


def raise_flow_failure(entry: Entry, error: Exception) -> NoReturn:
    """Raise what a prompt or resource (no failure result) answers for a flow that raised
    *error*: its JSON-RPC error as `flow_failure` makes it, chained to *error*, or *error*
    itself when it is one already."""
    answer = flow_failure(entry, error)
    if answer is error:
        raise error
    raise answer from error


_LOGGED_METHODS = MRTR_METHODS | {"tasks/get", "tasks/update", "tasks/cancel"}


def log_calls(ctx: ServerRequestContext[Any], call_next: CallNext) -> Awaitable[Any]:
    """Middleware: one DEBUG line per MRTR call served (when DEBUG is enabled; otherwise it
    hands back the rest of the chain's awaitable, so no frame of its own stays in the call)."""
    if ctx.method not in _LOGGED_METHODS or not log.isEnabledFor(logging.DEBUG):
        return call_next(ctx)
    return _logged(ctx, call_next)


async def _logged(ctx: ServerRequestContext[Any], call_next: CallNext) -> Any:
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
            _target(ctx.method, ctx.params),
            ctx.protocol_version,
            outcome,
            (time.perf_counter() - started) * 1000,
        )


def _target(method: str, params: Mapping[str, Any] | None) -> str:
    params = params or {}
    if method.startswith("tasks/"):
        answers = params.get("inputResponses")
        keys = f" answering {sorted(answers)}" if isinstance(answers, Mapping) else ""
        return f"task {params.get('taskId')!r}{keys}"
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
    if result.get("resultType") == "task":  # a call that became a task
        return f"task {result.get('taskId')!r} created, {result.get('status')}"
    if "taskId" in result and "status" in result:  # tasks/get
        status = result["status"]
        if status == "input_required":
            status += f" {sorted(result.get('inputRequests') or {})}"
        return f"task {status}"
    if result.get("isError"):
        blocks = result.get("content") or []
        text = "".join(b.get("text", "") for b in blocks if isinstance(b, Mapping))
        return f"isError: {text[:200]}"
    return "complete"
