"""The values layer's names in one place: requests, answers and capabilities.

The code lives in one module per idea: [_requests][mrtr_trio._requests] (the requests, their
constructors, wire forms and fingerprints), [_answers][mrtr_trio._answers] (the answers and how
they are read from a client's JSON) and [_capabilities][mrtr_trio._capabilities] (what each
request needs of the client). Form schemas are checked in `_schema` (with `_formats`), content
blocks in `_content`, and the errors are in `_errors`. This module only re-exports, so that the
layers above import the values from one place.
"""

from ._answers import (
    ACTIONS,
    ANSWER_TYPES,
    Answer,
    CreateMessageResult,
    ElicitResult,
    ListRootsResult,
    Root,
    content_problems_for,
    parse_answer,
    sdk_answer_json,
    trusted_answer,
    trusted_elicit_result,
)
from ._capabilities import ALL_CAPABILITIES, missing_capabilities
from ._requests import (
    ELICIT,
    FINGERPRINT_BYTES,
    KIND_CODES,
    KIND_NAMES,
    LEGACY_VERSIONS,
    REQUEST_TYPES,
    ROOTS,
    SAMPLING,
    CreateMessageRequest,
    ElicitRequest,
    ListRootsRequest,
    Request,
    canonical_wire,
    create_message,
    describe_request,
    elicit,
    elicit_url,
    fingerprint_of,
    list_roots,
    misused_request,
    request_from_wire,
)

__all__ = [
    "ACTIONS",
    "ALL_CAPABILITIES",
    "ANSWER_TYPES",
    "Answer",
    "CreateMessageRequest",
    "CreateMessageResult",
    "ELICIT",
    "ElicitRequest",
    "ElicitResult",
    "FINGERPRINT_BYTES",
    "KIND_CODES",
    "KIND_NAMES",
    "LEGACY_VERSIONS",
    "ListRootsRequest",
    "ListRootsResult",
    "REQUEST_TYPES",
    "ROOTS",
    "Request",
    "Root",
    "SAMPLING",
    "canonical_wire",
    "content_problems_for",
    "create_message",
    "describe_request",
    "elicit",
    "elicit_url",
    "fingerprint_of",
    "list_roots",
    "misused_request",
    "missing_capabilities",
    "parse_answer",
    "sdk_answer_json",
    "request_from_wire",
    "trusted_answer",
    "trusted_elicit_result",
]
