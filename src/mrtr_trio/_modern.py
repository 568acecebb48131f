"""The modern driver: one round of a flow on a 2026-07-28 request.

[advance][mrtr_trio._modern.advance] verifies the `requestState` before any handler code runs,
then [drive][mrtr_trio._drive.drive]s the flow with a [Replay][mrtr_trio._replay.Replay] machine
made from the token's cursor and this call's `inputResponses`, with no one to wait for: the
round ends when the flow finishes ([Complete][mrtr_trio.Complete]) or when the client must take a
turn ([InputRequired][mrtr_trio.InputRequired], with a fresh token for the machine's checkpoint).
"""

from __future__ import annotations

import functools
import math
import secrets
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, ClassVar

import attrs

from ._binding import binding_digest
from ._context import Context, Host
from ._drive import Turn, drive
from ._errors import InvalidInputResponse
from ._flow import Handler, Step, is_generator_handler, open_flow
from ._journal import Cursor, qualified_name, step_identity
from ._replay import Complete, Replay
from ._schema import is_mapping
from ._steps import STEP_GRACE, StepPolicy, StepStore, ask_store, call_step
from ._token import StateCodec
from ._tokenformat import FLOW_ID_BYTES
from ._values import Request

if TYPE_CHECKING:
    from ._runtime import Runtime

__all__ = ["InputRequired", "advance"]


@attrs.frozen
class InputRequired:
    """A modern round's outcome: the client must answer `input_requests` (`{key: request}`,
    empty for a state-only round) and retry with the `request_state` to echo."""

    input_requests: Mapping[str, Request]
    request_state: str | None


async def advance(
    codec: StateCodec,
    runtime: Runtime,
    handler: Handler,
    arguments: Mapping[str, Any],
    *,
    input_responses: Mapping[str, Any] | None,
    request_state: str | None,
    client_capabilities: Mapping[str, Any] | None,
    bind: bytes,
    host: Host | None = None,
    turn: Turn | None = None,
) -> Complete | InputRequired:
    """Run one modern round of *handler* (see the module docstring): *codec* opens and seals
    tokens, *runtime* gives the knobs, and a *turn* (if any) may wait for the client's answers
    in-process instead of ending the round."""
    replayable = is_generator_handler(handler)
    name = qualified_name(handler)
    _check_arguments(arguments)
    _check_responses(input_responses)
    binding = binding_digest(name, arguments, _check_bind(bind))
    if request_state is None:
        cursor = Cursor(flow_id=secrets.token_bytes(FLOW_ID_BYTES))
    else:
        cursor = codec.open(request_state, binding)
    rules = runtime._replay_rules if replayable else runtime._return_rules
    store = runtime.step_store
    if request_state is not None and runtime.single_use:
        await _use_once(codec, store, cursor)
    machine = Replay(
        name,
        rules,
        cursor,
        input_responses,
        replayable=replayable,
        client_capabilities=client_capabilities,
    )
    ctx = Context("modern", client_capabilities, machine=machine, host=host)
    flow = open_flow(
        handler, ctx, arguments, cursor.pending, cursor.payload, name=name, replayable=replayable
    )

    policy = None
    if store is not None:
        expires = None if request_state is None else cursor.issued_at + cursor.lifetime
        policy = StepPolicy(store, codec.clock, expires, runtime.ttl)
    action = await drive(flow, machine, _Round(turn, machine, codec, binding, policy))
    if type(action) is Complete:
        return action
    # (A plain dict for the caller, whatever mapping the machine asked with.)
    return InputRequired(dict(action.requests), codec.seal(machine.checkpoint(), binding))


class _Round:
    """The [Driver][mrtr_trio._drive.Driver] of one modern round: a *turn* that may wait for
    the client (or none: the round ends where the client must take a turn), untimed, and what
    its steps need (their idempotency keys are derived from where *machine* stands)."""

    __slots__ = ("_binding", "_codec", "_machine", "_policy", "turn")

    ask: ClassVar[None] = None
    round_timeout: ClassVar[float] = math.inf
    value_only: ClassVar[bool] = False

    def __init__(
        self,
        turn: Turn | None,
        machine: Replay,
        codec: StateCodec,
        binding: bytes,
        policy: StepPolicy | None,
    ) -> None:
        self.turn: Any = turn  # (None: see `waits`)
        self._machine = machine
        self._codec = codec
        self._binding = binding
        self._policy = policy

    @property
    def waits(self) -> bool:
        return self.turn is not None

    def now(self) -> float:
        return self._codec.clock()

    async def run_step(self, step: Step) -> Any:
        machine, codec, binding = self._machine, self._codec, self._binding

        # The machine stands still while the step runs: its key is derived when first asked for.
        @functools.cache
        def key() -> str:
            so_far = machine.so_far()
            return codec.step_key(so_far, binding, len(so_far.journal))

        if self._policy is None:
            return await call_step(step.fn, step.args, key)
        name = step_identity(step.fn, step.name)
        return await call_step(step.fn, step.args, key, self._policy, name=name, retry=step.retry)


async def _use_once(codec: StateCodec, store: StepStore | None, cursor: Cursor) -> None:
    """`single_use=True`: claim the token in the store, or refuse it as used."""
    assert store is not None  # the runtime requires a store for single_use
    # The mark outlives the token (which is checked to the second): never a second use.
    keep = max(0.0, cursor.issued_at + cursor.lifetime - codec.clock()) + 1.0 + STEP_GRACE
    claim = await ask_store(
        store.claim(f"mrtr_trio:token:{cursor.token_id.hex()}", "used", lease=keep, ttl=keep),
        "cannot check that this requestState is used once",
    )
    if claim.status != "won":
        codec.reject("already used (single_use=True)")


def _check_arguments(arguments: object) -> None:
    if not _has_str_keys(arguments):
        raise TypeError(f"arguments must be a dict with str keys, got {arguments!r}")


def _check_responses(responses: object) -> None:
    if responses is not None and not _has_str_keys(responses):
        raise InvalidInputResponse(
            f"inputResponses must be an object mapping keys to answers, got {responses!r}"
        )


def _has_str_keys(value: object) -> bool:
    if not is_mapping(value):
        return False
    for key in value:  # noqa: SIM110 - a loop: all() and a generator cost more, every round
        if type(key) is not str:
            return False
    return True


def _check_bind(bind: object) -> bytes:
    if type(bind) is bytes:
        return bind
    if not isinstance(bind, bytes | bytearray):
        raise TypeError(f"bind must be bytes, got {type(bind).__name__}")
    return bytes(bind)
