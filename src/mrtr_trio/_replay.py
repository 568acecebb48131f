"""The replay rules: a sans-IO state machine that says what a flow does next.

Two rules govern this file (after h11's `_state.py`):

1. Everything that decides what a round does lives here: replaying the journal, matching the
   pending point, which ask reads the call's `inputResponses`, when `is_replaying` flips,
   what is journaled, how answers are checked, the round budget, the capability check, and what
   divergence does.
2. It knows nothing of trio, of MCP, or of which era drives it. It runs no handler code, and
   its only I/O is two log records to the `mrtr_trio` logger: why an answer is asked again
   (INFO) and a divergence that `replay="reask"` survives (WARNING).

Theory of operation. A driver runs the handler; each time the handler needs something (a *need*
from `_flow`: an [Ask][mrtr_trio._flow.Ask] or a request yielded on its own, a `step`, a
`poll`, or `done`) the driver hands it to [Replay.next][mrtr_trio._replay.Replay.next], which
answers with an *action* (a recorded answer to a request yielded on its own, the commonest need
of a replay, comes from [Replay.replayed][mrtr_trio._replay.Replay.replayed] with no action):

- [Feed][mrtr_trio._replay.Feed]: send this value into the handler (a recorded answer or step
  value while replaying; the answers once they are all valid);
- [RunStep][mrtr_trio._replay.RunStep] / [RunPoll][mrtr_trio._replay.RunPoll]: call this
  function and report its value with `ran` / `polled`;
- [Suspend][mrtr_trio._replay.Suspend]: the client must take a turn and answer these requests
  (none: a pause, or a poll still waiting). A driver that can wait for the client (live, task)
  reports the answers with `answered`; the modern driver ends the round with a token made from
  [Replay.checkpoint][mrtr_trio._replay.Replay.checkpoint]. A request yielded on its own is
  named (`input-N`) and handled as a [OneRequest][mrtr_trio._replay.OneRequest] in every phase
  and era (no `Ask`, no dict): it is suspended on as one, and its bare answer may be reported
  with `answered_one`;
- [Complete][mrtr_trio.Complete]: the flow finished with this value (what a modern round
  returns as it is).

A modern retry starts **replaying**: each need must match the next journal entry (same kind,
keys and fingerprints), which gives back the recorded value. With the journal spent the machine
is **pending**: the next need must match the recorded pending point, and this call's
`inputResponses` answer it. Past that point it is **live**: new code runs, steps run, and asks
suspend the flow: the client takes a turn (**asking**, **waiting** while a poll is not met,
or **pushed**: a push-style ask made out of turn). A live legacy session starts live, and a
first modern call too (its first ask reads the call's `inputResponses`, as the conformance
suite expects). A need that does not match is a divergence: `replay="strict"` fails with
[NondeterminismError][mrtr_trio.NondeterminismError]; `"reask"` drops the rest of the journal
and goes on live, so the client is asked again.

[TRANSITIONS][mrtr_trio._replay.TRANSITIONS] is the phase diagram as data. The machine's whole
state is its phase, the data that phase owns ([OWNS][mrtr_trio._replay.OWNS]: the journal
position while replaying, the ask being answered while asking, the poll while waiting, ...), and
the flow's record, which every phase shares (its name and rules, the rounds taken, the journal
kept and the entries recorded after it). Every move, an error's included, is one of the table's
(`Replay._go`), and it clears what the phase it leaves owned and the next does not, so data
outlives its phase nowhere; a move the current phase does not list raises
[MrtrError][mrtr_trio.MrtrError], as h11's state machine does. docs/replay.md draws the diagram
and the ownership table from these tables.
"""

from __future__ import annotations

import json
import logging
import math
from collections.abc import Callable, Iterator, Mapping
from types import MappingProxyType
from typing import Any, Final, NoReturn, TypeAlias

import attrs

from ._errors import (
    InvalidInputResponse,
    InvalidRequestState,
    MissingCapability,
    MrtrError,
    NondeterminismError,
    PollTimeout,
    RoundLimitExceeded,
)
from ._flow import Ask, Done, Need, Poll, Step
from ._journal import (
    EMPTY_JOURNAL,
    PAUSED,
    Answered,
    AnsweredOne,
    Cursor,
    Entry,
    Mark,
    Pending,
    PendingOne,
    PendingPoll,
    StepResult,
    answers,
    describe_fingerprint,
    flat_record_problem,
    qualified_name,
    record_problem,
    recordable,
    single_key,
    step_fingerprint,
    step_identity,
)
from ._values import (
    REQUEST_TYPES,
    Answer,
    ElicitRequest,
    ElicitResult,
    Request,
    content_problems_for,
    describe_request,
    missing_capabilities,
    parse_answer,
)

