"""Errors you can see: a failing flow is logged on the server (with its traceback when the
server's code is at fault) while the client gets the same isError result; one DEBUG line per
served call; and the same over a real `mrtr-trio serve --log-level DEBUG` subprocess."""

from __future__ import annotations

import logging
import sys
from pathlib import Path

import pytest
import trio
from mcp import Client, StdioServerParameters
from mcp.client.stdio import stdio_client

from mrtr_trio import Context, Runtime, done, elicit
from mrtr_trio.mcp import App
from tests.server.clients import CALLBACKS, text_of

MODES = ["legacy", "2026-07-28"]
NAME = {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}

app = App("logged", runtime=Runtime([b"k" * 32], max_rounds=2))


@app.tool()
async def raises(ctx: Context):
    answer = yield elicit("Name?", NAME)
    raise ValueError(f"no luck for {answer.content['name']}")


@app.tool()
async def yields_a_number(ctx: Context):
    yield 42


@app.tool()
async def builds_a_bad_request(ctx: Context):
    yield elicit("Pick", {"type": "object", "properties": {"x": {"type": "object"}}})


@app.tool()
async def asks_forever(ctx: Context):
    while True:
        yield elicit("Name?", NAME)


@app.tool()
async def greets(ctx: Context):
    answer = yield elicit("Name?", NAME)
    yield done(f"Hello {answer.content['name']}")


FAULTS = {
    "raises": "no luck for Alice",
    "yields_a_number": "yielded 42",
    "builds_a_bad_request": "has type 'object'",
}
#: The handler's line the traceback shows (the runtime itself rejects the yielded 42).
RAISED_AT = {
    "raises": "raise ValueError",
    "builds_a_bad_request": 'yield elicit("Pick"',
}


def mrtr_records(caplog: pytest.LogCaptureFixture, level: int) -> list[logging.LogRecord]:
    return [r for r in caplog.records if r.name == "mrtr_trio.mcp" and r.levelno == level]


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("tool", sorted(FAULTS))
async def test_a_fault_in_the_handler_is_logged_with_its_traceback(
    caplog: pytest.LogCaptureFixture, mode: str, tool: str
) -> None:
    caplog.set_level(logging.INFO)
    async with Client(app.server, mode=mode, **CALLBACKS) as client:
        result = await client.call_tool(tool, {})
    assert result.is_error and FAULTS[tool] in text_of(result)
    [record] = mrtr_records(caplog, logging.ERROR)
    assert record.getMessage() == f"tool {tool!r} failed"
    assert record.exc_info is not None and FAULTS[tool] in str(record.exc_info[1])
    assert "Traceback (most recent call last)" in caplog.text
    if tool in RAISED_AT:  # the traceback reaches into the handler's own code
        assert f'File "{__file__}"' in caplog.text and RAISED_AT[tool] in caplog.text


@pytest.mark.parametrize("mode", MODES)
async def test_a_flow_ended_by_a_limit_is_a_warning_without_traceback(
    caplog: pytest.LogCaptureFixture, mode: str
) -> None:
    caplog.set_level(logging.INFO)
    async with Client(app.server, mode=mode, **CALLBACKS) as client:
        result = await client.call_tool("asks_forever", {})
    assert result.is_error and "after 2 rounds" in text_of(result)
    assert mrtr_records(caplog, logging.ERROR) == []
    [record] = mrtr_records(caplog, logging.WARNING)
    assert "asks_forever" in record.getMessage() and "RoundLimitExceeded" in record.getMessage()
    assert record.exc_info is None


async def test_debug_logs_one_line_per_served_call(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG, logger="mrtr_trio.mcp")
    async with Client(app.server, mode="2026-07-28", **CALLBACKS) as client:
        assert text_of(await client.call_tool("greets", {})) == "Hello Alice"
        with pytest.raises(Exception, match="Unknown tool"):
            await client.call_tool("nope", {})
    lines = [r.getMessage() for r in mrtr_records(caplog, logging.DEBUG)]
    assert len(lines) == 3, lines
    assert lines[0].startswith("tools/call 'greets' [2026-07-28]: input_required ['input-0'] (")
    assert lines[1].startswith(
        "tools/call 'greets' (retry with requestState) [2026-07-28]: complete"
    )
    assert lines[2].startswith("tools/call 'nope' [2026-07-28]: error -32602: Unknown tool: nope")
    assert all(line.endswith(" ms)") for line in lines)


async def test_nothing_is_logged_per_call_above_debug(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO)
    async with Client(app.server, mode="legacy", **CALLBACKS) as client:
        assert text_of(await client.call_tool("greets", {})) == "Hello Alice"
    assert [r for r in caplog.records if r.name.startswith("mrtr_trio")] == []


SERVED_FILE = Path(__file__).resolve()


async def test_served_from_the_command_line_a_failure_shows_on_stderr(tmp_path: Path) -> None:
    errors = tmp_path / "stderr.txt"
    server = StdioServerParameters(
        command=sys.executable,
        args=["-m", "mrtr_trio._cli", "serve", f"{SERVED_FILE}:app", "--log-level", "debug"],
        cwd=SERVED_FILE.parents[2],  # this file imports tests.server.clients
    )
    with errors.open("w") as stderr, trio.fail_after(30):
        transport = stdio_client(server, errlog=stderr)
        async with Client(transport, mode="2026-07-28", **CALLBACKS) as client:
            result = await client.call_tool("raises", {})
            assert text_of(result) == "no luck for Alice"
    logged = errors.read_text()
    assert "ERROR mrtr_trio.mcp: tool 'raises' failed\nTraceback" in logged
    assert "ValueError: no luck for Alice" in logged
    assert f'File "{SERVED_FILE}"' in logged
    assert "DEBUG mrtr_trio.mcp: tools/call 'raises' [2026-07-28]: input_required" in logged
    assert "isError: no luck for Alice" in logged
    assert " DEBUG mcp" not in logged  # the SDK's debug output stays out of the way
