"""The replay rules on the state machine alone: no handler runs, no trio, no token.

Each test tells a [Replay][mrtr_trio._replay.Replay] machine what a handler would have yielded
and checks what it answers, as h11's tests drive its Connection with events.
"""

from __future__ import annotations

import contextlib
import logging
import re
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mrtr_trio import (
    Complete,
    InvalidInputResponse,
    MissingCapability,
    MrtrError,
    NondeterminismError,
    PollTimeout,
    RoundLimitExceeded,
    done,
    elicit,
    list_roots,
    parse_answer,
    poll,
    step,
)
from mrtr_trio._flow import PAUSE, Ask
from mrtr_trio._journal import (
    PAUSED,
    Answered,
    AnsweredOne,
    Cursor,
    Journal,
    Pending,
    PendingOne,
    PendingPoll,
    StepResult,
    answers,
)
from mrtr_trio._journal import step_fingerprint as step_fp
from mrtr_trio._replay import (
    _UNOWNED,
    ASKING,
    ERROR,
    FAILED,
    FINISHED,
    LIVE,
    OWNS,
    PENDING,
    PUSHED,
    REPLAYING,
    TRANSITIONS,
    UNMATCHED,
    WAITING,
    Feed,
    OneRequest,
    Replay,
    Rules,
    RunPoll,
    RunStep,
    Suspend,
    _mark,
)
from mrtr_trio._values import ElicitResult

from .machine_checks import FLOW_RECORD, strays

NAME = {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}
YES = {"type": "object", "properties": {"ok": {"type": "boolean"}}, "required": ["ok"]}
ASK_NAME = elicit("Name?", NAME)
ASK_YES = elicit("Sure?", YES)
ADA = {"action": "accept", "content": {"name": "Ada"}}
OK = {"action": "accept", "content": {"ok": True}}


def lookup() -> str:
    return "looked up"


def ready() -> str | None:
    return None


STEP = step(lookup)
POLL = poll(ready, every=2.0, timeout=10.0)


def single(key: str, request: Any) -> Ask:
    return Ask({key: request})


def answered(key: str, request: Any, json: Any) -> Answered:
    return Answered({key: request.fingerprint}, {key: ElicitResult("accept", json["content"])})


FIRST_CALL = Cursor(flow_id=b"flow-id!")


def modern(cursor: Cursor = FIRST_CALL, responses: Any = None, **rules: Any) -> Replay:
    return Replay("flow", Rules(8, record=True, **rules), cursor, responses)


def live(**rules: Any) -> Replay:
    return Replay("flow", Rules(8, free_pauses=True, **rules))


# ------------------------------------------------------------------------------- live


def test_live_ask_suspends_and_answers_feed_the_handler() -> None:
    machine = live()
    assert machine.phase is LIVE and not machine.is_replaying
    action = machine.next(single("input-0", ASK_NAME))
    assert action == Suspend({"input-0": ASK_NAME})
    assert machine.phase is ASKING and machine.rounds == 1
    fed = machine.answered({"input-0": ADA, "unknown": 1})
    assert fed == Feed({"input-0": ElicitResult("accept", {"name": "Ada"})})
    assert machine.phase is LIVE


def test_steps_run_and_their_values_come_back_normalised() -> None:
    machine = live()
    assert machine.next(STEP) == RunStep(STEP)
    assert machine.ran((1, "two")) == Feed([1, "two"])  # as a token would read it back
    assert machine.next(done("v")) == Complete("v")
    assert machine.phase is FINISHED


def test_a_live_pause_is_free_but_a_modern_one_is_a_round() -> None:
    machine = live()
    assert machine.next(PAUSE) == Feed({})
    assert machine.rounds == 0
    modern_machine = modern()
    assert modern_machine.next(PAUSE) == Suspend({})
    assert modern_machine.rounds == 1
    assert modern_machine.checkpoint().pending == Pending({})


def test_schema_invalid_answers_are_asked_again_saying_why() -> None:
    machine = live()
    machine.next(single("input-0", ASK_YES))
    again = machine.answered({"input-0": {"action": "accept", "content": {"ok": "yes"}}})
    assert isinstance(again, Suspend)
    assert "'ok' must be a boolean" in again.problems["input-0"]
    asked = again.requests["input-0"]
    assert asked.message.startswith("Sure?\n\n(The previous answer was not accepted: ")
    assert asked.schema == YES
    assert machine.rounds == 2


