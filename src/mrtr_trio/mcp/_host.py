"""Running one MCP request's flow in the era the request belongs to.

A modern (2026-07-28) request runs one round with [Runtime.advance][mrtr_trio.Runtime.advance],
bound to the method, the target, the raw arguments, the authenticated principal and the server name.
A legacy request runs the whole flow live with [Runtime.run_live][mrtr_trio.Runtime.run_live], each
ask a real server-to-client request on the originating request's stream (`related_request_id`).
Client capabilities come from the request's `_meta` (modern) or from `initialize` (legacy).

Two middleware entries run before the SDK validates params: a non-string `requestState` gets
the fixed requestState error, and `inputResponses` is lifted out as raw JSON, so that
mrtr_trio checks each answer itself (unknown keys ignored, malformed answers named).
"""

from __future__ import annotations

import contextvars
import dataclasses
from collections.abc import Awaitable, Mapping, Sequence
from types import MappingProxyType
from typing import Any

import cbor2
import mcp_types as types
from mcp import MCPError
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from .._errors import InvalidInputResponse, InvalidRequestState
from .._modern import InputRequired
from .._replay import Complete
from .._runtime import Runtime
from .._util import IdentityMemo
from .._values import LEGACY_VERSIONS, Answer, Request, describe_request, parse_answer
from ._registry import Entry
from ._sdk import (
    CallNext,
    ServerRequestContext,
    allowed_log_levels,
    get_access_token,
    principal_components,
    send_related_request,
)
from ._wire import answer_json, input_required_result, mcp_error
from ._wirewatch import malformed_reason

__all__ = [
    "MRTR_METHODS",
    "RequestHost",
    "bind_bytes",
    "client_capabilities",
    "is_modern",
    "lift_input_responses",
    "principal",
    "raw_input_responses",
    "request_bind",
    "request_principal",
    "run_flow",
]

MRTR_METHODS = frozenset({"tools/call", "prompts/get", "resources/read"})

_RAW_INPUT_RESPONSES: contextvars.ContextVar[Any] = contextvars.ContextVar(
    "mrtr_trio_raw_input_responses", default=None
)
_LEVELS = ("debug", "info", "notice", "warning", "error", "critical", "alert", "emergency")


def is_modern(ctx: ServerRequestContext[Any]) -> bool:
    """Whether the request is a 2026-07-28 (stateless) one."""
    return ctx.protocol_version in MODERN_PROTOCOL_VERSIONS


def client_capabilities(ctx: ServerRequestContext[Any]) -> Mapping[str, Any]:
    """The client's declared capabilities as a read-only mapping (empty when it declared none).

    A legacy session declares them once, so each declaration is dumped once (the mapping is
    shared: read-only). A modern request declares them afresh each time: nothing to share."""
    declared = ctx.session.client_capabilities
    if declared is None:
        return _NONE_DECLARED
    modern = is_modern(ctx)
    known = None if modern else _DUMPED.get(declared)
    if known is not None:
        return known
    dumped = MappingProxyType(declared.model_dump(by_alias=True, mode="json", exclude_none=True))
    return dumped if modern else _DUMPED.put(declared, dumped)


_NONE_DECLARED: Mapping[str, Any] = MappingProxyType({})
_DUMPED: IdentityMemo[Any, Mapping[str, Any]] = IdentityMemo()


class RequestHost:
    """The [Host][mrtr_trio.Host] for one MCP request: progress and logs on its stream."""

    def __init__(self, ctx: ServerRequestContext[Any]) -> None:
        self._ctx = ctx

    @property
    def request_context(self) -> ServerRequestContext[Any]:
        return self._ctx

    async def report_progress(
        self, progress: float, total: float | None, message: str | None
    ) -> None:
        await self._ctx.session.report_progress(progress, total, message)

    async def log(self, level: str, data: Any, logger: str | None) -> None:
        if level not in _LEVELS:
            raise ValueError(f"log level must be one of {_LEVELS}, got {level!r}")
        if level not in allowed_log_levels(self._ctx.protocol_version, self._ctx.meta):
            return  # modern requests get logs only when they asked for them
        notification = types.LoggingMessageNotification(
            params=types.LoggingMessageNotificationParams(level=level, data=data, logger=logger)
        )
        await self._ctx.session.send_notification(
            notification, related_request_id=self._ctx.request_id
        )


class LegacyAsker:
    """Asks a legacy client over the back channel of the request being served.

    The client's answer is read as the JSON it sent and checked by mrtr_trio alone
    ([parse_answer][mrtr_trio.parse_answer]), as a 2026-07-28 answer is: one set of checks in
    both eras. (The SDK's typed `send_request` would dump the request model to JSON again and
    validate the answer into a model twice, to be dumped back to JSON here: about 60k
    instructions per ask, for nothing `parse_answer` does not check.)"""

    def __init__(self, ctx: ServerRequestContext[Any]) -> None:
        self._ctx = ctx
        version = ctx.protocol_version
        # A version the SDK negotiated but this release does not know reads as the newest.
        self._version = version if version in LEGACY_VERSIONS else LEGACY_VERSIONS[-1]

    async def __call__(self, key: str, request: Request) -> Answer:
        wire = request.to_legacy_wire(self._version)
        try:
            raw = await send_related_request(self._ctx, wire["method"], wire.get("params"))
        except MCPError as error:
            reason = malformed_reason(error)  # an answer the SDK dropped (see _wirewatch)
            if reason is None:
                raise
            raise InvalidInputResponse(
                f"the client's answer to {describe_request(request)} was dropped: {reason}"
            ) from None
        try:
            return parse_answer(request, raw)
        except InvalidInputResponse as error:
            # The client never saw the key (a legacy request has none): name the request by
            # what it asked.
            raise InvalidInputResponse(
                f"the client's answer to {describe_request(request)} is malformed: {error}"
            ) from None


