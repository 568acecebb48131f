"""``poll(fn, ...)``: waiting for a condition outside the client, in both eras."""

from __future__ import annotations

from typing import Any

import pytest
import trio
import trio.testing

from mrtr_trio import (
    Complete,
    Context,
    InputRequired,
    PollTimeout,
    Runtime,
    done,
    elicit,
    poll,
)

from .loops import BOTH_LOOPS

KEY = b"p" * 32
CONFIRM = {"type": "object", "properties": {"ok": {"type": "boolean"}}, "required": ["ok"]}


class Approval:
    """An outside condition: approved after *after* checks (or on a clock)."""

    def __init__(self, after: int) -> None:
        self.after = after
        self.checks = 0

    def __call__(self, ticket: str) -> str | None:
        self.checks += 1
        return f"{ticket} approved" if self.checks > self.after else None


def approval_flow(approval: Approval):
    async def wait_for_approval(ctx: Context, ticket: str):
        ok = yield elicit(f"Request approval for {ticket}?", CONFIRM)
        if not ok.accepted:
            yield done("not requested")
        verdict = yield poll(approval, ticket, every=5.0, timeout=60.0)
        yield done(verdict)

    return wait_for_approval


async def test_live_poll_calls_every_interval_until_met(autojump_clock: Any) -> None:
    approval = Approval(after=3)

    async def ask(key: str, request: Any) -> Any:
        return {"action": "accept", "content": {"ok": True}}

    start = trio.current_time()
    value = await Runtime([KEY]).run_live(approval_flow(approval), {"ticket": "T-1"}, ask)
    assert value == "T-1 approved"
    assert approval.checks == 4
    assert trio.current_time() - start == pytest.approx(15.0)  # three waits of 5 s


async def test_live_poll_times_out(autojump_clock: Any) -> None:
    async def never(ctx: Context):
        yield poll(lambda: None, every=1.0, timeout=3.0)

    with pytest.raises(PollTimeout, match="after its timeout of 3 s"):
        await Runtime([KEY]).run_live(never, {}, None)


@BOTH_LOOPS
async def test_modern_poll_answers_state_only_rounds_that_max_rounds_does_not_bound() -> None:
    approval = Approval(after=12)  # more waits than max_rounds allows rounds
    clock = [1_800_000_000.0]
    runtime = Runtime([KEY], max_rounds=2, clock=lambda: clock[0])
    handler = approval_flow(approval)
    out = await runtime.advance(handler, {"ticket": "T-2"})
    assert isinstance(out, InputRequired) and list(out.input_requests) == ["input-0"]
    responses: Any = {"input-0": {"action": "accept", "content": {"ok": True}}}
    state = out.request_state
    waits = 0
    while True:
        clock[0] += 1
        out = await runtime.advance(
            handler, {"ticket": "T-2"}, input_responses=responses, request_state=state
        )
        if isinstance(out, Complete):
            break
        assert out.input_requests == {}  # a state-only round
        responses, state = None, out.request_state
        waits += 1
    assert out.value == "T-2 approved"
    assert waits == 12 and approval.checks == 13
    assert runtime.inspect(handler, {"ticket": "T-2"}, state).polling


@BOTH_LOOPS
async def test_modern_poll_times_out_by_the_deadline_in_its_token() -> None:
    clock = [1_800_000_000.0]
    runtime = Runtime([KEY], clock=lambda: clock[0])
    handler = approval_flow(Approval(after=1000))
    out = await runtime.advance(
        handler,
        {"ticket": "T"},
        input_responses={"input-0": {"action": "accept", "content": {"ok": True}}},
    )
    assert isinstance(out, InputRequired) and out.input_requests == {}
    clock[0] += 62
    with pytest.raises(PollTimeout):
        await runtime.advance(handler, {"ticket": "T"}, request_state=out.request_state)


@BOTH_LOOPS
async def test_the_value_that_ends_a_wait_is_read_once() -> None:
    approval = Approval(after=0)
    runtime = Runtime([KEY])

    async def then_ask(ctx: Context):
        verdict = yield poll(approval, "T", every=1.0)
        again = yield elicit(f"{verdict}. Go on?", CONFIRM)
        yield done((verdict, again.action))

    out = await runtime.advance(then_ask, {})
    assert isinstance(out, InputRequired) and approval.checks == 1
    out = await runtime.advance(
        then_ask,
        {},
        input_responses={"input-0": {"action": "decline"}},
        request_state=out.request_state,
    )
    assert out == Complete(("T approved", "decline"))
    assert approval.checks == 1  # the replay read the recorded value


def test_poll_arguments_are_checked() -> None:
    with pytest.raises(TypeError, match="callable"):
        poll("not callable")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="every"):
        poll(print, every=0)
    with pytest.raises(ValueError, match="timeout"):
        poll(print, timeout=-1)
