"""mrtr_trio handlers in real FastMCP and MCPServer processes, on asyncio, on the frameworks' own
transports (FastMCP's HTTP app on uvicorn and its stdio; MCPServer's Streamable HTTP), driven
by the official `mcp.Client` (on the test's trio loop) and by FastMCP's `Client` (asyncio, in a
worker thread) in legacy, 2026-07-28 and auto modes. Every call's transcript (what the client
was asked, and the result) must be the one App gives for the same call on trio, and the
conformance suite's input-required scenarios must pass against the FastMCP process.

Each test talks to a real process several times: a 240 s limit (the watchdog fails a trio test
at half of it) leaves room for a loaded machine.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

import pytest
import trio
from fastmcp.client.transports import StdioTransport
from mcp import StdioServerParameters

from . import fastmcp_app
from .hosts import MODES, ROOT, Transcript, call_with_fastmcp_client, call_with_mcp_client, served
from .node import CONFORMANCE, installed_node_modules, node_paths

#: Calls that cover every kind of ask, batches, several rounds, state-only rounds, return style.
CALLS: list[tuple[str, dict[str, Any]]] = [
    ("asks_everything", {"topic": "jazz"}),
    ("batch_of_three", {}),
    ("wizard", {"title": "Order"}),
    ("return_chunked_sum", {"numbers": [1, 2, 3, 4, 5]}),
]
LEGACY = "2025-11-25"
pytestmark = pytest.mark.timeout(240)


async def app_transcript(mode: str, name: str, arguments: dict[str, Any]) -> Transcript:
    """The call as App on trio serves it (in-process): the reference."""
    transcript, _ = await call_with_mcp_client(
        fastmcp_app.app.server,
        "legacy" if mode == "legacy" else "2026-07-28",
        "tool",
        name,
        arguments,
    )
    return transcript


def same(got: Transcript, expected: Transcript, name: str) -> None:
    if name == "batch_of_three":  # a legacy batch is asked concurrently: in any order
        assert sorted(json.dumps(a, sort_keys=True) for a in got.asked) == sorted(
            json.dumps(a, sort_keys=True) for a in expected.asked
        )
    else:
        assert got.asked == expected.asked
    assert got.result == expected.result


def expected_version(mode: str) -> str:
    return LEGACY if mode == "legacy" else "2026-07-28"


@pytest.fixture(scope="module")
def fastmcp_http() -> Any:
    with served("http") as url:
        yield url


@pytest.mark.parametrize("mode", MODES)
async def test_fastmcp_http_with_the_official_client(fastmcp_http: str, mode: str) -> None:
    for name, arguments in CALLS:
        with trio.fail_after(60):
            got, version = await call_with_mcp_client(fastmcp_http, mode, "tool", name, arguments)
        assert version == expected_version(mode)
        same(got, await app_transcript(mode, name, arguments), name)


@pytest.mark.parametrize("mode", MODES)
async def test_fastmcp_http_with_fastmcps_client(fastmcp_http: str, mode: str) -> None:
    for name, arguments in CALLS:
        got, version = await trio.to_thread.run_sync(
            call_with_fastmcp_client, fastmcp_http, mode, name, arguments
        )
        assert version == expected_version(mode)
        same(got, await app_transcript(mode, name, arguments), name)


STDIO = StdioServerParameters(
    command=sys.executable, args=["-m", "tests.fastmcp_app", "stdio"], cwd=str(ROOT),
    env=dict(os.environ),
)  # fmt: skip


@pytest.mark.parametrize("mode", MODES)
async def test_fastmcp_stdio_with_both_clients(mode: str) -> None:
    name, arguments = "asks_everything", {"topic": "jazz"}
    expected = await app_transcript(mode, name, arguments)
    with trio.fail_after(60):
        got, version = await call_with_mcp_client(STDIO, mode, "tool", name, arguments)
    assert version == expected_version(mode)
    same(got, expected, name)

    # A fresh process per client (FastMCP keeps a stdio server alive, and its era, otherwise).
    def transport() -> StdioTransport:  # made on the client's loop (it holds loop objects)
        return StdioTransport(
            sys.executable, ["-m", "tests.fastmcp_app", "stdio"], cwd=str(ROOT), keep_alive=False
        )

    got, version = await trio.to_thread.run_sync(
        call_with_fastmcp_client, transport, mode, name, arguments
    )
    assert version == expected_version(mode)
    same(got, expected, name)


@pytest.mark.parametrize("mode", MODES)
async def test_mcpserver_http_with_the_official_client(mode: str) -> None:
    with served("mcpserver-http") as url:
        for name, arguments in CALLS:
            with trio.fail_after(60):
                got, version = await call_with_mcp_client(url, mode, "tool", name, arguments)
            assert version == expected_version(mode)
            same(got, await app_transcript(mode, name, arguments), name)


# ------------------------------------------------------------------------ conformance suite

SCENARIOS = [
    "basic-elicitation",
    "basic-sampling",
    "basic-list-roots",
    "request-state",
    "multiple-input-requests",
    "multi-round",
    "missing-input-response",
    "non-tool-request",
    "result-type",
    "unsupported-methods",
    "tampered-state",
    "capability-check",
    "ignore-extra-params",
    "validate-input",
]


@pytest.mark.timeout(480)  # 14 runs of the suite: the watchdog fails it after 240 s
async def test_the_conformance_suites_input_required_scenarios_pass_against_fastmcp(
    fastmcp_http: str, tmp_path: Path
) -> None:
    installed_node_modules()
    node, _ = node_paths()
    failures: dict[str, list[str]] = {}
    for scenario in SCENARIOS:
        out = tmp_path / scenario
        with trio.fail_after(120):
            run = await trio.run_process(
                [str(node), str(CONFORMANCE), "server", "--url", fastmcp_http,
                 "--scenario", f"input-required-result-{scenario}", "-o", str(out)],
                capture_stdout=True, capture_stderr=True, check=False,
                env={**os.environ, "NO_COLOR": "1"},
            )  # fmt: skip
        checks = [c for f in out.rglob("checks.json") for c in json.loads(f.read_text())]
        assert checks, f"{scenario}: no checks\n{run.stdout.decode(errors='replace')}"
        bad = [f"{c.get('id')}: {c.get('status')}" for c in checks if c.get("status") != "SUCCESS"]
        if bad or run.returncode != 0:
            failures[scenario] = bad or [run.stdout.decode(errors="replace")[-2000:]]
    print(f"\nconformance input-required-result-*: {len(SCENARIOS) - len(failures)} passed")
    assert not failures, failures
