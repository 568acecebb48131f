"""Exactly-once steps across processes: two `mrtr-trio serve --http` processes share one key and
one real Redis (started by the tests), and the official `mcp.Client` (2026-07-28) presents one
round-1 `requestState` again and again, one process after the other or all at once.

The step's side effect is a line appended to a ledger file outside both processes, so the
count holds whichever process ran it.
"""

from __future__ import annotations

import contextlib
import os
import re
import secrets
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import mcp_types as types
import pytest
import trio
from mcp import Client
from mcp.shared.exceptions import MCPError

from mrtr_trio import Context, Runtime, done, elicit, step
from mrtr_trio.mcp import App
from mrtr_trio.redis import RedisStepStore

from ..services import RedisServer, free_port
from .clients import CALLBACKS, text_of

APP_FILE = Path(__file__).with_name("exactly_once_app.py")
MODE = "2026-07-28"
YES = {"input-0": {"action": "accept", "content": {"confirm": True}}}
CONFIRM = {
    "type": "object",
    "properties": {"confirm": {"type": "boolean"}},
    "required": ["confirm"],
}
PRESENTATIONS = 20
SERVING = re.compile(r"mrtr-trio: serving '.*' on (http://\S+)")


@contextlib.contextmanager
def serving(
    target: str, env: dict[str, str], log: Path
) -> Iterator[tuple[str, subprocess.Popen[bytes]]]:
    """Serve `exactly_once_app.py:<target>` in a process of its own: its URL and the process
    (which a test may kill), until exit."""
    with log.open("w") as stderr:
        process = subprocess.Popen(
            [
                *(sys.executable, "-m", "mrtr_trio._cli", "serve"),
                *(f"{APP_FILE}:{target}", "--http", "127.0.0.1:0"),
            ],
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=stderr,
        )
    try:
        deadline = time.monotonic() + 60
        while (found := SERVING.search(log.read_text())) is None:
            if process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"{target} did not start:\n{log.read_text()}")
            time.sleep(0.05)
        yield found.group(1), process
    finally:
        if process.poll() is None:
            process.send_signal(signal.SIGINT)
            try:
                process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()


@contextlib.contextmanager
def serve(target: str, env: dict[str, str], log: Path) -> Iterator[str]:
    """Serve `exactly_once_app.py:<target>` in a process of its own; its URL, until exit."""
    with serving(target, env, log) as (url, _):
        yield url


class Servers:
    """Two processes of each app, and the ledger their steps append to."""

    def __init__(self, urls: dict[str, tuple[str, str]], ledger: Path) -> None:
        self.urls = urls
        self.ledger = ledger

    def charges(self) -> list[list[str]]:
        """The ledger's lines: pid, step key, amount, receipt."""
        text = self.ledger.read_text() if self.ledger.exists() else ""
        return [line.split() for line in text.splitlines()]


@pytest.fixture(scope="module")
def servers(
    redis_service: RedisServer, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Servers]:
    directory = tmp_path_factory.mktemp("exactly-once")
    ledger = directory / "ledger.txt"
    env = {
        **os.environ,
        "MRTR_TRIO_TEST_KEY": secrets.token_hex(32),
        "MRTR_TRIO_TEST_REDIS": redis_service.unix_url,
        "MRTR_TRIO_TEST_LEDGER": str(ledger),
    }
    with contextlib.ExitStack() as stack:
        urls = {
            target: tuple(
                stack.enter_context(serve(target, env, directory / f"{target}-{n}.log"))
                for n in "ab"
            )
            for target in ("app", "single_use_app")
        }
        yield Servers(urls, ledger)  # type: ignore[arg-type]


@pytest.fixture
def fresh(servers: Servers, redis_db: RedisServer) -> Servers:
    """The servers, with an empty Redis and an empty ledger."""
    servers.ledger.write_text("")
    return servers


@contextlib.asynccontextmanager
async def clients(urls: tuple[str, str]) -> Any:
    async with (
        Client(urls[0], mode=MODE, **CALLBACKS) as first,
        Client(urls[1], mode=MODE, **CALLBACKS) as second,
    ):
        yield first, second