def test_a_batch_keeps_valid_answers_and_asks_only_for_the_rest() -> None:
    machine = modern()
    batch = Ask({"a": ASK_NAME, "b": ASK_YES})
    assert machine.next(batch) == Suspend(batch.requests)
    again = machine.answered({"a": ADA})
    assert again == Suspend({"b": ASK_YES})
    cursor = machine.checkpoint()
    assert cursor.pending == Pending(
        batch.fingerprints, {"a": ElicitResult("accept", {"name": "Ada"})}
    )
    fed = machine.answered({"b": OK})
    assert isinstance(fed, Feed) and set(fed.value) == {"a", "b"}


def test_malformed_answers_are_protocol_errors_and_end_the_machine() -> None:
    machine = live()
    machine.next(single("input-0", ASK_NAME))
    with pytest.raises(InvalidInputResponse, match=r"'input-0' \(the .*\) is malformed"):
        machine.answered({"input-0": {"action": "maybe"}})
    assert machine.phase is ERROR
    with pytest.raises(MrtrError, match="phase ERROR"):
        machine.next(done(1))


def test_the_round_limit_names_the_last_problem() -> None:
    machine = Replay("flow", Rules(1))
    machine.next(single("input-0", ASK_YES))
    with pytest.raises(RoundLimitExceeded, match=r"after 1 rounds.*'input-0'.*must be a boolean"):
        machine.answered({"input-0": {"action": "accept", "content": {"ok": 3}}})


def test_missing_capabilities_are_refused_before_asking() -> None:
    machine = Replay("flow", Rules(8), client_capabilities={"elicitation": {}})
    with pytest.raises(MissingCapability) as caught:
        machine.next(single("input-0", list_roots()))
    assert caught.value.required_capabilities == {"roots": {}}
    assert machine.rounds == 0


def test_push_style_asks_do_not_disturb_the_flow() -> None:
    machine = live()
    assert machine.push({"push-0": ASK_NAME}) == Suspend({"push-0": ASK_NAME})
    assert isinstance(machine.answered({"push-0": ADA}), Feed)
    assert machine.phase is LIVE
    assert machine.next(done(1)) == Complete(1)


def test_a_push_style_ask_from_a_running_step_or_poll_leaves_it_running() -> None:
    # A step's (or a poll's) function may ask the client itself on a live session: the step
    # it runs is still LIVE's data under the ask, and its value comes back after.
    machine = live()
    assert machine.next(STEP) == RunStep(STEP)
    machine.push({"push-0": ASK_NAME})
    assert isinstance(machine.answered({"push-0": ADA}), Feed)
    assert machine.ran(1) == Feed(1)
    machine.next(POLL)
    machine.polled(None, 0.0)
    assert machine.answered({}) == RunPoll(POLL)
    machine.push({"push-1": ASK_NAME})
    machine.abandon()
    with pytest.raises(PollTimeout):  # (its deadline was kept too)
        machine.polled(None, 11.0)


def test_an_abandoned_push_style_ask_leaves_the_flow_live() -> None:
    # The client's error or a timeout: the handler may catch it and carry on.
    machine = live()
    machine.push({"push-0": ASK_NAME})
    machine.abandon()
    assert machine.phase is LIVE
    assert isinstance(machine.next(single("input-0", ASK_YES)), Suspend)
    # A malformed answer: the machine's own error, which the handler may catch too.
    machine = live()
    machine.push({"push-0": ASK_NAME})
    with pytest.raises(InvalidInputResponse):
        machine.answered({"push-0": {"action": "maybe"}})
    machine.abandon()
    assert machine.phase is LIVE
    assert machine.next(done(1)) == Complete(1)
    # An ordinary ask's malformed answer still ends the flow.
    machine = live()
    machine.next(single("input-0", ASK_NAME))
    with pytest.raises(InvalidInputResponse):
        machine.answered({"input-0": {"action": "maybe"}})
    assert machine.phase is ERROR
    with pytest.raises(MrtrError, match="got 'push-style ask abandoned' in phase LIVE"):
        live().abandon()


