"""Modern rounds: replay, divergence, answer checks, capabilities and limits."""

from __future__ import annotations

import json
import logging
from typing import Any

import pytest

from mrtr_trio import (
    Complete,
    Context,
    CreateMessageRequest,
    ElicitRequest,
    InputRequired,
    InvalidInputResponse,
    MissingCapability,
    NondeterminismError,
    RoundLimitExceeded,
    Runtime,
    create_message,
    done,
    elicit,
    elicit_url,
    list_roots,
    pause,
    step,
)
from mrtr_trio._journal import flat_record_problem, record_problem
from mrtr_trio.testing import run_live, run_modern

from .flows import CONFIRM, NAME, SIZE, happy_answer
from .loops import BOTH_LOOPS

pytestmark = BOTH_LOOPS

KEY = b"r" * 32
ACCEPT_NAME = {"action": "accept", "content": {"name": "Ada"}}
ACCEPT_YES = {"action": "accept", "content": {"confirm": True}}


def runtime(**kw: Any) -> Runtime:
    return Runtime([KEY], **kw)


async def greet(ctx: Context):
    answers = yield {"user_name": elicit("What is your name?", NAME)}
    yield done(f"Hello, {answers['user_name'].content['name']}!")


# ----------------------------------------------------------------- round 0 and retries


async def test_round_zero_answered_from_input_responses_without_state() -> None:
    out = await runtime().advance(greet, {}, input_responses={"user_name": ACCEPT_NAME})
    assert out == Complete("Hello, Ada!")


async def test_unknown_response_keys_are_ignored() -> None:
    responses = {"user_name": ACCEPT_NAME, "unknown_extra_key": {"x": 1}, "another": 12}
    out = await runtime().advance(greet, {}, input_responses=responses)
    assert out == Complete("Hello, Ada!")


async def test_missing_response_asks_again_with_state() -> None:
    out = await runtime().advance(greet, {}, input_responses={"wrong_key": ACCEPT_NAME})
    assert isinstance(out, InputRequired)
    assert list(out.input_requests) == ["user_name"]
    assert out.request_state


@pytest.mark.parametrize(
    "bad", [12345, "Alice", None, [], {"action": "maybe"}, {"action": "accept"}]
)
async def test_malformed_answers_are_protocol_errors(bad: Any) -> None:
    with pytest.raises(InvalidInputResponse, match="'user_name'") as caught:
        await runtime().advance(greet, {}, input_responses={"user_name": bad})
    assert caught.value.code == -32602


async def test_non_mapping_input_responses_is_a_protocol_error() -> None:
    with pytest.raises(InvalidInputResponse, match="must be an object"):
        await runtime().advance(greet, {}, input_responses=["user_name"])  # type: ignore[arg-type]


async def test_later_asks_in_the_same_call_go_to_the_client() -> None:
    async def two(ctx: Context):
        first = yield {"a": elicit("A?", NAME)}
        second = yield {"b": elicit("B?", NAME)}
        yield done(first["a"].content["name"] + second["b"].content["name"])

    rt = runtime()
    # "b" is answered early, but only the first ask reads this call's responses.
    out = await rt.advance(two, {}, input_responses={"a": ACCEPT_NAME, "b": ACCEPT_NAME})
    assert isinstance(out, InputRequired) and list(out.input_requests) == ["b"]
    final = await rt.advance(
        two,
        {},
        input_responses={"b": {"action": "accept", "content": {"name": "Bo"}}},
        request_state=out.request_state,
    )
    assert final == Complete("AdaBo")


async def test_retry_without_answers_asks_again_and_counts_a_round() -> None:
    rt = runtime(max_rounds=2)
    first = await rt.advance(greet, {})
    assert isinstance(first, InputRequired)
    second = await rt.advance(greet, {}, request_state=first.request_state)
    assert isinstance(second, InputRequired) and list(second.input_requests) == ["user_name"]
    with pytest.raises(RoundLimitExceeded, match="still required input after 2 rounds"):
        await rt.advance(greet, {}, request_state=second.request_state)


# ---------------------------------------------------------------- schemas and batches


