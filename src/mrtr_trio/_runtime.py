"""The [Runtime][mrtr_trio.Runtime]: the keyring and the knobs, and the ways to run a flow."""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Coroutine, Mapping, Sequence
from typing import Any, Literal

import attrs

from ._binding import binding_digest
from ._context import Host
from ._drive import Turn
from ._flow import Handler, is_generator_handler
from ._journal import AnsweredOne, Pending, PendingOne, PendingPoll, qualified_name, single_key
from ._keyring import Keyring, check_keys
from ._keys import default_keys
from ._live import AskFunction, run_live
from ._modern import InputRequired, advance
from ._replay import Complete, Rules
from ._steps import StepStore
from ._token import StateCodec
from ._util import check_count, check_seconds
from ._values import Request

__all__ = ["Runtime", "StateInfo"]


def _keys(keys: Sequence[bytes] | None) -> tuple[bytes, ...]:
    # MRTR_TRIO_KEYS, else the process key with a warning naming the user's line.
    return default_keys() if keys is None else check_keys(keys)


def _float(value: Any) -> Any:
    # Numbers become floats; anything else is left for the validator to name.
    return float(value) if isinstance(value, int) and not isinstance(value, bool) else value


def _seconds(instance: Any, attribute: attrs.Attribute[Any], value: Any) -> None:
    check_seconds(attribute.name, value)
    if attribute.name == "ttl" and math.isinf(value):
        raise ValueError("ttl must be finite")


def _at_least(minimum: int) -> Callable[[Any, attrs.Attribute[Any], Any], None]:
    def check(instance: Any, attribute: attrs.Attribute[Any], value: Any) -> None:
        check_count(attribute.name, value, minimum)

    return check


def _pacing(instance: Any, attribute: attrs.Attribute[Any], value: Any) -> None:
    check_seconds(attribute.name, value, zero=True)


def _replay_mode(instance: Any, attribute: attrs.Attribute[Any], value: Any) -> None:
    if value not in ("strict", "reask"):
        raise ValueError(f'replay must be "strict" or "reask", got {value!r}')


def _store(instance: Any, attribute: attrs.Attribute[Any], value: Any) -> None:
    if value is not None and not isinstance(value, StepStore):
        raise TypeError(
            f"step_store must be a StepStore (claim, record, read, release), got {value!r}"
        )


def _callable(instance: Any, attribute: attrs.Attribute[Any], value: Any) -> None:
    if not callable(value):
        raise TypeError("clock must be a callable returning seconds since the epoch")


@attrs.frozen
class StateInfo:
    """What a verified `requestState` holds (from [Runtime.inspect][mrtr_trio.Runtime.inspect]).

    - `rounds`: round trips so far; `issued_at` / `expires_at`: seconds since the epoch;
    - `entries`: journal entries (answered asks, pauses, steps and polls) a retry replays;
    - `pending_keys`: the keys the client is to answer (empty at a pause or a poll);
    - `answered_keys`: keys of the pending ask already validly answered (a batch in part);
    - `pending_requests`: return style only: the pending requests themselves, which travel
      in the token (yield style replays them instead: `None`);
    - `polling`: the flow waits in a `poll`.
    """

    rounds: int
    issued_at: int
    expires_at: int
    entries: int
    pending_keys: tuple[str, ...]
    answered_keys: tuple[str, ...]
    pending_requests: Mapping[str, Request] | None
    polling: bool


