"""A process killed mid-step: two `mrtr-trio serve --http` processes share a key and a real
Redis; the first runs a step, does its side effect, and is killed with SIGKILL before it
records the result. The second process finishes the flow once the dead holder's lease lapsed
(not after the token's lifetime): a step declared `retry=True` runs again under the same
`step_key()`, which the downstream service deduplicates (one charge); a step that is not gets
the unknown outcome reported, and is not run again."""

from __future__ import annotations

import contextlib
import os
import secrets
import signal
import subprocess
import time
from pathlib import Path

import mcp_types as types
import pytest
import trio
from mcp import Client

from ..services import RedisServer
from .clients import CALLBACKS, text_of
from .test_exactly_once import MODE, YES, serving

LEASE = 1.0


def charges(ledger: Path) -> list[list[str]]:
    text = ledger.read_text() if ledger.exists() else ""
    return [line.split() for line in text.splitlines()]


async def kill_mid_step(
    url: str, tool: str, amount: int, victim: subprocess.Popen[bytes], ledger: Path
) -> str:
    """Start *tool*'s flow on the process at *url*, present its round-1 token so that the step
    runs, and SIGKILL the process once the step's side effect is in the ledger. The token."""
    async with Client(url, mode=MODE, **CALLBACKS) as client:
        first = await client.session.call_tool(tool, {"amount": amount}, allow_input_required=True)
        assert isinstance(first, types.InputRequiredResult) and first.request_state
        token = first.request_state

    async def present() -> None:
        # The connection dies with the process: whatever the client raises then is expected.
        with contextlib.suppress(Exception):
            async with Client(url, mode=MODE, **CALLBACKS) as client:
                await client.session.call_tool(
                    tool,
                    {"amount": amount},
                    input_responses=YES,
                    request_state=token,
                    allow_input_required=True,
                )

    async with trio.open_nursery() as nursery:
        nursery.start_soon(present)
        while not any(c[2] == str(amount) for c in charges(ledger)):  # noqa: ASYNC110
            await trio.sleep(0.02)  # (another process writes the file)
        victim.send_signal(signal.SIGKILL)
        await trio.to_thread.run_sync(victim.wait)
    return token


async def finish(url: str, tool: str, amount: int, token: str) -> types.CallToolResult:
    async with Client(url, mode=MODE, **CALLBACKS) as client:
        result = await client.session.call_tool(
            tool,
            {"amount": amount},
            input_responses=YES,
            request_state=token,
            allow_input_required=True,
        )
    assert isinstance(result, types.CallToolResult)
    return result


@pytest.mark.parametrize("tool", ["charge_retry", "charge_once"])
async def test_a_process_killed_mid_step_leaves_a_flow_another_process_finishes(
    redis_db: RedisServer, tmp_path: Path, tool: str
) -> None:
    ledger, hold = tmp_path / "ledger.txt", tmp_path / "hold"
    hold.touch()
    env = {
        **os.environ,
        "MRTR_TRIO_TEST_KEY": secrets.token_hex(32),
        "MRTR_TRIO_TEST_REDIS": redis_db.unix_url,
        "MRTR_TRIO_TEST_LEDGER": str(ledger),
        "MRTR_TRIO_TEST_LEASE": str(LEASE),
        "MRTR_TRIO_TEST_HOLD": str(hold),
    }
    with (
        serving("slow_app", env, tmp_path / "a.log") as (url_a, process_a),
        serving("slow_app", env, tmp_path / "b.log") as (url_b, _),
    ):
        with trio.fail_after(90):
            token = await kill_mid_step(url_a, tool, 21, process_a, ledger)
            assert process_a.returncode == -signal.SIGKILL
            hold.unlink()
            started = time.monotonic()
            result = await finish(url_b, tool, 21, token)
            waited = time.monotonic() - started
            again = await finish(url_b, tool, 21, token)
    (charge,) = charges(ledger)  # one charge downstream, made by the killed process
    assert charge[0] == str(process_a.pid)
    # Known within about a lease of the kill, not after the token's 600 s.
    assert waited < LEASE + 5
    if tool == "charge_retry":
        # Run again under the same step_key(): the service answered with the first charge.
        assert not result.is_error, result
        assert text_of(result) == f"charged 21: receipt {charge[3]}"
        assert text_of(again) == text_of(result)  # recorded now
    else:
        assert result.is_error and "may or may not have happened" in text_of(result)
        assert again.is_error and "may or may not have happened" in text_of(again)
