"""The testing kit itself: strategies, answer scripts, the era and replay checks, the
recorded-state replayer and the pytest fixtures."""

from __future__ import annotations

import subprocess
import sys
import time
from typing import Any

import pytest
from hypothesis import find, given, settings
from hypothesis import strategies as st

from mrtr_trio import (
    Context,
    CreateMessageResult,
    ElicitRequest,
    ElicitResult,
    InputRequired,
    ListRootsResult,
    NondeterminismError,
    Runtime,
    create_message,
    done,
    elicit,
    elicit_url,
    list_roots,
    parse_answer,
    pause,
    step,
)
from mrtr_trio._schema import check_schema, content_problems
from mrtr_trio._values import content_problems_for
from mrtr_trio.testing import (
    TEST_KEY,
    AnswerScript,
    RecordedState,
    ReplayCheckError,
    Runner,
    assert_all_continue,
    assert_eras_agree,
    replay_recorded,
    run_live,
    run_modern,
)
from mrtr_trio.testing import strategies as mst

from . import flows
from .flows import CONFIRM, happy_answer

# ------------------------------------------------------------------------------ strategies


@given(mst.schemas(), st.data())
def test_schemas_are_valid_and_form_content_satisfies_them(
    schema: dict[str, Any], data: st.DataObject
) -> None:
    check_schema(schema)
    content = data.draw(mst.form_content(schema))
    assert content_problems(schema, content) == []
    assert set(schema.get("required", ())) <= set(content)


requests = st.one_of(
    mst.schemas().map(lambda schema: elicit("Form?", schema)),
    st.just(elicit_url("Open this", "https://example.com/x")),
    st.integers(1, 100).map(lambda n: create_message("Hi", max_tokens=n)),
    st.just(list_roots()),
)


@given(requests, st.data())
def test_answers_for_gives_answers_the_runtime_accepts(request: Any, data: st.DataObject) -> None:
    answer = data.draw(mst.answers_for(request))
    assert parse_answer(request, answer.to_wire()) == answer  # round-trips through JSON
    assert content_problems_for(request, answer) == []
    if isinstance(answer, ElicitResult):
        has_content = answer.accepted and request.url is None
        assert (answer.content is not None) == has_content
    elif isinstance(answer, ListRootsResult):
        assert all(root.uri.startswith("file:///") for root in answer.roots)
    else:
        assert isinstance(answer, CreateMessageResult)


def test_answers_for_draws_every_action_or_the_ones_asked_for() -> None:
    request = elicit("Sure?", CONFIRM)
    for action in ("accept", "decline", "cancel"):
        find(mst.answers_for(request), lambda answer, action=action: answer.action == action)
    only: list[str] = []

    @settings(max_examples=20)
    @given(mst.answers_for(request, actions=["decline", "cancel"]))
    def collect(answer: ElicitResult) -> None:
        only.append(answer.action)

    collect()
    assert set(only) == {"decline", "cancel"}


@pytest.mark.parametrize(
    ("prop", "values"),
    [
        ({"type": "string", "format": "email", "minLength": 7, "maxLength": 7}, None),
        ({"type": "string", "format": "uri", "maxLength": 3}, None),
        ({"type": "string", "format": "date"}, None),
        ({"type": "string", "format": "date-time", "maxLength": 20}, None),
        ({"type": "string", "format": "date-time", "minLength": 26, "maxLength": 27}, None),
        ({"type": "string", "format": "email", "minLength": 200}, None),
        ({"type": "string", "minLength": 2, "maxLength": 2}, None),
        ({"type": "string", "enum": ["a", "bbb"], "minLength": 2}, {"bbb"}),
        ({"type": "integer", "minimum": 1.5, "maximum": 2.5}, {2}),
        ({"type": "number", "minimum": 3, "maximum": 3}, {3}),
        ({"type": "array", "items": {"enum": ["x"]}, "minItems": 1}, None),
    ],
)
@given(data=st.data())
def test_form_content_respects_tight_bounds(
    prop: dict[str, Any], values: set[Any] | None, data: st.DataObject
) -> None:
    schema = {"type": "object", "properties": {"v": prop}, "required": ["v"]}
    content = data.draw(mst.form_content(schema))
    assert content_problems(schema, content) == []
    if values is not None:
        assert content["v"] in values