__all__ = [
    "ASKING",
    "FAILED",
    "HOLDS",
    "LIVE",
    "OWNS",
    "PENDING",
    "REPLAYING",
    "PUSHED",
    "WAITING",
    "TRANSITIONS",
    "UNMATCHED",
    "Action",
    "Complete",
    "Feed",
    "OneRequest",
    "Replay",
    "Rules",
    "RunPoll",
    "RunStep",
    "Suspend",
    "check_answer",
    "collect_answers",
]

log = logging.getLogger("mrtr_trio")

# ------------------------------------------------------------------------------- phases


class _Phase:
    __slots__ = ("name",)

    def __init__(self, name: str) -> None:
        self.name = name

    def __repr__(self) -> str:
        return self.name


#: Re-running code an earlier round already ran, feeding it the journal.
REPLAYING: Final = _Phase("REPLAYING")
#: The journal is spent; the next need must be the pending point this call answers.
PENDING: Final = _Phase("PENDING")
#: Past the pending point: new code runs.
LIVE: Final = _Phase("LIVE")
#: The client is taking a turn: answering an ask (a pause: an ask of nothing).
ASKING: Final = _Phase("ASKING")
#: The client is taking a turn while a poll waits for its condition: the turn over, it polls
#: again.
WAITING: Final = _Phase("WAITING")
#: The client is answering a push-style ask, made out of turn by a live flow
#: ([Replay.push][mrtr_trio._replay.Replay.push]): an error about it leaves the flow to the
#: handler, which may catch it.
PUSHED: Final = _Phase("PUSHED")
#: The flow finished.
FINISHED: Final = _Phase("FINISHED")
#: An error ended the flow; the machine accepts nothing more.
ERROR: Final = _Phase("ERROR")

#: The event of an error raised about the flow: it ends the flow (a push-style ask's, only
#: the ask).
FAILED: Final = "error"

#: (phase, event) → the phase after it. Every move the machine makes is one of these; an event
#: the current phase does not list raises [MrtrError][mrtr_trio.MrtrError] (and, like any
#: error, moves the machine along its `"error"` event).
TRANSITIONS: Final[Mapping[_Phase, Mapping[str, _Phase]]] = MappingProxyType(
    {
        REPLAYING: {
            "need matches the next entry": REPLAYING,
            "journal spent, a point is pending": PENDING,
            "journal spent, nothing pending": LIVE,
            "need diverges (reask)": LIVE,
            FAILED: ERROR,
        },
        PENDING: {
            "need matches the pending poll": LIVE,
            "all answered": LIVE,
            "the client takes a turn": ASKING,
            "need diverges (reask)": LIVE,
            FAILED: ERROR,
        },
        LIVE: {
            "step or poll ran": LIVE,
            "all answered": LIVE,
            "the client takes a turn": ASKING,
            "pause with no turn to give": LIVE,
            "poll not met yet": WAITING,
            "push-style ask": PUSHED,
            "done": FINISHED,
            FAILED: ERROR,
        },
        ASKING: {
            "all answered": LIVE,
            "the client takes a turn": ASKING,
            FAILED: ERROR,
        },
        WAITING: {
            "turn over, poll again": LIVE,
            FAILED: ERROR,
        },
        PUSHED: {
            "all answered": LIVE,
            "the client takes a turn": PUSHED,
            "push-style ask abandoned": LIVE,
            FAILED: PUSHED,
        },
        FINISHED: {FAILED: ERROR},
        ERROR: {},
    }
)

#: An empty mapping shared by every action and machine that has nothing to hold.
_NOTHING: Mapping[str, Any] = MappingProxyType({})

#: What each phase owns, by the [Replay][mrtr_trio._replay.Replay] slot that holds it (what
#: each holds: `HOLDS`). A slot the current phase does not list holds its empty value: a move
#: clears what the phase it leaves owned and the next does not.
OWNS: Final[Mapping[_Phase, frozenset[str]]] = MappingProxyType(
    {
        REPLAYING: frozenset({"_position", "_length", "_pending", "_responses"}),
        PENDING: frozenset({"_pending", "_responses"}),
        LIVE: frozenset({"_responses", "_running", "_polling"}),
        ASKING: frozenset({"_asking", "_kept"}),
        WAITING: frozenset({"_running", "_polling"}),
        # (A push-style ask is made from live code, maybe from a step it runs: LIVE's data
        # waits under it.)
        PUSHED: frozenset({"_asking", "_kept", "_running", "_polling"}),
        FINISHED: frozenset(),
        ERROR: frozenset(),
    }
)

