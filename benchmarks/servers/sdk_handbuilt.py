"""(c) The trip served by the SDK's low-level `Server` with a hand-written state machine.

What a careful user writes without a runtime:

- on 2026-07-28 each call is one round: the state is JSON ``{"answers": [...]}``; the handler
  reads the answer to the pending question (its key names the question's index), validates it
  with a pydantic model, and returns the next `InputRequiredResult` or the result. The state is
  sealed by the SDK's own `RequestStateBoundary` (AES-256-GCM, TTL, bound to method, tool,
  arguments and audience), appended to ``server.middleware`` as the SDK documents;
- on a legacy session (where the SDK refuses an `InputRequiredResult`) the same questions are
  three `session.elicit_form` calls inside the one call.
"""

from __future__ import annotations

import json
import secrets
from collections.abc import Callable
from typing import Any

import mcp_types as types
import trio
from mcp.server.context import ServerRequestContext
from mcp.server.lowlevel import Server
from mcp.server.request_state import RequestStateBoundary, RequestStateSecurity
from mcp.server.stdio import stdio_server
from mcp.shared.exceptions import MCPError
from mcp_types.version import MODERN_PROTOCOL_VERSIONS
from pydantic import BaseModel, Field, ValidationError

from mrtr_trio.mcp import _transports as transports

from .. import flows

__all__ = ["build", "serve_http", "serve_stdio", "target"]


class TripArguments(BaseModel):
    traveller: str


class SurveyArguments(BaseModel):
    n: int = Field(ge=0)


class Destination(BaseModel):
    city: str


class Dates(BaseModel):
    start: str
    nights: int = Field(ge=1)


class Confirm(BaseModel):
    confirm: bool


class Count(BaseModel):
    v: int


class Declined(Exception):
    """The user declined or cancelled a question."""


# The trip's questions: (schema, content model, message from the traveller and answers so far).
_TRIP: list[tuple[dict[str, Any], type[BaseModel], Callable[[str, list[Any]], str]]] = [
    (flows.DESTINATION, Destination, lambda who, a: f"Where to, {who}?"),
    (flows.DATES, Dates, lambda who, a: f"When do you go to {a[0]['city']}?"),
    (
        flows.CONFIRM,
        Confirm,
        lambda who, a: f"Book {a[0]['city']} from {a[1]['start']} for {a[1]['nights']} nights?",
    ),
]


def _text(text: str) -> types.CallToolResult:
    return types.CallToolResult(content=[types.TextContent(type="text", text=text)])


def _accepted(answer: Any, model: type[BaseModel]) -> dict[str, Any]:
    """The validated content of an accepted elicitation; `Declined` otherwise."""
    if not isinstance(answer, types.ElicitResult):
        raise MCPError(-32602, "expected an elicitation answer")
    if answer.action != "accept":
        raise Declined
    try:
        return model.model_validate(answer.content or {}).model_dump()
    except ValidationError as error:
        raise MCPError(-32602, f"invalid answer: {error.error_count()} errors") from None


def _question(message: str, schema: dict[str, Any]) -> types.ElicitRequest:
    return types.ElicitRequest(
        params=types.ElicitRequestFormParams(message=message, requested_schema=schema)
    )


def _trip_result(traveller: str, answers: list[Any]) -> types.CallToolResult:
    if not answers[2]["confirm"]:
        return _text("Cancelled")
    where, when = answers[0], answers[1]
    return _text(flows.booking(traveller, where["city"], when["start"], when["nights"]))


def _trip_round(
    traveller: str, params: types.CallToolRequestParams
) -> types.CallToolResult | types.InputRequiredResult:
    answers: list[Any] = json.loads(params.request_state)["answers"] if params.request_state else []
    index = len(answers)
    if index >= len(_TRIP):
        raise MCPError(-32602, "the trip is already complete")
    response = (params.input_responses or {}).get(f"q{index}")
    if response is not None:
        answers.append(_accepted(response, _TRIP[index][1]))
        index += 1
        if index == len(_TRIP):
            return _trip_result(traveller, answers)
    schema, _, message = _TRIP[index]
    return types.InputRequiredResult(
        input_requests={f"q{index}": _question(message(traveller, answers), schema)},
        request_state=json.dumps({"answers": answers}),
    )


async def _trip_live(ctx: ServerRequestContext[Any], traveller: str) -> types.CallToolResult:
    answers: list[Any] = []
    for schema, model, message in _TRIP:
        answer = await ctx.session.elicit_form(
            message(traveller, answers), schema, related_request_id=ctx.request_id
        )
        answers.append(_accepted(answer, model))
    return _trip_result(traveller, answers)


def _survey_round(
    n: int, params: types.CallToolRequestParams
) -> types.CallToolResult | types.InputRequiredResult:
    answers: list[int] = json.loads(params.request_state)["answers"] if params.request_state else []
    index = len(answers)
    response = (params.input_responses or {}).get(f"q{index}")
    if response is not None:
        answers.append(_accepted(response, Count)["v"])
        index += 1
    if index >= n:
        return _text(str(sum(answers)))
    return types.InputRequiredResult(
        input_requests={f"q{index}": _question(f"Question {index}?", flows.COUNT)},
        request_state=json.dumps({"answers": answers}),
    )


_TOOLS = [
    types.Tool(name="trip", input_schema=TripArguments.model_json_schema()),
    types.Tool(name="survey", input_schema=SurveyArguments.model_json_schema()),
]


async def _list_tools(ctx: Any, params: Any) -> types.ListToolsResult:
    return types.ListToolsResult(tools=_TOOLS)


async def _call_tool(
    ctx: ServerRequestContext[Any], params: types.CallToolRequestParams
) -> types.CallToolResult | types.InputRequiredResult:
    modern = ctx.protocol_version in MODERN_PROTOCOL_VERSIONS
    try:
        if params.name == "trip":
            traveller = TripArguments.model_validate(params.arguments or {}).traveller
            if modern:
                return _trip_round(traveller, params)
            return await _trip_live(ctx, traveller)
        if params.name == "survey" and modern:
            n = SurveyArguments.model_validate(params.arguments or {}).n
            return _survey_round(n, params)
    except Declined:
        return _text("Cancelled")
    except ValidationError as error:
        return types.CallToolResult(
            content=[types.TextContent(type="text", text=str(error))], is_error=True
        )
    raise MCPError(-32602, f"Unknown tool: {params.name}")


def build(survey_questions: int = 0) -> Server[Any]:
    """The server (its survey tool takes *n* as an argument, so *survey_questions* is unused)."""
    server: Server[Any] = Server(
        "trip", version="1.0", on_list_tools=_list_tools, on_call_tool=_call_tool
    )
    security = RequestStateSecurity(keys=[secrets.token_bytes(32)])
    server.middleware.append(RequestStateBoundary(security, default_audience=server.name))
    return server


def target(survey_questions: int = 0) -> Server[Any]:
    """What an in-process ``mcp.Client`` connects to."""
    return build(survey_questions)


async def serve_stdio() -> None:
    server = build()
    async with stdio_server() as (read, write):
        await server.run(read, write, server.create_initialization_options())


async def serve_http(task_status: trio.TaskStatus[str] = trio.TASK_STATUS_IGNORED) -> None:
    """Serve the SDK's `streamable_http_app()`, as it comes, on a free loopback port with
    `mrtr_trio.mcp`'s hypercorn settings (those of `App.serve_http`; the App's ASGI stack
    differs, see [benchmarks.servers.__main__][])."""
    await transports.serve_http(
        build().streamable_http_app(), "127.0.0.1", 0, "/mcp", task_status=task_status
    )