@pytest.mark.parametrize(
    "prop",
    [
        {"type": "string", "format": "date", "maxLength": 5},
        {"type": "string", "format": "date-time", "maxLength": 19},
        {"type": "string", "format": "email", "minLength": 255},
        {"type": "string", "minLength": 4, "maxLength": 2},
        {"type": "integer", "minimum": 0.2, "maximum": 0.8},
        {"type": "string", "enum": ["a"], "minLength": 3},
        {"type": "array", "items": {"enum": ["x", "y"]}, "minItems": 3, "maxItems": 2},
    ],
)
def test_unsatisfiable_schemas(prop: dict[str, Any]) -> None:
    required = {"type": "object", "properties": {"v": prop}, "required": ["v"]}
    with pytest.raises(mst.UnsatisfiableSchema, match="'v'"):
        mst.form_content(required)
    # An answer can still decline or cancel, but not accept.
    assert mst.answers_for(elicit("?", required), actions=["decline"]) is not None
    with pytest.raises(ValueError, match="cannot be satisfied"):
        mst.answers_for(elicit("?", required), actions=["accept"])
    with pytest.raises(ValueError, match="no actions"):
        mst.answers_for(elicit("?", CONFIRM), actions=[])


@given(st.data())
def test_an_unsatisfiable_optional_property_is_left_out(data: st.DataObject) -> None:
    schema = {
        "type": "object",
        "properties": {"v": {"type": "string", "format": "date", "maxLength": 5}},
    }
    assert data.draw(mst.form_content(schema)) == {}


def test_answers_for_checks_its_arguments() -> None:
    with pytest.raises(ValueError, match="unknown elicitation actions"):
        mst.answers_for(elicit("?", CONFIRM), actions=["maybe"])
    with pytest.raises(TypeError):
        mst.answers_for("not a request")  # type: ignore[arg-type]


@settings(max_examples=30)
@given(mst.programs(max_rounds=3), mst.answer_functions())
async def test_programs_stay_within_their_round_budget(
    program: mst.Program, answer: AnswerScript
) -> None:
    rt = Runtime([TEST_KEY], replay="strict", max_rounds=3)
    await run_modern(program.run, {"label": "x"}, answer, runtime=rt)
    await run_live(program.run, {"label": "x"}, answer, runtime=rt)
    assert "async def program" in str(program)
    assert mst.program_of(program.run) is program


def test_program_of_refuses_other_handlers() -> None:
    with pytest.raises(TypeError, match="flows"):
        mst.program_of(flows.single_ask)


# ---------------------------------------------------------------------------- answer scripts


def test_answer_scripts_answer_by_key_request_and_occurrence_not_call_order() -> None:
    made: list[tuple[str, str, int]] = []

    def choose(key: str, request: Any, occurrence: int) -> Any:
        made.append((key, request.message, occurrence))
        return ElicitResult("accept" if len(made) % 2 else "decline")

    script = AnswerScript(choose)
    a, b = elicit("A?", CONFIRM), elicit("B?", CONFIRM)
    first = [script("x", a), script("y", b), script("x", a)]
    script.restart()
    second = [script("y", b), script("x", a), script("x", a)]  # another order
    assert [second[1], second[0], second[2]] == first
    assert made == [("x", "A?", 0), ("y", "B?", 0), ("x", "A?", 1)]
    assert len(script.decided) == 3


# ------------------------------------------------------------------- non-determinism caught


async def reads_the_clock(ctx: Context):
    first = yield elicit(f"Started at {time.monotonic_ns()} ns. Go on?", CONFIRM)
    second = yield elicit("And again?", CONFIRM)
    yield done((first.action, second.action))


async def reads_the_clock_later(ctx: Context):
    first = yield elicit("Go on?", CONFIRM)
    second = yield elicit(f"It is {time.monotonic_ns()} ns. Again?", CONFIRM)
    yield done((first.action, second.action))


@pytest.mark.parametrize("replay_check", [True, False])
async def test_assert_eras_agree_catches_a_clock_reading_handler(replay_check: bool) -> None:
    with pytest.raises(AssertionError) as caught:
        await assert_eras_agree(reads_the_clock, {}, happy_answer, replay_check=replay_check)
    message = str(caught.value)
    assert "reads_the_clock" in message and "round 1" in message
    live, modern = message.split("live asked ")[1].split("; modern asked ")
    assert '"method": "elicitation/create"' in live and "Started at" in live
    assert '"method": "elicitation/create"' in modern and "Started at" in modern


async def test_assert_eras_agree_names_the_round_where_the_clock_is_read() -> None:
    with pytest.raises(AssertionError, match=r"round 2: live asked .*It is \d+ ns") as caught:
        await assert_eras_agree(reads_the_clock_later, {}, happy_answer)
    assert "modern asked" in str(caught.value)