@attrs.frozen(eq=False)
class Runtime:
    """Runs handlers: one modern round at a time ([advance][mrtr_trio.Runtime.advance]) or a
    whole legacy flow live ([run_live][mrtr_trio.Runtime.run_live]).

    - *keys*: `requestState` signing keys, each at least 32 bytes; the first signs, all
      verify (rotation). `None`: the keys in `MRTR_TRIO_KEYS` when it is set, else one
      random key per process, with a warning.
    - *ttl*: seconds a token stays valid after it was minted.
    - *max_rounds*: round trips to the client before the flow fails with
      [RoundLimitExceeded][mrtr_trio.RoundLimitExceeded].
    - *round_timeout*: seconds a live round may wait for its answers.
    - *legacy_shim*: run return-style handlers on legacy sessions by re-entering them.
    - *state_only_pacing*: seconds the legacy shim waits before re-entering after a state-only
      round (return style only).
    - *max_state_bytes*: the largest token minted or accepted.
    - *replay*: on a divergent replay, `"strict"` raises
      [NondeterminismError][mrtr_trio.NondeterminismError]; `"reask"` logs and asks again.
    - *step_store*: a [StepStore][mrtr_trio.StepStore]; with one, each step's result is
      recorded under its idempotency key before it is journaled, and a step whose key is
      recorded (a token presented again) returns the recorded value without running. Without
      one (the default), a step runs once per presentation of a token.
    - *single_use*: accept each `requestState` once (needs a *step_store*); a second
      presentation is the ordinary invalid-state error.
    - *encrypt*: encrypt tokens (ChaCha20-Poly1305, extra `mrtr_trio[encrypt]`) so that the
      client cannot read the answers and payloads inside them. Tokens of either kind are
      accepted whatever this says.
    - *clock*: the wall clock tokens are stamped and checked with (for tests).

    A runtime is immutable and shared by concurrent flows; `attrs.evolve(runtime, ...)` makes
    one with some knobs changed and the same keys. Its flows run on whichever event loop
    awaits them: trio, or asyncio (through anyio, whose cancel scopes time the live rounds
    and whose task groups fan a batch out).
    """

    keys: tuple[bytes, ...] = attrs.field(
        default=None, converter=_keys, repr=lambda keys: f"<{len(keys)} key(s)>"
    )
    ttl: float = attrs.field(default=600.0, kw_only=True, converter=_float, validator=_seconds)
    max_rounds: int = attrs.field(default=8, kw_only=True, validator=_at_least(1))
    round_timeout: float = attrs.field(
        default=600.0, kw_only=True, converter=_float, validator=_seconds
    )
    legacy_shim: bool = attrs.field(default=True, kw_only=True, converter=bool)
    state_only_pacing: float = attrs.field(
        default=0.25, kw_only=True, converter=_float, validator=_pacing
    )
    max_state_bytes: int = attrs.field(default=65536, kw_only=True, validator=_at_least(64))
    replay: Literal["strict", "reask"] = attrs.field(
        default="reask", kw_only=True, validator=_replay_mode
    )
    step_store: StepStore | None = attrs.field(default=None, kw_only=True, validator=_store)
    single_use: bool = attrs.field(default=False, kw_only=True, converter=bool)
    encrypt: bool = attrs.field(default=False, kw_only=True, converter=bool)
    clock: Callable[[], float] = attrs.field(
        default=time.time, kw_only=True, validator=_callable, repr=False
    )
    _codec: StateCodec = attrs.field(init=False, repr=False)
    # The replay rules each driver gives its flows, made once from the knobs above.
    _live_rules: Rules = attrs.field(init=False, repr=False)
    _replay_rules: Rules = attrs.field(init=False, repr=False)  # modern, yield style
    _return_rules: Rules = attrs.field(init=False, repr=False)  # modern, return style

    def __attrs_post_init__(self) -> None:
        if self.single_use and self.step_store is None:
            raise ValueError(
                "single_use=True needs a step_store to remember used tokens, e.g. "
                "step_store=MemoryStepStore() (one process) or RedisStepStore(...) (several)"
            )
        keyring = Keyring(self.keys)
        if self.encrypt:
            keyring.check_cipher()
        codec = StateCodec(
            keyring, float(self.ttl), self.max_state_bytes, self.clock, encrypt=self.encrypt
        )
        object.__setattr__(self, "_codec", codec)
        strict = self.replay == "strict"
        object.__setattr__(self, "_live_rules", Rules(self.max_rounds, free_pauses=True))
        object.__setattr__(self, "_replay_rules", Rules(self.max_rounds, strict, record=True))
        object.__setattr__(self, "_return_rules", Rules(self.max_rounds, strict))

    def advance(
        self,
        handler: Handler,
        arguments: Mapping[str, Any],
        *,
        input_responses: Mapping[str, Any] | None = None,
        request_state: str | None = None,
        client_capabilities: Mapping[str, Any] | None = None,
        bind: bytes = b"",
        host: Host | None = None,
        turn: Turn | None = None,
    ) -> Coroutine[Any, Any, Complete | InputRequired]:
        """One modern round: await it for [Complete][mrtr_trio.Complete] or
        [InputRequired][mrtr_trio.InputRequired].

        *input_responses* is what the client sent (key → JSON answer, or answer objects);
        *request_state* the token it echoed (`None` only when it sent none: any string,
        `""` included, must verify); *client_capabilities* `None` means "all declared";
        *bind* is extra context the token is bound to (the MCP host passes method, target,
        principal and audience); *host* lends the handler's context progress, logging and the
        host's request object.

        *turn* is for hosts that can wait for the client in-process (the tasks extension, where
        a flow goes on in the background): `await turn(suspend)` is called when the client
        must answer `suspend.requests` (none: a pause; `suspend.retry_after` set: a
        `poll` waiting) and returns the client's responses, or `None` to end the round with
        a token as usual.

        Raises [InvalidRequestState][mrtr_trio.InvalidRequestState] before any handler code
        runs when the token fails verification (and, for a token that verified, when the replay
        reads a malformed journal entry),
        [InvalidInputResponse][mrtr_trio.InvalidInputResponse] for a malformed answer,
        [MissingCapability][mrtr_trio.MissingCapability],
        [RoundLimitExceeded][mrtr_trio.RoundLimitExceeded],
        [NondeterminismError][mrtr_trio.NondeterminismError] (strict replay), or whatever the
        handler raises. The handler is always closed.
        """
        # The round's own coroutine, not one around it: a frame fewer per round.
        return advance(
            self._codec,
            self,
            handler,
            arguments,
            input_responses=input_responses,
            request_state=request_state,
            client_capabilities=client_capabilities,
            bind=bind,
            host=host,
            turn=turn,
        )

    def run_live(
        self,
        handler: Handler,
        arguments: Mapping[str, Any],
        ask: AskFunction | None,
        *,
        client_capabilities: Mapping[str, Any] | None = None,
        host: Host | None = None,
    ) -> Coroutine[Any, Any, Any]:
        """Run a whole legacy flow: await it for the flow's value.

        `await ask(key, request)` performs one server-to-client request and returns the
        client's answer (JSON or an answer object); its exceptions end the flow. `ask=None`
        means the session has no back channel: asking raises
        [BackChannelUnavailable][mrtr_trio.BackChannelUnavailable], while steps, polls and
        pauses still work. Raises as [advance][mrtr_trio.Runtime.advance] does, plus
        [RoundTimeout][mrtr_trio.RoundTimeout].

        (It returns the flow's drive itself, so that a suspended flow keeps no frame of its
        own here. Like a coroutine function's, its errors are raised when it is awaited.)
        """
        return run_live(self, handler, arguments, ask, client_capabilities, host=host)

    def inspect(
        self,
        handler: Handler,
        arguments: Mapping[str, Any],
        request_state: str,
        *,
        bind: bytes = b"",
        check_expiry: bool = True,
    ) -> StateInfo:
        """Verify *request_state* as [advance][mrtr_trio.Runtime.advance] would for this call,
        and say what it holds, without running the handler. *check_expiry=False* reads an
        expired token (to debug it, or to replay recorded tokens offline).

        Raises [InvalidRequestState][mrtr_trio.InvalidRequestState] when it does not verify,
        or when an entry of its journal is malformed (every entry is read here; a replay reads
        them as it reaches them).
        """
        is_generator_handler(handler)
        binding = binding_digest(qualified_name(handler), arguments, bytes(bind))
        cursor = self._codec.open(request_state, binding, check_expiry=check_expiry)
        entries = tuple(cursor.journal)
        pending = cursor.pending
        keys: tuple[str, ...] = ()
        answered: tuple[str, ...] = ()
        requests = None
        if isinstance(pending, PendingOne):
            singles = sum(type(entry) is AnsweredOne for entry in entries)
            keys = (single_key(singles),)
        elif isinstance(pending, Pending):
            keys = tuple(k for k in pending.fingerprints if k not in pending.answered)
            answered = tuple(pending.answered)
            requests = pending.requests
        return StateInfo(
            rounds=cursor.rounds,
            issued_at=cursor.issued_at,
            expires_at=cursor.issued_at + cursor.lifetime,
            entries=len(entries),
            pending_keys=keys,
            answered_keys=answered,
            pending_requests=requests,
            polling=isinstance(pending, PendingPoll),
        )