async def test_schema_invalid_content_is_asked_again_and_valid_answers_are_kept() -> None:
    async def form(ctx: Context):
        got = yield {"name": elicit("Name?", NAME), "size": elicit("Size?", SIZE)}
        yield done((got["name"].content["name"], got["size"].content["size"]))

    rt = runtime()
    first = await rt.advance(form, {})
    assert isinstance(first, InputRequired)
    bad_size = {"action": "accept", "content": {"size": 99}}
    second = await rt.advance(
        form,
        {},
        input_responses={"name": ACCEPT_NAME, "size": bad_size},
        request_state=first.request_state,
    )
    assert isinstance(second, InputRequired)
    assert list(second.input_requests) == ["size"]  # the name was kept
    third = await rt.advance(
        form,
        {},
        input_responses={"size": {"action": "accept", "content": {"size": 3}}},
        request_state=second.request_state,
    )
    assert third == Complete(("Ada", 3))


@pytest.mark.parametrize(
    "content",
    [{}, {"size": "3"}, {"size": 2.5}, {"size": True}, {"size": 0}, {"size": 11}],
)
async def test_schema_checks_types_required_and_bounds(content: dict[str, Any]) -> None:
    async def form(ctx: Context):
        got = yield {"size": elicit("Size?", SIZE)}
        yield done(got["size"].content)

    out = await runtime().advance(
        form, {}, input_responses={"size": {"action": "accept", "content": content}}
    )
    assert isinstance(out, InputRequired), f"{content} should be asked again"


async def test_a_wrong_kind_of_answer_is_malformed() -> None:
    async def sample(ctx: Context):
        got = yield {"s": create_message("Hi", max_tokens=10)}
        yield done(got["s"].text)

    with pytest.raises(InvalidInputResponse, match="role"):
        await runtime().advance(sample, {}, input_responses={"s": ACCEPT_YES})


# -------------------------------------------------------------------------- divergence

clock = {"value": 0}


async def reads_the_clock(ctx: Context):
    clock["value"] += 1  # a handler that is not deterministic
    first = yield elicit(f"Question at t={clock['value']}?", CONFIRM)
    second = yield elicit("Second?", CONFIRM)
    yield done((first.action, second.action))


version = {"v": 1}


async def versioned(ctx: Context):
    first = yield elicit(f"Question v{version['v']}?", CONFIRM)
    second = yield elicit("Second?", CONFIRM)
    yield done((first.action, second.action))


async def test_strict_replay_raises_naming_handler_round_and_both_requests() -> None:
    rt = runtime(replay="strict")
    version["v"] = 1
    first = await rt.advance(versioned, {})
    assert isinstance(first, InputRequired)
    second = await rt.advance(
        versioned, {}, input_responses={"input-0": ACCEPT_YES}, request_state=first.request_state
    )
    assert isinstance(second, InputRequired) and list(second.input_requests) == ["input-1"]
    version["v"] = 2  # a deploy changes the first question while the flow is in flight
    with pytest.raises(NondeterminismError) as caught:
        await rt.advance(
            versioned,
            {},
            input_responses={"input-1": ACCEPT_YES},
            request_state=second.request_state,
        )
    error = caught.value
    assert error.handler == "versioned"
    assert (error.round, error.yield_index) == (1, 0)
    assert error.recorded.startswith("'input-0' (elicitation/create ")
    assert error.current["input-0"]["params"]["message"] == "Question v2?"
    assert "versioned" in str(error) and "Question v2?" in str(error) and "round 1" in str(error)


async def test_strict_replay_raises_when_the_pending_ask_changed() -> None:
    rt = runtime(replay="strict")
    clock["value"] = 0
    first = await rt.advance(reads_the_clock, {})
    assert isinstance(first, InputRequired)
    with pytest.raises(NondeterminismError) as caught:
        # The retry re-runs the handler, which now asks "t=2": not the pending "t=1".
        clock["value"] = 5
        await rt.advance(
            reads_the_clock,
            {},
            input_responses={"input-0": ACCEPT_YES},
            request_state=first.request_state,
        )
    assert caught.value.yield_index == 0
    assert caught.value.current["input-0"]["params"]["message"] == "Question at t=6?"


async def test_reask_replay_asks_again_and_logs(caplog: pytest.LogCaptureFixture) -> None:
    rt = runtime(replay="reask")
    clock["value"] = 0
    first = await rt.advance(reads_the_clock, {})
    assert isinstance(first, InputRequired)
    with caplog.at_level(logging.WARNING, logger="mrtr_trio"):
        again = await rt.advance(
            reads_the_clock,
            {},
            input_responses={"input-0": ACCEPT_YES},
            request_state=first.request_state,
        )
    assert isinstance(again, InputRequired)
    assert again.input_requests["input-0"].message == "Question at t=2?"
    assert any("diverged" in r.getMessage() and "reask" in r.getMessage() for r in caplog.records)


