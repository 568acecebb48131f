"""The :class:`Runtime`: the keyring and the knobs, and the two ways to run a flow."""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Literal

import attrs

from ._context import Host
from ._drive import Settings
from ._live import AskFunction, run_live
from ._replay import Complete, InputRequired, advance
from ._state import Keyring, StateCodec

__all__ = ["Runtime"]


class Runtime:
    """Runs handlers: one modern round at a time (:meth:`advance`) or a whole legacy flow live
    (:meth:`run_live`).

    - *keys*: ``requestState`` signing keys, each at least 32 bytes; the first signs, all
      verify (rotation). ``None``: one random key per process, with a warning.
    - *ttl*: seconds a token stays valid after it was minted.
    - *max_rounds*: round trips to the client before the flow fails with
      :class:`~mrtr_trio.RoundLimitExceeded`.
    - *round_timeout*: seconds a live round may wait for its answers.
    - *legacy_shim*: run return-style handlers on legacy sessions by re-entering them.
    - *state_only_pacing*: seconds the legacy shim waits before re-entering after a state-only
      round (return style only).
    - *max_state_bytes*: the largest token minted or accepted.
    - *replay*: on a divergent replay, ``"strict"`` raises
      :class:`~mrtr_trio.NondeterminismError`; ``"reask"`` logs and asks again.
    - *clock*: the wall clock tokens are stamped and checked with (for tests).
    """

    def __init__(
        self,
        keys: Sequence[bytes] | None = None,
        *,
        ttl: float = 600.0,
        max_rounds: int = 8,
        round_timeout: float = 600.0,
        legacy_shim: bool = True,
        state_only_pacing: float = 0.25,
        max_state_bytes: int = 65536,
        replay: Literal["strict", "reask"] = "reask",
        clock: Callable[[], float] = time.time,
    ) -> None:
        _positive("ttl", ttl)
        _positive("round_timeout", round_timeout)
        if not isinstance(max_rounds, int) or isinstance(max_rounds, bool) or max_rounds < 1:
            raise ValueError(f"max_rounds must be an int >= 1, got {max_rounds!r}")
        if not isinstance(state_only_pacing, int | float) or not state_only_pacing >= 0:
            raise ValueError(f"state_only_pacing must be >= 0 seconds, got {state_only_pacing!r}")
        if not isinstance(max_state_bytes, int) or max_state_bytes < 64:
            raise ValueError(f"max_state_bytes must be an int >= 64, got {max_state_bytes!r}")
        if replay not in ("strict", "reask"):
            raise ValueError(f'replay must be "strict" or "reask", got {replay!r}')
        if not callable(clock):
            raise TypeError("clock must be a callable returning seconds since the epoch")
        self._settings = Settings(
            max_rounds=max_rounds,
            round_timeout=float(round_timeout),
            legacy_shim=bool(legacy_shim),
            state_only_pacing=float(state_only_pacing),
            replay=replay,
        )
        self._codec = StateCodec(
            Keyring(keys), ttl=float(ttl), max_state_bytes=max_state_bytes, clock=clock
        )

    def _derive(self, *, check_expiry: bool = True, **changes: Any) -> Runtime:
        """A new runtime with the same keys and these settings changed (for
        :mod:`mrtr_trio.testing`: fresh-process checks and offline replays)."""
        derived = object.__new__(Runtime)
        derived._settings = attrs.evolve(self._settings, **changes)
        codec = self._codec
        derived._codec = StateCodec(
            codec.keyring,
            ttl=codec.ttl,
            max_state_bytes=codec.max_state_bytes,
            clock=codec.clock,
            check_expiry=check_expiry,
        )
        return derived

    def __repr__(self) -> str:
        s = self._settings
        return (
            f"Runtime(<{len(self._codec.keyring.key_ids)} key(s)>, ttl={self.ttl}, "
            f"max_rounds={s.max_rounds}, round_timeout={s.round_timeout}, "
            f"legacy_shim={s.legacy_shim}, state_only_pacing={s.state_only_pacing}, "
            f"max_state_bytes={self.max_state_bytes}, replay={s.replay!r})"
        )

    # The knobs, read-only: a Runtime is shared by concurrent flows.
    ttl = property(lambda self: self._codec.ttl, doc="Token lifetime in seconds.")
    max_rounds = property(lambda self: self._settings.max_rounds, doc="Round-trip cap.")
    round_timeout = property(lambda self: self._settings.round_timeout, doc="Live round timeout.")
    legacy_shim = property(lambda self: self._settings.legacy_shim, doc="Legacy shim enabled.")
    state_only_pacing = property(
        lambda self: self._settings.state_only_pacing, doc="Shim pause before state-only re-entry."
    )
    max_state_bytes = property(lambda self: self._codec.max_state_bytes, doc="Token size cap.")
    replay = property(lambda self: self._settings.replay, doc='"strict" or "reask".')

    async def advance(
        self,
        handler: Callable[..., Any],
        arguments: Mapping[str, Any],
        *,
        input_responses: Mapping[str, Any] | None = None,
        request_state: str | None = None,
        client_capabilities: Mapping[str, Any] | None = None,
        bind: bytes = b"",
        host: Host | None = None,
    ) -> Complete | InputRequired:
        """One modern round: :class:`Complete` or :class:`InputRequired`.

        *input_responses* is what the client sent (key → JSON answer, or answer objects);
        *request_state* the token it echoed (``None`` only when it sent none: any string,
        ``""`` included, must verify); *client_capabilities* ``None`` means "all declared";
        *bind* is extra context the token is bound to (the MCP host passes method, target,
        principal and audience); *host* lends the handler's context progress, logging and the
        host's request object.

        Raises :class:`~mrtr_trio.InvalidRequestState` before any handler code runs when the
        token fails verification, :class:`~mrtr_trio.InvalidInputResponse` for a malformed
        answer, :class:`~mrtr_trio.MissingCapability`,
        :class:`~mrtr_trio.RoundLimitExceeded`, :class:`~mrtr_trio.NondeterminismError`
        (strict replay), or whatever the handler raises. The handler is always closed.
        """
        return await advance(
            self._settings,
            self._codec,
            handler,
            arguments,
            input_responses=input_responses,
            request_state=request_state,
            client_capabilities=client_capabilities,
            bind=bind,
            host=host,
        )

    async def run_live(
        self,
        handler: Callable[..., Any],
        arguments: Mapping[str, Any],
        ask: AskFunction | None,
        *,
        client_capabilities: Mapping[str, Any] | None = None,
        host: Host | None = None,
    ) -> Any:
        """Run a whole legacy flow and return its value.

        ``await ask(key, request)`` performs one server-to-client request and returns the
        client's answer (JSON or an answer object); its exceptions end the flow. ``ask=None``
        means the session has no back channel: asking raises
        :class:`~mrtr_trio.BackChannelUnavailable`, while steps and pauses still work. Raises
        as :meth:`advance` does, plus :class:`~mrtr_trio.RoundTimeout`.
        """
        if ask is not None and not callable(ask):
            raise TypeError(f"ask must be an async callable ask(key, request), got {ask!r}")
        return await run_live(
            self._settings, handler, arguments, ask, client_capabilities, host=host
        )


def _positive(name: str, value: object) -> None:
    if not isinstance(value, int | float) or isinstance(value, bool) or not value > 0:
        raise ValueError(f"{name} must be a positive number of seconds, got {value!r}")
    if math.isinf(value) and name == "ttl":
        raise ValueError("ttl must be finite")