def test_answers_out_of_turn_are_a_bug_the_machine_names() -> None:
    machine = live()
    with pytest.raises(MrtrError, match="got answers in phase LIVE"):
        machine.answered({})


def test_a_live_request_of_its_own_is_asked_and_answered_with_no_mapping_built() -> None:
    # The commonest live round: a request yielded alone is held as its key and itself.
    machine = live()
    action = machine.next(ASK_NAME)
    assert action == Suspend({"input-0": ASK_NAME})
    one = action.requests
    assert type(one) is OneRequest and (one.key, one.request) == ("input-0", ASK_NAME)
    assert machine.phase is ASKING and machine.rounds == 1
    assert machine.answered_one(ADA) == Feed(ElicitResult("accept", {"name": "Ada"}))
    assert machine.phase is LIVE
    # The next one gets the next key; the mapping answers `answered` as a dict would.
    assert machine.next(ASK_YES) == Suspend({"input-1": ASK_YES})
    assert machine.answered({"other": OK}) == Suspend({"input-1": ASK_YES})  # unanswered
    assert machine.rounds == 3
    assert machine.answered({"input-1": OK}) == Feed(ElicitResult("accept", {"ok": True}))


def test_one_request_is_a_mapping_of_one() -> None:
    one = OneRequest("k", ASK_NAME)
    assert one == {"k": ASK_NAME} and {"k": ASK_NAME} == one and one != {"k": ASK_YES}  # noqa: SIM300
    assert len(one) == 1 and list(one) == ["k"] and dict(one) == {"k": ASK_NAME}
    assert "k" in one and "j" not in one and one.get("j") is None
    with pytest.raises(KeyError):
        one["j"]
    assert repr(one) == repr({"k": ASK_NAME})


def test_a_live_request_of_its_own_is_asked_again_saying_why_within_the_round_limit() -> None:
    machine = Replay("flow", Rules(2, free_pauses=True))
    machine.next(ASK_YES)
    again = machine.answered_one({"action": "accept", "content": {"ok": "yes"}})
    assert isinstance(again, Suspend) and type(again.requests) is OneRequest
    assert "'ok' must be a boolean" in again.problems["input-0"]
    asked = again.requests["input-0"]
    assert asked.message.startswith("Sure?\n\n(The previous answer was not accepted: ")
    assert asked.schema == YES and machine.rounds == 2
    # What is checked is the request as the handler yielded it, not the explained copy.
    with pytest.raises(RoundLimitExceeded, match=r"after 2 rounds.*'input-0'.*must be a boolean"):
        machine.answered_one({"action": "accept", "content": {"ok": 3}})
    assert machine.phase is ERROR


def test_a_live_request_of_its_own_checks_capabilities_and_malformed_answers() -> None:
    machine = Replay("flow", Rules(8), client_capabilities={"elicitation": {}})
    with pytest.raises(MissingCapability) as caught:
        machine.next(list_roots())
    assert caught.value.required_capabilities == {"roots": {}}
    assert machine.rounds == 0 and machine.phase is ERROR
    machine = live()
    machine.next(ASK_NAME)
    with pytest.raises(InvalidInputResponse, match=r"'input-0' \(the .*\) is malformed"):
        machine.answered_one({"action": "maybe"})
    assert machine.phase is ERROR


def test_one_answer_out_of_turn_is_a_bug_the_machine_names() -> None:
    with pytest.raises(MrtrError, match="got one answer in phase LIVE"):
        live().answered_one(ADA)
    machine = live()
    machine.next(Ask({"a": ASK_NAME, "b": ASK_YES}))  # a batch is answered as a mapping
    with pytest.raises(MrtrError, match="got one answer in phase ASKING"):
        machine.answered_one(ADA)


def test_a_journaled_request_of_its_own_takes_the_same_path() -> None:
    # Where the answer is journaled (modern), a request of its own is asked as a OneRequest
    # too: the checkpoint holds its fingerprint under its key, and its answer is journaled.
    machine = modern()
    action = machine.next(ASK_NAME)
    assert action == Suspend({"input-0": ASK_NAME}) and type(action.requests) is OneRequest
    assert machine.checkpoint().pending == PendingOne(ASK_NAME.fingerprint)
    assert machine.answered_one(ADA) == Feed(parse_answer(ASK_NAME, ADA))
    assert list(machine.so_far().journal) == [
        AnsweredOne("input-0", ASK_NAME.fingerprint, parse_answer(ASK_NAME, ADA))
    ]