async def test_a_handler_that_finishes_early_on_replay_is_divergent() -> None:
    calls = {"n": 0}

    async def shrinks(ctx: Context):
        calls["n"] += 1
        if calls["n"] > 1:
            yield done("short")
        yield elicit("Long?", CONFIRM)
        yield done("long")

    rt = runtime(replay="strict")
    first = await rt.advance(shrinks, {})
    assert isinstance(first, InputRequired)
    with pytest.raises(NondeterminismError, match="finished"):
        await rt.advance(
            shrinks, {}, input_responses={"input-0": ACCEPT_YES}, request_state=first.request_state
        )
    calls["n"] = 0
    lenient = runtime(replay="reask")
    first = await lenient.advance(shrinks, {})
    assert isinstance(first, InputRequired)
    out = await lenient.advance(
        shrinks, {}, input_responses={"input-0": ACCEPT_YES}, request_state=first.request_state
    )
    assert out == Complete("short")


# ------------------------------------------------------------------------- steps


async def test_steps_run_exactly_once_per_flow_in_both_eras() -> None:
    calls: list[int] = []

    async def record(n: int) -> int:
        calls.append(n)
        return n * 10

    async def stepper(ctx: Context):
        a = yield step(record, 1)
        first = yield elicit(f"a={a}?", CONFIRM)
        b = yield step(record, 2)
        second = yield elicit(f"b={b}?", CONFIRM)
        c = yield step(record, 3)
        yield done((a, b, c, first.action, second.action))

    live = await run_live(stepper, {}, happy_answer)
    assert calls == [1, 2, 3]
    calls.clear()
    modern = await run_modern(stepper, {}, happy_answer)
    assert calls == [1, 2, 3]
    assert live == modern == (10, 20, 30, "accept", "accept")


async def test_step_values_are_normalised_the_same_in_both_eras() -> None:
    async def tuples(ctx: Context):
        value = yield step(lambda: (1, (2, 3)))
        yield elicit("ok?", CONFIRM)
        yield done(value)

    assert await run_live(tuples, {}, happy_answer) == [1, [2, 3]]
    assert await run_modern(tuples, {}, happy_answer) == [1, [2, 3]]


# ------------------------------------------------------------------ capabilities


@pytest.mark.parametrize(
    ("request_", "capabilities", "missing"),
    [
        (elicit("x", CONFIRM), {"sampling": {}}, {"elicitation": {"form": {}}}),
        (elicit_url("x", "https://example.com"), {"elicitation": {}}, {"elicitation": {"url": {}}}),
        (
            elicit_url("x", "https://e.com"),
            {"elicitation": {"form": {}}},
            {"elicitation": {"url": {}}},
        ),
        (create_message("x", max_tokens=5), {}, {"sampling": {}}),
        (
            create_message("x", max_tokens=5, include_context="thisServer"),
            {"sampling": {}},
            {"sampling": {"context": {}}},
        ),
        (list_roots(), {"elicitation": {}}, {"roots": {}}),
    ],
)
async def test_missing_capability_in_both_eras(request_, capabilities, missing) -> None:
    async def asks(ctx: Context):
        yield request_
        yield done("never")

    for run in (run_modern, run_live):
        with pytest.raises(MissingCapability) as caught:
            await run(asks, {}, happy_answer, client_capabilities=capabilities)
        assert caught.value.code == -32021
        assert caught.value.required_capabilities == missing
        assert caught.value.data == {"requiredCapabilities": missing}
        # The message carries the same object as JSON, not Python's repr.
        message = str(caught.value)
        assert ".asks needs client capabilities the client did not declare: " in message
        assert json.loads(message.split("declare: ", 1)[1]) == missing, message


async def test_bare_elicitation_capability_means_form_mode() -> None:
    value = await run_modern(greet, {}, happy_answer, client_capabilities={"elicitation": {}})
    assert value == "Hello, name-value!"


async def test_handlers_see_declared_capabilities_and_can_adapt() -> None:
    async def adaptive(ctx: Context):
        caps = ctx.client_capabilities
        asks: dict[str, Any] = {}
        if "sampling" in caps:
            asks["s"] = create_message("Hi", max_tokens=5)
        if "elicitation" in caps:
            asks["e"] = elicit("Hi?", CONFIRM)
        got = yield asks
        yield done(sorted(got))

    out = await runtime().advance(adaptive, {}, client_capabilities={"sampling": {}})
    assert isinstance(out, InputRequired)
    assert [type(r) for r in out.input_requests.values()] == [CreateMessageRequest]
    everything = await runtime().advance(adaptive, {})
    assert isinstance(everything, InputRequired)
    assert {type(r) for r in everything.input_requests.values()} == {
        CreateMessageRequest,
        ElicitRequest,
    }