#: What each slot a phase may own holds (docs/replay.md lists them by phase).
HOLDS: Final[Mapping[str, str]] = MappingProxyType(
    {
        "_position": "the next journal entry to replay",
        "_length": "the journal's end",
        "_pending": "the pending point this call answers",
        "_responses": "this call's `inputResponses`, until an ask reads them",
        "_running": "the step or poll being run",
        "_polling": "a poll's deadline, once it was not met",
        "_asking": "the ask the client is answering",
        "_kept": "its valid answers so far",
    }
)

#: Each slot a phase may own, and its value while none does.
_UNOWNED: Final[Mapping[str, Any]] = MappingProxyType(
    {
        "_position": 0,
        "_length": 0,
        "_pending": None,
        "_responses": None,
        "_running": None,
        "_polling": None,
        "_asking": None,
        "_kept": _NOTHING,
    }
)

#: `TRANSITIONS` as `_go` reads it: (phase, event) → (the phase after it, the slots the move
#: clears with their empty values).
_MOVES: Final = {
    phase: {
        event: (
            target,
            tuple((slot, _UNOWNED[slot]) for slot in sorted(OWNS[phase] - OWNS[target])),
        )
        for event, target in moves.items()
    }
    for phase, moves in TRANSITIONS.items()
}

# ------------------------------------------------------------------------------ actions


@attrs.frozen
class Feed:
    """Send `value` into the handler."""

    value: Any


@attrs.frozen
class RunStep:
    """Call `step.fn(*step.args)` (awaiting an awaitable result) and report the value with
    [Replay.ran][mrtr_trio._replay.Replay.ran]."""

    step: Step


@attrs.frozen
class RunPoll:
    """Call `poll.fn(*poll.args)` once and report the value with
    [Replay.polled][mrtr_trio._replay.Replay.polled]."""

    poll: Poll


@attrs.frozen
class Suspend:
    """The client takes a turn: `requests` to answer (as they go to the client: a re-asked
    elicitation's message says what was wrong), `problems` why some are asked again, and
    `retry_after` (a poll's interval) when the turn only waits for the outside world. No
    requests and no `retry_after`: a pause."""

    requests: Mapping[str, Request]
    problems: Mapping[str, str] = _NOTHING
    retry_after: float | None = None


class OneRequest(Mapping[str, Request]):
    """A request yielded on its own, under its generated key: the need the machine makes of
    it (in every phase and era), and the requests of the [Suspend][mrtr_trio._replay.Suspend]
    that asks it, `{key: request}` as a mapping with no dict built. A driver that asks one
    request at a time reads `key` and `request`."""

    __slots__ = ("key", "request")

    def __init__(self, key: str, request: Request) -> None:
        self.key = key
        self.request = request

    def __getitem__(self, key: str) -> Request:
        if key == self.key:
            return self.request
        raise KeyError(key)

    def __contains__(self, key: object) -> bool:
        return key == self.key

    def __iter__(self) -> Iterator[str]:
        return iter((self.key,))

    def __len__(self) -> int:
        return 1

    def __repr__(self) -> str:
        return repr({self.key: self.request})


#: A need as the machine works on it: a request yielded on its own is named, as a
#: [OneRequest][mrtr_trio._replay.OneRequest].
_Named: TypeAlias = Ask | OneRequest | Step | Poll | Done


@attrs.frozen
class Complete:
    """The flow finished with `value`: the machine's last action, and what a modern round
    ([Runtime.advance][mrtr_trio.Runtime.advance]) returns."""

    value: Any


Action = Feed | RunStep | RunPoll | Suspend | Complete

# -------------------------------------------------------------------------------- rules


@attrs.frozen
class Rules:
    """What a driver fixes for its flows, from the runtime's knobs (the
    [Runtime][mrtr_trio.Runtime] makes each driver's once; what a call brings, such as the
    client's capabilities, goes to the [Replay][mrtr_trio._replay.Replay] machine itself).

    - *max_rounds*: turns the client may take before
      [RoundLimitExceeded][mrtr_trio.RoundLimitExceeded];
    - *strict*: divergence raises (`replay="strict"`) instead of asking again;
    - *free_pauses*: a `pause()` continues at once and costs no round (live yield-style
      flows, where the client has nothing to do);
    - *record*: journal what the flow passes, for a checkpoint (modern yield-style flows).
    """

    max_rounds: int
    strict: bool = False
    free_pauses: bool = False
    record: bool = False


_REQUEST_KINDS = frozenset(REQUEST_TYPES)
_NO_CURSOR = Cursor()
_MISMATCH: Any = object()
#: What [Replay.replayed][mrtr_trio._replay.Replay.replayed] returns for a need it does not
#: replay itself.
UNMATCHED: Final[Any] = object()


