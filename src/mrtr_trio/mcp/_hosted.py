"""One call of an mrtr_trio handler served inside another framework's MCP request handler
(FastMCP's tools, prompts and resources; the SDK's `MCPServer`), on whichever loop serves it.

The framework owns the server: the wire, the listing, its middleware and its own request-state
boundary. This module only needs the SDK's request context of the call (`ServerRequestContext`,
which both frameworks lend their handlers) and does what [App][mrtr_trio.mcp.App] does for one
call: a legacy request runs the flow live over the request's back channel, a 2026-07-28
request runs one round with [Runtime.advance][mrtr_trio.Runtime.advance], bound to the method,
the target, the arguments as received, the framework's authenticated principal and the audience.

Both frameworks seal `requestState` with the SDK's request-state boundary, which unseals it
before any handler runs: the context's raw params already carry mrtr_trio's own token, in
plaintext, and `inputResponses` as the client sent them (raw JSON, so that mrtr_trio checks
each answer itself as on [App][mrtr_trio.mcp.App]).
"""

from __future__ import annotations

import weakref
from collections.abc import Mapping, Sequence
from typing import Any

import mcp_types as types

from .._replay import Complete
from .._runtime import Runtime
from ._host import run_flow
from ._registry import Entry
from ._sdk import ServerRequestContext

__all__ = ["run_hosted", "shared_runtime"]

_RUNTIMES: weakref.WeakKeyDictionary[object, Runtime] = weakref.WeakKeyDictionary()


def shared_runtime(server: object) -> Runtime:
    """The [Runtime][mrtr_trio.Runtime] the handlers registered on the framework's *server*
    without one share: `Runtime()` (keys from `MRTR_TRIO_KEYS`), made on first use, kept as
    long as the server lives."""
    runtime = _RUNTIMES.get(server)
    if runtime is None:
        runtime = _RUNTIMES[server] = Runtime()
    return runtime


async def run_hosted(
    runtime: Runtime,
    ctx: ServerRequestContext[Any],
    entry: Entry,
    raw_arguments: Mapping[str, Any],
    arguments: Mapping[str, Any],
    *,
    target: str,
    audience: str,
    principal: Sequence[str | None] | None,
) -> Complete | types.InputRequiredResult:
    """Run *entry*'s handler for the request *ctx* in its era: its value as
    [Complete][mrtr_trio.Complete], or (2026-07-28 only) the SDK `InputRequiredResult` whose
    `requestState` is mrtr_trio's signed token (the framework's boundary seals it again).

    *principal* is the caller's `(client_id, issuer, subject)` as the framework authenticated
    it (`None` when unauthenticated): a token minted for one principal does not verify for
    another."""
    params = ctx.params if isinstance(ctx.params, Mapping) else {}
    return await run_flow(
        runtime,
        ctx,
        entry,
        raw_arguments,
        arguments,
        input_responses=params.get("inputResponses"),
        request_state=params.get("requestState"),
        target=target,
        audience=audience,
        principal=principal,
    )
