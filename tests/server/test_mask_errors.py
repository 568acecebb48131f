"""`App(mask_errors=True)` (issue 20, item 9): a handler's failure reaches the client as a fixed
message with an error id, and the log has the traceback under the same id; failures the
client can act on keep their messages; the default tells the exception's text."""

from __future__ import annotations

import logging
import re
from typing import Any

import pytest
import trio
from mcp import Client
from mcp.shared.exceptions import MCPError

from mrtr_trio import Runtime, done, elicit
from mrtr_trio.mcp import App, background

from .clients import CALLBACKS, text_of
from .test_tasks import call, errors_logged, until

SECRET = "password=hunter2 at db.internal:5432"
NAME = {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}
MODES = ["legacy", "2026-07-28"]
ERROR_ID = re.compile(r"error id ([0-9a-f]{16})")


def app_with(**options: Any) -> App:
    app = App("masked", runtime=Runtime([b"e" * 32]), task_poll_interval=0.05, **options)

    @app.tool()
    async def connect(ctx: Any) -> str:
        raise RuntimeError(SECRET)

    @app.tool()
    async def ask_then_fail(ctx: Any) -> Any:
        yield elicit("Name?", NAME)
        raise RuntimeError(SECRET)

    @app.tool()
    async def asks_forever(ctx: Any) -> Any:
        while True:
            yield elicit("Name?", NAME)

    @app.tool()
    async def bad_arguments(ctx: Any, count: int) -> str:
        return str(count)

    @app.prompt()
    async def briefing(ctx: Any) -> str:
        raise RuntimeError(SECRET)

    @app.resource("vault://secret")
    async def vault(ctx: Any) -> str:
        raise RuntimeError(SECRET)

    @app.tool(task="required")
    async def nightly(ctx: Any) -> Any:
        yield background()
        raise RuntimeError(SECRET)
        yield done(None)

    return app


def the_logged_id(caplog: pytest.LogCaptureFixture, told: str) -> str:
    """The error id in *told*; checks the log has one ERROR line with it and the traceback."""
    assert SECRET not in told, told
    error_id = ERROR_ID.search(told)
    assert error_id is not None, told
    logged = [r for r in errors_logged(caplog) if error_id.group(1) in r.getMessage()]
    assert len(logged) == 1, [r.getMessage() for r in errors_logged(caplog)]
    assert logged[0].exc_info is not None and str(logged[0].exc_info[1]) == SECRET
    return error_id.group(1)


@pytest.mark.parametrize("mode", MODES)
async def test_masked_failures_tell_an_id_the_log_has(
    mode: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO)
    ids = set()
    async with Client(app_with(mask_errors=True).server, mode=mode, **CALLBACKS) as client:
        for tool in ("connect", "ask_then_fail"):
            result = await client.call_tool(tool, {})
            assert result.is_error
            text = text_of(result)
            assert text.startswith(f"tool {tool!r} failed with an internal error"), text
            ids.add(the_logged_id(caplog, text))
        for read in (lambda: client.get_prompt("briefing", {}), lambda: client.read_resource("vault://secret")):  # fmt: skip
            with pytest.raises(MCPError) as caught:
                await read()
            assert caught.value.code == -32603
            error_id = the_logged_id(caplog, caught.value.message)
            assert caught.value.error.data == {"errorId": error_id}
            ids.add(error_id)
    assert len(ids) == 4  # one id per failure


@pytest.mark.parametrize("mode", MODES)
async def test_what_the_client_can_act_on_is_not_masked(mode: str) -> None:
    async with Client(app_with(mask_errors=True).server, mode=mode, **CALLBACKS) as client:
        limit = await client.call_tool("asks_forever", {})
        assert limit.is_error and "still required input after" in text_of(limit)
        invalid = await client.call_tool("bad_arguments", {"count": "x"})
        assert invalid.is_error and "count" in text_of(invalid)


async def test_a_task_that_fails_is_masked_too(
    nursery: trio.Nursery, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO)
    url = await nursery.start(app_with(mask_errors=True).serve_http, "127.0.0.1", 0)
    task_id = (await call(url, "nightly"))["taskId"]
    task = await until(url, task_id, "completed", "failed")
    assert task["result"]["isError"] is True
    the_logged_id(caplog, task["result"]["content"][0]["text"])


@pytest.mark.parametrize("mode", MODES)
async def test_by_default_the_client_is_told_the_exception(mode: str) -> None:
    async with Client(app_with().server, mode=mode, **CALLBACKS) as client:
        result = await client.call_tool("connect", {})
        assert result.is_error and text_of(result) == SECRET