# ----------------------------------------------------------------------------- modern


def test_a_first_call_answers_its_first_ask_from_the_calls_responses() -> None:
    machine = modern(responses={"input-0": ADA})
    assert not machine.is_replaying
    assert machine.next(STEP) == RunStep(STEP)  # steps before the first ask run
    machine.ran("looked up")
    assert isinstance(machine.next(single("input-0", ASK_NAME)), Feed)
    assert machine.next(single("input-1", ASK_YES)) == Suspend({"input-1": ASK_YES})
    cursor = machine.checkpoint()
    assert [type(e) for e in cursor.journal] == [StepResult, Answered]
    assert cursor.pending == Pending({"input-1": ASK_YES.fingerprint})
    assert cursor.rounds == 1


def test_replay_feeds_the_journal_then_the_pending_ask_reads_the_responses() -> None:
    journal = (answered("input-0", ASK_NAME, ADA), StepResult(step_fp(lookup), "recorded"))
    cursor = Cursor(Journal(journal), Pending({"input-1": ASK_YES.fingerprint}), rounds=1)
    machine = modern(cursor, {"input-1": OK})
    assert machine.phase is REPLAYING and machine.is_replaying
    assert machine.next(single("input-0", ASK_NAME)) == Feed(
        {"input-0": ElicitResult("accept", {"name": "Ada"})}
    )
    assert machine.next(STEP) == Feed("recorded")  # the step is not run again
    assert machine.phase is PENDING and machine.is_replaying
    assert machine.next(single("input-1", ASK_YES)) == Feed(
        {"input-1": ElicitResult("accept", {"ok": True})}
    )
    assert machine.phase is LIVE and not machine.is_replaying
    assert machine.next(done("end")) == Complete("end")


def test_strict_divergence_names_the_round_the_yield_and_both_requests() -> None:
    cursor = Cursor(Journal((PAUSED, answered("input-0", ASK_NAME, ADA))), Pending({}), rounds=2)
    machine = modern(cursor, strict=True)
    machine.next(PAUSE)
    with pytest.raises(NondeterminismError) as caught:
        machine.next(single("input-0", ASK_YES))
    error = caught.value
    assert (error.handler, error.round, error.yield_index) == ("flow", 2, 1)
    assert error.recorded.startswith("'input-0' (elicitation/create ")
    assert error.current["input-0"]["params"]["message"] == "Sure?"
    assert machine.phase is ERROR


def test_reask_divergence_drops_the_rest_of_the_journal_and_asks(
    caplog: pytest.LogCaptureFixture,
) -> None:
    cursor = Cursor(
        Journal((answered("input-0", ASK_NAME, ADA), PAUSED)),
        PendingOne(b"\0\1\2\3\4\5\6\7\7"),
        2,
    )
    machine = modern(cursor, {"input-1": OK})
    machine.next(single("input-0", ASK_NAME))
    with caplog.at_level(logging.WARNING, logger="mrtr_trio"):
        action = machine.next(single("input-1", ASK_YES))
    assert "diverged from its recorded flow at round 2, yield #1" in caplog.text
    assert action == Suspend({"input-1": ASK_YES})  # the answers in hand were for another ask
    cursor = machine.checkpoint()
    assert tuple(cursor.journal) == (answered("input-0", ASK_NAME, ADA),)


def test_finishing_early_is_a_divergence() -> None:
    cursor = Cursor(Journal((answered("input-0", ASK_NAME, ADA),)), Pending({}), 1)
    with pytest.raises(NondeterminismError, match="now it finished"):
        modern(cursor, strict=True).next(done(1))


def test_return_style_checkpoints_carry_their_requests_and_payload() -> None:
    machine = Replay("flow", Rules(8), replayable=False)
    action = machine.next(Ask({"k": ASK_NAME}, payload={"step": 1}))
    assert action == Suspend({"k": ASK_NAME})
    cursor = machine.checkpoint()
    assert cursor.pending == Pending({"k": ASK_NAME.fingerprint}, {}, {"k": ASK_NAME})
    assert cursor.payload == {"step": 1} and not cursor.journal


