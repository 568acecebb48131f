"""Will a deploy break the flows in flight? Replay recorded tokens against the current code.

A modern flow's `requestState` journals the answers so far with a fingerprint of each request they
answer. When the handler's code changes while flows are in flight, the next retry replays the
journal against the new code; if the new code asks something else before the pending point, the flow
diverges (`replay="strict"`) or asks again (`replay="reask"`).
[replay_recorded][mrtr_trio.testing.replay_recorded] runs that check offline, like Temporal's
`Replayer`: feed it tokens saved from a running server
([RecordedState][mrtr_trio.testing.RecordedState]) and the keys, and it reports, per token, whether
the current code continues the flow cleanly or where it diverges.
"""

from __future__ import annotations

import base64
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, Literal

import attrs

from .._base64url import b64url
from .._errors import InvalidRequestState, NondeterminismError
from .._flow import is_generator_handler
from .._runtime import Runtime
from ._probe import probe, wire_of
from ._runners import wire_text

__all__ = ["RecordedState", "ReplayReport", "assert_all_continue", "replay_recorded"]

# Recorded tokens may have had any number of rounds; the offline replay must not count them.
_NO_ROUND_LIMIT = 1 << 30


@attrs.frozen
class RecordedState:
    """A `requestState` saved from a running server, with what it was minted for.

    - *request_state*: the token exactly as the server returned it;
    - *arguments*: the handler's arguments on that call (as the handler received them);
    - *bind*: the `bind` bytes the token was minted with (`b""` for
      [Runtime.advance][mrtr_trio.Runtime.advance] called without one; the MCP host
      binds method, target, principal and audience);
    - *label*: free text for the report (a tool name, a capture date).

    `to_json` and `from_json` give it a JSON form for saving to a file.
    """

    request_state: str
    arguments: Mapping[str, Any] = attrs.field(factory=dict)
    bind: bytes = b""
    label: str = ""

    def to_json(self) -> dict[str, Any]:
        """`{"requestState", "arguments", "bind" (unpadded base64url), "label"}`."""
        bind = b64url(self.bind)
        return {
            "requestState": self.request_state,
            "arguments": dict(self.arguments),
            "bind": bind,
            "label": self.label,
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> RecordedState:
        """The record from `to_json`'s form (`bind` and `label` may be missing)."""
        bind = str(data.get("bind", ""))
        return cls(
            data["requestState"],
            dict(data.get("arguments", {})),
            base64.urlsafe_b64decode(bind + "=" * (-len(bind) % 4)),
            str(data.get("label", "")),
        )


Status = Literal["continues", "diverged", "invalid", "failed"]


@attrs.frozen
class ReplayReport:
    """What replaying one recorded token against the current code showed.

    `status` is one of:

    - `"continues"`: the current code replays the journal and reaches the same pending point;
      `current_request` holds the pending ask (`{key: wire form}`, `{}` at a pause) and
      `detail` what comes next;
    - `"diverged"`: the current code asks something else first; `round` (1-based round
      trip) and `yield_index` say where, `recorded_request` what the journal holds (key,
      kind and fingerprint: tokens keep no request text) and `current_request` what the code
      does now (`{key: wire form}`, `{"step": name}`, `{"pause": None}`, or `None`
      when it finishes instead);
    - `"invalid"`: the token does not verify (wrong keys, or the handler's name, the
      arguments or the bind bytes differ from the ones it was minted for); `detail` says why;
    - `"failed"`: the handler raised while replaying; `detail` names the exception.

    `index` is the token's position in the input. `str(report)` is a one-line account.
    """

    index: int
    recorded: RecordedState
    status: Status
    detail: str = ""
    round: int | None = None
    yield_index: int | None = None
    recorded_request: str | None = None
    current_request: Any = None

    @property
    def ok(self) -> bool:
        """True when the flow continues cleanly."""
        return self.status == "continues"

    def __str__(self) -> str:
        label = f" ({self.recorded.label})" if self.recorded.label else ""
        head = f"token #{self.index}{label}"
        if self.status == "continues":
            if self.current_request:
                return f"{head} continues to its pending ask {wire_text(self.current_request)}"
            return f"{head} continues: it passes its pause(), then {self.detail}"
        if self.status == "diverged":
            return (
                f"{head} diverges at round {self.round}, yield #{self.yield_index}: recorded "
                f"{self.recorded_request}; the current code asks "
                f"{wire_text(self.current_request)}"
            )
        if self.status == "invalid":
            return f"{head} does not verify: {self.detail}"
        return f"{head} fails while replaying: {self.detail}"


async def replay_recorded(
    handler: Callable[..., Any],
    recorded: Iterable[RecordedState],
    *,
    keys: Sequence[bytes] | None = None,
    runtime: Runtime | None = None,
) -> list[ReplayReport]:
    """Replay each recorded token against *handler* as it is now, and report per token.

    Pass the server's signing keys as *keys*, or its *runtime*. Expiry is not checked (tokens
    saved last week still replay), replay is strict, and the round limit is lifted. Each
    token is retried with no answers, which replays its journal and stops at its pending ask:
    no step runs, and a token pending at a `pause()` is stopped at the first yield past it.
    The handler's code does run (up to that point), so keep it free of side effects outside
    `step()`, as replay requires anyway.
    """
    if (keys is None) == (runtime is None):
        raise TypeError("replay_recorded() needs the server's keys=[...] or its runtime=...")
    is_generator_handler(handler)  # a TypeError for what is not a handler, before any token
    base = runtime if runtime is not None else Runtime(keys)
    strict = attrs.evolve(base, replay="strict", max_rounds=_NO_ROUND_LIMIT)
    reports = []
    for index, record in enumerate(recorded):
        reports.append(await _replay_one(strict, handler, index, record))
    return reports


async def _replay_one(
    runtime: Runtime, handler: Callable[..., Any], index: int, record: RecordedState
) -> ReplayReport:
    try:
        # Expiry aside (a token saved last week still replays): read the token's issue time
        # and replay it on a clock stopped there.
        info = runtime.inspect(
            handler, record.arguments, record.request_state, bind=record.bind, check_expiry=False
        )
        offline = attrs.evolve(runtime, clock=lambda: float(info.issued_at))
        found = await probe(
            offline, handler, record.arguments, record.request_state, bind=record.bind
        )
    except InvalidRequestState as error:
        return ReplayReport(index, record, "invalid", error.reason)
    except NondeterminismError as error:
        return ReplayReport(
            index,
            record,
            "diverged",
            str(error),
            round=error.round,
            yield_index=error.yield_index,
            recorded_request=error.recorded,
            current_request=error.current,
        )
    except Exception as error:
        return ReplayReport(index, record, "failed", f"{type(error).__name__}: {error}")
    return ReplayReport(
        index, record, "continues", found.then or "", current_request=wire_of(found.requests)
    )


def assert_all_continue(reports: Iterable[ReplayReport]) -> None:
    """Raise `AssertionError` listing every report that does not continue cleanly."""
    reports = list(reports)
    broken = [report for report in reports if not report.ok]
    if broken:
        lines = "\n".join(f"  {report}" for report in broken)
        raise AssertionError(
            f"{len(broken)} of {len(reports)} recorded flow(s) would break:\n{lines}"
        )
