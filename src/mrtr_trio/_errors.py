"""The errors mrtr_trio raises.

Every error is an [MrtrError][mrtr_trio.MrtrError] carrying a JSON-RPC `code` and a message a user
can act on. The MCP host turns them into wire errors (`InvalidRequestState`, `InvalidInputResponse`,
`MissingCapability`) or into `isError` tool results (everything else), as DESIGN §3 says.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = [
    "BackChannelUnavailable",
    "INVALID_PARAMS",
    "INTERNAL_ERROR",
    "InvalidInputResponse",
    "InvalidRequestState",
    "MISSING_REQUIRED_CLIENT_CAPABILITY",
    "MissingCapability",
    "MrtrError",
    "NondeterminismError",
    "PollTimeout",
    "RoundLimitExceeded",
    "StateTooLarge",
    "StepInProgress",
    "StepOutcomeUnknown",
    "StepStoreUnavailable",
    "RoundTimeout",
]

INVALID_REQUEST = -32600
INVALID_PARAMS = -32602
INTERNAL_ERROR = -32603
MISSING_REQUIRED_CLIENT_CAPABILITY = -32021


class MrtrError(Exception):
    """Base class of mrtr_trio's errors.

    `code` is the JSON-RPC error code the error maps to; `data` is the JSON-RPC `error.data`
    (or `None`); `str(error)` is the message.
    """

    code: int = INTERNAL_ERROR

    @property
    def message(self) -> str:
        """The human-readable message (what the client sees)."""
        return str(self.args[0]) if self.args else type(self).__name__

    @property
    def data(self) -> dict[str, Any] | None:
        """The JSON-RPC `error.data` payload, if this error has one."""
        return None


class InvalidRequestState(MrtrError):
    """A `requestState` failed verification: tampered, truncated, expired, minted under another
    key or for another call, or over the size cap.

    The client always sees the same message and data, so the error is no oracle; the precise
    reason is in `reason` and in the `mrtr_trio` log.
    """

    code = INVALID_PARAMS
    WIRE_MESSAGE = "Invalid or expired requestState"

    def __init__(self, reason: str) -> None:
        super().__init__(self.WIRE_MESSAGE)
        self.reason = reason

    @property
    def data(self) -> dict[str, Any]:
        return {"reason": "invalid_request_state"}


class InvalidInputResponse(MrtrError):
    """An answer from the client is not shaped like an answer to the request it answers."""

    code = INVALID_PARAMS


class MissingCapability(MrtrError):
    """The flow needs a request kind the client did not declare.

    `required_capabilities` is a ClientCapabilities-shaped object naming only what is missing,
    e.g. `{"sampling": {}}`.
    """

    code = MISSING_REQUIRED_CLIENT_CAPABILITY

    def __init__(self, message: str, required_capabilities: Mapping[str, Any]) -> None:
        super().__init__(message)
        self.required_capabilities: dict[str, Any] = dict(required_capabilities)

    @property
    def data(self) -> dict[str, Any]:
        return {"requiredCapabilities": self.required_capabilities}


class RoundLimitExceeded(MrtrError):
    """The flow still required input after `max_rounds` round trips."""


class RoundTimeout(MrtrError):
    """A live round got no complete answer within `round_timeout` seconds."""


class PollTimeout(MrtrError):
    """A `poll(...)` condition was still not met after its `timeout`."""


class StepStoreUnavailable(MrtrError):
    """The step store could not be reached, did not answer in time, or is full. Before a step
    ran, it did not run (with a store, a step never runs unrecorded); after, its result could
    not be recorded, and the message says so."""


class StateTooLarge(MrtrError):
    """The `requestState` a round would mint is over `max_state_bytes` (an answer, a step
    result or a payload too big to carry): the flow ends with this error, logged as a limit
    reached, not as a fault in the server."""


class StepInProgress(MrtrError):
    """Another presentation of the same `requestState` is running this step (its holder keeps
    renewing its lease); retrying the request later gets its result."""


class StepOutcomeUnknown(MrtrError):
    """A step's earlier attempt may have had its effect: its holder died or was cancelled
    mid-step without recording a result, and the step was not declared `retry=True`. It is
    not run again; check the effect downstream (under the step's
    [step_key][mrtr_trio.step_key]) and start a new flow."""


class NondeterminismError(MrtrError):
    """Replaying a flow produced a different request than the one its journal recorded.

    Either the handler is not deterministic (it read the clock, a random number or I/O outside
    `step()`) or its code changed while the flow was in flight. The attributes hold the
    structured details: `handler`, `round` (1-based round trip), `yield_index` (0-based),
    `recorded` (key, kind and fingerprint of what the journal holds) and `current` (the
    request the handler yields now, in wire form, or `None` when it finished instead).
    """

    def __init__(
        self,
        message: str,
        *,
        handler: str,
        round: int,
        yield_index: int,
        recorded: str,
        current: Any,
    ) -> None:
        super().__init__(message)
        self.handler = handler
        self.round = round
        self.yield_index = yield_index
        self.recorded = recorded
        self.current = current


class BackChannelUnavailable(MrtrError):
    """A legacy session has no way to send a server-to-client request (stateless or
    JSON-response HTTP)."""

    code = INVALID_REQUEST