# ------------------------------------------------------------------------------- poll


def test_poll_waits_in_state_only_rounds_that_cost_no_round() -> None:
    machine = modern()
    assert machine.next(POLL) == RunPoll(POLL)
    assert machine.polled(None, 1000.0) == Suspend({}, retry_after=2.0)
    assert machine.rounds == 0
    cursor = machine.checkpoint()
    assert cursor.pending == PendingPoll(step_fp(ready), 1010)
    resumed = modern(cursor)
    assert resumed.next(POLL) == RunPoll(POLL)  # the condition is checked once per round
    assert resumed.polled("approved", 1005.0) == Feed("approved")
    assert resumed.next(done(1)) == Complete(1)


def test_poll_times_out_after_its_deadline() -> None:
    cursor = Cursor(Journal(), PendingPoll(step_fp(ready), 1010))
    machine = modern(cursor)
    machine.next(POLL)
    with pytest.raises(PollTimeout, match=r"ready.*10 s"):
        machine.polled(None, 1010.0)


def test_live_poll_polls_again_after_each_turn() -> None:
    machine = live()
    machine.next(POLL)
    assert machine.polled(None, 0.0) == Suspend({}, retry_after=2.0)
    assert machine.answered({}) == RunPoll(POLL)
    assert machine.polled(None, 2.0) == Suspend({}, retry_after=2.0)
    assert machine.answered({}) == RunPoll(POLL)
    assert machine.polled(7, 4.0) == Feed(7)


def test_a_recorded_poll_replays_without_polling() -> None:
    cursor = Cursor(Journal((StepResult(step_fp(ready), "done"),)), Pending({}), 1)
    machine = modern(cursor)
    assert machine.next(POLL) == Feed("done")


# -------------------------------------------------------------------------- the table


def test_every_phase_is_in_the_table_and_reachable_from_a_start() -> None:
    starts = {REPLAYING, PENDING, LIVE}
    reached = set(starts)
    frontier = list(starts)
    while frontier:
        for target in TRANSITIONS[frontier.pop()].values():
            if target not in reached:
                reached.add(target)
                frontier.append(target)
    assert reached | {ERROR} == set(TRANSITIONS)


def test_a_machine_only_moves_along_the_table() -> None:
    # Walk a flow that uses every kind of need; every _go() call looks its event up in the
    # table, so a move missing from it would raise here.
    cursor = Cursor(
        Journal((answered("input-0", ASK_NAME, ADA),)), PendingOne(ASK_YES.fingerprint), 1
    )
    machine = modern(cursor, {"input-1": {"action": "accept", "content": {"ok": "x"}}})
    machine.next(single("input-0", ASK_NAME))
    assert isinstance(machine.next(single("input-1", ASK_YES)), Suspend)
    assert isinstance(machine.answered({"input-1": OK}), Feed)
    machine.next(STEP)
    machine.ran(1)
    machine.next(POLL)
    machine.polled(None, 0.0)
    machine.answered({})
    machine.polled(2, 1.0)
    assert machine.next(done(3)) == Complete(3)


def test_every_phase_change_is_a_move_of_the_table() -> None:
    # The machine's phase is assigned in two places only: its start, and `_go`, which looks
    # the move up in TRANSITIONS (ERROR included: an error is the "error" move).
    import inspect

    from mrtr_trio import _replay

    source = inspect.getsource(_replay)
    assignments = [
        line.strip() for line in source.splitlines() if re.search(r"self\.phase\b.* = ", line)
    ]
    assert assignments == [
        "self.phase = REPLAYING",
        "self.phase = PENDING",
        "self.phase = LIVE",
        "self.phase, cleared = _MOVES[self.phase][event]",
    ]
    # _MOVES is TRANSITIONS, with what each move clears.
    assert {p: {e: t for e, (t, _) in m.items()} for p, m in _replay._MOVES.items()} == TRANSITIONS
    assert all(FAILED in moves for phase, moves in TRANSITIONS.items() if phase is not ERROR)


