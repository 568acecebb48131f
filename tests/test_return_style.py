"""Return-style handlers (the TypeScript FastMCP semantics) in both eras."""

from __future__ import annotations

from typing import Any

import pytest
import trio

from mrtr_trio import (
    Complete,
    Context,
    InputRequired,
    MintedState,
    MrtrError,
    RoundLimitExceeded,
    Runtime,
    accepted_content,
    elicit,
    input_required,
    input_response,
)
from mrtr_trio.testing import run_live, run_modern

from . import flows
from .flows import CONFIRM, SIZE, happy_answer
from .loops import BOTH_LOOPS

KEY = b"s" * 32


def runtime(**kw: Any) -> Runtime:
    return Runtime([KEY], **kw)


@BOTH_LOOPS
async def test_first_call_has_no_input_responses_and_state() -> None:
    seen: list[Any] = []

    async def probe(ctx: Context):
        seen.append((ctx.input_responses, ctx.request_state()))
        if ctx.input_responses is None:
            return input_required(
                {"c": elicit("ok?", CONFIRM)},
                await ctx.mint_request_state({"step": 1, "tags": ("a", "b")}),
            )
        return "done"

    for run in (run_live, run_modern):
        seen.clear()
        assert await run(probe, {}, happy_answer) == "done"
        (first_responses, first_state), (responses, state) = seen
        assert first_responses is None and first_state is None
        assert accepted_content(responses, "c") == {"confirm": True}
        assert input_response(responses, "c").accepted
        assert state == {"step": 1, "tags": ["a", "b"]}  # structured, normalised, not a string


@BOTH_LOOPS
async def test_state_only_rounds_carry_the_payload_in_both_eras() -> None:
    numbers = list(range(1, 8))
    for run in (run_live, run_modern):
        value = await run(
            flows.return_chunked_sum,
            {"numbers": numbers, "chunk": 3},
            happy_answer,
            runtime=runtime(state_only_pacing=0),
        )
        assert value == sum(numbers)


async def test_the_shim_paces_state_only_rounds(autojump_clock: Any) -> None:
    start = trio.current_time()
    value = await runtime(state_only_pacing=0.25).run_live(
        flows.return_chunked_sum, {"numbers": [1, 2, 3, 4, 5, 6], "chunk": 2}, happy_answer
    )
    assert value == 21
    assert trio.current_time() - start == pytest.approx(0.5)  # two state-only re-entries


@BOTH_LOOPS
async def test_legacy_shim_disabled_fails_loudly() -> None:
    with pytest.raises(MrtrError, match="legacy_shim=False"):
        await run_live(flows.return_confirm, {}, happy_answer, runtime=runtime(legacy_shim=False))
    # modern rounds do not need the shim
    assert (
        await run_modern(flows.return_confirm, {}, happy_answer, runtime=runtime(legacy_shim=False))
        == "deploy: yes"
    )


@BOTH_LOOPS
async def test_round_limit_counts_shim_reentries() -> None:
    async def forever(ctx: Context):
        return input_required(request_state=await ctx.mint_request_state(0))

    for run in (run_live, run_modern):
        with pytest.raises(RoundLimitExceeded, match="after 4 rounds"):
            await run(forever, {}, happy_answer, runtime=runtime(max_rounds=4, state_only_pacing=0))


@BOTH_LOOPS
async def test_answers_are_checked_before_the_handler_is_reentered() -> None:
    entries: list[Any] = []

    async def sized(ctx: Context):
        entries.append(ctx.input_responses)
        if ctx.input_responses is None:
            return input_required({"size": elicit("Size?", SIZE)})
        return ctx.input_responses["size"].content["size"]

    rt = runtime()
    first = await rt.advance(sized, {})
    assert isinstance(first, InputRequired)
    bad = {"size": {"action": "accept", "content": {"size": 0}}}
    again = await rt.advance(sized, {}, input_responses=bad, request_state=first.request_state)
    assert isinstance(again, InputRequired) and list(again.input_requests) == ["size"]
    assert len(entries) == 1  # not re-entered with invalid content
    good = {"size": {"action": "accept", "content": {"size": 5}}, "extra": {"junk": 1}}
    assert await rt.advance(
        sized, {}, input_responses=good, request_state=again.request_state
    ) == Complete(5)
    assert list(entries[-1]) == ["size"]  # keys the runtime did not ask for are dropped


@BOTH_LOOPS
async def test_round_zero_answers_reenter_the_handler_at_once() -> None:
    out = await runtime().advance(
        flows.return_confirm,
        {"action": "ship"},
        input_responses={"confirm": {"action": "accept", "content": {"confirm": False}}},
    )
    assert out == Complete("ship: no")


def test_input_required_rejects_bad_input() -> None:
    with pytest.raises(TypeError, match="needs input_requests, request_state, or both"):
        input_required()
    with pytest.raises(TypeError, match="mint_request_state"):
        input_required(request_state="raw string")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="values must be requests"):
        input_required({"k": "not a request"})  # type: ignore[dict-item]
    carried = input_required(request_state=MintedState(1))
    assert carried.input_requests == {} and carried.request_state == MintedState(1)


@BOTH_LOOPS
async def test_unrecordable_payload_is_refused_when_minted() -> None:
    async def bad(ctx: Context):
        return input_required(request_state=await ctx.mint_request_state({1, 2}))

    with pytest.raises(MrtrError, match="cannot record the set from mint_request_state"):
        await runtime().advance(bad, {})


@BOTH_LOOPS
async def test_a_token_from_the_other_style_is_refused_clearly() -> None:
    from mrtr_trio import done

    async def same_name(ctx: Context):  # yield style first...
        yield elicit("ok?", CONFIRM)
        yield done("yield")

    rt = runtime()
    first = await rt.advance(same_name, {})
    assert isinstance(first, InputRequired)

    async def same_name(ctx: Context):  # type: ignore[no-redef]  # ...then return style
        return "return"

    with pytest.raises(MrtrError, match="minted by a yield-style handler"):
        await rt.advance(same_name, {}, request_state=first.request_state)
