"""Conversions between mrtr_trio's values and the MCP SDK's wire types.

Requests become SDK request models (the 2026 shape that `InputRequiredResult` embeds); SDK
answers become client JSON for [parse_answer][mrtr_trio.parse_answer]; handler return values
become `CallToolResult`, `GetPromptResult` and `ReadResourceResult`; mrtr_trio errors become
`MCPError` with their JSON-RPC code and data.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Mapping
from typing import Any

import mcp_types as types
import pydantic
from mcp import MCPError

from .._errors import InvalidInputResponse, InvalidRequestState, MissingCapability, MrtrError
from .._modern import InputRequired
from .._util import IdentityMemo
from .._values import Request

__all__ = [
    "PROTOCOL_ERRORS",
    "answer_json",
    "error_message",
    "error_result",
    "input_required_result",
    "mcp_error",
    "prompt_result",
    "resource_result",
    "sdk_request",
    "tool_result",
]

_REQUEST_TYPES: dict[str, type[pydantic.BaseModel]] = {
    "elicitation/create": types.ElicitRequest,
    "sampling/createMessage": types.CreateMessageRequest,
    "roots/list": types.ListRootsRequest,
}

_CONTENT_BLOCKS: pydantic.TypeAdapter[list[types.ContentBlock]] = pydantic.TypeAdapter(
    list[types.ContentBlock]
)
_PROMPT_MESSAGES: pydantic.TypeAdapter[list[types.PromptMessage]] = pydantic.TypeAdapter(
    list[types.PromptMessage]
)


def sdk_request(request: Request) -> Any:
    """The SDK model of *request*, 2026-shaped (what an `InputRequiredResult` embeds).

    Built once per request object (requests are frozen, and the constructors hand back the
    same object for the same question)."""
    known = _SDK_REQUESTS.get(request)
    if known is None:
        known = _SDK_REQUESTS.put(
            request, _REQUEST_TYPES[request.method].model_validate(request.to_wire())
        )
    return known


_SDK_REQUESTS: IdentityMemo[Request, Any] = IdentityMemo()


def input_required_result(outcome: InputRequired) -> types.InputRequiredResult:
    """The SDK `InputRequiredResult` for a modern round that needs the client."""
    return types.InputRequiredResult(
        input_requests={key: sdk_request(r) for key, r in outcome.input_requests.items()},
        request_state=outcome.request_state,
    )


#: Errors that are protocol errors in every method and era (DESIGN §3): JSON-RPC errors, never
#: `isError` results.
PROTOCOL_ERRORS = (InvalidRequestState, InvalidInputResponse, MissingCapability)


def error_message(error: BaseException) -> str:
    """What the client is told about *error*: its message, or its type's name."""
    text = str(error)
    return text if text else type(error).__name__


def mcp_error(error: MrtrError) -> MCPError:
    """The JSON-RPC error for *error*."""
    return MCPError(error.code, error.message, error.data)


def tool_result(value: Any) -> types.CallToolResult:
    """A tool's return value as a result: `str` → one text block, `None` → no content, a
    `dict` → JSON text plus `structuredContent`, a list of content blocks → that content,
    an SDK `CallToolResult` → as is."""
    if isinstance(value, types.CallToolResult):
        return value
    if value is None:
        return types.CallToolResult(content=[])
    if isinstance(value, str):
        return types.CallToolResult(content=[types.TextContent(type="text", text=value)])
    if isinstance(value, Mapping):
        text = json.dumps(value, ensure_ascii=False, default=str)
        return types.CallToolResult(
            content=[types.TextContent(type="text", text=text)],
            structured_content=dict(value),
        )
    if isinstance(value, list | tuple):
        return types.CallToolResult(content=_CONTENT_BLOCKS.validate_python(list(value)))
    return types.CallToolResult(content=[types.TextContent(type="text", text=str(value))])


def error_result(message: str) -> types.CallToolResult:
    """A tool execution error (`isError: true`) carrying *message*."""
    return types.CallToolResult(
        content=[types.TextContent(type="text", text=message)], is_error=True
    )


def prompt_result(value: Any, description: str | None) -> types.GetPromptResult:
    """A prompt's return value as a result: `str` → one user text message, a list of
    messages → as is, an SDK `GetPromptResult` → as is."""
    if isinstance(value, types.GetPromptResult):
        return value
    if isinstance(value, str):
        messages = [
            types.PromptMessage(role="user", content=types.TextContent(type="text", text=value))
        ]
    elif isinstance(value, list | tuple):
        messages = _PROMPT_MESSAGES.validate_python(list(value))
    else:
        raise MrtrError(
            f"a prompt must return a str or a list of messages, got {type(value).__name__}"
        )
    return types.GetPromptResult(description=description, messages=messages)


def resource_result(value: Any, uri: str, mime_type: str | None) -> types.ReadResourceResult:
    """A resource's return value as a result: `str` → text contents, `bytes` → a blob,
    an SDK `ReadResourceResult` → as is."""
    if isinstance(value, types.ReadResourceResult):
        return value
    contents: types.TextResourceContents | types.BlobResourceContents
    if isinstance(value, str):
        contents = types.TextResourceContents(
            uri=uri, mime_type=mime_type or "text/plain", text=value
        )
    elif isinstance(value, bytes | bytearray):
        contents = types.BlobResourceContents(
            uri=uri,
            mime_type=mime_type or "application/octet-stream",
            blob=base64.b64encode(bytes(value)).decode("ascii"),
        )
    else:
        raise MrtrError(f"a resource must return str or bytes, got {type(value).__name__}")
    return types.ReadResourceResult(contents=[contents])


def answer_json(answer: pydantic.BaseModel) -> dict[str, Any]:
    """An SDK answer model as the client's JSON."""
    if type(answer) is types.ElicitResult:  # the commonest answer, without a serializer pass
        json: dict[str, Any] = {"action": answer.action}
        if answer.content is not None:
            json["content"] = dict(answer.content)
        return json
    return answer.model_dump(by_alias=True, mode="json", exclude_none=True)
