"""mrtr_trio: write an interactive MCP handler once, as an async generator.

A handler yields what it needs from the client (`elicit`, `create_message`, `list_roots`) and
receives the answers. On a legacy MCP session a trio driver keeps the generator alive and turns
each yield into a real server-to-client request; on a 2026-07-28 request the runtime checkpoints
the flow into a signed CBOR `requestState` and replays it on the client's retry.

Where to start:

- [Runtime][mrtr_trio.Runtime]: the keys and the knobs; `advance` runs one modern round,
  `run_live` a whole legacy flow;
- [mrtr_trio.mcp.App][]: an MCP server for such handlers, over stdio or Streamable HTTP
  (`mrtr-trio serve server.py` on the command line);
- [mrtr_trio.testing][]: run a handler as either era's client would, and check that both eras
  agree;
- the documentation, in `docs/` beside the source (`mkdocs serve` renders it): writing
  handlers, serving, calling a server, testing, migrating from TypeScript FastMCP.

This module only re-exports; the code lives in private modules.
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
    StepOutcomeUnknown,
    StepStoreUnavailable,
)
from ._flow import (
    CallAgain,
    Handler,
    MintedState,
    done,
    input_required,
    pause,
    poll,
    step,
)
from ._keys import EphemeralKeyWarning
from ._live import AskFunction
from ._modern import InputRequired
from ._replay import Complete
from ._runtime import Runtime, StateInfo
from ._steps import Claim, MemoryStepStore, StepStore, step_key
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
    "NondeterminismError",
    "PollTimeout",
    "Request",
    "Root",
    "RoundLimitExceeded",
    "RoundTimeout",
    "Runtime",
    "StateInfo",
    "StepInProgress",
    "StepOutcomeUnknown",
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
