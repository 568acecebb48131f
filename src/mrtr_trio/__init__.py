"""mrtr_trio: write an interactive MCP handler once, as an async generator.

On a legacy MCP session a trio driver keeps the generator alive and turns each yielded request
into a real server-to-client request; on a 2026-07-28 request the runtime checkpoints the flow
into a signed CBOR `requestState` and replays it on the client's retry.

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
    PollTimeout,
    RoundLimitExceeded,
    RoundTimeout,
    StepInProgress,
    StepStoreUnavailable,
)
from ._flow import (
    CallAgain,
    Handler,
    MintedState,
    NeedsInput,
    done,
    input_required,
    pause,
    poll,
    step,
)
from ._live import AskFunction
from ._modern import Complete, InputRequired
from ._runtime import Runtime, StateInfo
from ._steps import Claim, MemoryStepStore, StepStore, step_key
from ._token import EphemeralKeyWarning
from ._util import fixup_module_metadata
from ._values import (
    Answer,
    CreateMessageRequest,
    CreateMessageResult,
    ElicitRequest,
    ElicitResult,
    ListRootsRequest,
    ListRootsResult,
    Request,
    Root,
    create_message,
    elicit,
    elicit_url,
    list_roots,
    parse_answer,
)

__version__ = "0.1.0.dev0"

__all__ = [
    "Answer",
    "AskFunction",
    "BackChannelUnavailable",
    "CallAgain",
    "Claim",
    "Complete",
    "Context",
    "CreateMessageRequest",
    "CreateMessageResult",
    "ElicitRequest",
    "ElicitResult",
    "EphemeralKeyWarning",
    "Handler",
    "Host",
    "InputRequired",
    "InvalidInputResponse",
    "InvalidRequestState",
    "ListRootsRequest",
    "ListRootsResult",
    "MemoryStepStore",
    "MintedState",
    "MissingCapability",
    "MrtrError",
    "NeedsInput",
    "NondeterminismError",
    "PollTimeout",
    "Request",
    "Root",
    "RoundLimitExceeded",
    "RoundTimeout",
    "Runtime",
    "StateInfo",
    "StepInProgress",
    "StepStore",
    "StepStoreUnavailable",
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
    "poll",
    "step",
    "step_key",
]

fixup_module_metadata(__name__, globals())
del fixup_module_metadata
