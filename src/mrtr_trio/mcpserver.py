"""mrtr_trio handlers as tools and prompts of the official SDK's `MCPServer`.

`@mrtr_trio.mcpserver.tool(server)` registers a yield-style or return-style handler, the same
handlers [App][mrtr_trio.mcp.App] takes, on a `mcp.server.mcpserver.MCPServer`, which serves it
on asyncio (or trio) like any of its tools; `prompt(server)` likewise. As on
[mrtr_trio.fastmcp][]: a legacy session runs the flow live over the call's back channel; a
2026-07-28 request runs one round with [Runtime.advance][mrtr_trio.Runtime.advance] and answers
the SDK's `InputRequiredResult` with mrtr_trio's signed token, which the server's request-state
boundary seals once more (docs/fastmcp.md, "MCPServer").

`MCPServer` makes a tool of a function: the function registered here has the handler's
parameters (after its context) and a keyword-only `MCPServer` context, so the server advertises
and checks the same parameters; the call itself then reads the arguments as the client sent
them from the request and checks them as [App][mrtr_trio.mcp.App] does (strictly by default).
Resources are not offered: `MCPServer` lets only URI templates ask for input.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping
from typing import Any, TypeVar

from mcp import MCPError

from ._replay import Complete
from ._runtime import Runtime
from .mcp._host import request_principal
from .mcp._hosted import run_hosted, shared_runtime
from .mcp._log import flow_failure, raise_flow_failure
from .mcp._registry import ArgumentsError, Entry, Kind, make_entry
from .mcp._sdk import MCPServer, MCPServerContext
from .mcp._wire import error_result, prompt_result, tool_result

__all__ = ["prompt", "tool"]

F = TypeVar("F", bound=Callable[..., Any])

#: The keyword-only parameter the registered function receives `MCPServer`'s context in.
CONTEXT_PARAMETER = "mrtr_trio_mcpserver_context"


def tool(
    server: MCPServer,
    name: str | None = None,
    description: str | None = None,
    *,
    runtime: Runtime | None = None,
    strict: bool = True,
    mask_errors: bool = False,
    **options: Any,
) -> Callable[[F], F]:
    """Register a handler of either style as a tool of the `MCPServer` *server*; the decorator
    returns the function unchanged.

    *runtime* defaults to `Runtime()` (keys from `MRTR_TRIO_KEYS`), one per server; *strict* and
    *mask_errors* mean what `App`'s `strict_arguments` and `mask_errors` mean. Other keyword
    *options* are `MCPServer.add_tool`'s (`title`, `annotations`, `icons`, `meta`).
    """
    _check_server(server, "tool", name)

    def register(fn: F) -> F:
        entry = make_entry(
            "tool", fn, name=name, description=description, strict=strict, mask_errors=mask_errors
        )
        hosted = _Hosted(entry, runtime or shared_runtime(server), server.name)
        server.add_tool(
            _function(entry, hosted.call_tool),
            name=entry.name,
            description=entry.description,
            structured_output=False,
            **options,
        )
        return fn

    return register


def prompt(
    server: MCPServer,
    name: str | None = None,
    description: str | None = None,
    *,
    runtime: Runtime | None = None,
    mask_errors: bool = False,
    **options: Any,
) -> Callable[[F], F]:
    """Register a handler of either style as a prompt of the `MCPServer` *server*: it returns a
    `str` (one user message) or a list of messages. Other keyword *options* are
    `MCPServer.prompt`'s (`title`, `icons`)."""
    _check_server(server, "prompt", name)

    def register(fn: F) -> F:
        entry = make_entry(
            "prompt", fn, name=name, description=description, mask_errors=mask_errors
        )
        hosted = _Hosted(entry, runtime or shared_runtime(server), server.name)
        function = _function(entry, hosted.get_prompt)
        server.prompt(name=entry.name, description=entry.description, **options)(function)
        return fn

    return register


def _check_server(server: Any, kind: Kind, name: Any) -> None:
    if callable(name) and not isinstance(name, str):
        raise TypeError(f"write @mrtr_trio.mcpserver.{kind}(server) with parentheses")
    if not isinstance(server, MCPServer):
        raise TypeError(
            f"mrtr_trio.mcpserver.{kind} needs the MCPServer first, got {type(server).__name__}"
        )


def _function(entry: Entry, call: Callable[[MCPServerContext], Any]) -> Callable[..., Any]:
    """A function `MCPServer` makes a tool or prompt of: the handler's parameters after its
    context (annotations resolved), and the server's context as a keyword-only parameter."""
    handler = inspect.signature(entry.fn, eval_str=True)
    parameters = list(handler.parameters.values())[1:]
    context = inspect.Parameter(
        CONTEXT_PARAMETER, inspect.Parameter.KEYWORD_ONLY, annotation=MCPServerContext
    )

    async def function(**arguments: Any) -> Any:
        return await call(arguments[CONTEXT_PARAMETER])

    function.__signature__ = handler.replace(  # type: ignore[attr-defined]
        parameters=[*parameters, context], return_annotation=inspect.Signature.empty
    )
    function.__annotations__ = {
        p.name: p.annotation for p in parameters if p.annotation is not inspect.Parameter.empty
    } | {CONTEXT_PARAMETER: MCPServerContext}
    function.__name__ = entry.name
    function.__qualname__ = entry.name
    function.__doc__ = entry.description
    return function


class _Hosted:
    """One registered handler: runs a call of it in the call's era."""

    def __init__(self, entry: Entry, runtime: Runtime, audience: str) -> None:
        self.entry = entry
        self.runtime = runtime
        self.audience = audience

    async def _serve(self, context: MCPServerContext, raw: Mapping[str, Any]) -> Any:
        entry = self.entry
        return await run_hosted(
            self.runtime,
            context.request_context,
            entry,
            raw,
            entry.validate(raw),
            target=entry.name,
            audience=self.audience,
            principal=request_principal(),
        )

    async def call_tool(self, context: MCPServerContext) -> Any:
        entry = self.entry
        raw = _raw_arguments(context)
        try:
            outcome = await self._serve(context, raw)
        except ArgumentsError as error:  # per spec, a tool execution error
            return error_result(str(error))
        except Exception as error:
            answer = flow_failure(entry, error, error_result)
            if isinstance(answer, MCPError):
                raise answer from error
            return answer
        return tool_result(outcome.value) if isinstance(outcome, Complete) else outcome

    async def get_prompt(self, context: MCPServerContext) -> Any:
        entry = self.entry
        raw = _raw_arguments(context)
        try:
            outcome = await self._serve(context, raw)
            if not isinstance(outcome, Complete):
                return outcome
            result = prompt_result(outcome.value, entry.description)
        except ArgumentsError as error:
            raise MCPError(-32602, str(error)) from None
        except Exception as error:
            raise_flow_failure(entry, error)
        return [
            m.model_dump(by_alias=True, mode="json", exclude_none=True) for m in result.messages
        ]


def _raw_arguments(context: MCPServerContext) -> Mapping[str, Any]:
    """The call's arguments as the client sent them."""
    params = context.request_context.params
    raw = params.get("arguments") if isinstance(params, Mapping) else None
    return raw if isinstance(raw, Mapping) else {}