# ----------------------------------------------------------------------- pauses


async def test_pause_is_a_state_only_round_on_modern() -> None:
    async def pauses(ctx: Context):
        yield pause()
        yield done("after")

    rt = runtime()
    first = await rt.advance(pauses, {})
    assert isinstance(first, InputRequired)
    assert first.input_requests == {} and first.request_state
    assert await rt.advance(pauses, {}, request_state=first.request_state) == Complete("after")


async def test_modern_round_limit_counts_pauses() -> None:
    async def forever(ctx: Context):
        while True:
            yield pause()

    with pytest.raises(RoundLimitExceeded, match="after 3 rounds"):
        await run_modern(forever, {}, happy_answer, runtime=runtime(max_rounds=3))


async def test_the_client_gives_up_after_ten_retries() -> None:
    async def forever(ctx: Context):
        while True:
            yield pause()

    with pytest.raises(RoundLimitExceeded, match="client gave up"):
        await run_modern(forever, {}, happy_answer, runtime=runtime(max_rounds=50))


# --------------------------------------------------------------------- host hooks


class RecordingHost:
    def __init__(self) -> None:
        self.sent: list[tuple[str, Any]] = []

    @property
    def request_context(self) -> str:
        return "the host's request"

    async def report_progress(
        self, progress: float, total: float | None, message: str | None
    ) -> None:
        self.sent.append(("progress", progress))

    async def log(self, level: str, data: Any, logger: str | None) -> None:
        self.sent.append((level, data))


async def test_notifications_are_not_repeated_by_replays() -> None:
    async def chatty(ctx: Context):
        assert ctx.request_context == "the host's request"
        await ctx.log("info", "starting")
        first = yield elicit("One?", CONFIRM)
        await ctx.report_progress(50, 100)
        second = yield elicit("Two?", CONFIRM)
        await ctx.log("info", "finishing")
        yield done((first.action, second.action))

    rt = runtime()
    host = RecordingHost()
    state, responses = None, None
    for key in ("input-0", "input-1", None):
        out = await rt.advance(
            chatty, {}, request_state=state, input_responses=responses, host=host
        )
        if key is None:
            assert out == Complete(("accept", "accept"))
            break
        state, responses = out.request_state, {key: ACCEPT_YES}
    # Each notification once, though the handler ran from the top three times.
    assert host.sent == [("info", "starting"), ("progress", 50), ("info", "finishing")]
    live_host = RecordingHost()

    async def ask(key: str, request: Any) -> Any:
        return ACCEPT_YES

    assert await rt.run_live(chatty, {}, ask, host=live_host) == ("accept", "accept")
    assert live_host.sent == host.sent


class _Text(str):
    """A str subclass: the fast check must not take it for a plain str."""


@pytest.mark.parametrize(
    "content",
    [
        {},
        {"name": "Ada", "n": 3, "x": 1.5, "ok": True, "tags": ["a", "b"]},
        {"name": "Zoë", "city": "Łódź"},
        {"name": "\ud800"},
        {"\udfff": "key"},
        {"tags": ["fine", "\ud800"]},
        {"name": _Text("\ud800")},
        {"n": 2**80, "nan": float("nan")},
    ],
)
def test_the_fast_check_of_form_content_agrees_with_the_full_one(content: Any) -> None:
    assert flat_record_problem(content) == record_problem(content, False)


async def test_answers_a_token_could_not_hold_are_malformed_in_both_eras() -> None:
    async def sample(ctx: Context):
        got = yield {"s": create_message("Hi", max_tokens=10)}
        yield done(got["s"].text)

    deep: Any = "x"
    for _ in range(40):
        deep = {"nested": deep}
    too_deep = {
        "role": "assistant",
        "content": {"type": "text", "text": "t", "_meta": deep},
        "model": "m",
    }
    surrogate = {"role": "assistant", "content": {"type": "text", "text": "\ud800"}, "model": "m"}
    for bad in (too_deep, surrogate):
        with pytest.raises(
            InvalidInputResponse, match=r"the answer to 's' \(the .*\) cannot be used"
        ):
            await runtime().advance(sample, {}, input_responses={"s": bad})
        with pytest.raises(
            InvalidInputResponse, match=r"the answer to 's' \(the .*\) cannot be used"
        ):
            await run_live(sample, {}, lambda key, request, bad=bad: bad)
