"""Handlers written the wrong way get an error that names the way that works (issue 20, items
3 and 4): a request awaited or returned instead of yielded, and a generator that ends without
`done(...)`."""

from __future__ import annotations

import logging
import re
from typing import Any

import pytest
from mcp import Client

from mrtr_trio import (
    Runtime,
    create_message,
    done,
    elicit,
    elicit_url,
    input_required,
    list_roots,
)
from mrtr_trio.mcp import App
from mrtr_trio.testing import run_live, run_modern

from .clients import CALLBACKS, text_of

NAME = {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}
REQUESTS = {
    "elicit(...)": lambda: elicit("Name?", NAME),
    "elicit_url(...)": lambda: elicit_url("Sign in", "https://example.com/login"),
    "create_message(...)": lambda: create_message("hi", max_tokens=5),
    "list_roots()": list_roots,
}
RUNNERS = [run_modern, run_live]


def never(key: str, request: Any) -> Any:
    raise AssertionError(f"nothing should be asked, got {key}: {request!r}")


def assert_names_the_fix(error: BaseException, call: str) -> None:
    text = str(error)
    assert f"`answer = yield {call}`" in text, text
    assert f"`answer = await ctx.{call}`" in text, text
    assert "input_required" in text, text


@pytest.mark.parametrize("call", REQUESTS)
@pytest.mark.parametrize("run", RUNNERS, ids=["modern", "live"])
async def test_returning_a_request_names_yield_and_ctx(call: str, run: Any) -> None:
    async def returns_a_request(ctx: Any) -> Any:
        return REQUESTS[call]()

    with pytest.raises(TypeError, match=r"returns_a_request returned .*, which does not ask") as e:
        await run(returns_a_request, {}, never)
    assert_names_the_fix(e.value, call)


@pytest.mark.parametrize("call", REQUESTS)
@pytest.mark.parametrize("run", RUNNERS, ids=["modern", "live"])
async def test_awaiting_a_request_names_yield_and_ctx(call: str, run: Any) -> None:
    async def awaits_a_request(ctx: Any) -> Any:
        return await REQUESTS[call]()

    async def awaits_in_a_generator(ctx: Any) -> Any:
        answer = await REQUESTS[call]()
        yield done(answer)

    for handler in (awaits_a_request, awaits_in_a_generator):
        with pytest.raises(TypeError, match=re.escape(f"`await {call}` does not ask")) as e:
            await run(handler, {}, never)
        assert_names_the_fix(e.value, call)


async def test_the_right_ways_still_ask() -> None:
    async def returns_input_required(ctx: Any) -> Any:
        if ctx.input_responses is None:
            return input_required({"name": elicit("Name?", NAME)})
        return ctx.input_responses["name"].content["name"]

    def answer(key: str, request: Any) -> Any:
        return {"action": "accept", "content": {"name": "Ada"}}

    for run in RUNNERS:
        assert await run(returns_input_required, {}, answer) == "Ada"


def misused_app() -> App:
    app = App("misuse", runtime=Runtime([b"m" * 32]))

    @app.tool()
    async def returns_elicit(ctx: Any) -> Any:
        return elicit("Name?", NAME)

    @app.tool()
    async def awaits_elicit(ctx: Any) -> Any:
        ok = await elicit("Name?", NAME)
        return ok

    @app.tool()
    async def forgets_done(ctx: Any) -> Any:
        answer = yield elicit("Name?", NAME)
        assert answer.accepted

    @app.tool()
    async def says_done_none(ctx: Any) -> Any:
        yield elicit("Name?", NAME)
        yield done(None)

    return app


@pytest.mark.parametrize("mode", ["legacy", "2026-07-28"])
async def test_over_mcp_the_tool_error_names_the_fix(mode: str) -> None:
    app = misused_app()
    async with Client(app.server, mode=mode, **CALLBACKS) as client:
        for tool in ("returns_elicit", "awaits_elicit"):
            result = await client.call_tool(tool, {})
            assert result.is_error, tool
            assert_names_the_fix(Exception(text_of(result)), "elicit(...)")


async def test_a_generator_that_ends_without_done_is_logged_once(
    caplog: pytest.LogCaptureFixture,
) -> None:
    app = misused_app()
    caplog.set_level(logging.WARNING, logger="mrtr_trio")
    for mode in ("legacy", "2026-07-28", "2026-07-28"):
        async with Client(app.server, mode=mode, **CALLBACKS) as client:
            result = await client.call_tool("forgets_done", {})
            assert not result.is_error and result.content == []
            quiet = await client.call_tool("says_done_none", {})
            assert not quiet.is_error and quiet.content == []
    said = [r.getMessage() for r in caplog.records if "without `yield done(...)`" in r.getMessage()]
    assert len(said) == 1, said
    assert "forgets_done ended without `yield done(...)`" in said[0]
    assert "done(None)" in said[0]