class Replay:
    """The state machine of one flow invocation (see the module docstring).

    *name* names the handler in messages; *cursor* is where a modern retry stands (empty for a
    first call or a live session); *responses* is this call's `inputResponses` (key → client
    JSON or answer object), read by the pending ask, or on a first call by the first ask;
    *replayable* is False for return-style flows, whose pending requests travel in the token;
    *client_capabilities* is what the client declared (`None`: everything), checked before
    each ask.

    Its slots are the flow's record, which every phase shares (`name`, `rules`,
    `client_capabilities`, `rounds`, `phase`; `_cursor`, the flow's identity; `_journal`, the
    journal kept; `_recorded`, the entries recorded after it; `_singles`, the requests yielded
    on their own so far; `_payload`, the last ask's; `_replayable`), and the data a phase owns
    ([OWNS][mrtr_trio._replay.OWNS]).
    """

    __slots__ = (
        "_asking",
        "_cursor",
        "_journal",
        "_kept",
        "_length",
        "_payload",
        "_pending",
        "_polling",
        "_position",
        "_recorded",
        "_replayable",
        "_responses",
        "_running",
        "_singles",
        "client_capabilities",
        "name",
        "phase",
        "rounds",
        "rules",
    )

    def __init__(
        self,
        name: str,
        rules: Rules,
        cursor: Cursor = _NO_CURSOR,
        responses: Mapping[str, Any] | None = None,
        *,
        replayable: bool = True,
        client_capabilities: Mapping[str, Any] | None = None,
    ) -> None:
        self.name = name
        self.rules = rules
        self.client_capabilities = client_capabilities
        self.rounds = cursor.rounds
        self._cursor = cursor
        self._journal = cursor.journal if replayable else EMPTY_JOURNAL
        self._length = len(self._journal)
        self._pending = cursor.pending
        self._payload = cursor.payload
        self._responses = responses
        self._replayable = replayable
        self._position = 0
        self._singles = 0  # requests yielded on their own so far: the next one's key
        # What the flow passes beyond the journal, when it is to be checkpointed.
        # (Without a checkpoint to make, an empty tuple stands in: nothing is appended.)
        self._recorded: list[Entry] = [] if rules.record else ()  # type: ignore[assignment]
        self._asking: Ask | OneRequest | None = None  # the ask the client is answering
        self._kept: Mapping[str, Answer] = _NOTHING  # its answers so far
        self._running: Step | Poll | None = None
        self._polling: PendingPoll | None = None
        if self._length:
            self.phase = REPLAYING
        elif self._pending is not None:
            self.phase = PENDING
        else:
            self.phase = LIVE

    def __repr__(self) -> str:
        where = f" at entry {self._position}" if self.phase is REPLAYING else ""
        return f"<Replay {self.name} {self.phase!r}{where}>"

    @property
    def is_replaying(self) -> bool:
        """True while the handler re-runs code an earlier round already ran (up to the point
        this call answers)."""
        return self.phase is REPLAYING or self.phase is PENDING

    # -------------------------------------------------------------------- driver inputs

    def next(self, need: Need) -> Action:
        """What to do about *need*, the handler's latest."""
        named: _Named
        if type(need) in _REQUEST_KINDS:  # a request yielded on its own, under its key
            named = OneRequest(single_key(self._singles), need)  # type: ignore[arg-type]
            self._singles += 1
        else:
            named = need  # type: ignore[assignment]  # (a cast, without the call)
        phase = self.phase
        if phase is REPLAYING:
            return self._replay(named)
        if phase is PENDING:
            return self._at_pending(named)
        if phase is LIVE:
            return self._live(named)
        return self._unexpected(f"a need ({type(need).__name__})")

    def replayed(self, need: Need) -> Any:
        """`next`'s commonest case, with no action to build: while replaying, the recorded
        answer when *need* is a request yielded on its own that matches the next entry (its
        fingerprint and key); otherwise [UNMATCHED][mrtr_trio._replay.UNMATCHED], and the
        driver asks `next`."""
        if self.phase is REPLAYING and type(need) in _REQUEST_KINDS:
            try:
                answer = self._journal.answer(self._position, self._singles, need.fingerprint)  # type: ignore[union-attr]
            except InvalidRequestState:  # a malformed entry in a token that verified
                self._fail()
                raise
            if answer is not None:
                self._singles += 1
                self._matched()
                return answer
        return UNMATCHED

    def ran(self, value: Any) -> Feed:
        """The step asked for by [RunStep][mrtr_trio._replay.RunStep] returned *value*."""
        step = self._running
        if self.phase is not LIVE or not isinstance(step, Step):
            return self._unexpected("a step's value")
        self._running = None
        value = self._recordable(value, step.fn)
        self._journal_entry(
            StepResult(step_fingerprint(step.fn, step.name), value), "step or poll ran"
        )
        return Feed(value)

    def polled(self, value: Any, now: float) -> Feed | Suspend:
        """The poll asked for by [RunPoll][mrtr_trio._replay.RunPoll] returned *value*, at
        *now* (seconds, on the clock the driver measures deadlines with)."""
        poll = self._running
        if self.phase is not LIVE or not isinstance(poll, Poll):
            return self._unexpected("a poll's value")
        fingerprint = step_fingerprint(poll.fn, poll.name)
        if value is not None:
            self._running = self._polling = None
            value = self._recordable(value, poll.fn)
            self._journal_entry(StepResult(fingerprint, value), "step or poll ran")
            return Feed(value)
        waiting = self._polling
        if waiting is None:
            deadline = None if poll.timeout is None else math.ceil(now + poll.timeout)
            waiting = self._polling = PendingPoll(fingerprint, deadline)
        if waiting.deadline is not None and now >= waiting.deadline:
            self._fail()
            raise PollTimeout(
                f"{self.name}: poll({qualified_name(poll.fn)}) was still not met after its "
                f"timeout of {poll.timeout:g} s"
            )
        self._go("poll not met yet")
        return Suspend({}, retry_after=poll.every)

    def answered(self, responses: Mapping[str, Any]) -> Action:
        """The client's turn is over: *responses* (key → client JSON or answer object) answer
        the requests of the last [Suspend][mrtr_trio._replay.Suspend]."""
        phase = self.phase
        if phase is WAITING:
            self._go("turn over, poll again")
            assert self._running is not None
            return RunPoll(self._running)  # type: ignore[arg-type]
        if phase is not ASKING and phase is not PUSHED:
            return self._unexpected("answers")
        ask = self._asking
        if type(ask) is OneRequest:
            return self._take_one(ask, responses)
        assert type(ask) is Ask
        return self._take(ask, self._kept, responses)

    def answered_one(self, raw: Any) -> Feed | Suspend:
        """[answered][mrtr_trio._replay.Replay.answered] for a
        [Suspend][mrtr_trio._replay.Suspend] whose requests are a
        [OneRequest][mrtr_trio._replay.OneRequest], with no mapping to build: *raw* (client
        JSON or an answer object) answers its one request."""
        one = self._asking
        if self.phase is not ASKING or type(one) is not OneRequest:
            return self._unexpected("one answer")
        return self._answer_one(one, raw)

    def push(self, requests: Mapping[str, Request]) -> Suspend:
        """Ask the client *requests* out of turn (a live push-style `await ctx.elicit(...)`);
        the answers come back as the [Feed][mrtr_trio._replay.Feed] that
        [answered][mrtr_trio._replay.Replay.answered] returns, and nothing is journaled."""
        self._go("push-style ask")
        try:
            return self._suspend(Ask(requests), requests, _NOTHING, _NOTHING)
        except MrtrError:  # refused before it was asked: the flow goes on live
            self.abandon()
            raise

    def abandon(self) -> None:
        """The push-style ask in progress ended without its answers: the client's error, a
        timeout, or an error this machine raised about its answers (malformed, or re-asked
        past the round limit). The handler sees that error where it awaited the ask,
        and may catch it and carry on, so the flow goes on as if the ask had not been made."""
        self._go("push-style ask abandoned")

    def checkpoint(self) -> Cursor:
        """Where the flow stands while the client takes its turn, for a token."""
        pending: Pending | PendingOne | PendingPoll
        if self.phase is WAITING:
            assert self._polling is not None
            pending = self._polling
        elif self.phase is ASKING:
            ask = self._asking
            if type(ask) is OneRequest:  # (only yield-style flows, which replay, yield one)
                pending = PendingOne(ask.request.fingerprint)
            else:
                assert type(ask) is Ask
                pending = Pending(
                    ask.fingerprints,
                    dict(self._kept),
                    None if self._replayable else ask.requests,
                )
        else:
            return self._unexpected("a checkpoint")
        return self.so_far(pending)

    def so_far(self, pending: Pending | PendingOne | PendingPoll | None = None) -> Cursor:
        """The journal up to the current need, with the flow's identity (what a step's
        idempotency key is derived from), and with *pending* what a checkpoint holds."""
        cursor = self._cursor
        journal = self._journal
        if self.phase is REPLAYING:  # (only what was replayed so far)
            journal = journal.head(self._position)
        return Cursor(
            journal.then(self._recorded),
            pending,
            self.rounds,
            self._payload,
            flow_id=cursor.flow_id,
            key_id=cursor.key_id,
        )

    # ------------------------------------------------------------------------ the phases

    def _replay(self, need: _Named) -> Action:
        try:
            entry = self._journal[self._position]
        except InvalidRequestState:  # a malformed entry in a token that verified
            self._fail()
            raise
        value = _recorded_value(entry, need)
        if value is _MISMATCH:
            return self._diverge(_describe_entry(entry), need)
        self._matched()
        return Feed(value)

    def _matched(self) -> None:
        """The need matched the next entry: on to the one after, out of the journal after
        the last."""
        self._go("need matches the next entry")
        self._position = position = self._position + 1
        if position != self._length:
            return
        if self._pending is not None:
            self._go("journal spent, a point is pending")
        else:
            self._go("journal spent, nothing pending")

    def _at_pending(self, need: _Named) -> Action:
        pending = self._pending
        assert pending is not None
        if not answers(pending, *_mark(need)):
            singles = self._singles - (type(need) is OneRequest)
            return self._diverge(_describe_entry(pending, singles), need)
        if type(pending) is PendingPoll:
            self._go("need matches the pending poll")
            self._running, self._polling = need, pending  # type: ignore[assignment]
            return RunPoll(need)  # type: ignore[arg-type]
        responses, self._responses = self._responses or _NOTHING, None
        if type(pending) is PendingOne:
            # (Its key is implied: the journal is spent, so the next request yielded on its
            # own is the one it recorded.)
            return self._take_one(need, responses)  # type: ignore[arg-type]
        return self._take(need, pending.answered, responses)  # type: ignore[arg-type,union-attr]

    def _live(self, need: _Named) -> Action:
        kind = type(need)
        if kind is OneRequest:
            one: OneRequest = need  # type: ignore[assignment]
            if self._responses is not None:  # a first call: its first ask reads them
                responses, self._responses = self._responses, None
                return self._take_one(one, responses)
            return self._suspend(one, one, _NOTHING, _NOTHING)
        if kind is Ask:
            ask: Ask = need  # type: ignore[assignment]
            if not ask.requests:
                if self.rules.free_pauses and self._replayable:
                    self._journal_entry(PAUSED, "pause with no turn to give")
                    return Feed({})
                self._payload = ask.payload
                return self._suspend(ask, _NOTHING, _NOTHING, _NOTHING)
            if self._responses is not None:  # a first call: its first ask reads them
                responses, self._responses = self._responses, None
                return self._take(ask, {}, responses)
            self._payload = ask.payload
            return self._suspend(ask, ask.requests, _NOTHING, _NOTHING)
        if kind is Step:
            self._running = need  # type: ignore[assignment]
            return RunStep(need)  # type: ignore[arg-type]
        if kind is Poll:
            self._running = need  # type: ignore[assignment]
            return RunPoll(need)  # type: ignore[arg-type]
        self._go("done")
        return Complete(need.value)  # type: ignore[union-attr]

    # ----------------------------------------------------------------------- the moves

    def _take(self, ask: Ask, kept: Mapping[str, Answer], responses: Mapping[str, Any]) -> Action:
        """Check *responses* for *ask*: feed the answers when all are valid, else ask again."""
        try:
            answers, again, problems = collect_answers(ask.requests, kept, responses)
        except MrtrError:
            self._fail()
            raise
        if again:
            self._payload = ask.payload
            return self._suspend(ask, again, answers, problems)
        self._go("all answered")
        if self._replayable and self.rules.record:
            self._recorded.append(Answered(ask.fingerprints, dict(answers)))
        return Feed(answers)

    def _take_one(self, one: OneRequest, responses: Mapping[str, Any]) -> Action:
        """`_take` for a request yielded on its own: its answer in *responses*, or ask again."""
        if one.key not in responses:
            return self._suspend(one, one, _NOTHING, _NOTHING)
        return self._answer_one(one, responses[one.key])

    def _answer_one(self, one: OneRequest, raw: Any) -> Feed | Suspend:
        """Check *raw* as the answer to *one*: feed it (journaled where the flow is recorded)
        when valid, else ask again saying why."""
        try:
            answer, problem = _checked(one.key, one.request, raw)
        except MrtrError:
            self._fail()
            raise
        if problem is not None:
            return self._suspend(one, one, _NOTHING, {one.key: problem})
        self._go("all answered")
        if self.rules.record:
            self._recorded.append(AnsweredOne(one.key, one.request.fingerprint, answer))
        return Feed(answer)

    def _suspend(
        self,
        ask: Ask | OneRequest,
        to_ask: Mapping[str, Request],
        kept: Mapping[str, Answer],
        problems: Mapping[str, str],
    ) -> Suspend:
        rules = self.rules
        if self.client_capabilities is not None and to_ask:
            missing = missing_capabilities(
                (to_ask.request,) if type(to_ask) is OneRequest else to_ask.values(),
                self.client_capabilities,
            )
            if missing:
                self._fail()
                raise MissingCapability(
                    f"{self.name} needs client capabilities the client did not declare: "
                    f"{json.dumps(missing, sort_keys=True)}",
                    missing,
                )
        if self.rounds >= rules.max_rounds:
            self._fail()
            why = "".join(f"; the answer to {key!r} {text}" for key, text in problems.items())
            raise RoundLimitExceeded(
                f"{self.name} still required input after {rules.max_rounds} rounds "
                f"(max_rounds={rules.max_rounds}){why}"
            )
        self.rounds += 1
        self._asking, self._kept = ask, kept
        self._go("the client takes a turn")
        if not problems:
            return Suspend(to_ask)
        log.info(
            "%s: asking again: %s",
            self.name,
            "; ".join(f"the answer to {key!r} {text}" for key, text in problems.items()),
        )
        if type(to_ask) is OneRequest:
            explained = _explained(to_ask.request, problems.get(to_ask.key))
            return Suspend(OneRequest(to_ask.key, explained), problems)
        return Suspend(
            {key: _explained(r, problems.get(key)) for key, r in to_ask.items()}, problems
        )

    def _diverge(self, recorded: str, need: _Named) -> Action:
        replaying = self.phase is REPLAYING
        position = self._position if replaying else len(self._journal)
        round_ = 1 + sum(not isinstance(e, StepResult) for e in self._journal[:position])
        sentence, current = _describe_need(need)
        message = (
            f"{self.name} diverged from its recorded flow at round {round_}, yield "
            f"#{position}: recorded {recorded}; now {sentence}. The handler is not "
            "deterministic (it read the clock, randomness or I/O outside step()) or its code "
            "changed while this flow was in flight."
        )
        if self.rules.strict:
            self._fail()
            raise NondeterminismError(
                message,
                handler=self.name,
                round=round_,
                yield_index=position,
                recorded=recorded,
                current=current,
            )
        log.warning("%s Asking again (replay='reask').", message)
        if replaying:  # the rest of the journal is dropped
            self._journal = self._journal.head(position)
        self._responses = None  # what they answered was something else
        self._go("need diverges (reask)")
        return self._live(need)

    def _journal_entry(self, entry: Entry, event: str) -> None:
        if self.rules.record:
            self._recorded.append(entry)
        self._go(event)

    def _recordable(self, value: Any, fn: Callable[..., Any]) -> Any:
        try:
            return recordable(value, f"step {qualified_name(fn)}")
        except MrtrError:
            self._fail()
            raise

    def _fail(self) -> None:
        """An error about the flow is on its way out: the machine takes its `"error"` move
        (which ends the flow, except in a push-style ask: see `abandon`)."""
        self._go(FAILED)

    def _go(self, event: str) -> None:
        """Take the move *event* from the current phase, as the table says, clearing the data
        the phase after it does not own; a move the table does not list raises
        [MrtrError][mrtr_trio.MrtrError]."""
        try:
            self.phase, cleared = _MOVES[self.phase][event]
        except KeyError:
            self._unexpected(repr(event))
        if cleared:  # (most moves clear nothing: a replayed entry's, for one)
            for slot, empty in cleared:
                setattr(self, slot, empty)

    def _unexpected(self, what: str) -> NoReturn:
        phase = self.phase
        if FAILED in TRANSITIONS[phase]:
            self._go(FAILED)
        raise MrtrError(f"{self.name}: the replay machine got {what} in phase {phase!r}")