def test_a_move_the_table_does_not_list_raises_and_ends_the_flow() -> None:
    machine = live()
    with pytest.raises(MrtrError, match="got 'turn over, poll again' in phase LIVE"):
        machine._go("turn over, poll again")
    assert machine.phase is ERROR
    with pytest.raises(MrtrError, match="got 'done' in phase ERROR"):
        machine._go("done")
    assert machine.phase is ERROR


def test_suspended_turns_are_phases_of_their_own() -> None:
    asking = live()
    asking.next(ASK_NAME)
    assert asking.phase is ASKING
    waiting = live()
    waiting.next(POLL)
    waiting.polled(None, 0.0)
    assert waiting.phase is WAITING
    with pytest.raises(MrtrError, match="got one answer in phase WAITING"):
        waiting.answered_one(ADA)
    pushed = live()
    pushed.push({"push-0": ASK_NAME})
    assert pushed.phase is PUSHED
    with pytest.raises(MrtrError, match="got a checkpoint in phase PUSHED"):
        pushed.checkpoint()
    assert pushed.phase is PUSHED  # an error in a push-style ask is the handler's to catch
    pushed.abandon()
    assert pushed.phase is LIVE


def test_the_docs_draw_the_phase_diagram_from_the_table() -> None:
    import subprocess
    import sys
    from pathlib import Path

    script = Path(__file__).resolve().parents[1] / "docs" / "scripts" / "phase_diagram.py"
    run = subprocess.run([sys.executable, str(script), "--check"], capture_output=True, text=True)
    assert run.returncode == 0, run.stderr


def test_the_docs_diagram_shows_every_move_of_the_table_and_no_other() -> None:
    from pathlib import Path

    page = (Path(__file__).resolve().parents[1] / "docs" / "replay.md").read_text()
    drawn = re.findall(r"^    (\w+) --> (\w+): (.+)$", page, re.MULTILINE)
    moves = [(repr(p), repr(t), e) for p, m in TRANSITIONS.items() for e, t in m.items()]
    assert sorted(drawn) == sorted(moves) and len(moves) == 28


def test_replayed_gives_a_matching_single_answer_and_moves_on_after_the_last() -> None:
    name, yes = ElicitResult("accept", {"name": "Ada"}), ElicitResult("accept", {"ok": True})
    journal = Journal(
        (
            AnsweredOne("input-0", ASK_NAME.fingerprint, name),
            AnsweredOne("input-1", ASK_YES.fingerprint, yes),
        )
    )
    cursor = Cursor(journal, flow_id=b"flow-id!")
    # A changed request (another fingerprint), a batch of one, a step: not replayed here.
    assert modern(cursor).replayed(ASK_YES) is UNMATCHED
    assert modern(cursor).replayed(Ask({"input-0": ASK_NAME})) is UNMATCHED
    assert modern(cursor).replayed(STEP) is UNMATCHED
    # An entry recorded under another key (the n-th request yielded alone is `input-n`).
    moved = Cursor(Journal((AnsweredOne("input-1", ASK_NAME.fingerprint, name), *journal)))
    assert modern(moved).replayed(ASK_NAME) is UNMATCHED
    machine = modern(cursor)
    assert machine.replayed(ASK_NAME) == name and machine.phase is REPLAYING
    # The last entry moves the phase on (nothing is pending here: live).
    assert machine.replayed(ASK_YES) == yes and machine.phase is LIVE
    assert machine.replayed(ASK_NAME) is UNMATCHED
    assert machine.next(ASK_NAME) == Suspend({"input-2": ASK_NAME})  # under the next key
    pending = Cursor(journal, PendingOne(ASK_NAME.fingerprint), flow_id=b"flow-id!")
    machine = modern(pending)
    assert machine.replayed(ASK_NAME) == name and machine.replayed(ASK_YES) == yes
    assert machine.phase is PENDING and machine.is_replaying
    assert live().replayed(ASK_NAME) is UNMATCHED  # nothing to replay live