async def run_flow(
    runtime: Runtime,
    ctx: ServerRequestContext[Any],
    entry: Entry,
    raw_arguments: Mapping[str, Any],
    arguments: Mapping[str, Any],
    *,
    input_responses: Any,
    request_state: Any,
    target: str,
    audience: str,
    principal: Sequence[str | None] | None,
) -> Complete | types.InputRequiredResult:
    """Run *entry*'s handler for the request *ctx* in its era: on a legacy session live over
    its back channel, on 2026-07-28 one round with the call's *input_responses* (as the client
    sent them) and *request_state*, bound to the method, *target*, the arguments as received,
    *audience* and *principal* (the caller's `(client_id, issuer, subject)`, `None` when
    unauthenticated). Every host serves a call through here: [App][mrtr_trio.mcp.App], its
    tasks, and the handlers registered on FastMCP or `MCPServer`.

    Returns the finished value as [Complete][mrtr_trio.Complete], or (modern only) the SDK
    `InputRequiredResult` to send back.
    """
    host = RequestHost(ctx)
    capabilities = client_capabilities(ctx)
    if not is_modern(ctx):
        ask = LegacyAsker(ctx) if ctx.session.can_send_request else None
        value = await runtime.run_live(
            entry.fn, arguments, ask, client_capabilities=capabilities, host=host
        )
        return Complete(value)
    outcome = await runtime.advance(
        entry.fn,
        arguments,
        input_responses=input_responses,
        request_state=request_state,
        client_capabilities=capabilities,
        bind=bind_bytes(ctx.method, target, raw_arguments, audience, principal),
        host=host,
    )
    if isinstance(outcome, InputRequired):
        return input_required_result(outcome)
    return outcome


def request_principal() -> Sequence[str | None] | None:
    """The `(client_id, issuer, subject)` the request being served was authenticated as (the
    SDK's auth context), or `None` when unauthenticated: what a token is bound to."""
    token = get_access_token()
    return principal_components(token) if token is not None else None


def principal() -> tuple[str, ...]:
    """The authenticated principal of the request being served
    (`(client_id, issuer, subject)`), or `()` when unauthenticated."""
    token = get_access_token()
    if token is None:
        return ()
    return tuple(part or "" for part in principal_components(token))


def request_bind(
    method: str, target: str, raw_arguments: Mapping[str, Any], audience: str
) -> bytes:
    """The `bind` bytes of the request being served (see `bind_bytes`)."""
    return bind_bytes(method, target, raw_arguments, audience, request_principal())


def bind_bytes(
    method: str,
    target: str,
    raw_arguments: Mapping[str, Any],
    audience: str,
    principal: Sequence[str | None] | None,
) -> bytes:
    """What a token is bound to besides the handler: method, target, the arguments as
    received, the authenticated principal (`(client_id, issuer, subject)`; none when
    unauthenticated) and the audience (the server name)."""
    return cbor2.dumps(
        [method, target, dict(raw_arguments), list(principal or ()), audience],
        canonical=True,
        default=lambda encoder, value: encoder.encode(repr(value)),
    )


def raw_input_responses(params: Any) -> Any:
    """The request's `inputResponses` as the client sent them (JSON), or `None`."""
    lifted = _RAW_INPUT_RESPONSES.get()
    if lifted is not None:
        return lifted
    typed = getattr(params, "input_responses", None)
    if typed is None:
        return None
    return {key: answer_json(answer) for key, answer in typed.items()}


# The middleware below are plain functions that return the rest of the chain's awaitable when
# they have nothing to wrap: no coroutine frame of theirs stays in the call's await chain, which
# every resumption of a legacy flow's task (each ask, each answer) would otherwise pass through.


def guard_request_state(ctx: ServerRequestContext[Any], call_next: CallNext) -> Awaitable[Any]:
    """Middleware: a non-string `requestState` gets the fixed requestState error (the SDK
    would otherwise reject it with a generic params error)."""
    if ctx.method in MRTR_METHODS and isinstance(ctx.params, Mapping):
        state = ctx.params.get("requestState")
        if state is not None and not isinstance(state, str):
            raise mcp_error(InvalidRequestState(f"not a string but {type(state).__name__}"))
    return call_next(ctx)


def lift_input_responses(ctx: ServerRequestContext[Any], call_next: CallNext) -> Awaitable[Any]:
    """Middleware: take `inputResponses` out of the params before the SDK validates them, and
    hand them to the flow as raw JSON."""
    if (
        ctx.method in MRTR_METHODS
        and isinstance(ctx.params, Mapping)
        and ctx.params.get("inputResponses") is not None
    ):
        return _lifted(ctx, call_next)
    return call_next(ctx)


async def _lifted(ctx: ServerRequestContext[Any], call_next: CallNext) -> Any:
    params = dict(ctx.params or {})
    token = _RAW_INPUT_RESPONSES.set(params.pop("inputResponses"))
    try:
        return await call_next(dataclasses.replace(ctx, params=params))
    finally:
        _RAW_INPUT_RESPONSES.reset(token)
