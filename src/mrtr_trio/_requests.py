"""Input requests: what a handler asks the client for, as frozen values.

A handler asks with [elicit][mrtr_trio.elicit], [elicit_url][mrtr_trio.elicit_url],
[create_message][mrtr_trio.create_message] or [list_roots][mrtr_trio.list_roots]; each returns a
frozen request, remembered so that a replay which asks again gets the same object back.
`request.to_wire()` is the 2026-07-28 embedded-request JSON (`{"method", "params"}`, the value of
one `inputRequests` entry); `request.to_legacy_wire(version)` is the params-bearing body of the
2025-era server-to-client JSON-RPC request; `request_from_wire` reads either back. A request's
`fingerprint` (its kind, then a digest of its canonical wire form) is what a journal entry
answers.
"""

from __future__ import annotations

import functools
import json
import uuid
from collections.abc import Generator, Mapping, Sequence
from typing import Any, ClassVar, Literal, NoReturn, TypeAlias, cast

import attrs
import blake3

from ._content import SAMPLING_MESSAGE, check_content
from ._schema import Compiled, check_schema, compile_schema, is_int, is_number
from ._util import Memo, short_repr

__all__ = [
    "CreateMessageRequest",
    "ELICIT",
    "ElicitRequest",
    "FINGERPRINT_BYTES",
    "KIND_CODES",
    "KIND_NAMES",
    "LEGACY_VERSIONS",
    "ListRootsRequest",
    "REQUEST_TYPES",
    "ROLES",
    "ROOTS",
    "Request",
    "SAMPLING",
    "canonical_wire",
    "create_message",
    "describe_request",
    "elicit",
    "elicit_url",
    "fingerprint_of",
    "list_roots",
    "misused_request",
    "request_from_wire",
]

ELICIT = "elicitation/create"
SAMPLING = "sampling/createMessage"
ROOTS = "roots/list"
#: The roles of a sampling message (and of a sampling answer).
ROLES = ("user", "assistant")
_INCLUDE_CONTEXT = ("none", "thisServer", "allServers")
#: The 2025-era protocol versions (sessions opened with `initialize`).
LEGACY_VERSIONS = ("2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25")


# ------------------------------------------------------------------------------ identity
#
# A request's fingerprint is one byte naming its kind, then a short digest of its canonical wire
# form: enough for a replay to notice that the handler now asks something else, and to say what
# kind of thing the journal recorded. Requests compute it once and keep it. A 64-bit digest: a
# replay compares each journal entry with what the code asks now, so over a 1000-entry journal
# the odds that a changed request passes for the recorded one by accident are about
# 1000 / 2**64 (5e-17).

#: The first byte of a fingerprint, by request method (and `"step"`).
KIND_CODES = {ELICIT: 0, SAMPLING: 1, ROOTS: 2, "step": 3}
KIND_NAMES = {code: kind for kind, code in KIND_CODES.items()}
FINGERPRINT_BYTES = 9
_KDF_FINGERPRINT = "mrtr_trio 2026-11-30 request fingerprint"

# Sorted keys: the same request fingerprints the same whatever order its dicts were built in.
_CANONICAL_JSON = json.JSONEncoder(
    sort_keys=True, separators=(",", ":"), ensure_ascii=False, check_circular=False
)


def canonical_wire(request: Request) -> str:
    """*request*'s wire form as canonical JSON (sorted keys): equal texts, equal requests."""
    return _CANONICAL_JSON.encode(request.to_wire())


def fingerprint_of(kind: str, data: bytes) -> bytes:
    """A fingerprint: the *kind*'s code, then a short digest of *data*."""
    digest = blake3.blake3(data, derive_key_context=_KDF_FINGERPRINT).digest(FINGERPRINT_BYTES - 1)
    return bytes((KIND_CODES[kind],)) + digest


def _request_fingerprint(request: Request) -> bytes:
    return fingerprint_of(request.method, canonical_wire(request).encode())


def _compile_form(request: ElicitRequest) -> Compiled:
    assert request.schema is not None
    return compile_schema(request.schema)


# ---------------------------------------------------------------------------------- requests


def misused_request(request: Request, misuse: str) -> TypeError:
    """The error for a request used as if it asked by itself: *misuse* says what the handler
    did, with `{call}` for the request (`"`await {call}`"`), and the message names the ways
    that do ask."""
    call = request.constructor_call()
    return TypeError(
        f"{misuse.format(call=call)} does not ask the client: a request is asked when it is "
        f"yielded. In a yield-style handler (an async generator) write `answer = yield {call}`; "
        f"in a coroutine handler, `answer = await ctx.{call}` asks on a live (legacy) session, "
        f"and `return input_required({{'key': {call}}})` asks in both eras"
    )


