"""Properties of the runtime over random handler programs (``strategies.flows()``).

Era equivalence runs at least 500 flows per run; the others (tampering, expiry, binding, steps
run exactly once, every generator closed, recorded tokens replay) at least 50 each.
"""

from __future__ import annotations

import contextlib
import string
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from mrtr_trio import InputRequired, InvalidRequestState, Runtime
from mrtr_trio.testing import (
    TEST_KEY,
    RecordedState,
    assert_all_continue,
    assert_eras_agree,
    replay_recorded,
    run_live,
    run_modern,
)
from mrtr_trio.testing import strategies as mst

from .hostile import decode, encode

ERA_FLOWS = max(500, settings.default.max_examples)
# The other properties: 50 examples in CI (each draws and runs a whole flow), more in "long".
EXAMPLES = max(50, settings.default.max_examples // 2)
OTHER_KEY = b"another key, also 32 bytes or more"
B64URL = string.ascii_letters + string.digits + "-_"
START = 1_800_000_000.0


class Clock:
    def __init__(self) -> None:
        self.now = START

    def __call__(self) -> float:
        return self.now


def runtime(**kw: Any) -> Runtime:
    # One round more than programs use, so a retry without answers still fits.
    return Runtime([TEST_KEY], replay="strict", max_rounds=9, **kw)


async def tokens_of(
    handler: Callable[..., Any], arguments: dict[str, Any], answer: Any, rt: Runtime
) -> list[str]:
    """Run the flow modern and return every token it was handed."""
    tokens: list[str] = []

    def on_round(_: int, outcome: Any) -> None:
        if isinstance(outcome, InputRequired) and outcome.request_state is not None:
            tokens.append(outcome.request_state)

    await run_modern(handler, arguments, answer, runtime=rt, on_round=on_round)
    return tokens


# ------------------------------------------------------------------------ era equivalence


@settings(max_examples=ERA_FLOWS)
@given(mst.flows())
async def test_eras_agree_on_generated_flows(flow: mst.FlowCase) -> None:
    handler, arguments, answer = flow
    program = mst.program_of(handler)
    value = await assert_eras_agree(handler, arguments, answer)  # strict, replay checks on
    assert value is None or value == program.ledger.last_trail
    assert program.ledger.started == program.ledger.closed


# ------------------------------------------------------------------ steps and generators


@settings(max_examples=EXAMPLES)
@given(mst.flows())
async def test_steps_run_exactly_once_per_flow_in_each_era(flow: mst.FlowCase) -> None:
    handler, arguments, answer = flow
    program = mst.program_of(handler)
    for run in (run_live, run_modern):
        before = program.ledger.step_calls
        await run(handler, arguments, answer)
        assert program.ledger.step_calls - before == program.steps, run.__name__


@settings(max_examples=EXAMPLES)
@given(mst.flows(), st.integers(0, 6))
async def test_every_generator_is_closed_even_when_the_client_fails(
    flow: mst.FlowCase, fail_at: int
) -> None:
    handler, arguments, answer = flow
    program = mst.program_of(handler)
    calls = {"n": 0}

    def flaky(key: str, request: Any) -> Any:
        calls["n"] += 1
        if calls["n"] > fail_at:
            raise ConnectionError("the client went away")
        return answer(key, request)

    advances = {"n": 0}

    def count(_: int, __: Any) -> None:
        advances["n"] += 1

    with contextlib.suppress(ConnectionError):
        await run_live(handler, arguments, flaky)
    assert program.ledger.started == program.ledger.closed == 1

    calls["n"] = 0
    answer.restart()
    with contextlib.suppress(ConnectionError):
        await run_modern(handler, arguments, flaky, on_round=count)
    assert program.ledger.started == program.ledger.closed == 1 + advances["n"]


# ---------------------------------------------------------------------------- the token


def tampered(token: str) -> st.SearchStrategy[str]:
    """Every way a client might alter a token: characters, bits, length."""
    raw = decode(token)

    def flip(position: int, bit: int) -> str:
        changed = bytearray(raw)
        changed[position] ^= 1 << bit
        return encode(bytes(changed))

    return st.one_of(
        st.tuples(st.integers(0, len(token) - 1), st.sampled_from(B64URL))
        .filter(lambda change: token[change[0]] != change[1])
        .map(lambda change: token[: change[0]] + change[1] + token[change[0] + 1 :]),
        st.tuples(st.integers(0, len(raw) - 1), st.integers(0, 7)).map(lambda f: flip(*f)),
        st.integers(0, len(token) - 1).map(lambda n: token[:n]),
        st.text(B64URL, min_size=1, max_size=8).map(lambda tail: token + tail),
        st.binary(min_size=1, max_size=4).map(lambda extra: encode(raw + extra)),
    )


@settings(max_examples=EXAMPLES)
@given(mst.flows(), st.data())
async def test_tampered_tokens_are_rejected_before_any_handler_code(
    flow: mst.FlowCase, data: st.DataObject
) -> None:
    handler, arguments, answer = flow
    rt = runtime()
    tokens = await tokens_of(handler, arguments, answer, rt)
    assume(tokens)
    token = data.draw(st.sampled_from(tokens), label="token")
    bad = data.draw(tampered(token), label="tampered")
    program = mst.program_of(handler)
    before = program.ledger.started
    with pytest.raises(InvalidRequestState) as caught:
        await rt.advance(handler, arguments, request_state=bad)
    assert str(caught.value) == "Invalid or expired requestState"
    assert program.ledger.started == before


@settings(max_examples=EXAMPLES)
@given(
    mst.flows(),
    st.data(),
    st.integers(1, 3600),
    st.integers(-120, 7300),
    st.sampled_from([0.0, 0.25, 0.999]),
)
async def test_tokens_expire_exactly_after_ttl(
    flow: mst.FlowCase, data: st.DataObject, ttl: int, seconds: int, fraction: float
) -> None:
    handler, arguments, answer = flow
    clock = Clock()
    rt = runtime(ttl=ttl, clock=clock)
    tokens = await tokens_of(handler, arguments, answer, rt)
    assume(tokens)
    token = data.draw(st.sampled_from(tokens), label="token")
    clock.now = START + seconds + fraction
    # Minted at START: valid from 60 s before it (clock skew) until ttl seconds after it.
    if -60 <= seconds + fraction < ttl:
        await rt.advance(handler, arguments, request_state=token)
    else:
        program = mst.program_of(handler)
        before = program.ledger.started
        with pytest.raises(InvalidRequestState):
            await rt.advance(handler, arguments, request_state=token)
        assert program.ledger.started == before


async def impostor(ctx: Any, label: str = "") -> Any:
    raise AssertionError("verification must fail before any handler code runs")
    yield


@settings(max_examples=EXAMPLES)
@given(
    mst.flows(),
    st.data(),
    st.sampled_from(["arguments", "bind", "handler", "key"]),
)
async def test_tokens_are_bound_to_handler_arguments_bind_and_keys(
    flow: mst.FlowCase, data: st.DataObject, change: str
) -> None:
    handler, arguments, answer = flow
    rt = runtime()
    tokens = await tokens_of(handler, arguments, answer, rt)
    assume(tokens)
    token = data.draw(st.sampled_from(tokens), label="token")
    program = mst.program_of(handler)
    before = program.ledger.started
    target, args, bind, checker = handler, arguments, b"", rt
    if change == "arguments":
        args = {"label": data.draw(st.text(max_size=8).filter(lambda s: s != arguments["label"]))}
    elif change == "bind":
        bind = data.draw(st.binary(min_size=1, max_size=16), label="bind")
    elif change == "handler":
        target = impostor
    else:
        checker = Runtime([OTHER_KEY], replay="strict", max_rounds=9)
    with pytest.raises(InvalidRequestState):
        await checker.advance(target, args, request_state=token, bind=bind)
    assert program.ledger.started == before
    if change == "key":  # rotation: the old key still verifies behind a new one
        rotated = Runtime([OTHER_KEY, TEST_KEY], replay="strict", max_rounds=9)
        await rotated.advance(handler, arguments, request_state=token)


# ------------------------------------------------------------------------ recorded tokens


@settings(max_examples=EXAMPLES)
@given(mst.flows())
async def test_recorded_tokens_of_unchanged_code_continue_and_run_no_step(
    flow: mst.FlowCase,
) -> None:
    handler, arguments, answer = flow
    tokens = await tokens_of(handler, arguments, answer, runtime())
    program = mst.program_of(handler)
    steps = program.ledger.step_calls
    reports = await replay_recorded(
        handler, [RecordedState(t, arguments) for t in tokens], keys=[TEST_KEY]
    )
    assert_all_continue(reports)
    assert len(reports) == len(tokens)
    assert program.ledger.step_calls == steps
    assert program.ledger.started == program.ledger.closed