async def test_run_modern_replay_check_catches_a_clock_reading_handler() -> None:
    with pytest.raises(NondeterminismError, match="round 1"):  # strict replay, one round on
        await run_modern(reads_the_clock, {}, happy_answer)
    with pytest.raises(ReplayCheckError) as caught:
        await run_modern(reads_the_clock, {}, happy_answer, replay_check=True)
    error = caught.value
    assert error.round == 1
    asked = error.expected["input-0"]["params"]["message"]
    replayed = error.current["input-0"]["params"]["message"]
    assert asked != replayed and asked.startswith("Started at") and replayed.startswith("Started")
    assert "round 1" in str(error) and asked in str(error) and replayed in str(error)


async def test_run_modern_replay_check_catches_state_kept_in_process_memory() -> None:
    visits: dict[str, int] = {}

    async def remembers(ctx: Context, user: str):
        visits[user] = visits.get(user, 0) + 1  # memory that a fresh process would not have
        yield pause()
        ok = yield elicit(f"Visit {visits[user]}: confirm?", CONFIRM)
        yield done(ok.action)

    with pytest.raises(ReplayCheckError, match="round 2") as caught:
        await run_modern(remembers, {"user": "ada"}, happy_answer, replay_check=True)
    # Round 1 paused (its replay reaches the pause); round 2 asked "Visit 3", its replay "Visit 4".
    assert "Visit 3" in str(caught.value) and "Visit 4" in str(caught.value)


async def test_replay_checks_pass_deterministic_flows_and_run_no_extra_steps() -> None:
    calls: list[int] = []

    def record(n: int) -> int:
        calls.append(n)
        return n

    async def stepper(ctx: Context):
        a = yield step(record, 1)
        yield pause()
        b = yield step(record, 2)
        answers = yield {"x": elicit(f"{a}?", CONFIRM), "y": list_roots()}
        yield pause()
        c = yield step(record, 3)
        yield done((a, b, c, answers["x"].action))

    assert await run_modern(stepper, {}, happy_answer, replay_check=True) == (1, 2, 3, "accept")
    assert calls == [1, 2, 3]
    await run_modern(
        flows.return_chunked_sum, {"numbers": [1, 2, 3]}, happy_answer, replay_check=True
    )
    await run_modern(flows.return_confirm, {}, happy_answer, replay_check=True)


async def test_assert_eras_agree_compares_values_and_errors() -> None:
    async def era_in_value(ctx: Context):
        ok = yield elicit("Sure?", CONFIRM)
        yield done((ok.action, ctx.era))

    with pytest.raises(AssertionError, match="different values: live \\('accept', 'legacy'\\)"):
        await assert_eras_agree(era_in_value, {}, happy_answer)

    async def fails_live(ctx: Context):
        ok = yield elicit("Sure?", CONFIRM)
        if ctx.era == "legacy":
            raise RuntimeError("only live")
        yield done(ok.action)

    with pytest.raises(AssertionError, match="live raised RuntimeError: only live, but modern"):
        await assert_eras_agree(fails_live, {}, happy_answer)

    async def fails_always(ctx: Context):
        yield elicit("Sure?", CONFIRM)
        raise KeyError("both")

    with pytest.raises(KeyError, match="both") as caught:
        await assert_eras_agree(fails_always, {}, happy_answer)
    assert "both eras raised KeyError" in caught.value.__notes__[0]


async def test_assert_eras_agree_compares_what_each_round_asks() -> None:
    async def batches_live_only(ctx: Context):
        if ctx.era == "legacy":
            both = yield {"a": elicit("A?", CONFIRM), "b": elicit("B?", CONFIRM)}
            yield done((both["a"].action, both["b"].action))
        a = yield {"a": elicit("A?", CONFIRM)}
        b = yield {"b": elicit("B?", CONFIRM)}
        yield done((a["a"].action, b["b"].action))

    with pytest.raises(AssertionError, match=r"round 1: live asked \{\"a\".*\"b\".*modern asked"):
        await assert_eras_agree(batches_live_only, {}, happy_answer)


@pytest.mark.parametrize(
    ("handler", "arguments"),
    [
        (flows.single_ask, {"who": "Ada"}),
        (flows.batch_of_three, {}),
        (flows.wizard, {"title": "Setup"}),
        (flows.with_pause, {"n": 3}),
        (flows.with_step, {}),
        (flows.return_confirm, {"action": "ship"}),
        (flows.return_chunked_sum, {"numbers": [1, 2, 3, 4, 5]}),
    ],
)
async def test_the_example_flows_agree(
    mrtr_run: Runner, handler: Any, arguments: Any, autojump_clock: Any
) -> None:
    await mrtr_run.assert_eras_agree(handler, arguments, happy_answer)


