"""The testing kit on either event loop: its runners and the era-equivalence check run a flow
with a step on trio and on asyncio alike (the kit's one loop-specific line, the checkpoint of
the live era's ask, is anyio's), and its pytest fixtures serve an asyncio test under anyio's
pytest plugin as they serve a trio test under pytest-trio."""

from __future__ import annotations

from typing import Any

import anyio
import pytest

from mrtr_trio import Context, MemoryStepStore, Runtime, done, elicit, step
from mrtr_trio.testing import AnswerScript, assert_eras_agree, run_live, run_modern

from .loops import BOTH_LOOPS

CONFIRM = {"type": "object", "properties": {"ok": {"type": "boolean"}}, "required": ["ok"]}
KEY = b"t" * 32


async def fetch(amount: int) -> str:
    await anyio.sleep(0.001)  # a step that waits on the loop
    return f"quote for {amount}"


async def order(ctx: Context, amount: int):  # type: ignore[no-untyped-def]
    quote = yield step(fetch, amount)
    answer = yield elicit(f"{quote}: buy?", CONFIRM)
    yield done({"quote": quote, "bought": answer.accepted and answer.content["ok"]})


async def trip(ctx: Context):  # type: ignore[no-untyped-def]
    # Two requests in one round: the live era asks them concurrently, and the era check tells
    # the rounds apart by its asks' checkpoint.
    both = yield {"a": elicit("A?", CONFIRM), "b": elicit("B?", CONFIRM)}
    quote = yield step(fetch, len(both))
    again = yield elicit(f"{quote}: sure?", CONFIRM)
    yield done([sorted(both), again.accepted])


def accept(key: str, request: Any) -> Any:
    return {"action": "accept", "content": {"ok": True}}


EXPECTED = {"quote": "quote for 7", "bought": True}


@BOTH_LOOPS
async def test_the_runners_and_the_era_check_run_on_the_calling_loop() -> None:
    runtime = Runtime([KEY], step_store=MemoryStepStore())
    assert await run_modern(order, {"amount": 7}, accept, runtime=runtime) == EXPECTED
    assert await run_modern(order, {"amount": 7}, accept, replay_check=True) == EXPECTED
    assert await run_live(order, {"amount": 7}, accept) == EXPECTED
    assert await assert_eras_agree(order, {"amount": 7}, AnswerScript(accept_all)) == EXPECTED
    assert await assert_eras_agree(trip, {}, accept) == [["a", "b"], True]


def accept_all(key: str, request: Any, occurrence: int) -> Any:
    return {"action": "accept", "content": {"ok": True}}


PLUGIN_TESTS = """
import pytest

from mrtr_trio import done, elicit, step

pytestmark = pytest.mark.anyio
CONFIRM = {"type": "object", "properties": {"ok": {"type": "boolean"}}, "required": ["ok"]}


@pytest.fixture(params=["asyncio", "trio"])
def anyio_backend(request):
    return request.param


def quote(amount):
    return f"quote for {amount}"


async def order(ctx, amount):
    q = yield step(quote, amount)
    answer = yield elicit(f"{q}: buy?", CONFIRM)
    yield done([q, answer.content["ok"]])


def accept(key, request):
    return {"action": "accept", "content": {"ok": True}}


async def test_the_fixtures_on_each_loop(mrtr_run, anyio_backend):
    import sniffio

    assert sniffio.current_async_library() == anyio_backend
    assert await mrtr_run.run_modern(order, {"amount": 3}, accept) == ["quote for 3", True]
    assert await mrtr_run.assert_eras_agree(order, {"amount": 3}, accept) == ["quote for 3", True]
"""


def test_the_pytest_fixtures_serve_anyios_plugin_on_asyncio(pytester: pytest.Pytester) -> None:
    pytester.makeini("[pytest]\nfilterwarnings = error\n")
    pytester.makepyfile(test_kit_on_loops=PLUGIN_TESTS)
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "-v", timeout=120)
    result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines(["*test_the_fixtures_on_each_loop?asyncio? PASSED*"])
