"""The replay driver: one round of a flow on a modern (2026-07-28) request.

:func:`advance` verifies the ``requestState`` (before any handler code runs), replays a
yield-style handler from the top feeding it the journal's answers and step results while
checking each yield against its recorded fingerprint, feeds the pending ask this call's
``inputResponses``, and runs on to the next ask (checkpointed into a fresh token) or to the end.
Return-style handlers are not replayed: their pending requests and payload travel in the token.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from typing import Any

import attrs

from ._context import Context, Host
from ._drive import Settings, check_capabilities, check_round_budget, resume, run_step
from ._errors import InvalidInputResponse, NondeterminismError
from ._flow import (
    Ask,
    Finished,
    Flow,
    Need,
    RunStep,
    Wait,
    collect_answers,
    handler_name,
    open_flow,
)
from ._state import (
    PAUSE_RECORD,
    AskRecord,
    Cursor,
    PauseRecord,
    PendingAsk,
    PendingPause,
    Record,
    StateCodec,
    StepRecord,
    binding_digest,
    describe_fingerprint,
)
from ._values import Request

__all__ = ["Complete", "InputRequired", "advance"]

log = logging.getLogger("mrtr_trio")


@attrs.frozen
class Complete:
    """A modern round that finished the flow with ``value``."""

    value: Any


@attrs.frozen
class InputRequired:
    """A modern round that needs the client: ``input_requests`` (key → request; empty for a
    state-only round) and the ``request_state`` to echo."""

    input_requests: Mapping[str, Request]
    request_state: str | None


async def advance(
    settings: Settings,
    codec: StateCodec,
    handler: Callable[..., Any],
    arguments: Mapping[str, Any],
    *,
    input_responses: Mapping[str, Any] | None,
    request_state: str | None,
    client_capabilities: Mapping[str, Any] | None,
    bind: bytes,
    host: Host | None = None,
) -> Complete | InputRequired:
    """Run one modern round of *handler* (see the module docstring)."""
    name = handler_name(handler)
    arguments = _check_arguments(arguments)
    responses = _check_responses(input_responses)
    binding = binding_digest(name, arguments, _check_bind(bind))
    cursor = Cursor() if request_state is None else codec.open(request_state, binding)
    ctx = Context("modern", client_capabilities, host=host)
    flow = open_flow(handler, ctx, arguments, resume_at=cursor.pending, payload=cursor.payload)
    round_ = _Round(settings, codec, name, binding, cursor, request_state is None, ctx)
    try:
        return await round_.run(flow, responses)
    finally:
        await flow.aclose()


class _Round:
    def __init__(
        self,
        settings: Settings,
        codec: StateCodec,
        name: str,
        binding: bytes,
        cursor: Cursor,
        first_call: bool,
        ctx: Context,
    ) -> None:
        self.settings = settings
        self.codec = codec
        self.name = name
        self.binding = binding
        self.cursor = cursor
        self.first_call = first_call
        self.ctx = ctx

    async def run(
        self, flow: Flow, responses: Mapping[str, Any] | None
    ) -> Complete | InputRequired:
        journal: list[Record] = []
        pending = self.cursor.pending
        # This call's inputResponses answer one ask: the pending one, or on a call without
        # state the handler's first ask. Later asks go to the client.
        first_ask_reads = self.first_call

        # Until the flow passes the pending point it re-runs code an earlier round ran.
        self.ctx._set_replaying(flow.replayable and not self.first_call)
        need = await resume(flow, None, first=True)
        for position, record in enumerate(self.cursor.journal):
            value = _replayed_value(record, need)
            if value is _MISMATCH:
                self._diverged(position, _describe_record(record), need)
                pending = None  # the answers in hand were for another request
                break
            journal.append(record)
            need = await resume(flow, value)

        while True:
            if pending is not None and not _pending_matches(pending, need):
                self._diverged(len(journal), _describe_pending(pending), need)
                pending = None
            if pending is None:
                self.ctx._set_replaying(False)
            if isinstance(need, Finished):
                return Complete(need.value)
            if isinstance(need, RunStep):
                value = await run_step(need)
                if flow.replayable:
                    journal.append(StepRecord(need.fingerprint, value))
                need = await resume(flow, value)
                continue
            if isinstance(need, Wait):
                if pending is None:
                    return self._checkpoint(journal, PendingPause(), {}, need.payload)
                pending = None
                self.ctx._set_replaying(False)
                if flow.replayable:
                    journal.append(PAUSE_RECORD)
                need = await resume(flow, None)
                continue
            assert isinstance(need, Ask)
            prints = need.fingerprints
            stored = None if flow.replayable else need.requests
            if pending is None and not first_ask_reads:
                pending_ask = PendingAsk(prints, {}, stored)
                return self._checkpoint(journal, pending_ask, need.requests, need.payload)
            kept = pending.answered if isinstance(pending, PendingAsk) else {}
            answers, again = collect_answers(need.requests, kept, responses or {})
            pending, first_ask_reads = None, False
            self.ctx._set_replaying(False)
            if again:
                pending_ask = PendingAsk(prints, answers, stored)
                return self._checkpoint(journal, pending_ask, again, need.payload)
            if flow.replayable:
                journal.append(AskRecord({k: (prints[k], answers[k]) for k in need.requests}))
            need = await resume(flow, answers)

    def _checkpoint(
        self,
        journal: list[Record],
        pending: PendingAsk | PendingPause,
        asked: Mapping[str, Request],
        payload: Any,
    ) -> InputRequired:
        check_capabilities(self.name, asked.values(), self.ctx.client_capabilities)
        check_round_budget(self.name, self.cursor.rounds, self.settings)
        cursor = Cursor(tuple(journal), pending, self.cursor.rounds + 1, payload)
        return InputRequired(dict(asked), self.codec.seal(cursor, self.binding))

    def _diverged(self, position: int, recorded: str, need: Need) -> None:
        journal = self.cursor.journal[:position]
        round_ = 1 + sum(not isinstance(r, StepRecord) for r in journal)
        current = _describe_need(need)
        message = (
            f"{self.name} diverged from its recorded flow at round {round_}, yield "
            f"#{position}: recorded {recorded}; now {current[0]}. The handler is not "
            "deterministic (it read the clock, randomness or I/O outside step()) or its code "
            "changed while this flow was in flight."
        )
        if self.settings.replay == "strict":
            raise NondeterminismError(
                message,
                handler=self.name,
                round=round_,
                yield_index=position,
                recorded=recorded,
                current=current[1],
            )
        log.warning("%s Asking again (replay='reask').", message)


_MISMATCH: Any = object()


def _replayed_value(record: Record, need: Need) -> Any:
    """What the journal gives back for *need*, or ``_MISMATCH``."""
    if isinstance(record, AskRecord) and isinstance(need, Ask):
        if record.answers.keys() == need.requests.keys() and all(
            record.answers[key][0] == fp for key, fp in need.fingerprints.items()
        ):
            return {key: answer for key, (_, answer) in record.answers.items()}
    elif isinstance(record, StepRecord) and isinstance(need, RunStep):
        if record.fingerprint == need.fingerprint:
            return record.value
    elif isinstance(record, PauseRecord) and isinstance(need, Wait):
        return None
    return _MISMATCH


def _pending_matches(pending: PendingAsk | PendingPause, need: Need) -> bool:
    if isinstance(pending, PendingPause):
        return isinstance(need, Wait)
    return isinstance(need, Ask) and need.fingerprints == pending.fingerprints


def _describe_record(record: Record) -> str:
    if isinstance(record, AskRecord):
        return ", ".join(
            f"{key!r} ({describe_fingerprint(fp)})" for key, (fp, _) in record.answers.items()
        )
    if isinstance(record, StepRecord):
        return f"a step ({describe_fingerprint(record.fingerprint)})"
    return "pause()"


def _describe_pending(pending: PendingAsk | PendingPause) -> str:
    if isinstance(pending, PendingPause):
        return "pause()"
    return ", ".join(
        f"{key!r} ({describe_fingerprint(fp)})" for key, fp in pending.fingerprints.items()
    )


def _describe_need(need: Need) -> tuple[str, Any]:
    """A sentence and a structured value for what the handler does now."""
    if isinstance(need, Ask):
        wire = {key: request.to_wire() for key, request in need.requests.items()}
        return f"it asks {wire}", wire
    if isinstance(need, RunStep):
        return f"it runs step {need.name}", {"step": need.name}
    if isinstance(need, Wait):
        return "it pauses", {"pause": None}
    return "it finished", None


def _check_arguments(arguments: Mapping[str, Any]) -> Mapping[str, Any]:
    if not isinstance(arguments, Mapping) or not all(isinstance(k, str) for k in arguments):
        raise TypeError(f"arguments must be a dict with str keys, got {arguments!r}")
    return arguments


def _check_responses(responses: object) -> Mapping[str, Any] | None:
    if responses is None:
        return None
    if not isinstance(responses, Mapping) or not all(isinstance(k, str) for k in responses):
        raise InvalidInputResponse(
            f"inputResponses must be an object mapping keys to answers, got {responses!r}"
        )
    return responses


def _check_bind(bind: object) -> bytes:
    if not isinstance(bind, bytes | bytearray):
        raise TypeError(f"bind must be bytes, got {type(bind).__name__}")
    return bytes(bind)
