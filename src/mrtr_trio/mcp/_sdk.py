"""The parts of the `mcp` SDK (2.3) that the tasks extension and header-mapped parameters
rely on beyond its documented handler API, in one place.

`tests/server/test_sdk_pins.py` pins each of these facts, so an SDK upgrade that changes one
fails there first:

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
  `Server.add_request_handler` and answers `-32601` for unregistered ones.
"""

from __future__ import annotations

from typing import Any

from mcp.server.context import ServerRequestContext
from mcp.shared.inbound import (
    MCP_NAME_HEADER,
    X_MCP_HEADER_KEY,
    decode_header_value,
    find_invalid_x_mcp_header,
)

__all__ = ["X_MCP_HEADER_KEY", "invalid_header_annotation", "mcp_name_header"]


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
