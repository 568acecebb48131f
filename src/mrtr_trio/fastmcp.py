"""mrtr_trio handlers as FastMCP tools, prompts and resources (extra `mrtr_trio[fastmcp]`).

`@mrtr_trio.fastmcp.tool(server)` registers a yield-style or return-style handler, the same
handlers [App][mrtr_trio.mcp.App] takes, on a `fastmcp.FastMCP` server, which serves it on
asyncio (or trio) like any of its tools. On a legacy session the flow runs live: each request
it yields is a real server-to-client request over the call's back channel (elicitation,
sampling and roots, which FastMCP 4 itself no longer offers), its progress and logs go on the
call's stream. On a 2026-07-28 request each round is one
[Runtime.advance][mrtr_trio.Runtime.advance], returned as the SDK's `InputRequiredResult`
whose `requestState` is mrtr_trio's signed token, bound to the tool, its arguments as received,
FastMCP's authenticated principal (when there is one) and the server's name.

FastMCP's own request-state boundary stays in place: it seals the token once more on the way
out and opens it before the handler runs. docs/fastmcp.md says what that costs and how the two
keys compose. What this module relies on in FastMCP 4.2 (pinned by tests/test_fastmcp.py):

- a request handler's SDK `ServerRequestContext` is `fastmcp_request_ctx.get()._srctx` (FastMCP
  calls it its escape hatch to the SDK's context), with the raw params, unsealed;
- a `Tool` subclass's `run(arguments)` gets the client's arguments as sent, and an
  `InputRequiredToolResult` (likewise for prompts and resources) reaches the wire as the
  `InputRequiredResult` it wraps;
- `FastMCP._mask_error_details` is the server's `mask_error_details` (what *mask_errors*
  defaults to);
- FastMCP middleware sees a tool's `ToolResult` as the tool returned it, and an `MCPError`
  raised by middleware, a prompt or a resource reaches the wire as it is (a tool's own
  exceptions become `isError` results: see `_ProtocolFailure`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, TypeVar

import mcp_types as types
from fastmcp import FastMCP
from fastmcp.prompts import Message, Prompt, PromptArgument, PromptResult
from fastmcp.prompts.base import InputRequiredPromptResult
from fastmcp.resources import Resource, ResourceResult
from fastmcp.resources.base import InputRequiredResourceResult
from fastmcp.server.dependencies import fastmcp_request_ctx, get_access_token
from fastmcp.server.middleware import Middleware, MiddlewareContext
from fastmcp.server.middleware.middleware import CallNext
from fastmcp.tools import InputRequiredToolResult, Tool, ToolResult
from mcp import MCPError
from pydantic import AnyUrl, PrivateAttr

from ._replay import Complete
from ._runtime import Runtime
from .mcp._hosted import run_hosted, shared_runtime
from .mcp._log import flow_failure, raise_flow_failure
from .mcp._registry import ArgumentsError, Entry, Kind, make_entry
from .mcp._sdk import ServerRequestContext, principal_components
from .mcp._wire import error_result, prompt_result, resource_result, tool_result

__all__ = ["prompt", "resource", "runtime_of", "tool"]

F = TypeVar("F", bound=Callable[..., Any])


def runtime_of(server: FastMCP[Any]) -> Runtime:
    """The [Runtime][mrtr_trio.Runtime] *server*'s mrtr_trio handlers run with when they were
    registered without one: `Runtime()` (keys from `MRTR_TRIO_KEYS`), made on first use and
    shared by the server's handlers."""
    return shared_runtime(server)


def tool(
    server: FastMCP[Any],
    name: str | None = None,
    description: str | None = None,
    *,
    runtime: Runtime | None = None,
    input_schema: Mapping[str, Any] | None = None,
    strict: bool = True,
    mask_errors: bool | None = None,
    **options: Any,
) -> Callable[[F], F]:
    """Register a handler of either style as a tool of the FastMCP *server*; the decorator
    returns the function unchanged.

    The first parameter is mrtr_trio's context; the others form the input schema, and
    *description* defaults to the docstring, as on [App.tool][mrtr_trio.mcp.App.tool].
    *runtime* defaults to [runtime_of(server)][mrtr_trio.fastmcp.runtime_of]. *input_schema*,
    *strict* and *mask_errors* mean what `App`'s `input_schema`, `strict_arguments` and
    `mask_errors` mean; *mask_errors* defaults to the server's own `mask_error_details`. Other
    keyword *options* are FastMCP's own (`tags`, `title`, `annotations`, `meta`, `icons`...),
    given to its `Tool`.
    """
    _check_server(server, "tool", name)

    def register(fn: F) -> F:
        entry = make_entry(
            "tool",
            fn,
            name=name,
            description=description,
            input_schema=input_schema,
            strict=strict,
            mask_errors=_masks(server, mask_errors),
        )
        component = _HostedTool(
            name=entry.name,
            description=entry.description,
            parameters=dict(entry.input_schema()),
            **options,
        )
        component.bind(entry, runtime or runtime_of(server), server.name)
        _install_protocol_errors(server)
        server.add_tool(component)
        return fn

    return register