def describe_request(request: Request) -> str:
    """The request as a person would name it in an error: by what it asked
    (`the elicitation 'Deploy api?'`), since a client on a legacy session never sees its key."""
    if isinstance(request, ElicitRequest):
        mode = "elicitation" if request.schema is not None else "URL elicitation"
        return f"the {mode} {short_repr(request.message)}"
    if isinstance(request, CreateMessageRequest):
        return "the sampling request (sampling/createMessage)"
    return "the roots request (roots/list)"


def _not_awaitable(request: Request) -> Generator[Any, None, NoReturn]:
    raise misused_request(request, "`await {call}`")


@attrs.frozen
class ElicitRequest:
    """Ask the user: form mode (`schema` set) or URL mode (`url` set)."""

    method: ClassVar[str] = ELICIT

    #: A short digest of the wire form (computed once): what a journal entry answers.
    fingerprint = functools.cached_property(_request_fingerprint)

    #: The requested schema compiled (once, like the fingerprint): what answers are checked
    #: with, without looking the schema up again per answer.
    _form = functools.cached_property(_compile_form)

    message: str
    schema: Mapping[str, Any] | None = None
    url: str | None = None

    def __attrs_post_init__(self) -> None:
        if not isinstance(self.message, str):
            raise TypeError(f"elicitation message must be a str, got {type(self.message).__name__}")
        if (self.schema is None) == (self.url is None):
            raise TypeError("an ElicitRequest needs exactly one of schema (form) or url (URL mode)")
        if self.schema is not None:
            check_schema(self.schema)
        if self.url is not None and (not isinstance(self.url, str) or not self.url):
            raise TypeError(f"elicitation url must be a non-empty str, got {self.url!r}")

    @property
    def mode(self) -> Literal["form", "url"]:
        """`"form"` or `"url"`."""
        return "form" if self.schema is not None else "url"

    def constructor_call(self) -> str:
        """How a handler writes this request: `elicit(...)` or `elicit_url(...)`."""
        return "elicit(...)" if self.schema is not None else "elicit_url(...)"

    def __await__(self) -> Generator[Any, None, NoReturn]:
        return _not_awaitable(self)  # a clear error instead of Python's "can't be used in await"

    def to_wire(self) -> dict[str, Any]:
        """The 2026-07-28 embedded request `{"method", "params"}`."""
        params: dict[str, Any]
        if self.schema is not None:
            params = {"mode": "form", "message": self.message, "requestedSchema": self.schema}
        else:
            params = {"mode": "url", "message": self.message, "url": self.url}
        return {"method": ELICIT, "params": params}

    def to_legacy_wire(
        self, protocol_version: str = "2025-11-25", *, elicitation_id: str | None = None
    ) -> dict[str, Any]:
        """The 2025-era request `{"method", "params"}`.

        2025-06-18 has no `mode` and no URL mode; 2025-11-25 URL mode needs an
        `elicitationId` (a fresh UUID unless one is given).
        """
        _check_legacy_version(protocol_version)
        wire = self.to_wire()
        params = dict(wire["params"])
        if protocol_version < "2025-11-25":
            if self.url is not None:
                raise ValueError(f"URL-mode elicitation does not exist in MCP {protocol_version}")
            del params["mode"]
        elif self.url is not None:
            params["elicitationId"] = elicitation_id or str(uuid.uuid4())
        return {"method": ELICIT, "params": params}