# ------------------------------------------------------------------------------ helpers


def _mark(need: _Named) -> tuple[str | None, Mark, bool]:
    """What [answers][mrtr_trio._journal.answers] matches *need* by: its key (a request
    yielded on its own), its fingerprint(s), and whether it is a poll. (`done` has none, and
    nothing answers it.)"""
    kind = type(need)
    if kind is OneRequest:
        return need.key, need.request.fingerprint, False  # type: ignore[union-attr]
    if kind is Ask:
        return None, need.fingerprints, False  # type: ignore[union-attr]
    if kind is Step or kind is Poll:
        return None, step_fingerprint(need.fn, need.name), kind is Poll  # type: ignore[union-attr]
    return None, b"", False


def _recorded_value(entry: Entry, need: _Named) -> Any:
    """What the journal gives back for *need*, or `_MISMATCH`."""
    if not answers(entry, *_mark(need)):
        return _MISMATCH
    if type(entry) is AnsweredOne:
        return entry.answer
    if type(entry) is Answered:
        return dict(entry.answers)  # a copy: the handler gets it
    return entry.value  # type: ignore[union-attr]


def _describe_entry(entry: Entry | Pending | PendingOne | PendingPoll, singles: int = 0) -> str:
    """A journal entry, or a pending ask, as the divergence message names it (*singles*: the
    asks of one request before a pending one, which give its key)."""
    if isinstance(entry, PendingOne):
        return f"{single_key(singles)!r} ({describe_fingerprint(entry.fingerprint)})"
    if isinstance(entry, PendingPoll):
        return f"poll ({describe_fingerprint(entry.fingerprint)})"
    if isinstance(entry, StepResult):
        return f"a step ({describe_fingerprint(entry.fingerprint)})"
    if isinstance(entry, AnsweredOne):
        return f"{entry.key!r} ({describe_fingerprint(entry.fingerprint)})"
    if not entry.fingerprints:
        return "pause()"
    return ", ".join(
        f"{key!r} ({describe_fingerprint(fp)})" for key, fp in entry.fingerprints.items()
    )