def prompt(
    server: FastMCP[Any],
    name: str | None = None,
    description: str | None = None,
    *,
    runtime: Runtime | None = None,
    mask_errors: bool | None = None,
    **options: Any,
) -> Callable[[F], F]:
    """Register a handler of either style as a prompt of the FastMCP *server*: it returns a
    `str` (one user message) or a list of messages, as on [App.prompt][mrtr_trio.mcp.App.prompt].
    Other keyword *options* are FastMCP's own, given to its `Prompt`."""
    _check_server(server, "prompt", name)

    def register(fn: F) -> F:
        entry = make_entry(
            "prompt",
            fn,
            name=name,
            description=description,
            mask_errors=_masks(server, mask_errors),
        )
        component = _HostedPrompt(
            name=entry.name,
            description=entry.description,
            arguments=[
                PromptArgument(name=n, description=d, required=r) for n, d, r in entry.parameters()
            ],
            **options,
        )
        component.bind(entry, runtime or runtime_of(server), server.name)
        server.add_prompt(component)
        return fn

    return register


def resource(
    server: FastMCP[Any],
    uri: str,
    *,
    name: str | None = None,
    description: str | None = None,
    mime_type: str | None = None,
    runtime: Runtime | None = None,
    mask_errors: bool | None = None,
    **options: Any,
) -> Callable[[F], F]:
    """Register a handler of either style as the resource at *uri* (a plain URI: the handler
    takes only the context) of the FastMCP *server*; it returns `str` (text) or `bytes` (a
    blob), as on [App.resource][mrtr_trio.mcp.App.resource]. Other keyword *options* are
    FastMCP's own, given to its `Resource`."""
    _check_server(server, "resource", name)
    if not isinstance(uri, str) or "://" not in uri:
        raise TypeError(f"a resource needs a URI like 'scheme://path', got {uri!r}")
    if "{" in uri or "}" in uri:
        raise TypeError(
            f"resource {uri!r}: URI templates are served by mrtr_trio.mcp.App; "
            "mrtr_trio.fastmcp.resource takes a plain URI"
        )

    def register(fn: F) -> F:
        entry = make_entry(
            "resource",
            fn,
            name=name,
            description=description,
            uri=uri,
            mime_type=mime_type,
            mask_errors=_masks(server, mask_errors),
        )
        fields: dict[str, Any] = {"mime_type": mime_type} if mime_type else {}
        component = _HostedResource(
            uri=AnyUrl(uri), name=entry.name, description=entry.description, **fields, **options
        )
        component.bind(entry, runtime or runtime_of(server), server.name)
        server.add_resource(component)
        return fn

    return register


def _masks(server: FastMCP[Any], mask_errors: bool | None) -> bool:
    """Whether a handler's failures reach the client as an error id only: as asked, else as
    the server masks its own tools' (`FastMCP(mask_error_details=...)`)."""
    if mask_errors is not None:
        return bool(mask_errors)
    return bool(getattr(server, "_mask_error_details", False))


def _check_server(server: Any, kind: Kind, name: Any) -> None:
    if callable(name) and not isinstance(name, str):
        raise TypeError(f"write @mrtr_trio.fastmcp.{kind}(server) with parentheses")
    if not isinstance(server, FastMCP):
        raise TypeError(
            f"mrtr_trio.fastmcp.{kind} needs the FastMCP server first, got {type(server).__name__}"
        )


# ------------------------------------------------------------------------- one call


def _request_context() -> ServerRequestContext[Any]:
    """The SDK's context of the FastMCP request being served."""
    wrapper = fastmcp_request_ctx.get()
    if wrapper is None:
        raise RuntimeError("an mrtr_trio handler on FastMCP runs only inside a FastMCP request")
    return wrapper._srctx


def _principal() -> tuple[str | None, ...] | None:
    """The caller's `(client_id, issuer, subject)` as FastMCP authenticated it, or `None`."""
    token = get_access_token()
    return None if token is None else tuple(principal_components(token))