async def test_both_eras_get_the_same_step_values() -> None:
    flows.STEP_CALLS.clear()
    assert await assert_eras_agree(flows.with_step, {}, happy_answer) == "T-1 filed=True"
    assert flows.STEP_CALLS == ["T"]  # run once, by the modern era; live got its value
    with pytest.raises(AssertionError, match=r"round 1: live asked .*T-3.*modern asked .*T-2"):
        await assert_eras_agree(flows.with_step, {}, happy_answer, same_steps=False)


@given(st.data())
async def test_answer_functions_drive_a_users_handler(data: st.DataObject) -> None:
    answer = data.draw(mst.answer_functions())
    value = await assert_eras_agree(flows.decline_or_cancel, {}, answer)
    assert value.startswith(("accepted", "declined", "cancelled"))


# -------------------------------------------------------------------- recorded-state replayer

version = {"question": "Deploy to staging?"}


async def deploy(ctx: Context, service: str):
    ok = yield elicit(version["question"], CONFIRM)
    if not ok.accepted:
        yield done("cancelled")
    ticket = yield step(lambda: f"T-{service}")
    yield pause()
    notes = yield {"notes": create_message(f"Notes for {service}", max_tokens=50)}
    yield done(f"{service} {ticket}: {notes['notes'].text}")


async def recorded_flow(rt: Runtime) -> list[RecordedState]:
    """Tokens a server running ``deploy`` would have handed out, one per round."""
    saved: list[RecordedState] = []

    def on_round(_: int, outcome: Any) -> None:
        if isinstance(outcome, InputRequired):
            saved.append(RecordedState(outcome.request_state, {"service": "api"}, label="deploy"))

    await run_modern(deploy, {"service": "api"}, happy_answer, runtime=rt, on_round=on_round)
    return saved


async def test_recorded_tokens_continue_on_unchanged_code() -> None:
    version["question"] = "Deploy to staging?"
    saved = await recorded_flow(Runtime([TEST_KEY]))
    assert len(saved) == 3  # the question, the pause, the notes
    reports = await replay_recorded(deploy, saved, keys=[TEST_KEY])
    assert [r.status for r in reports] == ["continues"] * 3
    assert_all_continue(reports)
    assert "continues to its pending ask" in str(reports[0])
    assert "Deploy to staging?" in str(reports[0])
    assert "passes its pause(), then asks" in str(reports[1]) and "Notes for api" in str(reports[1])
    assert reports[2].current_request["notes"]["method"] == "sampling/createMessage"


async def test_a_changed_handler_is_reported_with_round_and_both_requests() -> None:
    version["question"] = "Deploy to staging?"
    saved = await recorded_flow(Runtime([TEST_KEY]))
    version["question"] = "Deploy to production?"  # the deploy under test changes the question
    try:
        reports = await replay_recorded(deploy, saved, keys=[TEST_KEY])
    finally:
        version["question"] = "Deploy to staging?"
    assert [r.status for r in reports] == ["diverged"] * 3
    first = reports[0]
    assert (first.round, first.yield_index) == (1, 0)
    assert first.recorded_request.startswith("'input-0' (elicitation/create ")
    assert first.current_request["input-0"]["params"]["message"] == "Deploy to production?"
    text = str(first)
    assert "round 1" in text and "'input-0' (elicitation/create" in text
    assert "Deploy to production?" in text and "(deploy)" in text
    with pytest.raises(AssertionError, match="3 of 3 recorded flow"):
        assert_all_continue(reports)


async def test_recorded_tokens_that_do_not_verify_or_fail() -> None:
    saved = await recorded_flow(Runtime([TEST_KEY]))
    other_key = await replay_recorded(deploy, saved[:1], keys=[b"x" * 32])
    assert other_key[0].status == "invalid" and "not in the keyring" in other_key[0].detail
    assert "does not verify" in str(other_key[0])
    moved = RecordedState(saved[0].request_state, {"service": "web"})
    rebound = await replay_recorded(deploy, [moved], keys=[TEST_KEY])
    assert rebound[0].status == "invalid" and "bound to another call" in rebound[0].detail

    async def deploy_broken(ctx: Context, service: str):
        raise RuntimeError("boom")
        yield

    deploy_broken.__qualname__ = "deploy"  # same identity, new (broken) body
    broken = await replay_recorded(deploy_broken, saved[:1], keys=[TEST_KEY])
    assert broken[0].status == "failed" and "RuntimeError: boom" in str(broken[0])


async def test_expired_tokens_still_replay() -> None:
    class Clock:
        now = 1_800_000_000.0

        def __call__(self) -> float:
            return self.now

    clock = Clock()
    rt = Runtime([TEST_KEY], ttl=60, clock=clock)
    saved = await recorded_flow(rt)
    clock.now += 7 * 86400  # a week later
    reports = await replay_recorded(deploy, saved, runtime=rt)
    assert all(r.ok for r in reports)


