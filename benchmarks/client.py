"""The client side, the same for every implementation: the official ``mcp.Client``'s
elicitation callback, answering like the benchmark's user, and 2026-07-28 rounds driven by hand
(to keep a round's ``requestState`` and retry it)."""

from __future__ import annotations

from collections.abc import Collection
from typing import Any

import mcp_types as types
from mcp import Client
from mcp.client import ClientRequestContext

from . import flows

__all__ = ["answer", "retry", "rounds"]


async def answer(
    context: ClientRequestContext | None, params: types.ElicitRequestParams
) -> types.ElicitResult:
    """Accept every form with the canned content of [benchmarks.flows][]."""
    assert isinstance(params, types.ElicitRequestFormParams)
    return types.ElicitResult(
        action="accept", content=flows.fill(params.requested_schema["properties"])
    )


async def retry(
    client: Client,
    tool: str,
    arguments: dict[str, Any],
    after: types.InputRequiredResult | None,
) -> types.CallToolResult | types.InputRequiredResult:
    """One leg: the first call (*after* is ``None``) or the retry answering *after*."""
    if after is None:
        return await client.session.call_tool(tool, arguments, allow_input_required=True)
    responses: dict[str, types.InputResponse] = {}
    for key, request in (after.input_requests or {}).items():
        assert isinstance(request, types.ElicitRequest)
        responses[key] = await answer(None, request.params)
    return await client.session.call_tool(
        tool,
        arguments,
        input_responses=responses,
        request_state=after.request_state,
        allow_input_required=True,
    )


async def rounds(
    client: Client, tool: str, arguments: dict[str, Any], keep: Collection[int]
) -> dict[int, types.InputRequiredResult]:
    """Drive *tool* round by round; the result of the leg whose state records *k* answers,
    for each *k* in *keep*."""
    kept: dict[int, types.InputRequiredResult] = {}
    result = await retry(client, tool, arguments, None)
    for answered in range(max(keep) + 1):
        if not isinstance(result, types.InputRequiredResult):
            raise RuntimeError(f"{tool} finished after {answered} answers")
        if answered in keep:
            kept[answered] = result
        if answered < max(keep):
            result = await retry(client, tool, arguments, result)
    return kept