def _describe_need(need: _Named) -> tuple[str, Any]:
    """A sentence and a structured value for what the handler does now."""
    if isinstance(need, Ask | OneRequest):
        requests = need.requests if isinstance(need, Ask) else need
        if not requests:
            return "it pauses", {"pause": None}
        wire = {key: request.to_wire() for key, request in requests.items()}
        return f"it asks {wire}", wire
    if isinstance(need, Step | Poll):
        name = step_identity(need.fn, need.name)
        what = "step" if isinstance(need, Step) else "poll"
        return f"it runs {what} {name}", {what: name}
    return "it finished", None


def _explained(request: Request, problem: str | None) -> Request:
    """*request* as it is asked again: an elicitation says what was wrong with the answer."""
    if problem is None or not isinstance(request, ElicitRequest):
        return request
    return attrs.evolve(
        request, message=f"{request.message}\n\n(The previous answer was not accepted: {problem}.)"
    )


def collect_answers(
    requests: Mapping[str, Request],
    kept: Mapping[str, Answer],
    responses: Mapping[str, Any],
) -> tuple[dict[str, Answer], dict[str, Request], dict[str, str]]:
    """Check *responses* (key → client JSON or answer) against *requests*, on top of the
    answers already *kept*.

    Returns `(answers, again, problems)`: the valid answers (kept plus new); the requests
    still unanswered or answered with content that fails the requested schema, to ask again;
    and for the latter, what was wrong. Keys nobody asked for are ignored. A response not shaped
    like an answer to its request raises
    [InvalidInputResponse][mrtr_trio.InvalidInputResponse] naming the key.
    """
    answers = dict(kept)
    again: dict[str, Request] = {}
    problems: dict[str, str] = {}
    for key, request in requests.items():
        if key in answers:
            continue
        if key not in responses:
            again[key] = request
            continue
        answer, problem = _checked(key, request, responses[key])
        if problem is None:
            answers[key] = answer
        else:
            again[key] = request
            problems[key] = problem
    return answers, again, problems


