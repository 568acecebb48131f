"""mrtr_trio: write an interactive MCP handler once, as an async generator.

On a legacy MCP session a trio driver keeps the generator alive and turns each yielded request
into a real server-to-client request; on a 2026-07-28 request the runtime checkpoints the flow
into a signed CBOR ``requestState`` and replays it on the client's retry.

This module only re-exports; see the private modules for the code.
"""

from ._context import Context, Host, accepted_content, input_response
from ._errors import (
    BackChannelUnavailable,
    InvalidInputResponse,
    InvalidRequestState,
    MissingCapability,
    MrtrError,
    NondeterminismError,
    RoundLimitExceeded,
    RoundTimeout,
)
from ._flow import MintedState, NeedsInput, done, input_required, pause, step
from ._replay import Complete, InputRequired
from ._runtime import Runtime
from ._state import EphemeralKeyWarning
from ._values import (
    CreateMessageRequest,
    CreateMessageResult,
    ElicitRequest,
    ElicitResult,
    ListRootsRequest,
    ListRootsResult,
    Root,
    create_message,
    elicit,
    elicit_url,
    list_roots,
    parse_answer,
)

__version__ = "0.1.0.dev0"

__all__ = [
    "BackChannelUnavailable",
    "Complete",
    "Context",
    "CreateMessageRequest",
    "CreateMessageResult",
    "ElicitRequest",
    "ElicitResult",
    "EphemeralKeyWarning",
    "Host",
    "InputRequired",
    "InvalidInputResponse",
    "InvalidRequestState",
    "ListRootsRequest",
    "ListRootsResult",
    "MintedState",
    "MissingCapability",
    "MrtrError",
    "NeedsInput",
    "NondeterminismError",
    "Root",
    "RoundLimitExceeded",
    "RoundTimeout",
    "Runtime",
    "accepted_content",
    "create_message",
    "done",
    "elicit",
    "elicit_url",
    "input_required",
    "input_response",
    "list_roots",
    "parse_answer",
    "pause",
    "step",
]