async def test_a_token_at_a_pause_stops_before_new_steps() -> None:
    calls: list[str] = []

    async def paused(ctx: Context):
        yield pause()
        yield step(calls.append, "side effect")
        yield done("ok")

    rt = Runtime([TEST_KEY])
    first = await rt.advance(paused, {})
    assert isinstance(first, InputRequired) and first.request_state
    reports = await replay_recorded(paused, [RecordedState(first.request_state)], runtime=rt)
    assert reports[0].ok and reports[0].detail.startswith("runs step")
    assert calls == []


async def test_return_style_tokens_are_verified_and_read() -> None:
    rt = Runtime([TEST_KEY])
    first = await rt.advance(flows.return_confirm, {"action": "ship"})
    assert isinstance(first, InputRequired) and first.request_state
    chunked = await rt.advance(flows.return_chunked_sum, {"numbers": [1, 2, 3]})
    assert isinstance(chunked, InputRequired) and chunked.request_state
    reports = await replay_recorded(
        flows.return_confirm, [RecordedState(first.request_state, {"action": "ship"})], runtime=rt
    )
    assert reports[0].ok and "Really ship?" in str(reports[0])
    reports = await replay_recorded(
        flows.return_chunked_sum,
        [RecordedState(chunked.request_state, {"numbers": [1, 2, 3]})],
        runtime=rt,
    )
    assert reports[0].ok


def test_recorded_states_have_a_json_form() -> None:
    record = RecordedState("token", {"a": [1, "b"]}, b"\x00bind\xff", "label")
    assert RecordedState.from_json(record.to_json()) == record
    assert RecordedState.from_json({"requestState": "t"}) == RecordedState("t")


async def test_replay_recorded_needs_keys_or_a_runtime() -> None:
    with pytest.raises(TypeError, match="keys"):
        await replay_recorded(deploy, [])
    with pytest.raises(TypeError, match="handler"):
        await replay_recorded(lambda: None, [], keys=[TEST_KEY])


# ---------------------------------------------------------------------------- the fixtures


def test_the_fixtures_give_a_strict_runtime_with_the_test_key(
    mrtr_runtime: Runtime, mrtr_run: Runner, mrtr_keys: list[bytes]
) -> None:
    assert mrtr_keys == [TEST_KEY] and len(TEST_KEY) >= 32
    assert mrtr_runtime.replay == "strict"
    assert mrtr_run.runtime is mrtr_runtime and mrtr_run.replay_check


async def test_the_runner_fixture_runs_both_eras_and_checks_replays(mrtr_run: Runner) -> None:
    assert await mrtr_run.run_live(flows.single_ask, {}, happy_answer) == "Hello, name-value!"
    assert await mrtr_run.run_modern(flows.single_ask, {}, happy_answer) == "Hello, name-value!"
    with pytest.raises(ReplayCheckError):
        await mrtr_run.run_modern(reads_the_clock, {}, happy_answer)
    with pytest.raises(NondeterminismError):
        await mrtr_run.run_modern(reads_the_clock, {}, happy_answer, replay_check=False)
    saved: list[RecordedState] = []

    async def keep(_: int, outcome: Any) -> None:
        if isinstance(outcome, InputRequired):
            saved.append(RecordedState(outcome.request_state, {"who": "Ada"}))

    await mrtr_run.run_modern(flows.single_ask, {"who": "Ada"}, happy_answer, on_round=keep)
    assert_all_continue(await mrtr_run.replay_recorded(flows.single_ask, saved))


# ------------------------------------------------------------------ answers a token must hold


async def test_answers_with_integers_beyond_64_bits_survive_a_round() -> None:
    schema = {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}

    async def two_numbers(ctx: Context):
        a = yield elicit("First?", schema)
        b = yield elicit("Second?", schema)
        yield done(a.content["n"] + b.content["n"])

    def big(key: str, request: ElicitRequest) -> Any:
        return {"action": "accept", "content": {"n": 2**70}}

    assert await run_modern(two_numbers, {}, big) == 2**71


def test_strategies_without_hypothesis_name_the_extra() -> None:
    code = (
        "import sys; sys.modules['hypothesis'] = None\nfrom mrtr_trio.testing import strategies\n"
    )
    ran = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert ran.returncode != 0
    assert "needs hypothesis: install mrtr_trio's test extra" in ran.stderr, ran.stderr
    assert "pip install -e '.[test]'" in ran.stderr