class _Hosted:
    """What each hosted component carries: the entry, the runtime, the audience."""

    _entry: Entry
    _runtime: Runtime
    _audience: str

    def bind(self, entry: Entry, runtime: Runtime, audience: str) -> None:
        self._entry = entry
        self._runtime = runtime
        self._audience = audience

    async def _serve(
        self, raw: Mapping[str, Any], arguments: Mapping[str, Any], target: str
    ) -> Complete | types.InputRequiredResult:
        return await run_hosted(
            self._runtime,
            _request_context(),
            self._entry,
            raw,
            arguments,
            target=target,
            audience=self._audience,
            principal=_principal(),
        )


class _ProtocolFailure(ToolResult):
    """What a tool answers for an mrtr_trio protocol error (an invalid requestState or answer,
    a missing capability): an `isError` result saying so, which `_ProtocolErrors` turns into
    the JSON-RPC error it stands for. (Raised, FastMCP would log the client's mistake as the
    server's error and make an `isError` result of it.)"""

    _error: MCPError = PrivateAttr()

    @classmethod
    def of(cls, error: MCPError) -> _ProtocolFailure:
        failure = cls(content=[types.TextContent(type="text", text=error.message)], is_error=True)
        failure._error = error
        return failure


class _HostedTool(_Hosted, Tool):
    _entry: Entry = PrivateAttr()
    _runtime: Runtime = PrivateAttr()
    _audience: str = PrivateAttr()

    async def run(self, arguments: dict[str, Any]) -> ToolResult:
        entry = self._entry
        try:
            validated = entry.validate(arguments)
        except ArgumentsError as error:  # per spec, a tool execution error
            return ToolResult.from_mcp_result(error_result(str(error)))
        try:
            outcome = await self._serve(arguments, validated, entry.name)
        except Exception as error:
            answer = flow_failure(entry, error, error_result)
            if isinstance(answer, MCPError):
                return _ProtocolFailure.of(answer)
            return ToolResult.from_mcp_result(answer)
        if isinstance(outcome, Complete):
            return ToolResult.from_mcp_result(tool_result(outcome.value))
        return InputRequiredToolResult(outcome)


class _ProtocolErrors(Middleware):
    """FastMCP middleware: an mrtr_trio protocol error out of one of its tools reaches the
    client as its JSON-RPC error (as on [App][mrtr_trio.mcp.App]), not as an `isError` result,
    which FastMCP makes of anything else a tool raises."""

    async def on_call_tool(
        self,
        context: MiddlewareContext[types.CallToolRequestParams],
        call_next: CallNext[types.CallToolRequestParams, ToolResult],
    ) -> ToolResult:
        result = await call_next(context)
        if isinstance(result, _ProtocolFailure):
            raise result._error
        return result


def _install_protocol_errors(server: FastMCP[Any]) -> None:
    if not any(isinstance(entry, _ProtocolErrors) for entry in server.middleware):
        server.add_middleware(_ProtocolErrors())


class _HostedPrompt(_Hosted, Prompt):
    _entry: Entry = PrivateAttr()
    _runtime: Runtime = PrivateAttr()
    _audience: str = PrivateAttr()

    async def render(self, arguments: dict[str, Any] | None = None) -> PromptResult:
        entry = self._entry
        raw = arguments or {}
        try:
            validated = entry.validate(raw)
        except ArgumentsError as error:
            raise MCPError(-32602, str(error)) from None
        try:
            outcome = await self._serve(raw, validated, entry.name)
            if isinstance(outcome, types.InputRequiredResult):
                return InputRequiredPromptResult(outcome)
            result = prompt_result(outcome.value, entry.description)
        except Exception as error:
            raise_flow_failure(entry, error)
        return PromptResult(
            [Message(m.content, role=m.role) for m in result.messages],
            description=result.description,
        )


class _HostedResource(_Hosted, Resource):
    _entry: Entry = PrivateAttr()
    _runtime: Runtime = PrivateAttr()
    _audience: str = PrivateAttr()

    async def read(self) -> str | bytes | ResourceResult:
        entry = self._entry
        uri = str(entry.uri)
        try:
            outcome = await self._serve({}, {}, uri)
            if isinstance(outcome, types.InputRequiredResult):
                return InputRequiredResourceResult(outcome)
            resource_result(outcome.value, uri, entry.mime_type)  # the same checks as App's
        except Exception as error:
            raise_flow_failure(entry, error)
        value: str | bytes = outcome.value
        return bytes(value) if isinstance(value, bytearray) else value