def test_a_request_yielded_alone_is_journaled_compactly_and_answered_bare() -> None:
    machine = modern(responses={"input-0": ADA})
    fed = machine.next(ASK_NAME)  # a request yielded on its own is named input-0
    assert fed == Feed(ElicitResult("accept", {"name": "Ada"}))  # the answer, not a dict
    assert machine.next(ASK_YES) == Suspend({"input-1": ASK_YES})
    cursor = machine.checkpoint()
    assert tuple(cursor.journal) == (
        AnsweredOne("input-0", ASK_NAME.fingerprint, ElicitResult("accept", {"name": "Ada"})),
    )
    replay = modern(cursor, {"input-1": OK})
    assert replay.next(ASK_NAME) == Feed(ElicitResult("accept", {"name": "Ada"}))
    assert replay.next(ASK_YES) == Feed(ElicitResult("accept", {"ok": True}))
    # The same request asked in a batch of one is another yield: a divergence.
    with pytest.raises(NondeterminismError):
        modern(cursor, strict=True).next(Ask({"input-0": ASK_NAME}))


# ------------------------------------------------------------------------- ownership


def test_every_slot_is_the_flow_record_or_data_a_phase_owns() -> None:
    assert set(Replay.__slots__) == FLOW_RECORD | set(_UNOWNED)
    assert not FLOW_RECORD & set(_UNOWNED)
    assert set(OWNS) == set(TRANSITIONS)
    assert set().union(*OWNS.values()) == set(_UNOWNED)
    assert not OWNS[FINISHED] and not OWNS[ERROR]


_ENTRIES = st.sampled_from(
    [
        answered("input-0", ASK_NAME, ADA),
        AnsweredOne("input-0", ASK_NAME.fingerprint, ElicitResult("accept", {"name": "Ada"})),
        AnsweredOne("input-1", ASK_YES.fingerprint, ElicitResult("accept", {"ok": True})),
        Answered({"a": ASK_NAME.fingerprint}, {"a": ElicitResult("accept", {"name": "Ada"})}),
        StepResult(step_fp(lookup), "looked up"),
        StepResult(step_fp(ready), 1),
        PAUSED,
    ]
)
#: Journals a flow of the inputs below can replay to their end.
_A_FLOW = [
    [AnsweredOne("input-0", ASK_NAME.fingerprint, ElicitResult("accept", {"name": "Ada"}))],
    [StepResult(step_fp(lookup), "looked up"), PAUSED],
    [StepResult(step_fp(ready), 1), answered("input-0", ASK_NAME, ADA)],
]
_PENDING = st.sampled_from(
    [
        None,
        PendingOne(ASK_NAME.fingerprint),
        Pending({"a": ASK_NAME.fingerprint}),
        Pending({}),
        PendingPoll(step_fp(ready), None),
        PendingPoll(step_fp(ready), 5),
    ]
)
_RESPONSES = st.sampled_from(
    [None, {}, {"input-0": ADA, "a": ADA}, {"input-1": OK}, {"a": {"bad": 1}}, {"a": OK}]
)
#: Every input a driver gives a machine, with its arguments.
_INPUTS = (
    ("next", (ASK_NAME,)),
    ("next", (ASK_YES,)),
    ("next", (Ask({"a": ASK_NAME}),)),
    ("next", (PAUSE,)),
    ("next", (STEP,)),
    ("next", (POLL,)),
    ("next", (done(1),)),
    ("replayed", (ASK_NAME,)),
    ("replayed", (ASK_YES,)),
    ("ran", (1,)),
    ("polled", (None,)),
    ("polled", (2,)),
    ("answered", ({},)),
    ("answered", ({"input-0": ADA, "input-1": OK, "a": ADA, "push-0": ADA},)),
    ("answered", ({"a": {"action": "accept", "content": {"name": 3}}},)),
    ("answered", ({"a": "malformed"},)),
    ("answered_one", (ADA,)),
    ("answered_one", (OK,)),
    ("push", ({"push-0": ASK_NAME},)),
    ("abandon", ()),
    ("checkpoint", ()),
    ("so_far", ()),
)

_NEEDS = ("next", "replayed", "so_far")
#: The inputs a driver gives in each phase.
_IN_TURN = {
    REPLAYING: _NEEDS,
    PENDING: _NEEDS,
    LIVE: (*_NEEDS, "ran", "polled", "push"),
    ASKING: ("answered", "answered_one", "checkpoint", "so_far"),
    WAITING: ("answered", "checkpoint", "so_far"),
    PUSHED: ("answered", "abandon"),
}


