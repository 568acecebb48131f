"""One handler, both eras: every example flow gives the same value live and replayed."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mrtr_trio import Context, done, elicit, step
from mrtr_trio.testing import run_live, run_modern

from . import flows
from .flows import CONFIRM, NAME, action_answer, happy_answer

CASES = [
    pytest.param(flows.single_ask, {"who": "Ada"}, happy_answer, "Hello, name-value!", id="single"),
    pytest.param(
        flows.batch_of_three,
        {},
        happy_answer,
        "name-value|Paris|file:///work,file:///tmp",
        id="batch",
    ),
    pytest.param(
        flows.wizard,
        {"title": "Setup"},
        happy_answer,
        {"name": "name-value", "color": "blue", "size": 2},
        id="wizard",
    ),
    pytest.param(flows.with_pause, {"n": 3}, happy_answer, 6, id="pause"),
    pytest.param(flows.return_confirm, {"action": "ship"}, happy_answer, "ship: yes", id="return"),
    pytest.param(
        flows.return_chunked_sum, {"numbers": [1, 2, 3, 4, 5]}, happy_answer, 15, id="state-only"
    ),
]


@pytest.mark.parametrize(("handler", "arguments", "answer", "expected"), CASES)
async def test_example_flows_agree(handler, arguments, answer, expected) -> None:
    live = await run_live(handler, arguments, answer)
    modern = await run_modern(handler, arguments, answer)
    assert live == modern == expected


@pytest.mark.parametrize(
    ("actions", "expected"),
    [
        (("accept",), "accepted confirm=True"),
        (("decline", "accept"), "declined, then accept"),
        (("decline", "cancel"), "declined, then cancel"),
        (("cancel",), "cancelled"),
    ],
)
async def test_decline_and_cancel_branches_agree(actions, expected) -> None:
    live = await run_live(flows.decline_or_cancel, {}, action_answer(*actions))
    modern = await run_modern(flows.decline_or_cancel, {}, action_answer(*actions))
    assert live == modern == expected


async def test_step_flow_agrees_and_runs_its_step_once_per_flow() -> None:
    flows.STEP_CALLS.clear()
    live = await run_live(flows.with_step, {}, happy_answer)
    assert flows.STEP_CALLS == ["T"]
    modern = await run_modern(flows.with_step, {}, happy_answer)
    assert flows.STEP_CALLS == ["T", "T"]  # one call per flow, though modern replays twice
    assert live == "T-1 filed=True"
    assert modern == "T-2 filed=True"


# ------------------------------------------------------------------ property: eras agree

ELICIT_ANSWERS = st.one_of(
    st.builds(lambda c: {"action": "accept", "content": {"confirm": c}}, st.booleans()),
    st.just({"action": "decline"}),
    st.just({"action": "cancel"}),
)


async def branching(ctx: Context, depth: int):
    """Branches on every answer: how far it goes and what it asks depend on the answers."""
    trail: list[str] = []
    for level in range(depth):
        answer = yield elicit(f"Level {level} after {'/'.join(trail) or 'start'}?", CONFIRM)
        if answer.action == "cancel":
            yield done(["cancelled", *trail])
        if answer.accepted and answer.content["confirm"]:
            trail.append(f"y{level}")
            if level % 2 == 0:
                batch = yield {
                    "name": elicit(f"Name at {level}?", NAME),
                    "sure": elicit(f"Sure at {level}?", CONFIRM),
                }
                trail.append(f"{batch['name'].action}{batch['sure'].action}")
        else:
            trail.append(f"n{level}")
            seen = yield step(len, trail)
            trail.append(f"s{seen}")
    yield done(trail)


def scripted(script: list[dict[str, Any]]):
    """Answer elicitations from *script* in order; batches get accepted names."""
    queue = list(script)

    def answer(key: str, request: Any) -> dict[str, Any]:
        if key == "name":
            return {"action": "accept", "content": {"name": "n"}}
        return queue.pop(0) if queue else {"action": "cancel"}

    return answer


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(script=st.lists(ELICIT_ANSWERS, max_size=8), depth=st.integers(1, 4))
def test_eras_agree_on_random_answers(script, depth) -> None:
    import trio

    async def both() -> tuple[Any, Any]:
        live = await run_live(branching, {"depth": depth}, scripted(script))
        modern = await run_modern(branching, {"depth": depth}, scripted(script))
        return live, modern

    live, modern = trio.run(both)
    assert live == modern