async def round_one(client: Client, amount: int) -> str:
    first = await client.session.call_tool("charge", {"amount": amount}, allow_input_required=True)
    assert isinstance(first, types.InputRequiredResult)
    assert list(first.input_requests or {}) == ["input-0"]
    assert first.request_state
    return first.request_state


async def present(client: Client, amount: int, token: str) -> str:
    result = await client.session.call_tool(
        "charge",
        {"amount": amount},
        input_responses=YES,
        request_state=token,
        allow_input_required=True,
    )
    assert isinstance(result, types.CallToolResult) and not result.is_error, result
    return text_of(result)


async def test_a_token_replayed_across_two_processes_runs_its_step_once(fresh: Servers) -> None:
    with trio.fail_after(120):
        async with clients(fresh.urls["app"]) as (a, b):
            token = await round_one(a, 11)
            replies = [await present((a, b)[n % 2], 11, token) for n in range(PRESENTATIONS)]
    charges = fresh.charges()
    assert len(charges) == 1, charges
    receipt = charges[0][3]
    assert replies == [f"charged 11: receipt {receipt}"] * PRESENTATIONS


async def test_concurrent_presentations_across_two_processes_run_the_step_once(
    fresh: Servers,
) -> None:
    replies: list[str] = []
    with trio.fail_after(120):
        async with clients(fresh.urls["app"]) as (a, b):
            token = await round_one(b, 12)

            async def one(client: Client) -> None:
                replies.append(await present(client, 12, token))

            async with trio.open_nursery() as nursery:
                for n in range(PRESENTATIONS):
                    nursery.start_soon(one, (a, b)[n % 2])
    charges = fresh.charges()
    assert len(charges) == 1, charges
    assert replies == [f"charged 12: receipt {charges[0][3]}"] * PRESENTATIONS


async def test_each_flow_is_charged_once_and_separately(fresh: Servers) -> None:
    # Two flows with the same arguments are two charges: the flow id tells them apart.
    with trio.fail_after(120):
        async with clients(fresh.urls["app"]) as (a, b):
            first, second = await round_one(a, 13), await round_one(b, 13)
            replies = [await present(c, 13, t) for t in (first, second) for c in (a, b)]
    charges = fresh.charges()
    assert len(charges) == 2 and charges[0][1] != charges[1][1]  # two step keys
    assert replies[0] == replies[1] != replies[2] == replies[3]


async def test_a_single_use_token_is_refused_the_second_time_in_any_process(
    fresh: Servers,
) -> None:
    with trio.fail_after(120):
        async with clients(fresh.urls["single_use_app"]) as (a, b):
            token = await round_one(a, 14)
            assert (await present(b, 14, token)).startswith("charged 14: receipt ")
            for client in (a, b):
                with pytest.raises(MCPError) as caught:
                    await present(client, 14, token)
                assert caught.value.code == -32602
                assert caught.value.message == "Invalid or expired requestState"
                assert caught.value.data == {"reason": "invalid_request_state"}
    assert len(fresh.charges()) == 1


async def test_a_tool_whose_store_is_down_returns_an_error_result_and_charges_nothing() -> None:
    charged: list[int] = []

    async def pay(ctx: Context, amount: int):
        yield elicit(f"Charge {amount}?", CONFIRM)
        yield step(charged.append, amount)
        yield done("charged")

    down = RedisStepStore(f"redis://127.0.0.1:{free_port()}/0", timeout=2)  # nothing listens
    app = App("down", runtime=Runtime([secrets.token_bytes(32)], step_store=down))
    app.tool()(pay)
    with trio.fail_after(30):
        async with Client(app.server, mode=MODE, **CALLBACKS) as client:
            result = await client.call_tool("pay", {"amount": 3})
    assert result.is_error
    assert "did not run: the step store failed (ConnectionError" in text_of(result)
    assert charged == []