@settings(max_examples=max(300, settings.default.max_examples))
@given(
    entries=st.one_of(st.lists(_ENTRIES, max_size=3), st.sampled_from(_A_FLOW)),
    pending=_PENDING,
    responses=_RESPONSES,
    knobs=st.fixed_dictionaries(
        {
            "max_rounds": st.integers(1, 4),
            "strict": st.booleans(),
            "free_pauses": st.booleans(),
            "record": st.booleans(),
        }
    ),
    replayable=st.booleans(),
    capabilities=st.sampled_from([None, {}, {"elicitation": {}}]),
    data=st.data(),
)
def test_after_every_input_a_machine_holds_only_what_its_phase_owns(
    entries: list[Any],
    pending: Any,
    responses: Any,
    knobs: dict[str, Any],
    replayable: bool,
    capabilities: Any,
    data: st.DataObject,
) -> None:
    # Any machine, and inputs in any order: mostly those a driver gives in the machine's
    # phase, sometimes any other (out of turn: refused, and the flow ends). Whatever it answers
    # or raises, it never holds data its phase does not own.
    # (The same check runs after every input of every other test: see tests/machine_checks.py.)
    cursor = Cursor(Journal(entries), pending, flow_id=b"flow-id!")
    machine = Replay(
        "flow",
        Rules(**knobs),
        cursor,
        responses,
        replayable=replayable,
        client_capabilities=capabilities,
    )
    assert strays(machine) == {}
    for now in range(14):
        fitting = [i for i in _INPUTS if i[0] in _IN_TURN.get(machine.phase, ())]
        anything = not fitting or data.draw(st.integers(0, 9)) == 0
        name, arguments = data.draw(st.sampled_from(_INPUTS if anything else fitting))
        if name == "polled":  # (a poll's value, and the clock)
            arguments = (*arguments, float(now))
        with contextlib.suppress(MrtrError):  # (refused: out of turn, malformed, ...)
            getattr(machine, name)(*arguments)
        assert strays(machine) == {}, (name, machine.phase)


# ------------------------------------------------------------------------- the one rule


def test_one_rule_decides_which_entry_answers_which_need() -> None:
    one = AnsweredOne("input-0", ASK_NAME.fingerprint, ElicitResult("decline"))
    batch = answered("a", ASK_NAME, ADA)
    result = StepResult(step_fp(ready), 1)
    recorded = {
        "one": one,
        "batch": batch,
        "pause": PAUSED,
        "result": result,
        "pending one": PendingOne(ASK_NAME.fingerprint),
        "pending batch": Pending({"a": ASK_NAME.fingerprint}),
        "pending pause": Pending({}),
        "pending poll": PendingPoll(step_fp(ready), None),
    }
    needs = {
        "one": OneRequest("input-0", ASK_NAME),
        "one, another key": OneRequest("input-1", ASK_NAME),
        "one, another request": OneRequest("input-0", ASK_YES),
        "batch": Ask({"a": ASK_NAME}),
        "batch, another key": Ask({"b": ASK_NAME}),
        "pause": PAUSE,
        "step": step(ready),
        "poll": poll(ready),
        "another step": STEP,
    }
    answered_by = {
        r: sorted(n for n, need in needs.items() if answers(entry, *_mark(need)))
        for r, entry in recorded.items()
    }
    assert answered_by == {
        "one": ["one"],
        "batch": ["batch"],
        "pause": ["pause"],
        "result": ["poll", "step"],  # a step's result replays a step or a poll of it
        "pending one": ["one", "one, another key"],  # (its key is implied by its place)
        "pending batch": ["batch"],
        "pending pause": ["pause"],
        "pending poll": ["poll"],  # only the poll it waits on
    }


def test_a_pending_poll_is_not_answered_by_a_step_of_the_same_function() -> None:
    cursor = Cursor(Journal(), PendingPoll(step_fp(ready), None), 1)
    with pytest.raises(NondeterminismError, match="recorded poll"):
        modern(cursor, strict=True).next(step(ready))
    assert modern(cursor).next(poll(ready)) == RunPoll(poll(ready))