def _checked(key: str, request: Request, raw: Any) -> tuple[Answer, str | None]:
    """*raw* as the answer to *request* (see `check_answer`), and why it is asked again when
    its accepted content does not fit the requested schema (`None` when it does)."""
    answer = check_answer(key, request, raw)
    wrong = content_problems_for(request, answer)
    if wrong:
        return answer, "does not fit the requested schema: " + "; ".join(wrong)
    return answer, None


def check_answer(key: str, request: Request, raw: Any) -> Answer:
    """*raw* (client JSON or an answer object) as the answer to *request*, asked under *key*;
    [InvalidInputResponse][mrtr_trio.InvalidInputResponse] naming the key when it is not shaped
    like one, or holds what a token could not (too deep, or strings that are not Unicode).
    Whether accepted content fits the requested schema is not checked here."""
    try:
        answer = parse_answer(request, raw)
    except InvalidInputResponse as error:
        raise InvalidInputResponse(
            f"the answer to {key!r} ({describe_request(request)}) is malformed: {error}"
        ) from None
    # Both eras: what a token could not hold. Form content is flat (parse_answer checked it):
    # only its strings can fail.
    if type(answer) is ElicitResult:
        problem = None if answer.content is None else flat_record_problem(answer.content)
    else:
        problem = record_problem(answer.to_wire())
    if problem is not None:
        raise InvalidInputResponse(
            f"the answer to {key!r} ({describe_request(request)}) cannot be used: {problem}"
        )
    return answer
