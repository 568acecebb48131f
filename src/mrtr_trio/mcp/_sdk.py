"""Every import from the `mcp` SDK (2.3) beyond its public API, and the facts about the SDK
that the host relies on beyond its documented handler API, in one place.

**The line.** Outside this module, the host imports the SDK only from its top level (`mcp`:
`Client`, `MCPError`, `UriTemplate`, `stdio_server`...) and the protocol's types (`mcp_types`),
plus the token-verifier interface that [mrtr_trio.auth][] implements
(`mcp.server.auth.provider.AccessToken` and `TokenVerifier`, the SDK's documented extension
point for verifiers; `auth` cannot import this module, which lives in a package that imports
`auth`). Every other `mcp.<module>` import lives here and is re-exported under the same name;
`tests/test_layers.py` fails naming any that is not. The re-exported names, and what they are
for:

- the low-level `Server`, its handlers' `ServerRequestContext` and its middleware's
  `CallNext`; `allowed_log_levels` (the levels a session's `logging/setLevel` enables);
- the Streamable HTTP machinery: `StreamableHTTPSessionManager`, `TransportSecuritySettings`,
  and `SessionMessage` (what the stdio streams carry);
- the auth plumbing the gate and the session slots reuse: `AuthContextMiddleware`,
  `BearerAuthBackend`, `AuthenticatedUser`, `get_access_token`, `principal_components` and
  `create_protected_resource_routes`;
- header parsing: `NAME_BEARING_METHODS`, `decode_header_value`;
- the SDK's `MCPServer` and its handlers' `MCPServerContext` (`mcp.server.mcpserver.Context`),
  which [mrtr_trio.mcpserver][] registers handlers on: a tool or prompt function's parameter
  annotated with that context receives it, its `request_context` is the call's
  `ServerRequestContext` with the raw params (the request-state boundary has already unsealed
  `requestState`), and an `MCPError` or an `InputRequiredResult` out of the function reaches the
  wire as it is.

An SDK upgrade that changes one of these facts fails a test: `tests/server/test_sdk_pins.py`
pins those it can check on their own (the header sentinel, the `x-mcp-header` check,
`Server.extensions`, that the SDK knows no `tasks/*` method, the race's logger and message, and
the middleware's order); the rest are covered by the tests of the features that rely on them
(`test_tasks.py`, `test_tool_options.py`, `test_quirks.py`):

- a request handler's `ctx.request` is the Starlette request on HTTP (`None` on stdio and
  in-process), which is how the `Mcp-Name` header of a `tasks/*` request is read (the SDK
  checks `Mcp-Name` only for `tools/call`, `prompts/get` and `resources/read`);
- header values use the `=?base64?...?=` sentinel, decoded strictly by
  `mcp.shared.inbound.decode_header_value`;
- `x-mcp-header` annotations are checked by `mcp.shared.inbound.find_invalid_x_mcp_header`,
  and the modern HTTP transport validates `Mcp-Param-*` headers against the schema that
  `Server.get_tool_input_schema` returns, before any handler runs;
- `Server.extensions` is what `server/discover` advertises under
  `capabilities.extensions`;
- on the 2026-07-28 wire a `tools/call` handler may return a plain `dict` whose
  `resultType` is an extension's (`"task"`): the runner passes it through unsieved, keeps
  its `null` values and stamps `serverInfo`;
- the SDK dispatches methods it does not know (`tasks/*`) to handlers added with
  `Server.add_request_handler` and answers `-32601` for unregistered ones;
- when a legacy session ends (the client's DELETE, an idle timeout) while one of the client's
  notifications or answers is still being posted on it, the SDK's Streamable HTTP transport has
  already answered that POST with 202 when it finds the session's stream closed: it logs
  `"Error handling POST request"` with an `anyio.ClosedResourceError` on the
  `mcp.server.streamable_http` logger and then tries to send a 500 after the 202 (hypercorn
  reports "http.response.start given the state ASGIHTTPState.CLOSED"). Official clients trigger
  it on most cancellations (`notifications/cancelled`, then DELETE). Nothing is lost, so
  neither traceback belongs on the user's stderr:
  [SessionGuard][mrtr_trio.mcp._sessions.SessionGuard] drops what the SDK sends after its
  response ended and the stream error that follows, and
  [quiet_known_sdk_races][mrtr_trio.mcp._sdk.quiet_known_sdk_races] filters the log record
  (logged at DEBUG on `mrtr_trio.mcp` instead). `tests/server/test_quirks.py` reproduces
  the race;
- a legacy request's `ServerSession` keeps the request's own back channel (the dispatch context
  that its typed `send_request(..., metadata=ServerMessageMetadata(related_request_id=...))`
  picks, which on Streamable HTTP is the request's POST stream) as `_request_outbound`, whose
  `send_raw_request(method, params)` sends a JSON request and returns the client's JSON result:
  [send_related_request][mrtr_trio.mcp._sdk.send_related_request] asks with it (pinned, and
  covered by every legacy test that asks);
- `StreamableHTTPSessionManager._server_instances` maps each open legacy session's id to its
  transport, and `_discard_session(id, transport)` ends one as a DELETE or an idle timeout
  does: [SessionSlots][mrtr_trio.mcp._slots.SessionSlots] counts and frees slots with them
  (`session_is_open`, `close_session`; pinned, and covered by `test_hardening.py`).
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Mapping
from typing import Any

import anyio
from mcp.server.auth.middleware.auth_context import AuthContextMiddleware, get_access_token
from mcp.server.auth.middleware.bearer_auth import AuthenticatedUser, BearerAuthBackend
from mcp.server.auth.provider import principal_components
from mcp.server.auth.routes import create_protected_resource_routes
from mcp.server.connection import allowed_log_levels
from mcp.server.context import CallNext, ServerRequestContext
from mcp.server.lowlevel import Server
from mcp.server.mcpserver import Context as MCPServerContext
from mcp.server.mcpserver import MCPServer
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from mcp.server.transport_security import TransportSecuritySettings
from mcp.shared.inbound import (
    MCP_NAME_HEADER,
    NAME_BEARING_METHODS,
    X_MCP_HEADER_KEY,
    decode_header_value,
    find_invalid_x_mcp_header,
)
from mcp.shared.message import SessionMessage

__all__ = [
    "NAME_BEARING_METHODS",
    "SDK_RACE_LOGGER",
    "SDK_RACE_MESSAGE",
    "X_MCP_HEADER_KEY",
    "AuthContextMiddleware",
    "AuthenticatedUser",
    "BearerAuthBackend",
    "CallNext",
    "MCPServer",
    "MCPServerContext",
    "Server",
    "ServerRequestContext",
    "SessionMessage",
    "StreamableHTTPSessionManager",
    "TransportSecuritySettings",
    "add_middleware",
    "allowed_log_levels",
    "create_protected_resource_routes",
    "decode_header_value",
    "get_access_token",
    "invalid_header_annotation",
    "mcp_name_header",
    "principal_components",
    "quiet_known_sdk_races",
    "send_related_request",
]


def add_middleware(server: Server[Any], *entries: Any) -> None:
    """Run *entries* before the SDK validates a request's params, in order.

    `Server.middleware` is marked provisional in mcp 2.3 (hence the pinned range in
    pyproject.toml); `tests/server/test_sdk_pins.py` checks that it still runs its entries
    with the raw params, before validation."""
    server.middleware.extend(entries)


def send_related_request(
    ctx: ServerRequestContext[Any], method: str, params: Mapping[str, Any] | None
) -> Awaitable[dict[str, Any]]:
    """Send the JSON request *method* with *params* to the client on the back channel of the
    request *ctx* serves (as `ctx.session.send_request` does with `related_request_id`), and
    return the client's result as it sent it: no SDK model is built either way, since
    mrtr_trio checks every answer itself (`parse_answer`), in both eras.

    Raises `MCPError` when the client answers with an error (or the session's answer watch
    fails the request: see [mrtr_trio.mcp._wirewatch][])."""
    return ctx.session._request_outbound.send_raw_request(method, params)


def mcp_name_header(ctx: ServerRequestContext[Any]) -> tuple[bool, str | None]:
    """`(present, value)` of the request's `Mcp-Name` header, decoded. `present` is
    `False` off HTTP or when the header is absent; a malformed base64 sentinel decodes to
    `None`, which matches nothing."""
    request = ctx.request
    headers = getattr(request, "headers", None)
    if headers is None:
        return False, None
    raw = headers.get(MCP_NAME_HEADER)
    if raw is None:
        return False, None
    return True, decode_header_value(raw)


def invalid_header_annotation(input_schema: Any) -> str | None:
    """Why an `x-mcp-header` annotation in *input_schema* is invalid, or `None`."""
    return find_invalid_x_mcp_header(input_schema)


#: The SDK logger and message of the race (mcp 2.3, mcp/server/streamable_http.py).
SDK_RACE_LOGGER = "mcp.server.streamable_http"
SDK_RACE_MESSAGE = "Error handling POST request"

log = logging.getLogger("mrtr_trio.mcp")


class _SessionEndedRace(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        error = record.exc_info[1] if record.exc_info else None
        if record.getMessage() == SDK_RACE_MESSAGE and isinstance(
            error, anyio.ClosedResourceError | anyio.BrokenResourceError
        ):
            log.debug("a client message arrived as its legacy session ended; dropped")
            return False
        return True


_FILTER = _SessionEndedRace()


def quiet_known_sdk_races() -> None:
    """Install the filter (once, however often it is called)."""
    logger = logging.getLogger(SDK_RACE_LOGGER)
    if _FILTER not in logger.filters:
        logger.addFilter(_FILTER)


def session_is_open(manager: StreamableHTTPSessionManager, session_id: str) -> bool:
    """Whether *manager* still holds the legacy session *session_id* (not ended by its DELETE,
    its idle timeout or a crash): `StreamableHTTPSessionManager._server_instances`."""
    return session_id in manager._server_instances


async def close_session(manager: StreamableHTTPSessionManager, session_id: str) -> None:
    """End the legacy session *session_id* as the SDK ends one (its `_discard_session`: the
    session is forgotten, its transport terminated, its in-flight requests cancelled)."""
    transport = manager._server_instances.get(session_id)
    if transport is not None:
        await manager._discard_session(session_id, transport)