@attrs.frozen
class CreateMessageRequest:
    """Ask the client's LLM for a completion (sampling)."""

    method: ClassVar[str] = SAMPLING

    #: A short digest of the wire form (computed once): what a journal entry answers.
    fingerprint = functools.cached_property(_request_fingerprint)

    messages: tuple[Mapping[str, Any], ...]
    max_tokens: int
    system_prompt: str | None = None
    temperature: float | None = None
    stop_sequences: tuple[str, ...] | None = None
    model_preferences: Mapping[str, Any] | None = None
    include_context: Literal["none", "thisServer", "allServers"] | None = None
    metadata: Mapping[str, Any] | None = None

    def __attrs_post_init__(self) -> None:
        if not self.messages:
            raise ValueError("create_message needs at least one message")
        for index, message in enumerate(self.messages):
            _check_sampling_message(message, f"messages[{index}]")
        if not is_int(self.max_tokens) or self.max_tokens <= 0:
            raise ValueError(f"max_tokens must be a positive int, got {self.max_tokens!r}")
        if self.system_prompt is not None and not isinstance(self.system_prompt, str):
            raise TypeError("system_prompt must be a str")
        if self.temperature is not None and not is_number(self.temperature):
            raise TypeError(f"temperature must be a number, got {self.temperature!r}")
        if self.stop_sequences is not None and not all(
            isinstance(s, str) for s in self.stop_sequences
        ):
            raise TypeError("stop_sequences must be a list of str")
        if self.include_context is not None and self.include_context not in _INCLUDE_CONTEXT:
            raise ValueError(f"include_context must be one of {_INCLUDE_CONTEXT}")
        for name in ("model_preferences", "metadata"):
            value = getattr(self, name)
            if value is not None and not isinstance(value, Mapping):
                raise TypeError(f"{name} must be a dict")

    def constructor_call(self) -> str:
        """How a handler writes this request: `create_message(...)`."""
        return "create_message(...)"

    def __await__(self) -> Generator[Any, None, NoReturn]:
        return _not_awaitable(self)

    def to_wire(self) -> dict[str, Any]:
        """The embedded request `{"method", "params"}` (the same params in both eras)."""
        params: dict[str, Any] = {"messages": list(self.messages), "maxTokens": self.max_tokens}
        optional = (
            ("systemPrompt", self.system_prompt),
            ("temperature", self.temperature),
            ("stopSequences", list(self.stop_sequences) if self.stop_sequences else None),
            ("modelPreferences", self.model_preferences),
            ("includeContext", self.include_context),
            ("metadata", self.metadata),
        )
        params.update((name, value) for name, value in optional if value is not None)
        return {"method": SAMPLING, "params": params}

    def to_legacy_wire(self, protocol_version: str = "2025-11-25") -> dict[str, Any]:
        """The 2025-era request: the same `{"method", "params"}`."""
        _check_legacy_version(protocol_version)
        return self.to_wire()


@attrs.frozen
class ListRootsRequest:
    """Ask the client for its roots."""

    method: ClassVar[str] = ROOTS

    #: A short digest of the wire form (computed once): what a journal entry answers.
    fingerprint = functools.cached_property(_request_fingerprint)

    def constructor_call(self) -> str:
        """How a handler writes this request: `list_roots()`."""
        return "list_roots()"

    def __await__(self) -> Generator[Any, None, NoReturn]:
        return _not_awaitable(self)

    def to_wire(self) -> dict[str, Any]:
        """The embedded request `{"method": "roots/list", "params": {}}`."""
        return {"method": ROOTS, "params": {}}

    def to_legacy_wire(self, protocol_version: str = "2025-11-25") -> dict[str, Any]:
        """The 2025-era request: the same `{"method", "params"}`."""
        _check_legacy_version(protocol_version)
        return self.to_wire()


Request: TypeAlias = ElicitRequest | CreateMessageRequest | ListRootsRequest
#: The request classes, for `isinstance` checks.
REQUEST_TYPES = (ElicitRequest, CreateMessageRequest, ListRootsRequest)


def elicit(message: str, schema: Mapping[str, Any]) -> ElicitRequest:
    """A form-mode elicitation: show *message* and a form for the restricted JSON *schema*
    (`{"type": "object", "properties": {...}, "required": [...]}`)."""
    if schema is None:
        raise TypeError("elicit() needs a schema; use elicit_url() for URL mode")
    # Replays rebuild the same requests every round: hand back the one already validated and
    # fingerprinted when the schema is the same object with the same content.
    key = (message, id(schema)) if type(message) is str else None
    if key is not None:
        known = _FORMS.lookup(key)  # a str and an int: hashable
        if known is not None and known[0] is schema and known[1].schema == schema:
            return known[1]
    request = ElicitRequest(message, schema=_copy_json(schema))
    if key is not None:
        _FORMS.put(key, (schema, request))
    return request


def elicit_url(message: str, url: str) -> ElicitRequest:
    """A URL-mode elicitation: ask the user to open *url* (for anything sensitive)."""
    if url is None:
        raise TypeError("elicit_url() needs a url")
    key = (message, url)
    if type(message) is str and type(url) is str:
        known = _URLS.get(key)
        if known is None:
            known = _URLS.put(key, ElicitRequest(message, url=url))
        return known
    return ElicitRequest(message, url=url)


def create_message(
    messages: str | Sequence[Mapping[str, Any]],
    *,
    max_tokens: int,
    system_prompt: str | None = None,
    temperature: float | None = None,
    stop_sequences: Sequence[str] | None = None,
    model_preferences: Mapping[str, Any] | None = None,
    include_context: Literal["none", "thisServer", "allServers"] | None = None,
    metadata: Mapping[str, Any] | None = None,
) -> CreateMessageRequest:
    """A sampling request. *messages* is a string (one user text message) or a list of
    `{"role": "user" | "assistant", "content": block | [blocks]}` dicts."""
    key: tuple[Any, ...] | None = None
    if type(messages) is str and model_preferences is None and metadata is None:
        stops = tuple(stop_sequences) if isinstance(stop_sequences, list) else stop_sequences
        # Types too: 1, 1.0 and True are equal keys, but not equal requests (True is refused,
        # and 1 and 1.0 have different wire forms, so different fingerprints).
        key = (messages, max_tokens, type(max_tokens), system_prompt, temperature)
        key += (type(temperature), stops, include_context)
        known = _SAMPLINGS.get(key)  # (an unhashable option is not cached: the checks name it)
        if known is not None:
            return known
    request = _create_message(
        messages,
        max_tokens=max_tokens,
        system_prompt=system_prompt,
        temperature=temperature,
        stop_sequences=stop_sequences,
        model_preferences=model_preferences,
        include_context=include_context,
        metadata=metadata,
    )
    return request if key is None else _SAMPLINGS.put(key, request)


