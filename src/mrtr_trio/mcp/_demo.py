"""`mrtr-trio demo`: one App, served over HTTP on loopback, driven by the official
`mcp.Client` in both eras, with a short transcript of every round."""

from __future__ import annotations

import json
import secrets
from typing import Any

import mcp_types as types
import trio
from mcp import Client

from .._context import Context, accepted_content
from .._flow import done, input_required
from .._runtime import Runtime
from .._values import create_message, elicit, list_roots
from ._app import App

__all__ = ["build_demo_app", "run_demo"]

CONFIRM = {
    "type": "object",
    "properties": {"confirm": {"type": "boolean", "description": "Go ahead?"}},
    "required": ["confirm"],
}


def build_demo_app() -> App:
    """The demo server: a yield-style deploy flow and a return-style confirmation."""
    app = App("mrtr-trio-demo", version="1.0", runtime=Runtime([secrets.token_bytes(32)]))

    @app.tool()
    async def deploy(ctx: Context, service: str, env: str = "staging"):  # type: ignore[no-untyped-def]
        """Deploy a service after a confirmation, with release notes and the client's roots."""
        ok = yield elicit(f"Deploy {service} to {env}?", CONFIRM)
        if not (ok.accepted and ok.content and ok.content["confirm"]):
            yield done("Cancelled")
        answers = yield {
            "notes": create_message("Summarise the release in five words", max_tokens=50),
            "roots": list_roots(),
        }
        roots = len(answers["roots"].roots)
        yield done(f"Deployed {service} to {env} ({roots} roots): {answers['notes'].text}")

    @app.tool()
    async def wipe(ctx: Context, path: str) -> Any:
        """Return style (the TypeScript FastMCP shape): ask, then get called again."""
        if ctx.input_responses is None:
            return input_required({"sure": elicit(f"Really wipe {path}?", CONFIRM)})
        sure = accepted_content(ctx.input_responses, "sure")
        return f"Wiped {path}" if sure and sure["confirm"] else f"Kept {path}"

    return app


# ------------------------------------------------------------------------ the client side


def _text(result: types.CallToolResult) -> str:
    return "".join(b.text for b in result.content if isinstance(b, types.TextContent))


def _say(text: str) -> None:
    print(text, flush=True)


def _client_answer(request: Any) -> Any:
    """What the demo's 'user' and 'model' answer."""
    if isinstance(request, types.ElicitRequestParams | types.ElicitRequestFormParams):
        return types.ElicitResult(action="accept", content={"confirm": True})
    if isinstance(request, types.CreateMessageRequestParams):
        text = types.TextContent(type="text", text="Faster builds, fewer bugs.")
        return types.CreateMessageResult(role="assistant", content=text, model="demo-model")
    return types.ListRootsResult.model_validate(
        {"roots": [{"uri": "file:///srv/app", "name": "app"}]}
    )


def _describe(method: str, params: Any) -> str:
    if method == "elicitation/create":
        return f'{method} "{params.message}"'
    if method == "sampling/createMessage":
        return f'{method} "{params.messages[-1].content.text}"'
    return method


def _answer_text(answer: Any) -> str:
    data = answer.model_dump(by_alias=True, mode="json", exclude_none=True)
    return json.dumps(data, separators=(", ", ": "))


async def _on_elicit(ctx: Any, params: Any) -> Any:
    return _answered("elicitation/create", params)


async def _on_sample(ctx: Any, params: Any) -> Any:
    return _answered("sampling/createMessage", params)


async def _on_roots(ctx: Any) -> Any:
    return _answered("roots/list", None)


def _answered(method: str, params: Any) -> Any:
    answer = _client_answer(params)
    _say(f"    server asks  {_describe(method, params)}")
    _say(f"    client says  {_answer_text(answer)}")
    return answer


CALLBACKS: dict[str, Any] = {
    "elicitation_callback": _on_elicit,
    "sampling_callback": _on_sample,
    "list_roots_callback": _on_roots,
}


async def _legacy(url: str, tool: str, arguments: dict[str, Any]) -> str:
    async with Client(url, mode="legacy", **CALLBACKS) as client:
        _say(f"  legacy session ({client.protocol_version}): {tool}({arguments})")
        result = await client.call_tool(tool, arguments)
    text = _text(result)
    _say(f"    result       {text}")
    return text


async def _modern(url: str, tool: str, arguments: dict[str, Any]) -> str:
    async with Client(url, mode="2026-07-28", **CALLBACKS) as client:
        _say(f"  modern requests ({client.protocol_version}): {tool}({arguments})")
        responses: dict[str, Any] | None = None
        state: str | None = None
        for round_number in range(1, 11):
            result = await client.session.call_tool(
                tool,
                arguments,
                input_responses=responses,
                request_state=state,
                allow_input_required=True,
            )
            if not isinstance(result, types.InputRequiredResult):
                text = _text(result)
                _say(f"    round {round_number}: complete: {text}")
                return text
            size = len(result.request_state or "")
            _say(f"    round {round_number}: input_required, requestState {size} chars")
            responses = {}
            for key, request in (result.input_requests or {}).items():
                answer = _answered(request.method, getattr(request, "params", None))
                responses[key] = answer
            state = result.request_state
    raise RuntimeError("the flow did not finish in 10 rounds")


_TOOLS = (
    (
        "deploy",
        {"service": "api", "env": "prod"},
        "yield style: an async generator. On modern requests it is replayed from the top each\n"
        "  round, so its requestState holds only the answers so far and a 4-byte fingerprint of\n"
        "  each request: replaying the handler re-creates the requests.",
    ),
    (
        "wipe",
        {"path": "/tmp/cache"},
        "return style (the TypeScript FastMCP shape): a coroutine that returns input_required\n"
        "  and is called again with the answers. It is not replayed, so its requestState holds\n"
        "  the pending requests in full, schema included, to check the answers against.",
    ),
)


async def run_demo() -> None:
    """Serve the demo App on a loopback port and drive it in both eras."""
    app = build_demo_app()
    async with trio.open_nursery() as nursery:
        url = await nursery.start(app.serve_http, "127.0.0.1", 0)
        _say(f"mrtr-trio demo: {app.name!r} serving Streamable HTTP on {url}\n")
        for tool, arguments, style in _TOOLS:
            _say(f"== {tool} ==\n  {style}")
            live = await _legacy(url, tool, arguments)
            modern = await _modern(url, tool, arguments)
            _say(f"  same result in both eras: {live == modern}\n")
            if live != modern:
                raise SystemExit(f"the eras disagree: {live!r} != {modern!r}")
        nursery.cancel_scope.cancel()