def _create_message(
    messages: str | Sequence[Mapping[str, Any]],
    *,
    max_tokens: int,
    system_prompt: str | None,
    temperature: float | None,
    stop_sequences: Sequence[str] | None,
    model_preferences: Mapping[str, Any] | None,
    include_context: Literal["none", "thisServer", "allServers"] | None,
    metadata: Mapping[str, Any] | None,
) -> CreateMessageRequest:
    if isinstance(messages, str):
        message_tuple: tuple[Mapping[str, Any], ...] = (
            {"role": "user", "content": {"type": "text", "text": messages}},
        )
    elif isinstance(messages, Sequence):
        message_tuple = tuple(cast("Sequence[Mapping[str, Any]]", messages))
    else:
        raise TypeError(
            f"messages must be a str or a list of message dicts, got {type(messages).__name__}"
        )
    if isinstance(stop_sequences, str):
        raise TypeError("stop_sequences must be a list of str, not a str")
    return CreateMessageRequest(
        message_tuple,
        max_tokens,
        system_prompt=system_prompt,
        temperature=temperature,
        stop_sequences=tuple(stop_sequences) if stop_sequences is not None else None,
        model_preferences=model_preferences,
        include_context=include_context,
        metadata=metadata,
    )


_LIST_ROOTS = ListRootsRequest()


def list_roots() -> ListRootsRequest:
    """A roots request."""
    return _LIST_ROOTS


# The constructors' memory of requests already built (bounded: cleared when full). A hit costs
# a lookup instead of a schema check and a fingerprint, which matters because every modern round
# replays the handler and so rebuilds every request it asked before.
_FORMS: Memo[tuple[str, int], tuple[Mapping[str, Any], ElicitRequest]] = Memo()
_URLS: Memo[tuple[str, str], ElicitRequest] = Memo()
_SAMPLINGS: Memo[tuple[Any, ...], CreateMessageRequest] = Memo()


def _copy_json(value: Any) -> Any:
    """A deep copy of JSON-like *value* (dicts and lists copied, leaves shared)."""
    if isinstance(value, Mapping):
        return {key: _copy_json(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [_copy_json(item) for item in value]
    return value


def request_from_wire(wire: object) -> Request:
    """The request for an embedded-request JSON `{"method", "params"}` (either era).

    Raises `ValueError` naming what is wrong.
    """
    if not isinstance(wire, Mapping) or not isinstance(wire.get("params", {}), Mapping):
        raise ValueError(f"an input request is an object with method and params, got {wire!r}")
    method, params = wire.get("method"), wire.get("params", {})
    try:
        if method == ELICIT:
            if params.get("mode", "form") == "url":
                return elicit_url(params["message"], params["url"])
            return elicit(params["message"], params["requestedSchema"])
        if method == SAMPLING:
            return create_message(
                params["messages"],
                max_tokens=params["maxTokens"],
                system_prompt=params.get("systemPrompt"),
                temperature=params.get("temperature"),
                stop_sequences=params.get("stopSequences"),
                model_preferences=params.get("modelPreferences"),
                include_context=params.get("includeContext"),
                metadata=params.get("metadata"),
            )
        if method == ROOTS:
            return _LIST_ROOTS
    except KeyError as missing:
        raise ValueError(f"{method} request params lack {missing}") from None
    except TypeError as problem:
        raise ValueError(f"{method} request is malformed: {problem}") from None
    raise ValueError(f"unknown input request method {method!r}")


# ----------------------------------------------------------------------------------- helpers


def _check_legacy_version(protocol_version: str) -> None:
    if protocol_version not in LEGACY_VERSIONS:
        raise ValueError(
            f"{protocol_version!r} is not a legacy MCP version (one of {LEGACY_VERSIONS})"
        )


def _check_sampling_message(message: object, where: str) -> None:
    if not isinstance(message, Mapping):
        raise TypeError(f"{where} must be a dict with role and content, got {message!r}")
    if message.get("role") not in ROLES:
        raise ValueError(f"{where}.role must be 'user' or 'assistant', got {message.get('role')!r}")
    check_content(message.get("content"), f"{where}.content", SAMPLING_MESSAGE)
